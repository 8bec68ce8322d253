"""The explorer's catalogue: the reference application's jobs, and a job of steps with a wait and continuations.

The reference catalogue's job of steps (the CV) neither waits nor charges, and its continuation (the money job's
notice) follows success only, so the explorer brings a job of its own (test-only, loaded by the local cloud as
`CONVERGE_CATALOGUE`): `explore.steps.v1` e-mails a notice (`effect_then_claim`, counted in SES as every e-mail is),
charges an account (`claim_then_effect`, with `confirm`), waits (`ctx.wait`, ten minutes, two days or nearly a year,
from its payload) and files a record (`keyed_effect`); on success it is followed by `explore.steps-next.v1`
(`<id>:next`), on failure or UNKNOWN by the same job (`<id>:on-failure`), which e-mails once. The same steps also
run capped at one per account (`explore.steps-capped.v1`), so a full or paused key meets a job that waits between
its steps. A wait of nearly a year (`YEAR_WAIT`), and the clock's long moves, pass what a time to live counted from
a marker's writing would allow. The charges and records land with a provider in this process (`WORLD`), which counts
each by its key and time, and which the explorer's rules make misbehave: a crash between two steps, a crash between
a step's effect and its marker, an answer lost after the charge, a provider that cannot say what it did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from catalogue import BINDINGS as REFERENCE_BINDINGS
from catalogue import LOCAL_HOOKS as REFERENCE_HOOKS
from catalogue.mail import SesMailer
from catalogue.settings import CatalogueSettings
from converge import (
    BatchSummary,
    Concurrency,
    Confirmation,
    Debounce,
    Identifier,
    JobBinding,
    JobContext,
    JobMessage,
    Limiter,
    Policy,
    Queue,
    RateLimited,
    Then,
)

BATCH_DONE_JOB = "explore.batch-done.v1"
"""A batch's callback (the explorer's batches' children are the reference jobs): it records what it was told."""
STEPS_JOB = "explore.steps.v1"
NEXT_JOB = "explore.steps-next.v1"
RECIPIENT = "account-holder@example.com"
SHORT_WAIT = 600
"""Seconds: a wait under SQS's 900-second delay (a delayed message)."""
LONG_WAIT = 2 * 86400
"""Seconds: a wait past it (a one-time schedule)."""
YEAR_WAIT = 364 * 86400
"""Seconds: a wait of nearly a year (the longest a wait may be), long enough that a time to live counted from a
marker's writing would pass in it or in a pause after it."""


class StepsMessage(JobMessage):
    account_id: Identifier
    wait_seconds: int = SHORT_WAIT


class NextMessage(JobMessage):
    account_id: Identifier


class BatchDone(BatchSummary):
    tag: Identifier


class BatchDoneRunner:
    """The callback: one e-mail (effect_then_claim, counted in SES as every e-mail is), and the summary it was
    given recorded in WORLD."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: BatchDone, ctx: JobContext) -> BatchDone:
        return message

    def run(self, message: BatchDone, summary: BatchDone, ctx: JobContext) -> None:
        WORLD.callbacks.append((ctx.operation_id, message.model_dump(), ctx.clock.now()))
        self.mailer.send(
            RECIPIENT, f"Batch {message.batch_id} done", f"{message.batch_total}\n\nReference: {ctx.operation_id}\n"
        )


class Crash(BaseException):
    """Stands for the injector's SimulatedCrash when no injector is installed (a unit test of this module)."""


@dataclass(frozen=True)
class StepEffect:
    operation_id: str
    step: str
    key: str
    at: float


