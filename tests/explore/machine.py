"""The explorer: a state machine that tries what can happen to operations, in any order, and checks the promise.

Each history starts from a clean local cloud (`Chaos.reset`), then runs steps drawn from the rules
below: producers enqueue (converge.enqueue, a raw PutItem or BatchWriteItem, the HTTP API; now, a
few minutes ahead on a message delay, days ahead on a one-time schedule, with or without an
expires_at) and write again; kill switches flip; operators, callers and the console cancel, resolve,
retry and redrive; the reconciler and the resumer run; the emulated clock moves; the event sources
are polled one batch at a time or drained; and faults are planned, each for the next time it can
hit (a crash after the effect, a second receipt, a lost response, a replayed dispatch, throttling,
a partly failed SendMessageBatch, a Lambda timeout, a lease expiring under its holder, an SSM outage,
a relay batch failing until Lambda gives it up, the schedule group deleted for a while, a dropped or
doubled schedule firing, a message delivered twice, a cap's key first used by two workers at once, a misbehaving
ledger provider). A job of steps
(tests/explore/catalogue.py) meets all of these, and rules of its own: crashes between its steps and between
a step's effect and its marker, a lost or unknowable charge, the clock past its wait, a cancel while it
waits, an operator's resolve of its pending step; its continuation follows it.

After every step the cheap invariants hold (promise.every_step, and the steps' promise.steps_kept); after
every reconciler pass nothing is invisible (promise.nothing_invisible); and at the end of every history,
once quiescent (faults off, the clock past every run_at and every wait, the resumer and the reconciler
run, sources drained), every operation is final or listed, and every listing is true (`teardown`).

Rules are small and named for what happens, so a shrunk history reads as a story and replays as a
test (see tests/explore/test_breaks.py).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import sys
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any, ClassVar
from urllib.parse import unquote

from botocore.exceptions import EndpointConnectionError
from flask.testing import FlaskClient
from hypothesis import strategies as st
from hypothesis import target
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule
from hypothesis.strategies._internal.featureflags import FeatureFlags

from catalogue import examples
from catalogue.ledger import LedgerMode
from converge.flow.batch_counter import BatchCounter
from converge.flow.held_waiters import KeyReleased
from converge.flow.registry import Registry
from converge.flow.signals import default_signal_id
from converge.model.batches import (
    ADMISSION_GRACE_SECONDS,
    BatchCallback,
    BatchChild,
    BatchState,
    callback_id,
    child_id,
    parse_child,
)
from converge.model.clock import iso
from converge.model.errors import IdentityConflict, InvalidAction, OperationNotFound
from converge.model.request import JobRequest
from converge.model.states import FINAL_STATES, OperationState
from converge.model.submission import SignalSubmission
from converge.model.timing import parse_instant
from converge.operate.cancel import bulk_cancel
from converge.operate.deadletters import DlqUrls
from converge.operate.overdue import OVERDUE_GRACE_SECONDS
from converge.runtime import Converge
from converge.screening.summary import summary_fields
from converge.store.codecs import request_from_image, request_item
from converge_cli.console.actions import DECISIONS
from converge_cli.console.app import create_app
from converge_cli.console.guard import SESSION_KEY, TOKEN_FIELD, Origins
from localcloud.clients import ACCOUNT_ID
from localcloud.faults import FaultKind
from localcloud.iam.evaluation import NamedDocument, evaluate
from tests.chaos import Chaos
from tests.conftest import load_template

from . import focus, promise
from .catalogue import (
    ACCOUNT_LIMIT,
    APPROVAL_JOB,
    APPROVALS,
    BATCH_DONE_JOB,
    DEBOUNCED_JOB,
    EDIT_TIMES,
    EDITED_JOB,
    LATEST_JOB,
    LIMITED_BOTH_JOB,
    LIMITED_JOB,
    LONG_WAIT,
    PARTNER_LIMIT,
    REFRESH,
    SHORT_WAIT,
    SINGLETON_JOB,
    SKIP_JOB,
    STEPS_CAPPED_JOB,
    STEPS_JOB,
    STEPS_TYPES,
    WORLD,
    YEAR_WAIT,
)
from .focus import member_of
from .promise import AdmittedBatch, Planned

JOBS: dict[str, tuple[str, dict[str, Any]]] = {
    # one job per policy, from the reference catalogue, with payloads valid against its demo data
    "email": ("email.partner-verification.v1", {"user_id": examples.UNCONFIRMED_USER}),  # effect_then_claim
    "money": (
        "ledger.partner-benefits.v1",  # claim_then_effect, fail-closed
        {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"},
    ),
    "upload": ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}),  # keyed
    # the explorer's job of steps (tests/explore/catalogue.py): notice, charge, wait, file; then its continuation
    "steps": (STEPS_JOB, {"account_id": "acct-1", "wait_seconds": SHORT_WAIT}),  # waits on a delayed message
    "steps-long": (STEPS_JOB, {"account_id": "acct-2", "wait_seconds": LONG_WAIT}),  # waits on a one-time schedule
    "steps-year": (STEPS_JOB, {"account_id": "acct-3", "wait_seconds": YEAR_WAIT}),  # waits nearly a year
    # the same steps capped at one per account (tests/explore/catalogue.py): a full or paused key meets their wait
    "steps-capped": (STEPS_CAPPED_JOB, {"account_id": "acct-8", "wait_seconds": LONG_WAIT}),
    # the explorer's rate-limited job (tests/explore/catalogue.py): one partner call a minute, its 429 planned
    "limited": (LIMITED_JOB, {"account_id": "acct-4"}),
    # the same call paced by its account too (one in ten minutes): held by the partner's pace, charged once on each
    "limited-both": (LIMITED_BOTH_JOB, {"account_id": "acct-11"}),
    # the explorer's capped job (tests/explore/catalogue.py): one sync per account at a time
    "singleton": (SINGLETON_JOB, {"account_id": "acct-6"}),
    # the explorer's debounced job (tests/explore/catalogue.py): an account's refresh after a burst, from the newest
    "debounced": (DEBOUNCED_JOB, {"account_id": "acct-7", "version": 1}),
    # the same refresh, its newest told by its edit's time, which a producer may write malformed (oldest, then)
    "debounced-by-time": (EDITED_JOB, {"account_id": "acct-11", "edited_at": EDIT_TIMES[0][0]}),
    # the same cap's two other modes: a refresh skipped while one runs, a render whose newest request waits
    "refresh": (SKIP_JOB, {"account_id": "acct-9"}),
    "render": (LATEST_JOB, {"account_id": "acct-10"}),
}
CAPPED_JOBS = ("singleton", "refresh", "render", "steps-capped")
STEPS_JOBS = frozenset({"steps", "steps-long", "steps-year", "steps-capped"})
OTHER_PAYLOADS: dict[str, dict[str, Any]] = {
    "email": {"user_id": examples.SECOND_UNCONFIRMED_USER},
    "money": {"partner_id": examples.SECOND_PARTNER, "amount_cents": 90, "benefit": "promo"},
    "upload": {"partner_id": examples.PARTNER, "upload_id": "up-other"},
    "steps": {"account_id": "acct-other", "wait_seconds": SHORT_WAIT},
    "steps-long": {"account_id": "acct-other", "wait_seconds": LONG_WAIT},
    "steps-year": {"account_id": "acct-other", "wait_seconds": YEAR_WAIT},
    "steps-capped": {"account_id": "acct-other", "wait_seconds": LONG_WAIT},
    "limited": {"account_id": "acct-other"},
    "limited-both": {"account_id": "acct-other"},
    "singleton": {"account_id": "acct-other"},
    "debounced": {"account_id": "acct-other", "version": 2},
    "debounced-by-time": {"account_id": "acct-other", "edited_at": EDIT_TIMES[1][0]},
    "refresh": {"account_id": "acct-other"},
    "render": {"account_id": "acct-other"},
}
# A step that waits for a signal (tests/explore/catalogue.py): its timeout on a delayed message, or a schedule.
APPROVAL_JOBS = {
    "approval": (APPROVAL_JOB, {"account_id": "acct-4", "timeout_seconds": SHORT_WAIT}),
    "approval-long": (APPROVAL_JOB, {"account_id": "acct-5", "timeout_seconds": LONG_WAIT}),
}
JOBS.update(APPROVAL_JOBS)
NOT_ONE_EMAIL = frozenset({*STEPS_TYPES, APPROVAL_JOB})
"""Job types the one-e-mail bound is not for: the job of steps (steps_kept bounds it) and the approval job, which
sends none (signals_kept is its promise)."""
OTHER_PAYLOADS.update({job: {"account_id": "acct-other", "timeout_seconds": SHORT_WAIT} for job in APPROVAL_JOBS})
DAY = 86400.0
TIMINGS: dict[str, tuple[float | None, float | None]] = {
    # name: (run_at, expires_at), seconds from now
    "now": (None, None),
    "run_at in 5 min": (300.0, None),
    "run_at in 2 days": (2 * DAY, None),
    # a copy a week early spends its receives before its time (hidden 11 h 40 min a receive), and is dead-lettered
    "run_at in 1 week": (7 * DAY, None),
    "expires in 1 min": (None, 60.0),
    "expires in 1 hour": (None, 3600.0),
    "run_at in 5 min, expires 5 min later": (300.0, 600.0),
    "run_at in 2 days, expires 1 hour later": (2 * DAY, 2 * DAY + 3600.0),
}
CLOCK_STEPS = (1.0, 30.0, 400.0, 1000.0, 3700.0, 2 * DAY + 60.0)
"""A small step, past a short run_at or a visibility timeout, past a lease, past an hour, past a long run_at."""
LONG_CLOCK_STEPS = (40 * DAY, 250 * DAY, 370 * DAY)
"""Weeks and months: a pause that lasts, a wait of most of a year, one past a year's wait (DynamoDB's time to live
deletes what expires meanwhile: the local cloud deletes on every move of the clock)."""
QUIET_ROUNDS = 1_000
"""The rounds a drain of the explorer's may take before it is a break (`promise.NeverQuiet`): a history's drains take
34 at most (measured over 3,272 drains of the bounded run and the flow-control and time histories); work that never
comes to rest takes all of them, each an emulated return of the same work."""
SQS_DEFAULT_RETENTION = 4 * DAY
"""What a queue keeps a message when its template declares no MessageRetentionPeriod."""


@functools.cache
def months_step() -> float:
    """The longest move of the clock with nothing run (`months_pass`): a day short of the shortest time a queue of
    the template keeps a message (a message sent at the start of a step is still there at its end)."""
    queues = [r for r in load_template()["Resources"].values() if r.get("Type") == "AWS::SQS::Queue"]
    retention = min(float(q.get("Properties", {}).get("MessageRetentionPeriod", SQS_DEFAULT_RETENTION)) for q in queues)
    return retention - DAY


API_CALLER = "AKIDEXPLORERCALLER01"
SIGNAL_ITEM_WRITES = ("alone", "with its own write", "forged as a request")
"""How a producer writes a signal item (`producer_signals_by_item`)."""
PRODUCER_TABLE = "explorer-producer-decisions"
OTHER_SUBMITTER = "arn:aws:iam::123456789012:user/someone-else"
RELAY_GIVE_UP_POLLS = 500
"""Enough polls of the stream for Lambda to bisect a failing batch and give up every part of it."""
PROGRESS_EVERY = 50
CONSOLE_SECRET = "explorer-console-secret"
RESUMER_EVENT = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}

DEBOUNCED_JOBS = ("debounced", "debounced-by-time")


def _of_version(job: str, payload: dict[str, Any], version: int) -> dict[str, Any]:
    """A burst's request's payload: its version, or (a job debounced by time) the edit time it picks."""
    if job == "debounced-by-time":
        return {**payload, "edited_at": EDIT_TIMES[version - 1][0]}
    return {**payload, "version": version}


CANNOT_TELL = "cannot tell"
PROVIDERS = ("can tell", "can tell", CANNOT_TELL)
"""What a provider of a history can tell of an effect whose answer was lost (`providers_met`): drawn from these,
shrinking to the first."""
KEPT, LOST = "kept", "lost"
ANSWERS = (KEPT, KEPT, LOST)
"""Whether a history's first effect and first charge lose their answers (`providers_met`), shrinking to kept."""

