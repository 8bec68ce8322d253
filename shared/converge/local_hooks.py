"""What a job catalogue's local hooks give the local cloud and `converge demo`: where its jobs' effects land, and
the demo's storyline.

A catalogue names its hook object with `LOCAL_HOOKS` (localcloud.hooks says what the object may provide); the
object answers with these values. They live in converge, beside the catalogue's bindings, so a catalogue's hooks
import nothing of the local cloud; converge_testing hands them on to a team's tests. No Lambda imports this module.

The storyline: the demo engine (the command line's `converge demo`) knows the framework's promises (duplicates
absorbed, a replayed dispatch skipped, a fail-closed job paused until its toggle is turned on, ...); a scenario
names the catalogue's operations that show each one (and a batch that fans out). Every step but the plan is
optional; a catalogue without a scenario gets the local cloud's default (localcloud.scenario.from_registry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from converge.model.batches import BatchCallback, BatchChild
from converge.model.states import OperationState


@dataclass(frozen=True)
class EffectSources:
    """Where a catalogue's jobs leave effects in the emulated services.

    E-mails are counted in SES, each naming its operation in a `Reference: <operation id>` line; objects
    in the bucket named by the stack output `bucket_output`, under `object_prefixes`, each carrying its
    writer's operation id as `operation-id` metadata; entry rows in the table named by `ledger_output`
    whose key `pk` starts with `ledger_entry_prefix`, keyed by `idempotency_key` (the operation id).
    `app_table_outputs` are emptied (with the ledger) when a run is reset.
    """

    bucket_output: str | None = None
    object_prefixes: tuple[str, ...] = ()
    ledger_output: str | None = None
    ledger_entry_prefix: str = ""
    app_table_outputs: tuple[str, ...] = ()


@dataclass
class Planned:
    """One operation the demo enqueues, and the state it must end in."""

    operation_id: str
    job_type: str
    payload: dict[str, Any]
    expect: OperationState
    note: str
    effects: dict[str, int] | None = None
    """The external effects it makes when it SUCCEEDED, by service (`ses`, `s3`, `ledger`), when not the one
    effect its policy makes (a job of steps: one per step with an effect)."""


@dataclass(frozen=True)
class RecurringStep:
    """A recurring job ticked while its toggle is off (a skip), then on; `result_key` counts what it did."""

    job_type: str
    function: str
    result_key: str
    event: str


@dataclass(frozen=True)
class BatchStep:
    """A fan-out the demo admits (twice: the second admission must write nothing), and what each child ends as.

    The callback runs exactly once, after every child is final, with counts that match `expect`; each child makes
    its policy's one effect when it SUCCEEDED and none otherwise, and so does the callback."""

    batch_id: str
    children: list[BatchChild]
    callback: BatchCallback
    expect: dict[str, OperationState]
    """Each child's final state, by its key."""
    note: str


@dataclass(frozen=True)
class ProducerCall:
    """One of the template's own functions (functions/<name>), invoked as its caller would, twice (a retry): it
    writes a business row and enqueues a job in one transaction. The demo checks the row, that the job was written
    once, and that its operation ends `expect`."""

    function: str
    """The function's logical id in the template."""
    event: dict[str, Any]
    operation_id: str
    """The operation the function enqueues."""
    row: tuple[str, dict[str, Any]]
    """(stack output naming the table, the key) of the business row it writes."""
    expect: OperationState
    note: str


@dataclass(frozen=True)
class ApprovalStep:
    """A job that waits for a person's decision (`ctx.wait_for`): the demo enqueues three, checks each waits SCHEDULED
    and listed for `signal` until its timeout, then sends one `approve` and one `reject` through `converge signal`
    (as an operator does; the approval twice, one signal) and moves the local clock past the third's timeout.

    `effects` are what each path makes (`approved`, `rejected`, `timed_out`; by service: `ses`, `ledger`, `s3`),
    checked exactly: an effect missing or made twice fails the demo."""

    job_type: str
    payload: dict[str, Any]
    signal: str
    timeout_seconds: float
    approve: dict[str, Any]
    reject: dict[str, Any]
    effects: dict[str, dict[str, int]]
    note: str


@dataclass(frozen=True)
class DebounceStep:
    """A burst of requests for one key of a debounced job type (its binding's `Debounce`), enqueued in the order
    given, a moment apart, all within its quiet period (edits whose requests reach converge out of order). The demo
    moves the local clock past the quiet period and checks, by the effects counted in the emulated services, that
    the burst ran once, as its newest request (by the debounce's `newest_by`; each request's value distinct), making
    `effects` (by service: `ses`, `s3`, `ledger`), the other requests none; that each other request ended NOOP,
    "debounced into <the run's operation id>"; and that the run started within `max_wait` of the first request."""

    job_type: str
    payloads: list[dict[str, Any]]
    effects: dict[str, int]
    note: str


@dataclass(frozen=True)
class Scenario:
    planned: list[Planned]
    duplicates: int = 3
    """The first `duplicates` planned operations are enqueued again with the same content."""
    identity_reuse: tuple[str, dict[str, Any]] | None = None
    """A planned operation id enqueued again with this other payload: refused (IdentityConflict)."""
    hostile_raw_items: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    """(operation id, raw attributes, a word the REJECTED reason holds), written with a plain PutItem."""
    owned_raw_item: tuple[str, str, dict[str, Any], dict[str, Any]] | None = None
    """(operation id, job type, payload, attributes converge owns): the attributes are ignored, the job runs."""
    producer_retry: str | None = None
    """A planned operation written again by a plain PutItem with the same content after it ran: a no-op."""
    producer_conflict: tuple[str, dict[str, Any]] | None = None
    """A planned operation written again with other content after it ran: listed under CONFLICT."""
    replayed: tuple[str, str] | None = None
    """(planned operation id, stack output of its queue URL): its dispatch is sent again after it ran."""
    paused: str | None = None
    """A planned fail-closed operation, deployed with its toggle off: PAUSED, then resumed by the toggle."""
    recurring: RecurringStep | None = None
    crash_between_steps: tuple[str, str] | None = None
    """(planned operation id, step): its first delivery dies just after that step's marker, before the next
    step; the retry runs none of the steps recorded (each effect is made once)."""
    batch: BatchStep | None = None
    """A batch of the catalogue's jobs and its callback (`converge demo` checks counts, effects and completion)."""
    producers: list[ProducerCall] = field(default_factory=list)
    """The template's own functions that enqueue (a sign-up, a request), called as their callers would."""
    replay_all: bool = False
    """Every planned operation's dispatch is sent again once it ran: its effects must not change (what the demo
    checks of a catalogue that names no effects of its own: each job's effects, whatever they are, made once)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(job type, why) of the jobs the scenario does not enqueue on their own: only converge starts them."""
    approval: ApprovalStep | None = None
    """A job that waits for a person's approval: approved, rejected and timed out (`converge demo` checks each)."""
    debounce: DebounceStep | None = None
    """A burst of requests for one key of a debounced job type: one run, the newest (`converge demo` checks it)."""