@dataclass
class StepWorld:
    """The provider the steps' charges and records land with, and the faults planned for the next step."""

    charges: Counter[str] = field(default_factory=Counter)
    """Each charge key ("<operation>:charge") and how many times the charge was applied."""
    records: Counter[str] = field(default_factory=Counter)
    """Each record key ("<operation>:file") and how many times it was written (idempotent by key)."""
    effects: list[StepEffect] = field(default_factory=list)
    crashes: Counter[str] = field(default_factory=Counter)
    """Planned crashes, each at its next opportunity: "between steps" (after a marker or the wait, before the
    next step), "after <step>" (its effect made, its marker not written), "before charge" (the charge's claim
    written, its effect not made)."""
    lose_charge_answer: int = 0
    """Planned: the next charges are applied and their answer lost (an ambiguous outcome)."""
    cannot_tell: bool = False
    """The provider can neither deduplicate nor be queried (for the rest of the history)."""
    callbacks: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)
    """Each run of a batch's callback: its operation id, its message, when."""
    partner_refuses: int = 0
    """Planned: the limited partner answers the next calls 429, retry after PARTNER_RETRY_AFTER seconds."""
    crowded: list[str] = field(default_factory=list)
    """Each start of a capped job that found its account's cap full of other operations in progress, or its key paused
    (a break)."""
    in_progress: Callable[[str, str], list[str]] | None = None
    """Set by the explorer: the other operations of an account, and of the starting one's job, in progress now
    (IN_PROGRESS, their lease live)."""
    refreshes: list[tuple[str, int | str, int, float]] = field(default_factory=list)
    """Each start of a debounced refresh: (operation id, version or edit time, attempt, when)."""
    paused: set[tuple[str, str]] = field(default_factory=set)
    """The capped job types and accounts an operator has paused (none of them may start until released)."""
    waits: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Each job of steps that reached its wait: the wait's seconds, and its end as the job first asked for it (a
    resumed run asks again later; the wait's marker keeps the first time recorded, never an earlier one)."""

    def reset(self) -> None:
        self.waits.clear()
        self.refreshes.clear()
        self.partner_refuses = 0
        self.crowded.clear()
        self.paused.clear()
        self.callbacks.clear()
        self.charges.clear()
        self.records.clear()
        self.effects.clear()
        self.crashes.clear()
        self.lose_charge_answer = 0
        self.cannot_tell = False

    def charged(self, operation_id: str) -> bool:
        return self.charges[f"{operation_id}:charge"] > 0

    def effects_of(self, operation_id: str) -> list[StepEffect]:
        return [effect for effect in self.effects if effect.operation_id == operation_id]

    # -- what the runner calls -----------------------------------------------------------------------------------

    def crash_at(self, point: str, ctx: JobContext, window: bool = False) -> None:
        """Die here if a crash is planned at this point (`window`: just after an e-mail, before its marker)."""
        if self.crashes[point]:
            self.crashes[point] -= 1
            _crash(f"injected crash {point} ({ctx.operation_id})", window=window, ctx=ctx)

    def between_steps(self, ctx: JobContext) -> None:
        self.crash_at("between steps", ctx)

    def waiting(self, ctx: JobContext, seconds: float) -> None:
        """The job is about to wait `seconds`: its end noted the first time (`waits`)."""
        self.waits.setdefault(ctx.operation_id, (float(seconds), ctx.clock.now() + seconds))

    def starting(self, ctx: JobContext, account_id: str, limit: int) -> None:
        """A capped job starts: noted as a break (`crowded`) when its key is paused, or when `limit` other operations
        of its job and account are in progress (converge's own leases: IN_PROGRESS and live, a crashed holder's until
        its lease lapses)."""
        if self.in_progress is None:
            return
        others = self.in_progress(account_id, ctx.operation_id)
        if (ctx.job_type, account_id) in self.paused:
            self.crowded.append(f"{ctx.operation_id} started while its key {account_id} was paused")
        if len(others) >= limit:
            self.crowded.append(
                f"{ctx.operation_id} started at {ctx.clock.now():.0f} while {others} ran (account {account_id})"
            )

    def charge(self, ctx: JobContext, key: str) -> dict[str, str]:
        self.crash_at("before charge", ctx)
        self.charges[key] += 1
        self.effects.append(StepEffect(ctx.operation_id, "charge", key, ctx.clock.now()))
        self.crash_at("after charge", ctx)
        if self.lose_charge_answer:
            self.lose_charge_answer -= 1
            raise ConnectionResetError("the charge's answer was lost")
        return {"charge": key}

    def confirm(self, key: str) -> Confirmation:
        if self.cannot_tell:
            return Confirmation.UNKNOWABLE
        return Confirmation.APPLIED if self.charges[key] else Confirmation.NOT_APPLIED

    def file(self, ctx: JobContext, key: str) -> dict[str, str]:
        self.records[key] += 1
        self.effects.append(StepEffect(ctx.operation_id, "file", key, ctx.clock.now()))
        self.crash_at("after file", ctx)
        return {"record": key}