FLOW_OPERATIONS = (3, 2, 3)
FLOW = ("caps", "rate limits", "debounce")
"""The flow control's groups of rules: each acts on its own jobs."""
THEMES: dict[str, focus.Theme] = {
    # the areas a history may concentrate on (tests/explore/focus.py): their jobs, the groups of rules acting on
    # them (all allowed), and the groups acting on none of their jobs (none allowed)
    "reference jobs": focus.Theme(
        ("email", "money", "upload"), full=("rewrites", "operators"), off=("steps", "signals", "batches", *FLOW)
    ),
    "steps and waits": focus.Theme(
        ("steps", "steps-long", "steps-year"), full=("steps", "operators"), off=("signals", "batches", *FLOW)
    ),
    "signals": focus.Theme(tuple(APPROVAL_JOBS), full=("steps", "signals"), off=("batches", *FLOW)),
    # a batch's children of the job of steps meet the steps' rules (a charge lost, a cancel while they wait); every
    # theme of jobs that can end UNKNOWN or FAILED, or wait, allows every operator's action (those are theirs)
    "batches": focus.Theme(
        ("email", "money", "upload", "steps"), full=("batches", "steps", "operators"), off=("signals", *FLOW)
    ),
    # a capped job of steps meets the steps' rules (an early copy while it waits) and the caps' (a paused key)
    # (flow control is about operations meeting on a key: two or three of them)
    "caps": focus.Theme(
        CAPPED_JOBS, full=("caps",), off=("signals", "batches", "rate limits", "debounce"), operations=FLOW_OPERATIONS
    ),
    "rate limits": focus.Theme(
        ("limited", "limited-both"),
        full=("rate limits",),
        off=("steps", "signals", "batches", "caps", "debounce"),
        operations=FLOW_OPERATIONS,
    ),
    "debounce": focus.Theme(
        DEBOUNCED_JOBS,
        full=("debounce",),
        off=("steps", "signals", "batches", "caps", "rate limits"),
        operations=FLOW_OPERATIONS,
    ),
}
THEMED_JOBS = focus.themed_jobs(sorted(JOBS), THEMES)
"""The history's theme and the jobs of it in play, drawn once per history (see focus.py)."""
JOB = THEMED_JOBS.flatmap(lambda themed: st.sampled_from(themed[1]))
"""A job of the history's focus: its operations, kill switches and bulk cancels use these."""
TIMING = focus.one_of_in_play("timings", list(TIMINGS), focus.TIMING_COUNTS)
JOB_AT = st.tuples(JOB, TIMING)
BATCHES_PER_HISTORY = 2
BATCH_JOBS = ("email", "money", "upload", "steps")
"""A batch's children: the reference jobs, one per policy, and the job of steps (a child that waits between its
steps, which an operator may reopen and cancel while it waits)."""
LISTED = st.none() | st.integers(min_value=0, max_value=7)
"""An operator's rule acts on one of the operations the list holds (its place, counted round), or, as None, on the
operation it drew (any the history made): one draw in two, when any is listed."""
FORGED_KEY = "zz"
"""The key of a child no batch of the explorer's admits (its keys are c0, c1, ...): a producer's write under it."""
LOOKS_LOST = [0]
"""Planned: the next looks at a batch after the counter counts a child fail (a throttled read), as many as this."""
_look = BatchCounter._look


def _lossy_look(self: BatchCounter, batch_id: str) -> None:
    if LOOKS_LOST[0]:
        LOOKS_LOST[0] -= 1
        raise ConnectionError("the counter's look at the batch after its child's count was lost")
    _look(self, batch_id)


BatchCounter._look = _lossy_look  # type: ignore[method-assign]