WORLD = StepWorld()


def _crash(message: str, window: bool, ctx: JobContext) -> None:
    """The worker's process dies here. Inside the injector, as its own crash (a crash after an e-mail and before
    its marker is a fault in that e-mail's window: the bound on e-mails allows the duplicate it may cause)."""
    from localcloud import faults

    injector = faults._ACTIVE
    if injector is None:
        raise Crash(message)
    if window:
        injector._injected(faults.FaultKind.CRASH_AFTER_EFFECT, ctx.operation_id)
    raise faults.SimulatedCrash(message)


class StepsRunner:
    """Notice, charge, wait, file: one effect per step, each under its own policy (`cap`: the job's concurrency cap,
    whose every start is checked as `WORLD.starting` checks it)."""

    def __init__(self, mailer: Any, cap: Concurrency | None = None) -> None:
        self.mailer = mailer
        self.cap = cap

    def load(self, message: StepsMessage, ctx: JobContext) -> str:
        return message.account_id

    def run(self, message: StepsMessage, account_id: str, ctx: JobContext) -> None:
        if self.cap is not None:
            WORLD.starting(ctx, account_id, self.cap.limit)
        ctx.step("notice", lambda key: self._notice(ctx, account_id), policy="effect_then_claim")
        WORLD.between_steps(ctx)
        ctx.step("charge", lambda key: WORLD.charge(ctx, key), policy="claim_then_effect", confirm=WORLD.confirm)
        WORLD.between_steps(ctx)
        WORLD.waiting(ctx, message.wait_seconds)
        ctx.wait("cool-off", seconds=message.wait_seconds)
        WORLD.between_steps(ctx)
        ctx.step("file", lambda key: WORLD.file(ctx, key), policy="keyed_effect")

    def _notice(self, ctx: JobContext, account_id: str) -> dict[str, str]:
        self.mailer.send(
            RECIPIENT, "Your account will be charged", f"Account {account_id}\n\nReference: {ctx.operation_id}\n"
        )
        WORLD.crash_at("after notice", ctx, window=True)
        return {"account": account_id}


class NextRunner:
    """The continuation: one e-mail (effect_then_claim), no steps."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: NextMessage, ctx: JobContext) -> str:
        return message.account_id

    def run(self, message: NextMessage, account_id: str, ctx: JobContext) -> None:
        self.mailer.send(
            RECIPIENT, "What happened to your account", f"Account {account_id}\n\nReference: {ctx.operation_id}\n"
        )


# -- a rate-limited job (docs/flow-control.md) ----------------------------------------------------------------------

LIMITED_JOB = "explore.limited.v1"
PARTNER_LIMIT = Limiter("explore-partner", limit=1, period=60)
"""One call a minute, no burst: two of the explorer's operations already meet it; a held one waits a minute."""
PARTNER_RETRY_AFTER = 45.0
ACCOUNT_LIMIT = Limiter("explore-account", limit=1, period=600, key="account_id")
"""One call in ten minutes per account, for the job that also names the partner's pace: held by the partner's first,
it must not wait behind the account unit it took meanwhile (charged once on each limiter for a run)."""
LIMITED_BOTH_JOB = "explore.limited-both.v1"


class LimitedMessage(JobMessage):
    account_id: Identifier


class LimitedRunner:
    """One call to a limited partner, seen as one e-mail (counted in SES with its time: the start the limit paces);
    a planned 429 raises RateLimited before the call."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: LimitedMessage, ctx: JobContext) -> str:
        return message.account_id

    def run(self, message: LimitedMessage, account_id: str, ctx: JobContext) -> None:
        if WORLD.partner_refuses:
            WORLD.partner_refuses -= 1
            raise RateLimited(PARTNER_LIMIT.name, retry_after=PARTNER_RETRY_AFTER)
        self.mailer.send(RECIPIENT, "Partner call", f"Account {account_id}\n\nReference: {ctx.operation_id}\n")


# -- a job capped at one running per account (docs/flow-control.md) ----------------------------------------------------

SINGLETON_JOB = "explore.singleton.v1"
SYNC_CAP = Concurrency("explore-sync", limit=1, key="account_id", recheck=30)
"""One sync of an account at a time: a second waits SCHEDULED, trying again within 30 s or when the first's slot
lapses."""


class SingletonRunner:
    """One sync of an account, seen as one e-mail. At its start it asks which other syncs of its account are in
    progress and notes a start that finds the cap full, or its key paused, as a break (`WORLD.starting`)."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: LimitedMessage, ctx: JobContext) -> str:
        return message.account_id

    def run(self, message: LimitedMessage, account_id: str, ctx: JobContext) -> None:
        WORLD.starting(ctx, account_id, SYNC_CAP.limit)
        self.mailer.send(RECIPIENT, "Statement sync", f"Account {account_id}\n\nReference: {ctx.operation_id}\n")


# -- a job debounced per account (docs/flow-control.md) --------------------------------------------------------------

DEBOUNCED_JOB = "explore.debounced.v1"
REFRESH = Debounce(key="account_id", newest_by="version", period=30, max_wait=120)
"""An account's refresh after a burst of changes: 30 s quiet, at most two minutes after the burst's first."""


class VersionedMessage(JobMessage):
    account_id: Identifier
    version: int = 1