def signed_by(access_key: str) -> dict[str, str]:
    """The Authorization header of a SigV4-signed request (the local API takes the caller from its key id)."""
    credential = f"{access_key}/20250101/us-east-1/execute-api/aws4_request"
    return {"Authorization": f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders=host, Signature=0"}


class Budget:
    """Reports (on stderr) when each kind of break was first seen, after how many histories and seconds."""

    started: ClassVar[float] = 0.0
    seen: ClassVar[set[str]] = set()

    @classmethod
    def start(cls) -> None:
        cls.started = time.monotonic()
        cls.seen = set()

    @classmethod
    def notice(cls, kind: type[promise.Broken], example: str) -> None:
        if kind.__name__ not in cls.seen:
            cls.seen.add(kind.__name__)
            elapsed = time.monotonic() - cls.started
            print(
                f"explore: first {kind.__name__} in history {Explorer.histories} after {elapsed:.0f} s: {example}",
                file=sys.stderr,
                flush=True,
            )


class Explorer(RuleBasedStateMachine):
    """Operations under everything that can happen to them; see the module docstring."""

    harness: ClassVar[Chaos | None] = None
    """The module's local cloud (tests/explore/conftest.py sets it)."""
    histories: ClassVar[int] = 0
    producer_policies: ClassVar[dict[str, NamedDocument]] = {}
    """Each deployment's ProducerPolicy, by its ARN, read once: what a producer's rewrite may write. By ARN: a
    process runs several test modules, each with a cloud of its own, whose jobs tables the policies name."""
    steps: ClassVar[int] = 0
    batches_admitted: ClassVar[int] = 0
    batches_completed: ClassVar[int] = 0
    """Batches admitted, and of them complete at their history's end (the final line of a run reports both)."""
    started_then_unstarted: ClassVar[int] = 0
    """Histories in which an operation started and then read as not started (the final line reports them)."""
    reached: ClassVar[Counter[str]] = Counter()
    """In how many histories an operation stood in each state (the final line of a run reports them: how often a
    history reaches UNKNOWN or PAUSED, where the operators' actions and the kill switches' breaks start)."""

    operations = Bundle("operations")
    api_operations = Bundle("api_operations")
    batches = Bundle("batches")

    def __init__(self) -> None:
        super().__init__()
        chaos = type(self).harness
        assert chaos is not None, "Explorer.harness is set by the explore fixtures"
        self.chaos = chaos
        Explorer.histories += 1
        if Explorer.histories % PROGRESS_EVERY == 0:
            print(f"explore: {Explorer.histories} histories, {Explorer.steps} steps", file=sys.stderr, flush=True)
        self.focus = focus.draw(THEMED_JOBS, sorted(JOBS), list(TIMINGS), THEMES)
        # The focus is this machine's swarm: Hypothesis' own (rules switched off at random) would thin it further.
        self._rules_strategy.enabled_rules_strategy = st.just(FeatureFlags())
        self.prefix = f"h{Explorer.histories}"
        self.made = 0
        self.refused_puts = 0
        """Producer rewrites ProducerPolicy denied (not written)."""
        self.planned: dict[str, Planned] = {}
        self.visited: set[tuple[str, bool]] = set()
        """The abstract states (state, effect counted) the operations were seen in, after each step."""
        self.nearest = 0
        """How near an operation came to started work that reads as not started (promise.started_then_unstarted)."""
        self.longest_unfinished = 0.0
        """The most days a job of steps stood unfinished since its record began (measured as months pass)."""
        self.worked: set[tuple[str, str, bool, bool, bool]] = set()
        """What the operator did from the list, each kind once: the state it was listed in, the action, whether its
        job has a continuation, whether it is a job of steps, and whether its request item was still there."""
        self.switched_off: set[str] = set()
        """The job types whose kill switch the history has switched off (and not on again)."""
        chaos.restore_toggles()
        chaos.reset(seed=0)  # the same history runs the same way every time (shrinking replays it)
        for module in list(chaos.cloud.runtime._modules.values()):  # the functions' own jitter (retry delays)
            warm = getattr(module, "converge", None)
            if warm is not None:
                warm.rng.seed(0)
        chaos.ledger_mode(LedgerMode.DEDUP)
        chaos.workload.max_rounds = QUIET_ROUNDS
        chaos.workload.unquiet.clear()
        WORLD.reset()
        APPROVALS.reset()
        self.signals_sent: list[promise.SentSignal] = []
        """Each signal sent, and its answer (promise.signals_kept)."""
        self.signal_items: list[promise.SignalItemSent] = []
        """Each signal item written to the jobs table (its answer is read back from its record)."""
        self.versions: dict[str, int] = {}
        """Each debounced request of a burst, and the version it was written with (a burst's own payloads)."""
        self.released: KeyReleased | None = None
        """What the last release of a capped key said (`operator_releases_a_capped_key`)."""
        WORLD.in_progress = self._in_progress
        self.cancelled_with: dict[str, int] = {}
        self.elsewhere: Any = None
        """The operator's actions from outside the project (an empty registry), built on first use."""
        self.admitted: dict[str, AdmittedBatch] = {}
        self.batch_jobs: dict[str, str] = {}
        self.batch_tags: dict[str, str] = {}
        """The callback's tag of a batch posted to the API (its name: its id is derived from it)."""
        LOOKS_LOST[0] = 0
        """Each operation seen CANCELLED, and how many step effects it had then (promise.steps_kept)."""
        outputs = chaos.cloud.outputs
        self.operator = self.converge.operator(
            "explorer:operator",
            dlq_urls=DlqUrls.model_validate(
                {
                    "CRITICAL_DLQ_URL": outputs["CriticalDlqUrl"],
                    "DEFAULT_DLQ_URL": outputs["DefaultDlqUrl"],
                    "BULK_DLQ_URL": outputs["BulkDlqUrl"],
                }
            ),
        )

    # -- helpers ---------------------------------------------------------------------------------------------------

    @property
    def cloud(self) -> Any:
        return self.chaos.cloud

    @property
    def converge(self) -> Any:
        return self.chaos.workload.converge

    @property
    def now(self) -> float:
        return float(self.cloud.clock.now())

    def _new(self, job: str, via: str, timing: str, caller: str | None = None) -> Planned:
        self.made += 1
        run_in, expires_in = TIMINGS[timing]
        now = self.now
        return Planned(
            f"{self.prefix}-{self.made}",
            job,
            via,
            None if run_in is None else now + run_in,
            None if expires_in is None else now + expires_in,
            caller,
        )

    def _remember(self, planned: Planned) -> str:
        self.planned[planned.operation_id] = planned
        return planned.operation_id

    def _written(self, planned: Planned) -> tuple[str, dict[str, Any]]:
        """The job type and payload the producer first wrote (a burst's request: with its own version)."""
        job_type, payload = JOBS[planned.job]
        version = self.versions.get(planned.operation_id)
        return job_type, payload if version is None else _of_version(planned.job, payload, version)

    def _item(self, planned: Planned) -> dict[str, Any]:
        job_type, payload = self._written(planned)
        return request_item(
            JobRequest(
                planned.operation_id,
                job_type,
                payload,
                f"corr-{planned.operation_id}",
                run_at=iso(planned.run_at) if planned.run_at is not None else None,
                expires_at=iso(planned.expires_at) if planned.expires_at is not None else None,
            )
        )

    def _first_written(self, operation_id: str) -> dict[str, Any]:
        """The request as the producer first wrote it (an API call's: its caller as `submitted_by`)."""
        planned = self.planned[operation_id]
        item = self._item(planned)
        if planned.api_caller is not None:
            stored = self._stored(operation_id) or {}
            item = {**item, **{k: v for k, v in stored.items() if k in ("submitted_by", "correlation_id")}}
        return item

    def _stored(self, operation_id: str) -> dict[str, Any] | None:
        response = self.cloud.client("dynamodb").get_item(
            TableName=self.cloud.outputs["JobsTableName"],
            Key={"operation_id": {"S": operation_id}},
            ConsistentRead=True,
        )
        return response.get("Item")

    def _rewrite(self, operation_id: str, item: dict[str, Any]) -> None:
        """A producer's PutItem over an existing request, logged for the rewrite invariant. The producer holds the
        template's ProducerPolicy: a put the policy denies (one naming `submitted_by`) is refused, as IAM would."""
        if not self._producer_may_put(item):
            self.refused_puts += 1
            return
        planned = self.planned[operation_id]
        log = self.chaos.faults.operations[operation_id]
        log.original = log.original or self._written(planned)
        log.original_fingerprints = (
            log.original_fingerprints or request_from_image(self._first_written(operation_id)).accepted_fingerprints
        )
        request = request_from_image(item)
        log.rewrites.append(("after", request.job_type, request.payload))
        log.rewritten_fingerprints.append(request.fingerprint)
        self.chaos.workload.enqueue_raw(item)

    def _producer_may_put(self, item: dict[str, Any], action: str = "dynamodb:PutItem") -> bool:
        """IAM's verdict on a PutItem (or a BatchWriteItem) of `item` into the jobs table under the deployed
        ProducerPolicy (the table's ARN built from the deployment's outputs: no DescribeTable per rewrite)."""
        policy_arn = self.cloud.outputs["ProducerPolicyArn"]
        policy = Explorer.producer_policies.get(policy_arn)
        if policy is None:
            iam = self.cloud.client("iam")
            version = iam.get_policy(PolicyArn=policy_arn)["Policy"]["DefaultVersionId"]
            document = iam.get_policy_version(PolicyArn=policy_arn, VersionId=version)["PolicyVersion"]["Document"]
            policy = Explorer.producer_policies[policy_arn] = NamedDocument(
                "ProducerPolicy", json.loads(unquote(document)) if isinstance(document, str) else document
            )
        jobs_table = self.cloud.outputs["JobsTableName"]
        arn = f"arn:aws:dynamodb:{self.cloud.clients.region}:{ACCOUNT_ID}:table/{jobs_table}"
        context = {"dynamodb:Attributes": sorted(item), "dynamodb:LeadingKeys": [item["operation_id"]["S"]]}
        return evaluate([policy], action, arn, context).allowed

    def room_for(self, operations: int) -> bool:
        """Whether the history's focus allows this many more operations."""
        return len(self.planned) + operations <= self.focus.operations

    def waiting_for_a_first_operation(self) -> bool:
        """Whether the history has made nothing yet, and its focus can make something now: then the platform does
        nothing (`focus.UNTIL_AN_OPERATION`: no drain, no poll, no move of the clock), and a fault, a kill switch
        or a provider's failure drawn meanwhile waits for the operations to come. Drawn before the first operation,
        the platform's steps were spent on nothing (measured: a quarter of all steps, and one history in five
        ended with nothing made)."""
        if self.planned or self.admitted:
            return False
        return any(all(check(self) for check in maker.preconditions) for maker in MAKER_RULES)

    def room_left(self) -> int:
        """How many more operations the history's focus allows."""
        return self.focus.operations - len(self.planned)

    def _enqueued_now(self, job: str, payload: dict[str, Any] | None = None) -> str:
        """One of the job's requests enqueued now through the Python API (its catalogue payload unless given)."""
        planned = self._new(job, "converge.enqueue", "now")
        job_type, default = JOBS[job]
        self.converge.enqueue(
            job_type,
            planned.operation_id,
            default if payload is None else payload,
            correlation_id=f"corr-{planned.operation_id}",
        )
        return self._remember(planned)

    # -- producers -------------------------------------------------------------------------------------------------

    @rule(target=operations, job=JOB, timing=TIMING)
    @member_of("ways in")
    @precondition(lambda self: self.room_for(1))
    def producer_enqueues(self, job: str, timing: str) -> str:
        planned = self._new(job, "converge.enqueue", timing)
        job_type, payload = JOBS[job]
        self.converge.enqueue(
            job_type,
            planned.operation_id,
            payload,
            correlation_id=f"corr-{planned.operation_id}",
            run_at=iso(planned.run_at) if planned.run_at is not None else None,
            expires_at=iso(planned.expires_at) if planned.expires_at is not None else None,
        )
        return self._remember(planned)

    @rule(target=operations, job=JOB, timing=TIMING)
    @member_of("ways in")
    @precondition(lambda self: self.room_for(1))
    def producer_puts_item(self, job: str, timing: str) -> str:
        planned = self._new(job, "put_item", timing)
        self.chaos.workload.enqueue_raw(self._item(planned))
        return self._remember(planned)

    @rule(target=operations, first=JOB_AT, second=JOB_AT)
    @member_of("ways in")
    @precondition(lambda self: self.room_for(2))
    def producer_batch_writes(self, first: tuple[str, str], second: tuple[str, str]) -> Any:
        written = [self._new(job, "batch_write_item", timing) for job, timing in (first, second)]
        self.cloud.client("dynamodb").batch_write_item(
            RequestItems={
                self.cloud.outputs["JobsTableName"]: [{"PutRequest": {"Item": self._item(p)}} for p in written]
            }
        )
        return multiple(*(self._remember(planned) for planned in written))

    @rule(targets=(operations, api_operations), job=JOB, timing=TIMING)
    @member_of("ways in")
    @precondition(lambda self: self.room_for(1))
    def caller_posts_to_api(self, job: str, timing: str) -> Any:
        planned = self._new(job, "api", timing, caller=API_CALLER)
        job_type, payload = JOBS[job]
        headers = {**signed_by(API_CALLER), "Idempotency-Key": planned.operation_id}
        if planned.run_at is not None:
            headers["Run-At"] = iso(planned.run_at)
        if planned.expires_at is not None:
            headers["Expires-At"] = iso(planned.expires_at)
        response = self.cloud.http("POST", f"/jobs/{job_type}", headers=headers, body=json.dumps(payload))
        if response.status != 202:
            promise.fail(promise.ApiRefusedItsCaller, [f"{response.status} {response.body!r}"])
            return multiple()  # (looked past: there is no operation to remember)
        operation_id = str(json.loads(response.body)["operation_id"])
        return self._remember(Planned(operation_id, job, "api", planned.run_at, planned.expires_at, API_CALLER))

    @rule(operation=operations)
    @member_of("rewrites")
    def producer_reputs_same(self, operation: str) -> None:
        item = self._stored(operation)
        if item is not None:
            self._rewrite(operation, dict(item))

    @rule(operation=operations)
    @member_of("rewrites")
    def producer_reputs_other_content(self, operation: str) -> None:
        item = self._stored(operation)
        if item is not None:
            job = self.planned[operation].job
            other = request_item(JobRequest(operation, JOBS[job][0], OTHER_PAYLOADS[job]))
            self._rewrite(operation, {**item, "payload": other["payload"]})

    @rule(operation=operations, timing=TIMING)
    @member_of("rewrites")
    def producer_reputs_other_options(self, operation: str, timing: str) -> None:
        item = self._stored(operation)
        if item is None:
            return
        run_in, expires_in = TIMINGS[timing]
        rewritten = {key: value for key, value in item.items() if key not in ("run_at", "expires_at")}
        if run_in is not None:
            rewritten["run_at"] = {"S": iso(self.now + run_in)}
        if expires_in is not None:
            rewritten["expires_at"] = {"S": iso(self.now + expires_in)}
        self._rewrite(operation, rewritten)

    @rule(operation=operations)
    @member_of("rewrites")
    def producer_reputs_other_submitter(self, operation: str) -> None:
        item = self._stored(operation)
        if item is not None:
            self._rewrite(operation, {**item, "submitted_by": {"S": OTHER_SUBMITTER}})

    # -- kill switches ---------------------------------------------------------------------------------------------

    @rule(job=JOB, on=st.booleans())
    @member_of("switches")
    def toggle_flips(self, job: str, on: bool) -> None:
        self._switch(JOBS[job][0], on)

    @rule(operation=operations)
    @member_of("switches")
    def operations_job_switched_off(self, operation: str) -> None:
        """An operator switches off the job of an operation already made (whatever it is doing): the switch lands
        on that operation, where `toggle_flips` draws a job from those in play (and on or off) at random."""
        self._switch(JOBS[self.planned[operation].job][0], False)

    def _switch(self, job_type: str, on: bool) -> None:
        self.chaos.set_toggle(job_type, "on" if on else "off")
        (self.switched_off.discard if on else self.switched_off.add)(job_type)

    # -- cancels, operators ----------------------------------------------------------------------------------------

    @rule(operation=operations)
    @member_of("cancels")
    def operator_cancels(self, operation: str) -> None:
        self._acts(operation, lambda: self.operator.cancel(operation, "no longer wanted"))

    @rule(operation=api_operations)
    @member_of("cancels")
    def caller_cancels_through_api(self, operation: str) -> None:
        """The caller cancels its own operation: 200 (cancelled) or 409 (too late). Its caller is known from its
        request alone (`submitted_by`): once that item is deleted (`request_item_deleted`), the API cannot tell the
        operation is this caller's, and answers as for any not its own, 404 (docs/http-api.md)."""
        owner_known = self._stored(operation) is not None
        response = self.cloud.http(
            "POST",
            f"/operations/{operation}/cancel",
            headers=signed_by(API_CALLER),
            body=json.dumps({"reason": "the caller changed its mind"}),
        )
        answered = (200, 409) if owner_known else (404,)
        refused = [] if response.status in answered else [f"cancel {operation}: {response.status} {response.body!r}"]
        promise.fail(promise.ApiRefusedItsCaller, refused)

    @rule(state=st.sampled_from(["SCHEDULED", "PAUSED"]), job=st.none() | JOB)
    @member_of("cancels")
    def operator_bulk_cancels(self, state: str, job: str | None) -> None:
        bulk_cancel(
            self.converge.operations,
            self.converge.delays,
            OperationState(state),
            "campaign withdrawn",
            job_type=JOBS[job][0] if job else None,
            dry_run=False,
            actor="explorer:operator",
            settlement=self.converge.settlement,
        )

    @rule(operation=operations)
    @member_of("cancels")
    def console_cancels(self, operation: str) -> None:
        """An operator cancels in the console: the action's answer, shown on the operation's page (303). An
        operation neither table holds yet (its request deleted before the relay recorded it) is not found (404,
        "no operation"): true when asked, though the relay's copy of the request still runs it (docs/console.md)."""
        known = self.converge.operations.get(operation) is not None
        client = self._console()
        signed_in = client.get(f"/?token={CONSOLE_SECRET}")  # the printed URL's token, exchanged for a session
        assert signed_in.status_code == 303, signed_in.status_code
        with client.session_transaction() as session:
            session[SESSION_KEY] = "explorer-token"
        response = client.post(
            f"/operations/{operation}/cancel",
            data={TOKEN_FIELD: "explorer-token", "reason": "cancelled in the console", "confirmed": "yes"},
        )
        answered = response.status_code, response.get_data(as_text=True)
        if known or answered[0] != 404:
            assert answered[0] == 303, (answered[0], answered[1][:500])
        else:
            assert f"no operation &#39;{operation}&#39;" in answered[1], answered[1][:500]

    def _console(self) -> FlaskClient:
        deployment = SimpleNamespace(converge=self.converge, outputs=self.cloud.outputs)
        app = create_app(deployment, Origins.of({"localhost"}), "console:explorer", secret=CONSOLE_SECRET)  # type: ignore[arg-type]
        return app.test_client()

    @rule(operation=operations, if_not_done=st.sampled_from(["retry", "failed"]), listed=LISTED)
    @member_of("operators")
    def operator_resolves(self, operation: str, if_not_done: str, listed: int | None = None) -> None:
        """An operator who looks the outcome up in the provider: succeeded if the effect is there, else as told."""
        operation = self._listed_or(operation, listed)
        decided = "succeeded" if self._made(operation) else if_not_done
        self._acts(operation, lambda: self.operator.resolve(operation, decided, "looked it up in the provider"))

    @rule(operation=operations, listed=LISTED)
    @member_of("operators")
    def operator_retries(self, operation: str, listed: int | None = None) -> None:
        operation = self._listed_or(operation, listed)
        self._acts(operation, lambda: self.operator.retry(operation, "the provider is back"))

    @rule(operation=operations, action=st.sampled_from(["resolve", "retry"]), listed=LISTED)
    @member_of("operators")
    def operator_acts_outside_the_project(self, operation: str, action: str, listed: int | None = None) -> None:
        """An operator acts from a directory without the project (its tool loaded no catalogue: an empty registry):
        a resolve as the provider says, or a retry. Each needs the job's binding (the continuation its outcome
        names, the queue it is sent to), so each is refused there, and changes nothing."""
        operation = self._listed_or(operation, listed)
        elsewhere = self._elsewhere()
        if action == "retry":
            self._acts(operation, lambda: elsewhere.retry(operation, "retried from elsewhere"))
            return
        decided = "succeeded" if self._made(operation) else "failed"
        self._acts(operation, lambda: elsewhere.resolve(operation, decided, "resolved from elsewhere"))

    @rule(data=st.data())
    @member_of("operators")
    def operator_works_the_list(self, data: st.DataObject) -> None:
        """An operator works down what needs attention (UNKNOWN, FAILED, PAUSED, and SCHEDULED: waiting for its
        time, between steps or held), batch children among them: one of those, and an action of those its state
        calls for (`LIST_ACTIONS`). The other operator rules take any operation made and any action, mostly on
        operations settled already; this one meets an operation in the state its action is for, and again on the
        same one (a child retried, then cancelled while it waits)."""
        listed = self._needing_attention()
        if listed:
            operation = data.draw(st.sampled_from(sorted(listed)), label="listed")
            action = data.draw(st.sampled_from(LIST_ACTIONS[listed[operation]]), label="action")
            self.worked.add(
                (
                    listed[operation].value,
                    action,
                    self._continues(operation),
                    self._job_of(operation) in STEPS_JOBS,
                    self._stored(operation) is not None,
                )
            )
            self.acts_on_the_list(operation, action)

    def acts_on_the_list(self, operation: str, action: str) -> None:
        """One of `operator_works_the_list`'s actions on an operation it listed."""
        if action == "cancel":
            self._acts(operation, lambda: self.operator.cancel(operation, "cancelled from the list"))
        elif action == "retry":
            self._acts(operation, lambda: self.operator.retry(operation, "retried from the list"))
        else:
            decided = "succeeded" if self._made(operation) else "failed"
            acting = self.operator if action == "resolve" else self._elsewhere()
            self._acts(operation, lambda: acting.resolve(operation, decided, "looked it up in the provider"))

    def _listed_or(self, operation: str, listed: int | None) -> str:
        """The operation an operator's rule acts on: with `listed`, one of those the list holds now (the one at that
        place, counted round), as an operator mostly acts on what needs attention; else (or with none listed) the
        operation drawn, any the history made, settled or not (None is where shrinking goes)."""
        needing = sorted(self._needing_attention()) if listed is not None else []
        return needing[listed % len(needing)] if needing else operation

    def _needing_attention(self) -> dict[str, OperationState]:
        """The operations an operator's list holds now (this history's own, batch children included), and their
        states."""
        return {
            operation_id: operation.state
            for operation_id, (operation, _) in promise.operations_now(self.cloud).items()
            if operation.state in LIST_ACTIONS and self._job_of(operation_id) is not None
        }

    def _job_of(self, operation: str) -> str | None:
        """The explorer's job of an operation it made, or of a child of a batch it admitted (None: not its own, a
        callback or a continuation among them)."""
        if operation in self.planned:
            return self.planned[operation].job
        child = parse_child(operation)
        return self.batch_jobs.get(child.batch_id) if child is not None else None

    def _continues(self, operation: str) -> bool:
        """Whether the job of an operation the explorer made (or a child of its batch) is followed by another."""
        job = self._job_of(operation)
        binding = self.converge.registry.get(JOBS[job][0]) if job is not None else None
        return binding is not None and (binding.on_success or binding.on_failure) is not None

    def _made(self, operation: str) -> bool:
        """What the provider says: the charge made (a job of steps: its UNKNOWN names the charge), or an effect."""
        if self._job_of(operation) in STEPS_JOBS:
            return WORLD.charged(operation)
        return sum(self.chaos.effects().for_operation(operation).values()) > 0

    def _elsewhere(self) -> Any:
        """The operator's actions as a tool started outside the project builds them: no job catalogue loaded."""
        if self.elsewhere is None:
            converge = self.converge
            bare = Converge(converge.settings, registry=Registry(), clients=converge.clients, clock=self.cloud.clock)
            self.elsewhere = bare.operator("explorer:elsewhere", dlq_urls=self.operator.dlq_urls)
        return self.elsewhere

    def _acts(self, operation: str, act: Any) -> Any:
        """Take an operator's action; if it is refused (not applied), nothing of the operation may have changed:
        neither its state record nor any of its steps' markers (promise.RefusedActionChangedSomething). An
        operation neither table holds yet (its request deleted before the relay recorded it) is an unknown id, the
        one thing an action raises for (OperationNotFound, "no operation"), and it too changes nothing."""
        before = self._footprint(operation)
        try:
            result = act()
        except OperationNotFound:
            if before["state"] is not None or self._stored(operation) is not None:
                raise  # a known operation said to be unknown
            result = SimpleNamespace(applied=False, action="an action", message="no operation")
        if not getattr(result, "applied", True):
            after = self._footprint(operation)
            changed = [name for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)]
            promise.fail(
                promise.RefusedActionChangedSomething,
                [f"{operation}: {result.action} refused ({result.message}), yet changed {changed}"] if changed else [],
            )
        return result

    def _footprint(self, operation: str) -> dict[str, Any]:
        """The operation's state record and step markers as stored (what an action could write)."""
        dynamodb = self.cloud.client("dynamodb")
        state = dynamodb.get_item(
            TableName=self.cloud.outputs["StateTableName"], Key={"operation_id": {"S": operation}}, ConsistentRead=True
        ).get("Item")
        markers = dynamodb.query(
            TableName=self.cloud.outputs["MarkersTableName"],
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"operation#{operation}"}},
            ConsistentRead=True,
        )["Items"]
        return {"state": state, **{f"marker {item['sk']['S']}": item for item in markers}}

    @rule()
    @member_of("operators")
    def operator_redrives(self) -> None:
        self.operator.redrive(dry_run=False)

    # -- the platform ----------------------------------------------------------------------------------------------

    @rule()
    @member_of("platform")
    def reconciler_runs(self) -> None:
        self.cloud.invoke("ReconcilerFunction", {})
        promise.nothing_invisible(self.cloud, self.chaos.faults, self.now)

    @rule()
    @member_of("platform")
    def resumer_runs(self) -> None:
        self.cloud.invoke("ResumerFunction", RESUMER_EVENT)

    @rule(seconds=st.sampled_from(CLOCK_STEPS))
    @member_of("platform")
    def clock_advances(self, seconds: float) -> None:
        self.cloud.advance(seconds)

    @rule()
    @member_of("platform")
    def stream_polled_once(self) -> None:
        for source in self.cloud.stream_sources:
            source.poll(flush=True)

    @rule()
    @member_of("platform")
    def queues_polled_once(self) -> None:
        for source in self.cloud.queue_sources:
            source.poll(flush=True)

    @rule()
    @member_of("platform")
    def due_schedules_fire(self) -> None:
        self.cloud.fire_one_time_schedules()

    @rule()
    @member_of("platform")
    def everything_drains(self) -> None:
        """Every source until quiet, the clock fast-forwarded to each hidden message (cloud.drain())."""
        self.chaos.workload.drain()

    @rule()
    @member_of("platform")
    def visible_work_drains(self) -> None:
        """Every source until quiet, with the clock standing still: hidden messages wait for the clock."""
        self.cloud.drain(max_rounds=100_000, max_fast_forward=0)

    # -- faults ----------------------------------------------------------------------------------------------------

    def _plan(self, kind: FaultKind, **options: Any) -> None:
        """The fault, at its next opportunity, whichever operation that is (one made later, too)."""
        self.chaos.faults.plan(kind, **options)

    @rule()
    @member_of("faults")
    def holder_crashes_after_effect(self) -> None:
        """The next holder to apply its effect dies before its terminal write."""
        self._plan(FaultKind.CRASH_AFTER_EFFECT)

    @rule()
    @member_of("faults")
    def second_receipt_during_effect(self) -> None:
        """The next holder about to apply its effect meets a second receipt of its message."""
        self._plan(FaultKind.CONCURRENT_DELIVERY)

    @rule()
    @member_of("faults")
    def effect_response_lost(self) -> None:
        """The next effect is applied, and its answer lost (a timeout)."""
        self._plan(FaultKind.LOST_RESPONSE)

    @rule()
    @member_of("faults")
    def lease_expires_under_holder(self) -> None:
        """The next holder's lease runs out after its effect, and another receipt takes over."""
        self._plan(FaultKind.LEASE_EXPIRY)

    @rule()
    @member_of("faults")
    def second_worker_races_a_keys_first_use(self) -> None:
        """The next worker to make a cap's key item (the key's first use) is raced by a second instance handed the
        next message of its batch at once (`producer_floods_two_workers_at_once` plans the same with its flood)."""
        self._plan(FaultKind.FIRST_USE_RACED)

    @rule(operation=operations)
    @member_of("faults")
    def dispatch_replayed(self, operation: str) -> None:
        """The request as its INSERT record carried it is sent again (a relay that died before its checkpoint)."""
        if self._stored(operation) is not None:
            self.chaos.faults.replay_dispatch(operation, self._first_written(operation))

    @rule()
    @member_of("faults")
    def dynamodb_throttles(self) -> None:
        """The next DynamoDB call of a worker or the relay is throttled."""
        self._plan(FaultKind.DYNAMODB_THROTTLE)

    @rule()
    @member_of("faults")
    def send_batch_partly_fails(self) -> None:
        """The next request the relay sends fails in its SendMessageBatch."""
        self._plan(FaultKind.SEND_BATCH_PARTIAL)

    @rule()
    @member_of("faults")
    def delivered_twice(self) -> None:
        """The next message a worker handles (or schedule firing) is delivered once more."""
        self._plan(FaultKind.DUPLICATE_DELIVERY)

    @rule()
    @member_of("faults")
    def schedule_firing_dropped(self) -> None:
        """The next one-time schedule to fire fails to deliver."""
        self._plan(FaultKind.SCHEDULE_FIRING_DROPPED)

    @rule(hard=st.booleans())
    @member_of("faults")
    def lambda_times_out(self, hard: bool) -> None:
        self._plan(FaultKind.LAMBDA_TIMEOUT, hard=hard)

    @rule(seconds=st.sampled_from([30.0, 90.0]))
    @member_of("faults")
    def ssm_goes_down(self, seconds: float) -> None:
        self.chaos.faults.ssm_outage(seconds)

    @rule()
    @member_of("faults")
    def relay_batch_fails(self) -> None:
        """The relay fails for every stream batch it is given until Lambda gives them up (to the failure queue)."""
        rule = self.chaos.faults.plan(FaultKind.RELAY_BATCH_FAILURE, times=RELAY_GIVE_UP_POLLS)
        try:
            for _ in range(RELAY_GIVE_UP_POLLS):
                for source in self.cloud.stream_sources:
                    source.poll(flush=True)
                if not any(source.has_pending() for source in self.cloud.stream_sources):
                    break
        finally:
            self.chaos.faults.withdraw(rule)

    @rule()
    @member_of("faults")
    def schedule_group_deleted(self) -> None:
        self.chaos.faults.delete_schedule_group()

    @rule()
    @member_of("faults")
    def schedule_group_recreated(self) -> None:
        self.chaos.faults.restore_schedule_group()

    @initialize(
        charges=st.sampled_from(PROVIDERS), ledger=st.sampled_from(PROVIDERS), first_answers=st.sampled_from(ANSWERS)
    )
    def providers_met(self, charges: str, ledger: str, first_answers: str = KEPT) -> None:
        """What the providers this history meets can tell, and whether the first answers are lost, from its start
        (its first printed step): an answer lost is ambiguous only with a provider that can neither deduplicate nor
        be asked, and that ambiguity (an UNKNOWN operation, which the operators' resolve and retry act on) is what
        many deep histories start from. One history in three meets such a charge provider, one in three such a
        ledger, and one in three loses the answer of its first effect and of its first charge (as the rules
        `effect_response_lost` and `charge_answer_lost` plan, drawn before anything runs); the rules
        `charge_provider_cannot_tell` and `ledger_provider_misbehaves` turn the providers so at a later step."""
        if charges == CANNOT_TELL:
            self.charge_provider_cannot_tell()
        if ledger == CANNOT_TELL:
            self.ledger_provider_misbehaves()
        if first_answers == LOST:
            self.effect_response_lost()
            self.charge_answer_lost()

    @rule()
    @member_of("faults")
    def ledger_provider_misbehaves(self) -> None:
        """From now on the ledger neither deduplicates nor answers lookups (a provider's nature, for the rest of
        the history: the emulated ledger, back in its good mode, would not know the credits it made meanwhile)."""
        self.chaos.ledger_mode(LedgerMode.NONE)

    # -- steps, waits, continuations (the job of steps in tests/explore/catalogue.py) ---------------------------

    @rule()
    @member_of("steps")
    def crash_between_steps(self) -> None:
        """The next job of steps to pass from one step (or its wait) to the next dies there."""
        WORLD.crashes["between steps"] += 1

    @rule(step=st.sampled_from(["notice", "charge", "file"]))
    @member_of("steps")
    def crash_between_effect_and_marker(self, step: str) -> None:
        """The next time the step's effect is made, the process dies before the step's marker is written."""
        WORLD.crashes[f"after {step}"] += 1

    @rule()
    @member_of("steps")
    def crash_before_claimed_charge(self) -> None:
        """The next charge's claim is written, then the process dies before the charge is made."""
        WORLD.crashes["before charge"] += 1

    @rule()
    @member_of("steps")
    def charge_answer_lost(self) -> None:
        """The next charge is made and its answer lost (the step's confirm settles it)."""
        WORLD.lose_charge_answer += 1

    @rule()
    @member_of("steps")
    def charge_provider_cannot_tell(self) -> None:
        """From now on the charge's provider can neither deduplicate nor be queried: an ambiguous charge makes its
        operation UNKNOWN, naming the step."""
        WORLD.cannot_tell = True

    @rule()
    @member_of("steps", moves_the_platform=True)
    def clock_passes_a_wait(self) -> None:
        """The clock moves past the short wait (its delayed message becomes visible)."""
        self.cloud.advance(SHORT_WAIT + 1.0)

    @rule(seconds=st.sampled_from(LONG_CLOCK_STEPS))
    @member_of("steps", moves_the_platform=True)
    def months_pass(self, seconds: float) -> None:
        """Weeks or months pass: a year's wait ends, a pause lasts; what DynamoDB's time to live deletes on the way
        is gone (the local cloud deletes expired items on every move of its clock). They pass as they would in AWS,
        where the event sources poll all along and the template's schedules fire every few minutes: the clock moves
        in equal steps, each shorter than the shortest time a queue of the template keeps a message, and before
        and after each one the platform catches up (`_weeks_go_by`). A single jump would let SQS drop, unread,
        work AWS delivers within minutes: a relay batch given up to the failure queue, a message in a work queue."""
        end = self.now + seconds
        self._weeks_go_by()
        for left in range(math.ceil(seconds / months_step()), 0, -1):
            if self.now < end:
                self.cloud.advance((end - self.now) / left)
                self._weeks_go_by()
        promise.nothing_invisible(self.cloud, self.chaos.faults, self.now)
        self.longest_unfinished = max(self.longest_unfinished, self._longest_unfinished_steps())

    def _longest_unfinished_steps(self) -> float:
        """Days the oldest job of steps that has not finished has stood since its record began (0: none)."""
        begun = [
            parse_instant("created_at", operation.created_at)
            for operation_id, (operation, _) in promise.operations_now(self.cloud).items()
            if operation.state not in FINAL_STATES and operation.created_at and self._job_of(operation_id) in STEPS_JOBS
        ]
        return (self.now - min(begun)) / DAY if begun else 0.0

    def _weeks_go_by(self) -> None:
        """What the platform does while time passes: the event sources take every message as it becomes visible
        (a visibility timeout, a delay and a due one-time schedule are minutes, so the clock moves on to each, as
        `everything_drains`), every schedule of the template fires once (over a step of days each fires thousands
        of times), and the sources take what those sent."""
        self.chaos.workload.drain()
        for schedule in self.cloud.bus.schedules:
            self.cloud.bus.fire(schedule)
        self.chaos.workload.drain()

    @rule(operation=operations)
    @member_of("steps")
    def request_item_deleted(self, operation: str) -> None:
        """The operation's request item is deleted from the jobs table (a producer with more rights than
        ProducerPolicy, or a clean-up by hand): documented as changing nothing, and an action that would need to
        send it again is refused."""
        self.cloud.client("dynamodb").delete_item(
            TableName=self.cloud.outputs["JobsTableName"], Key={"operation_id": {"S": operation}}
        )

    @rule(operation=operations)
    @member_of("steps")
    def operator_cancels_while_waiting(self, operation: str) -> None:
        """An operator cancels an operation of steps while it waits (if it does: else nothing happens)."""
        record = self.converge.operations.state.record(operation)
        if record.state is OperationState.SCHEDULED and record.waiting:
            self._acts(operation, lambda: self.operator.cancel(operation, "cancelled while it waited"))

    @rule(operation=operations, during_an_incident=st.booleans())
    @member_of("steps")
    def early_copy_while_waiting(self, operation: str, during_an_incident: bool = False) -> None:
        """A copy of the request of an operation waiting between steps arrives (a relay that died before its
        checkpoint, replaying it days before the wait ends): `dispatch_replayed`, landing on a wait (if the operation
        waits: else nothing happens), with whatever else holds it now (its kill switch, its cap's key). A replay
        often comes during an incident, when an operator has switched the job off: `during_an_incident` switches
        its job off first (the switch's own rules would have to fall between the wait's start and the copy)."""
        record = self.converge.operations.state.record(operation)
        if record.state is OperationState.SCHEDULED and record.waiting and self._stored(operation) is not None:
            if during_an_incident:
                self._switch(JOBS[self.planned[operation].job][0], False)
            self.chaos.faults.replay_dispatch(operation, self._first_written(operation))

    @rule(operation=operations, if_not_done=st.sampled_from(["retry", "failed"]), request_gone=st.booleans())
    @member_of("steps")
    def operator_resolves_pending_step(self, operation: str, if_not_done: str, request_gone: bool = False) -> None:
        """An operator resolves an UNKNOWN job of steps (its reason names the charge): succeeded if the provider
        has the charge, else as told; then the platform delivers what that sent. An operator may come to it days
        later, when the producer's clean-up has deleted its request item (`request_gone`: `request_item_deleted`
        first), and a resolve that would send it again is refused then, changing nothing."""
        if self.planned[operation].job not in STEPS_JOBS:
            return
        record = self.converge.operations.state.record(operation)
        if record.state is not OperationState.UNKNOWN:
            return
        if request_gone:
            self.request_item_deleted(operation)
        decided = "succeeded" if WORLD.charged(operation) else if_not_done
        self._acts(operation, lambda: self.operator.resolve(operation, decided, "looked the charge up in the provider"))

    # Weights: a rule named twice is drawn twice as often. The small moves (a poll, a drain of what is visible
    # now, the clock) come up more than the drain of everything, so that faults, switches and cancels fall
    # between the moves of an operation rather than after it has settled.
    stream_polled_again = stream_polled_once
    queues_polled_again = queues_polled_once
    visible_work_drains_again = visible_work_drains
    clock_advances_again = clock_advances

    # -- batches (their children are operations of the reference jobs: every fault rule applies to them) ---------

    def _batch(self, batch_id: str, job: str, other: bool = False) -> tuple[list[BatchChild], BatchCallback]:
        job_type, payload = JOBS[job]
        keys = self.admitted[batch_id].keys
        children = [BatchChild(key, job_type, payload) for key in keys]
        if other:
            children[-1] = BatchChild(keys[-1], job_type, OTHER_PAYLOADS[job])
        return children, BatchCallback(BATCH_DONE_JOB, {"tag": self.batch_tags.get(batch_id, batch_id)})

    def _child(self, batch_id: str, which: int) -> str:
        ids = self.admitted[batch_id].child_ids()
        return ids[which % len(ids)]

    @rule(
        target=batches, job=st.sampled_from(BATCH_JOBS), size=st.integers(min_value=2, max_value=5), crash=st.booleans()
    )
    @member_of("batches")
    @precondition(lambda self: len(self.admitted) < BATCHES_PER_HISTORY)
    def producer_admits_batch(self, job: str, size: int, crash: bool) -> str:
        """A producer admits a batch of 2-5 children and a callback (`crash`: it dies after the batch's record,
        before its children are written: the batch stays admitting until it is admitted again)."""
        batch_id = f"{self.prefix}-b{len(self.admitted) + 1}"
        Explorer.batches_admitted += 1
        self.admitted[batch_id] = AdmittedBatch(batch_id, tuple(f"c{index}" for index in range(size)))
        self.batch_jobs[batch_id] = job
        table = self.converge.require_batches().table

        def dies(*_: Any) -> None:
            raise ConnectionError("the producer died mid-admission")

        if crash:
            table.write_chunk = dies
        try:
            self.converge.enqueue_batch(batch_id, *self._batch(batch_id, job))
        except ConnectionError:
            pass
        finally:
            table.__dict__.pop("write_chunk", None)
        return batch_id

    @rule(target=batches, job=st.sampled_from(BATCH_JOBS), size=st.integers(min_value=2, max_value=5))
    @member_of("batches")
    @precondition(lambda self: len(self.admitted) < BATCHES_PER_HISTORY)
    def caller_posts_batch_to_api(self, job: str, size: int) -> Any:
        """A caller posts a batch of 2-5 children to the enqueue API (POST /batches/{name}), then posts it again (a
        lost response): admitted once, under an id derived from the caller and the name, the retry a replay."""
        name = f"{self.prefix}-b{len(self.admitted) + 1}"
        job_type, payload = JOBS[job]
        keys = tuple(f"c{index}" for index in range(size))
        document = {
            "children": [{"key": key, "job_type": job_type, "payload": payload} for key in keys],
            "callback": {"job_type": BATCH_DONE_JOB, "payload": {"tag": name}},
        }
        answers = [
            self.cloud.http("POST", f"/batches/{name}", headers=signed_by(API_CALLER), body=json.dumps(document))
            for _ in range(2)
        ]
        if [answer.status for answer in answers] != [202, 202]:
            promise.fail(promise.ApiRefusedItsCaller, [f"{a.status} {a.body!r}" for a in answers])
            return multiple()
        first, again = (json.loads(answer.body) for answer in answers)
        if not first["created"] or again["created"] or again["batch_id"] != first["batch_id"]:
            promise.fail(promise.BatchAdmissionWrong, [f"{name} posted twice: {first}, then {again}"])
        batch_id = str(first["batch_id"])
        Explorer.batches_admitted += 1
        self.admitted[batch_id] = AdmittedBatch(batch_id, keys)
        self.batch_jobs[batch_id] = job
        self.batch_tags[batch_id] = name
        return batch_id

    @rule(batch=batches)
    @member_of("batches")
    def producer_readmits_batch(self, batch: str) -> None:
        """The same batch again (a retried producer): nothing twice, and an admission left halfway finished."""
        try:
            self.converge.enqueue_batch(batch, *self._batch(batch, self.batch_jobs[batch]))
        except IdentityConflict as exc:
            promise.fail(promise.BatchAdmissionWrong, [f"{batch} admitted again with its own content: {exc}"])

    @rule(batch=batches)
    @member_of("batches")
    def producer_readmits_other_content(self, batch: str) -> None:
        """Other content under the same batch id: an identity conflict, nothing written."""
        try:
            self.converge.enqueue_batch(batch, *self._batch(batch, self.batch_jobs[batch], other=True))
        except IdentityConflict:
            return
        promise.fail(promise.BatchAdmissionWrong, [f"{batch} admitted again with other content"])

    @rule(batch=batches)
    @member_of("batches")
    def operator_cancels_batch(self, batch: str) -> None:
        with contextlib.suppress(InvalidAction):  # still admitting
            self.converge.cancel_batch(batch, "not this month", "explorer:operator")

    @rule(batch=batches, which=st.integers(min_value=0, max_value=4))
    @member_of("batches")
    def operator_cancels_child(self, batch: str, which: int) -> None:
        child = self._child(batch, which)
        if self.converge.operations.get(child) is not None:  # (not written when its admission stopped before it)
            self._acts(child, lambda: self.operator.cancel(child, "this partner is gone"))

    @rule(batch=batches, which=st.integers(min_value=0, max_value=4), if_not_done=st.sampled_from(["retry", "failed"]))
    @member_of("batches")
    def operator_resolves_child(self, batch: str, which: int, if_not_done: str) -> None:
        child = self._child(batch, which)
        if self.converge.operations.get(child) is None:
            return
        decided = "succeeded" if self._made(child) else if_not_done
        self._acts(child, lambda: self.operator.resolve(child, decided, "looked it up in the provider"))

    @rule(batch=batches, which=st.integers(min_value=0, max_value=4))
    @member_of("batches")
    def operator_retries_child(self, batch: str, which: int) -> None:
        child = self._child(batch, which)
        if self.converge.operations.get(child) is not None:
            self._acts(child, lambda: self.operator.retry(child, "the address is fixed"))

    @rule(batch=batches, form=st.sampled_from(["child", "callback"]), via=st.sampled_from(["put_item", "batch_write"]))
    @member_of("batches")
    def producer_writes_under_batch_id(self, batch: str, form: str, via: str) -> None:
        """A producer writes a request of its own under the batch's reserved ids: a child the batch does not have
        (`<batch>::0:zz`), or the batch's callback (`<batch>::callback`), by PutItem or BatchWriteItem. It holds
        ProducerPolicy: a write the policy denies is refused, as IAM would; what gets through, the relay refuses."""
        if form == "child":
            job_type, payload = JOBS[self.batch_jobs[batch]]
            request = JobRequest(child_id(batch, FORGED_KEY, 0), job_type, payload)
        else:
            total = len(self.admitted[batch].keys)
            summary = summary_fields(batch, total, {OperationState.SUCCEEDED.value: total})
            request = JobRequest(
                callback_id(batch), BATCH_DONE_JOB, {"tag": self.batch_tags.get(batch, batch), **summary}
            )
        item = request_item(request)
        action = "dynamodb:PutItem" if via == "put_item" else "dynamodb:BatchWriteItem"
        if not self._producer_may_put(item, action):
            self.refused_puts += 1
            return
        if via == "put_item":
            self.chaos.workload.enqueue_raw(item)
        else:
            self.cloud.client("dynamodb").batch_write_item(
                RequestItems={self.cloud.outputs["JobsTableName"]: [{"PutRequest": {"Item": item}}]}
            )

    @rule()
    @member_of("batches")
    def completion_look_lost(self) -> None:
        """The next look at a batch after the counter counts a child fails (the child is counted; the counter's call
        fails, and the stream gives it the batch again)."""
        LOOKS_LOST[0] += 1

    @rule()
    @member_of("batches")
    def counter_batch_fails(self) -> None:
        """The batch counter's next call fails once its work is done: the stream gives it the same batch again."""
        self.chaos.faults.plan(FaultKind.COUNTER_BATCH_FAILURE)

    def _overdue_scheduled(self) -> bool:
        """Whether an operation is still SCHEDULED with its run_at passed and nothing delivering it."""
        flying = promise.in_flight(self.cloud)
        return any(
            op.state is OperationState.SCHEDULED and op.record and (op.record.run_at or 0.0) <= self.now
            for operation_id, (op, _) in promise.operations_now(self.cloud).items()
            if operation_id not in flying
        )

    def _batches_quiescent(self) -> None:
        """An admission left halfway is old enough to be listed; the reconciler's pass, and what it enqueued run."""
        if not self.admitted:
            return
        LOOKS_LOST[0] = 0
        table = self.converge.require_batches()
        if any((b := table.get(batch)) is not None and b.state is BatchState.ADMITTING for batch in self.admitted):
            self.cloud.advance(ADMISSION_GRACE_SECONDS + 1)
        self.chaos.workload.drain()
        self.cloud.invoke("ReconcilerFunction", {})
        self.chaos.workload.drain()

    # -- rate limits (docs/flow-control.md) ---------------------------------------------------------------------

    @rule(target=operations, count=st.integers(min_value=2, max_value=3))
    @member_of("rate limits")
    @precondition(lambda self: self.room_for(2))
    def producer_floods_a_limited_partner(self, count: int) -> Any:
        """Several calls to the limited partner at once: the first starts, the others wait SCHEDULED for slots."""
        return multiple(*(self._enqueued_now("limited") for _ in range(min(count, self.room_left()))))

    @rule()
    @member_of("rate limits")
    def limited_partner_answers_429(self) -> None:
        """The partner refuses its next call with a retry-after: the key pauses, the job waits, no attempt spent."""
        WORLD.partner_refuses += 1

    @rule(seconds=st.sampled_from([45.0, 600.0]))
    @member_of("rate limits")
    def operator_pauses_the_limited_partner(self, seconds: float) -> None:
        """An operator pauses the partner's key (`converge limits pause`): jobs held already keep their slots."""
        limits = self.converge.rate_limits
        limits.pause(PARTNER_LIMIT.name, None, seconds)

    @rule(target=operations, count=st.integers(min_value=1, max_value=2))
    @member_of("rate limits")
    @precondition(lambda self: self.room_for(2))
    def producer_floods_the_partner_then_one_accounts_call(self, count: int) -> Any:
        """Calls to the limited partner, then one under the partner's pace and its account's too: the partner's pace
        holds that one first; come back on its slot, it starts, its account's unit taken once."""
        jobs = [*(["limited"] * count), "limited-both"]
        # The call under both paces always: the partner's calls as many as there is room for
        return multiple(*(self._enqueued_now(job) for job in jobs[-max(1, self.room_left()) :]))

    @rule()
    @member_of("rate limits")
    def limiter_key_raced(self) -> None:
        """Before each of a worker's next three writes to a rate limiter's key, the key moves against it: another
        worker reserves it before a write for a key at rest, an operator releases it before one for a busy key."""
        self.chaos.faults.plan(FaultKind.LIMITER_KEY_RACED, times=3)

    def _limited(self) -> set[str]:
        return {op for op, planned in self.planned.items() if planned.job in ("limited", "limited-both")}

    def _alone_on_their_account(self) -> set[str]:
        """The operations under the account's pace too, when the history made one only: its key's units are its own."""
        both = {op for op, planned in self.planned.items() if planned.job == "limited-both"}
        return both if len(both) == 1 else set()

    # -- signals: before, during and after a wait, twice, with another id, racing its timeout ---------------------

    @rule(operation=operations, signal_id=st.sampled_from(["sig-a", "sig-b"]))
    @member_of("signals")
    def sender_signals(self, operation: str, signal_id: str) -> None:
        self._signal(operation, signal_id)

    @rule(operation=operations, signal_id=st.sampled_from(["sig-a", "sig-b"]))
    @member_of("signals")
    def sender_signals_while_sqs_refuses(self, operation: str, signal_id: str) -> None:
        """A sender signals while SQS refuses every message (an outage of the sender's own process): a wake then
        cannot be sent, the operation is listed under STUCK for the reconciler, and the answer must not say it woke
        the operation (promise.SignalWokeUnsent)."""
        sqs = self.converge.clients.sqs

        def refuse(**_: Any) -> None:
            raise EndpointConnectionError(endpoint_url=sqs.meta.endpoint_url)

        events = ("before-call.sqs.SendMessage", "before-call.sqs.SendMessageBatch")
        for event in events:
            sqs.meta.events.register(event, refuse)
        try:
            receipt = self._signal(operation, signal_id)
        finally:
            for event in events:
                sqs.meta.events.unregister(event, refuse)
        promise.woke_only_when_sent(receipt, sent=False)

    def _signal(self, operation: str, signal_id: str) -> Any:
        decision = "approved" if signal_id == "sig-a" else "rejected"
        sent = SignalSubmission(operation, "approval", {"decision": decision}, signal_id, sent_by="explorer:sender")
        receipt = self.converge.signals.send(sent)
        self.signals_sent.append(promise.SentSignal(operation, signal_id, receipt.answer.value, (decision,)))
        return receipt

    @rule(operation=api_operations, signal_id=st.sampled_from(["sig-a", "sig-b"]))
    @member_of("signals")
    def caller_signals_through_api(self, operation: str, signal_id: str) -> None:
        """The operation's caller signals it over HTTP: its own route, answered as `converge.signal` answers (a 404
        once its request item is deleted: the API can no longer tell the operation is this caller's)."""
        self._signals_over_http(operation, signal_id, f"/operations/{operation}/signals/approval")

    @rule(operation=operations, signal_id=st.sampled_from(["sig-a", "sig-b"]))
    @member_of("signals")
    def operator_signals_through_api(self, operation: str, signal_id: str) -> None:
        """An operator signals any operation over HTTP, on the admin route."""
        self._signals_over_http(operation, signal_id, f"/admin/operations/{operation}/signals/approval")

    def _signals_over_http(self, operation: str, signal_id: str, path: str) -> None:
        decision = "approved" if signal_id == "sig-a" else "rejected"
        document = {"payload": {"decision": decision}, "signal_id": signal_id}
        response = self.cloud.http("POST", path, headers=signed_by(API_CALLER), body=json.dumps(document))
        answered = json.loads(response.body) if response.status in (200, 202, 404, 409) else {}
        answer = answered.get("answer") or answered.get("error")  # a caller's 404 is not_found with no receipt
        if answer is None:
            promise.fail(promise.ApiRefusedItsCaller, [f"signal {operation}: {response.status} {response.body!r}"])
            return
        self.signals_sent.append(promise.SentSignal(operation, signal_id, str(answer), (decision,)))

    @rule(
        operation=operations,
        signal_id=st.sampled_from(["sig-a", "sig-b"]),
        decision=st.sampled_from(DECISIONS),
        how=st.sampled_from(SIGNAL_ITEM_WRITES),
        corrected=st.booleans(),
    )
    @member_of("signals")
    def producer_signals_by_item(
        self, operation: str, signal_id: str, decision: str, how: str, corrected: bool = False
    ) -> None:
        """A producer signals by an item in the jobs table (`converge.signal_put`), alone or in one transaction with
        a write of its own; the same id again with another decision rewrites it (a duplicate: the first payload
        stands), as `corrected` does at once, before the relay reads either. Or it forges one: the item's key with a
        request's job type, which the relay answers `invalid`. It holds ProducerPolicy, which must allow the item;
        the relay sends it, and its answer is read back from the record under the item's key (promise.signals_kept;
        a refused item's rewrites answered too, each shown once: promise.ReceiptInconsistent)."""
        self._signal_item(operation, signal_id, decision, how)
        if corrected:
            other = next(each for each in DECISIONS if each != decision)
            self._signal_item(operation, signal_id, other, "alone")

    def _signal_item(self, operation: str, signal_id: str, decision: str, how: str) -> None:
        put = self.converge.signal_put(operation, "approval", {"decision": decision}, signal_id=signal_id)
        item = put["Put"]["Item"]
        if how == "forged as a request":
            item["job_type"] = {"S": APPROVAL_JOB}
        if not self._producer_may_put(item):
            promise.fail(promise.SignalLost, [f"ProducerPolicy denies the signal item {item['operation_id']['S']}"])
        dynamodb = self.cloud.client("dynamodb")
        if how == "with its own write":
            own = {"Put": {"TableName": self._producer_table(), "Item": {"pk": {"S": f"decision#{operation}"}}}}
            dynamodb.transact_write_items(TransactItems=[own, put])
        else:
            dynamodb.put_item(**put["Put"])
        self.signal_items.append(promise.SignalItemSent(item["operation_id"]["S"], decision, how))

    def _producer_table(self) -> str:
        """The producer's own table (its decisions), made once in the emulator."""
        dynamodb = self.cloud.client("dynamodb")
        if PRODUCER_TABLE not in dynamodb.list_tables()["TableNames"]:
            dynamodb.create_table(
                TableName=PRODUCER_TABLE,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        return PRODUCER_TABLE

    @rule(operation=operations, decision=st.sampled_from(DECISIONS))
    @member_of("signals")
    def console_decides(self, operation: str, decision: str) -> None:
        """A person approves or rejects in the console (confirmed): the signal `approval` with the decision, its id
        derived from its content; the answer flashed on the operation's page. An operation neither table holds yet
        is not found (404), as for any console action."""
        client = self._console()
        assert client.get(f"/?token={CONSOLE_SECRET}").status_code == 303
        with client.session_transaction() as session:
            session[SESSION_KEY] = "explorer-token"
        form = {"name": "approval", "decision": decision, "reason": "decided in the console", "confirmed": "yes"}
        response = client.post(f"/operations/{operation}/signal", data={TOKEN_FIELD: "explorer-token", **form})
        if response.status_code == 404 and self.converge.operations.get(operation) is None:
            return
        assert response.status_code == 303, (response.status_code, response.get_data(as_text=True)[:500])
        shown = re.search(r"approval: (\w+);", client.get(response.headers["Location"]).get_data(as_text=True))
        assert shown, "the console shows no answer for the decision"
        signal_id = default_signal_id("approval", {"decision": decision})
        self.signals_sent.append(promise.SentSignal(operation, signal_id, shown.group(1)))

    @invariant()
    def signals_kept(self) -> None:
        approvals = [op for op, planned in self.planned.items() if planned.job in APPROVAL_JOBS]
        sent = [*self.signals_sent, *promise.signal_items_answered(self.cloud, self.signal_items)]
        promise.signals_kept(self.converge, approvals, APPROVALS.decided, sent)

    # -- per-key concurrency (docs/flow-control.md) ---------------------------------------------------------------

    @rule(target=operations, count=st.integers(min_value=2, max_value=3), job=st.sampled_from(CAPPED_JOBS))
    @member_of("caps")
    @precondition(lambda self: self.room_for(2))
    def producer_floods_one_accounts_sync(self, count: int, job: str = "singleton") -> Any:
        """Several capped jobs of one account at once: one runs; the others wait SCHEDULED and try again (queue
        mode), end NOOP naming it (skip mode), or only the newest waits (replace mode)."""
        return multiple(*(self._enqueued_now(job) for _ in range(min(count, self.room_left()))))

    @rule(target=operations, count=st.integers(min_value=2, max_value=3), job=st.sampled_from(CAPPED_JOBS))
    @member_of("caps")
    @precondition(lambda self: self.room_for(2))
    def producer_floods_two_workers_at_once(self, count: int, job: str = "singleton") -> Any:
        """A flood of one account (as above) whose messages reach two workers at once: the next worker to make a
        cap's key item (the key's first use: the flood's first job, unless its key was used) is raced by a second
        instance of the function handed the next message of its batch, another job of the key, which takes the key's
        first slot just before (and may run and end meanwhile); the first must then take a slot left free."""
        self._plan(FaultKind.FIRST_USE_RACED)
        return self.producer_floods_one_accounts_sync(count, job)

    # -- debounce (docs/flow-control.md) --------------------------------------------------------------------------

    @rule(
        target=operations,
        versions=st.lists(st.integers(min_value=1, max_value=4), min_size=2, max_size=4),
        by_time=st.booleans(),
    )
    @member_of("debounce")
    @precondition(lambda self: self.room_for(2))
    def producer_bursts_one_accounts_changes(self, versions: list[int], by_time: bool = False) -> Any:
        """Changes of one account in a burst, each requesting its refresh with the version it made (newer and older
        ones, equal ones), or (`by_time`) with its edit's time, well formed or not (EDIT_TIMES: a malformed one is
        oldest): one run for the burst, from the newest; the others end NOOP naming it."""
        made = []
        job = "debounced-by-time" if by_time else "debounced"
        for version in versions[: max(0, self.room_left())]:
            operation_id = self._enqueued_now(job, _of_version(job, JOBS[job][1], version))
            self.versions[operation_id] = version
            made.append(operation_id)
        return multiple(*made)

    def _debounced(self) -> dict[str, tuple[str, float]]:
        """Each debounced request stored: its key and its order as the producer first wrote them (a rewrite with
        other content is refused and never runs, though the request item holds it): its version, or its edit's
        time's (EDIT_TIMES)."""
        stored = promise.operations_now(self.cloud)
        found = {}
        for operation_id, planned in self.planned.items():
            if planned.job not in DEBOUNCED_JOBS or operation_id not in stored:
                continue
            _, payload = JOBS[planned.job]
            version = self.versions.get(operation_id)
            if planned.job == "debounced":
                found[operation_id] = (str(payload["account_id"]), float(version or payload["version"]))
            else:
                order = EDIT_TIMES[version - 1][1] if version else dict(EDIT_TIMES)[payload["edited_at"]]
                found[operation_id] = (str(payload["account_id"]), order)
        return found

    @rule(job=st.sampled_from(CAPPED_JOBS))
    @member_of("caps")
    def operator_pauses_a_capped_key(self, job: str) -> None:
        """An operator pauses an account's key of a cap (`converge limits pause-key`): none of its jobs starts. The
        key is one of a capped job the history made, when it made one (`_in_play`)."""
        job_type, payload = JOBS[self._in_play(job)]
        cap = self.converge.registry.get(job_type).concurrency
        assert cap is not None
        self.converge.concurrency_caps.pause(cap.name, payload["account_id"], "explorer:operator")
        WORLD.paused.add((job_type, payload["account_id"]))

    @rule(job=st.sampled_from(CAPPED_JOBS))
    @member_of("caps")
    def operator_releases_a_capped_key(self, job: str) -> None:
        """An operator releases the key: the jobs held on it are woken now (each due now and its message sent, or
        listed under STUCK), and start as the cap lets them (what the release said: `released`)."""
        job_type, payload = JOBS[self._in_play(job)]
        self.released = self._release(job_type, payload["account_id"])

    @rule()
    @member_of("caps")
    def operator_frees_slots_left_behind(self) -> None:
        """An operator frees each capped key's slot whose holder has ended (`converge limits release --slot`): one left
        behind when giving it back failed, which would hold the key until its lease lapsed."""
        operations = promise.operations_now(self.cloud)
        caps = self.converge.concurrency_caps
        for running in caps.running():
            for holder in running.running:
                operation = operations.get(holder, (None, None))[0]
                if operation is not None and operation.state in FINAL_STATES:
                    caps.release_slot(running.cap.name, running.key, holder, "explorer:operator")

    @rule(operation=operations)
    @member_of("caps")
    def capped_jobs_message_sent_again(self, operation: str) -> None:
        """A capped job's message sent again as converge's own resends send it (a resume after its kill switch, the
        reconciler's, a release's wake): with no acceptance time on it, and only once its operation has a record (each
        of those resends an operation a delivery or the relay recorded). In replace mode its place in the key's order
        is then its record's: a newer request sent again is never taken for the oldest."""
        if (
            self.planned[operation].job in CAPPED_JOBS
            and self._stored(operation) is not None
            and self.converge.operations.state.record(operation).recorded
        ):
            self.chaos.faults.replay_dispatch(operation, self._first_written(operation))

    def _release(self, job_type: str, account_id: str) -> KeyReleased:
        cap = self.converge.registry.get(job_type).concurrency
        assert cap is not None
        released = self.converge.concurrency_caps.resume(cap.name, account_id, "explorer:operator")
        WORLD.paused.discard((job_type, account_id))
        promise.release_woke(self.cloud, self.chaos.faults, self._capped(), cap.name, account_id, released)
        return released

    def _in_play(self, job: str) -> str:
        """The capped job an operator's action on a key lands on: `job` when the history made one of it (or made no
        capped job at all), else one of those it made, picked by `job`'s place. An action on a key no operation of
        the history uses changes nothing; landing on the operations in play is what lets a pause meet, say, a capped
        job waiting between steps and a copy of its message."""
        made = [capped for capped in CAPPED_JOBS if any(p.job == capped for p in self.planned.values())]
        if not made or job in made:
            return job
        return made[CAPPED_JOBS.index(job) % len(made)]

    def _capped(self, *jobs: str) -> set[str]:
        return {op for op, planned in self.planned.items() if planned.job in (jobs or CAPPED_JOBS)}

    def _in_progress(self, account_id: str, starting: str) -> list[str]:
        """The other operations of an account, of the starting one's job (each capped job has a cap of its own), in
        progress now: IN_PROGRESS with a live lease (what the cap counts)."""
        now = self.now
        operations = promise.operations_now(self.cloud)
        job_type = operations[starting][0].job_type if starting in operations else None
        return sorted(
            operation_id
            for operation_id, (operation, _) in operations.items()
            if operation_id in self._capped()
            and operation_id != starting
            and operation.job_type == job_type
            and operation.state is OperationState.IN_PROGRESS
            and operation.record is not None
            and (operation.record.lease_until or 0) > now
            and (operation.payload or {}).get("account_id") == account_id
        )

    # -- the promise -----------------------------------------------------------------------------------------------

    @invariant()
    def promise_kept(self) -> None:
        Explorer.steps += 1
        promise.drains_quiet(self.chaos.workload, QUIET_ROUNDS)
        visited, nearness = promise.every_step(self.cloud, self.chaos.faults, self.planned, steps_jobs=NOT_ONE_EMAIL)
        self.visited |= visited | self._waits_switched_off()
        self.nearest = max(self.nearest, nearness)
        promise.steps_kept(self.cloud, self.chaos.faults, WORLD, STEPS_TYPES, self.cancelled_with)
        promise.batches_kept(self.converge, self.admitted.values(), WORLD.callbacks, cloud=self.cloud)
        promise.limits_kept(self.cloud, self.chaos.faults, self._limited(), PARTNER_LIMIT)
        promise.charged_once(self.cloud, self.chaos.faults, self._alone_on_their_account(), ACCOUNT_LIMIT)
        promise.reservations_kept(self.chaos.faults)
        promise.caps_kept(self.cloud, self._capped(), WORLD.crowded)
        promise.debounce_kept(self.cloud, self._debounced(), WORLD.refreshes, REFRESH.max_wait)
        promise.modes_kept(self.cloud, self._capped("refresh"), self._capped("render"))

    def _waits_switched_off(self) -> set[tuple[str, bool]]:
        """An abstract state no rule reaches in one step: a job of steps waiting between two steps while its kill
        switch is off (a copy of its message arriving then meets the switch before its time; the resumer wakes what
        the switch paused). Counted in the targeted phase's coverage, so histories that reach it are mutated further
        (a copy, a delivery, a switch back on, the resumer: one step each from there)."""
        if not self.switched_off:
            return set()
        waiting = [
            operation_id
            for operation_id, (operation, _) in promise.operations_now(self.cloud).items()
            if operation.state is OperationState.SCHEDULED
            and operation.job_type in self.switched_off
            and operation.record is not None
            and operation.record.waiting
        ]
        if not waiting:
            return set()
        counted = self.chaos.effects()
        return {
            ("SCHEDULED waiting, switched off", sum(counted.for_operation(operation_id).values()) > 0)
            for operation_id in waiting
        }

    def teardown(self) -> None:
        """Quiescence: faults off, the clock past every run_at, resumer and reconciler run, sources drained;
        then every operation is final or listed, and every listing is true. (Skipped when a step already
        failed, so that its failure is the one reported.)"""
        try:
            self._quiescence()
        finally:  # the lost looks are planned on a class the whole process shares: none left for the tests after
            LOOKS_LOST[0] = 0

    def _quiescence(self) -> None:
        if sys.exc_info()[0] is not None or not hasattr(self, "chaos"):
            return
        faults, cloud = self.chaos.faults, self.cloud
        faults.rules.clear()
        for job_type, account_id in sorted(WORLD.paused):  # an operator releases what they paused
            self._release(job_type, account_id)
        faults.ssm_outage_until = 0.0
        faults.restore_schedule_group()
        self.chaos.workload.drain()
        operations = promise.operations_now(cloud)
        open_now = any(op.state not in FINAL_STATES for op, _ in operations.values())
        if open_now or promise.in_flight(cloud) or promise.relay_failures_kept(cloud):
            # (when every operation is final, nothing is in flight and no given-up relay batch waits for the
            # reconciler's replay, none of this can change anything)
            waits = (op.record.run_at for op, _ in operations.values() if op.record and _waits(op))
            latest = max(
                (*(p.run_at for p in self.planned.values() if p.run_at is not None), *(w for w in waits if w)),
                default=self.now,
            )
            if latest - self.now + 1 > months_step():
                # Months to a wait's end: what the relay gave up meanwhile is replayed first (in AWS, within the
                # reconciler's five minutes), not left to outlive the failure queue's retention in one jump
                self.chaos.workload.reconcile()
            if latest >= self.now:
                cloud.advance(latest - self.now + 1)
            self.chaos.forget_toggles()
            cloud.invoke("ResumerFunction", RESUMER_EVENT)
            self.chaos.workload.drain()
            self.chaos.workload.reconcile()
            cloud.invoke("ReconcilerFunction", {})
            if self._overdue_scheduled():
                # What nothing will deliver past its run_at (its schedule deleted with the group, its firing dropped)
                # is the reconciler's once the overdue grace has passed: sent again, listed STUCK until a worker
                # takes it (converge.operate.overdue). Quiescence is past that deadline too.
                cloud.advance(OVERDUE_GRACE_SECONDS + 1)
                self.chaos.workload.reconcile()
                cloud.invoke("ReconcilerFunction", {})
        self._batches_quiescent()
        promise.drains_quiet(self.chaos.workload, QUIET_ROUNDS)
        promise.batches_kept(self.converge, self.admitted.values(), WORLD.callbacks, settled=True, cloud=self.cloud)
        batches = self.converge.require_batches()
        Explorer.batches_completed += sum(
            1 for batch in self.admitted if (found := batches.get(batch)) and found.state is BatchState.COMPLETE
        )
        self.visited |= promise.every_step(cloud, faults, self.planned, settled=True, steps_jobs=NOT_ONE_EMAIL)[0]
        promise.steps_kept(cloud, faults, WORLD, STEPS_TYPES, self.cancelled_with)
        promise.nothing_invisible(cloud, faults, self.now)
        promise.listings_true(cloud)
        promise.signal_items_answered(cloud, self.signal_items, settled=True)
        promise.limits_kept(cloud, faults, self._limited(), PARTNER_LIMIT)
        promise.charged_once(cloud, faults, self._alone_on_their_account(), ACCOUNT_LIMIT)
        promise.reservations_kept(faults)
        promise.caps_kept(cloud, self._capped(), WORLD.crowded)
        promise.debounce_kept(cloud, self._debounced(), WORLD.refreshes, REFRESH.max_wait)
        promise.modes_kept(cloud, self._capped("refresh"), self._capped("render"))
        # Coverage for Hypothesis' targeted phase: histories whose operations take more kinds of moves
        # (IN_PROGRESS -> PAUSED, PAUSED -> CANCELLED, ...) and stand in more abstract states (a state, with or
        # without its effect made) are mutated further, one step at a time: rare moves meet rare code, and an
        # operation PAUSED with its effect made is one step from a break.
        Explorer.reached.update({state for state, _ in self.visited})
        coverage = len(promise.moves(promise.operations_now(cloud))) + len(self.visited)
        if currently_in_test_context():  # not in a replay by hand (tests/explore/test_breaks.py)
            target(float(coverage), label="state moves and abstract states")
            # A score of its own for the one abstract state no rule reaches in a step and a cancel breaks from:
            # work started that reads as not started (PAUSED after a crash past its effect and a redelivery met
            # its kill switch). Under its own label the targeted phase climbs towards it, not towards moves in
            # general; from there, a cancel is one step (promise.started_then_unstarted).
            target(float(self.nearest), label="started, then reads as not started")
            # And one for time: a job of steps that stands unfinished for longer than what DynamoDB's time to live
            # keeps of it (its markers) is where a resumed run can repeat a step; months pass only while one waits
            # or is paused, so the climb is towards pauses and waits that last.
            target(self.longest_unfinished, label="days a job of steps stood unfinished")
            # And one for an operator's work: each kind of action taken on what was listed (by the state it was
            # listed in, and whether the job continues into another), so the climb is towards histories that leave
            # operations UNKNOWN, FAILED, PAUSED or waiting, and an operator who settles them every way there is.
            target(float(len(self.worked)), label="kinds of work an operator did from the list")
        if self.nearest == promise.STARTED_READS_UNSTARTED:
            Explorer.started_then_unstarted += 1


LIST_ACTIONS: dict[OperationState, tuple[str, ...]] = {
    # what an operator does to an operation it finds listed, by its state (first: what shrinking goes to); a cancel
    # of an UNKNOWN or a FAILED one is answered "not applied", and must change nothing
    OperationState.UNKNOWN: ("resolve", "retry", "resolve from elsewhere", "cancel"),
    OperationState.FAILED: ("retry", "resolve", "cancel"),
    OperationState.PAUSED: ("cancel", "retry"),
    OperationState.SCHEDULED: ("cancel",),
}
"""`operator_works_the_list`'s actions for each state it lists."""


MAKER_RULES = [maker for maker in Explorer.setup_state().rules if maker.targets]
"""The rules that make operations (they fill a bundle)."""


def _waits(operation: Any) -> bool:
    """An operation that waits for a time of its own: between two steps, or held by a rate limit for its slot."""
    record = operation.record
    return bool(record.waiting) or (operation.state is OperationState.SCHEDULED and record.run_at is not None)