class RefreshRunner:
    """An account's refresh, seen as one e-mail naming the version it refreshed from; each start is noted (its
    attempt too) so the explorer can tell the order of the runs' payloads."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: VersionedMessage, ctx: JobContext) -> int:
        return message.version

    def run(self, message: VersionedMessage, version: int, ctx: JobContext) -> None:
        WORLD.refreshes.append((ctx.operation_id, version, ctx.attempt, ctx.clock.now()))
        body = f"Account {message.account_id} at version {version}\n\nReference: {ctx.operation_id}\n"
        self.mailer.send(RECIPIENT, "Account refreshed", body)


EDITED_JOB = "explore.debounced-by-time.v1"
BY_EDIT = Debounce(key="account_id", newest_by="edited_at", period=30, max_wait=120)
"""The same refresh, its newest request told by the time of the edit that asked for it (an ISO-8601 time)."""
OLDEST = -1.0e100
"""The order of a request whose time cannot be read: older than every request whose time can (docs/flow-control.md)."""
EDIT_TIMES: tuple[tuple[str, float], ...] = (
    ("2027-01-15T08:00:00Z", 1_800_000_000_000.0),
    ("2027-01-15T08:00:01.5Z", 1_800_000_001_500.0),
    # a Z out of place: no time at all, whatever a reader that replaced the Z by a zone would make of it
    ("2027-01-15T09Z:00:00", OLDEST),
    ("2027-01-15T08:00:01.5Z:00", OLDEST),
)
"""The edit times a producer writes (a burst's `versions` 1 to 4 pick them), each with its order as
docs/flow-control.md defines it, told here apart from converge: a time with its zone, in epoch ms, or oldest."""


class EditedMessage(JobMessage):
    account_id: Identifier
    edited_at: Identifier = "2027-01-15T08:00:00Z"


class EditRefreshRunner:
    """The refresh of an edit, noted as the versioned one is (with its edit's time)."""

    def __init__(self, mailer: Any) -> None:
        self.mailer = mailer

    def load(self, message: EditedMessage, ctx: JobContext) -> str:
        return message.edited_at

    def run(self, message: EditedMessage, edited_at: str, ctx: JobContext) -> None:
        WORLD.refreshes.append((ctx.operation_id, edited_at, ctx.attempt, ctx.clock.now()))
        body = f"Account {message.account_id} as edited at {edited_at}\n\nReference: {ctx.operation_id}\n"
        self.mailer.send(RECIPIENT, "Account refreshed", body)


SKIP_JOB = "explore.refresh.v1"
REFRESH_CAP = Concurrency("explore-refresh", limit=1, key="account_id", mode="skip")
"""One refresh of an account at a time: a second while one runs is not needed, and ends NOOP naming the first."""
LATEST_JOB = "explore.render.v1"
RENDER_CAP = Concurrency("explore-render", limit=1, key="account_id", mode="replace", recheck=30)
"""One render of an account at a time, and only the newest request waits: an older one ends NOOP "replaced by"."""


def _mailer() -> SesMailer:
    return SesMailer(CatalogueSettings.from_env().require("sender_email"))


def explorer_job(
    job_type: str, message: type[JobMessage], runner: Callable[[], Any], description: str, **more: Any
) -> JobBinding:
    """One of the explorer's own jobs: on the critical queue (the worker that may send e-mail), effect_then_claim,
    enabled; `more`: its example payload, its continuations, its limits, its cap or its debounce."""
    return JobBinding(
        job_type=job_type,
        message=message,
        runner=runner,
        queue=Queue.CRITICAL,
        policy=Policy.EFFECT_THEN_CLAIM,
        default_enabled=True,
        description=f"Explorer: {description}",
        **more,
    )


def _next_payload(message: StepsMessage) -> dict[str, Any]:
    return {"account_id": message.account_id}


FOLLOWED = {"on_success": Then(NEXT_JOB, _next_payload), "on_failure": Then(NEXT_JOB, _next_payload)}
"""A job of steps is followed by a notice of what happened, whichever way it ends."""


STEPS = explorer_job(
    STEPS_JOB,
    StepsMessage,
    lambda: StepsRunner(_mailer()),
    "notice, charge, wait, file; followed by a notice of what happened.",
    example_payload={"account_id": "acct-1"},
    **FOLLOWED,
)
STEPS_CAPPED_JOB = "explore.steps-capped.v1"
STEPS_CAP = Concurrency("explore-steps", limit=1, key="account_id", recheck=30)
"""One job of steps of an account at a time: a second waits SCHEDULED while one runs (a wait between steps holds
no slot); a copy of a waiting one's message that meets a full or paused key leaves its wait as it was."""
STEPS_CAPPED = explorer_job(
    STEPS_CAPPED_JOB,
    StepsMessage,
    lambda: StepsRunner(_mailer(), STEPS_CAP),
    "notice, charge, wait, file, one at a time per account; followed by a notice of what happened.",
    example_payload={"account_id": "acct-1"},
    **FOLLOWED,
    concurrency=STEPS_CAP,
)
STEPS_TYPES = frozenset({STEPS_JOB, STEPS_CAPPED_JOB})
"""The job types made of the steps above (promise.steps_kept checks each of their operations)."""
NEXT = explorer_job(
    NEXT_JOB,
    NextMessage,
    lambda: NextRunner(_mailer()),
    "the continuation of a job of steps (one e-mail).",
    example_payload={"account_id": "acct-1"},
)

BATCH_DONE = explorer_job(
    BATCH_DONE_JOB,
    BatchDone,
    lambda: BatchDoneRunner(_mailer()),
    "a batch's callback (records the summary it was given).",
)

LIMITED = explorer_job(
    LIMITED_JOB,
    LimitedMessage,
    lambda: LimitedRunner(_mailer()),
    "one call to a partner limited to one a minute.",
    example_payload={"account_id": "acct-1"},
    limits=(PARTNER_LIMIT,),
)
LIMITED_BOTH = explorer_job(
    LIMITED_BOTH_JOB,
    LimitedMessage,
    lambda: LimitedRunner(_mailer()),
    "one call to the limited partner, also paced at one in ten minutes per account.",
    example_payload={"account_id": "acct-11"},
    limits=(PARTNER_LIMIT, ACCOUNT_LIMIT),
)

# -- a step that waits for a signal (`ctx.wait_for`), then records what resumed it ---------------------------------

APPROVAL_JOB = "explore.approval.v1"


class ApprovalMessage(JobMessage):
    account_id: Identifier
    timeout_seconds: int = SHORT_WAIT


@dataclass
class ApprovalWorld:
    """What each approval's `decide` step recorded: (operation id, "signal:<id>" or "timeout"), each time it ran."""

    decided: list[tuple[str, str]] = field(default_factory=list)

    def reset(self) -> None:
        self.decided.clear()

    def decide(self, operation_id: str, outcome: str) -> dict[str, str]:
        self.decided.append((operation_id, outcome))
        return {"outcome": outcome}


APPROVALS = ApprovalWorld()


class ApprovalRunner:
    """Wait for `approval` (or its timeout), then record the outcome (keyed_effect: a re-run writes the same)."""

    def load(self, message: ApprovalMessage, ctx: JobContext) -> str:
        return message.account_id

    def run(self, message: ApprovalMessage, account_id: str, ctx: JobContext) -> None:
        result = ctx.wait_for("approval", timeout=message.timeout_seconds)
        outcome = "timeout" if result.timed_out else f"signal:{result.signal_id}"
        WORLD.between_steps(ctx)
        ctx.step("decide", lambda key: APPROVALS.decide(ctx.operation_id, outcome), policy="keyed_effect")


APPROVAL = explorer_job(
    APPROVAL_JOB,
    ApprovalMessage,
    ApprovalRunner,
    "waits for an approval signal (or its timeout), then records which resumed it.",
    example_payload={"account_id": "acct-4"},
)


SINGLETON = explorer_job(
    SINGLETON_JOB,
    LimitedMessage,
    lambda: SingletonRunner(_mailer()),
    "an account's sync, one at a time per account.",
    example_payload={"account_id": "acct-1"},
    concurrency=SYNC_CAP,
)

DEBOUNCED = explorer_job(
    DEBOUNCED_JOB,
    VersionedMessage,
    lambda: RefreshRunner(_mailer()),
    "an account's refresh after a burst of changes, from the newest.",
    example_payload={"account_id": "acct-1", "version": 1},
    debounce=REFRESH,
)

DEBOUNCED_BY_TIME = explorer_job(
    EDITED_JOB,
    EditedMessage,
    lambda: EditRefreshRunner(_mailer()),
    "an account's refresh after a burst of edits, from the latest edit.",
    example_payload={"account_id": "acct-1", "edited_at": "2027-01-15T08:00:00Z"},
    debounce=BY_EDIT,
)

SKIPPING = explorer_job(
    SKIP_JOB,
    LimitedMessage,
    lambda: SingletonRunner(_mailer()),
    "an account's refresh, skipped while one runs.",
    example_payload={"account_id": "acct-1"},
    concurrency=REFRESH_CAP,
)

RENDER = explorer_job(
    LATEST_JOB,
    LimitedMessage,
    lambda: SingletonRunner(_mailer()),
    "an account's render, the newest request kept while one runs.",
    example_payload={"account_id": "acct-1"},
    concurrency=RENDER_CAP,
)

BINDINGS: tuple[JobBinding, ...] = (
    *REFERENCE_BINDINGS,
    STEPS,
    STEPS_CAPPED,
    NEXT,
    BATCH_DONE,
    LIMITED,
    LIMITED_BOTH,
    APPROVAL,
    SINGLETON,
    DEBOUNCED,
    DEBOUNCED_BY_TIME,
    SKIPPING,
    RENDER,
)
LOCAL_HOOKS = REFERENCE_HOOKS
