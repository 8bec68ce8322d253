"""The state table: converge's record of each operation, one item each, and every read and write of it.

A delivery's writes read nothing first and are one conditional UpdateItem each. The lease (`acquire`) is
the peek: it takes the operation IN_PROGRESS, creating its record when it has none, and when its condition
fails the record that failed it comes back with the error (ReturnValuesOnConditionCheckFailure), which says
why: settled, leased by a live holder, or promised to other content. `settle` records the outcome and
`release` gives the lease back, both only for the lease's holder. `pause`, `schedule`, `expire` and `reject`
move from whatever state the transition table allows. An operator's moves (`transition`, `mark_stuck`) and
a producer's conflicting write (`record_conflict`) are conditional on the record as it was read.

Writes that know the record (a lease holder knows it from its own lease's ReturnValues=ALL_OLD,
which consumes no read capacity) store the bounded history whole; writes that do not append one
entry, which the next knowing write trims. The clauses they share are `converge.store.clauses`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from converge.model import states
from converge.model.clock import Clock, SystemClock, iso
from converge.model.errors import InvalidTransition
from converge.model.records import (
    CONFLICTS_LIMIT,
    ERRORS_LIMIT,
    HISTORY_LIMIT,
    ConflictEntry,
    ErrorEntry,
    ExtraRefused,
    HistoryEntry,
    Lease,
    Operation,
    Refused,
    StateRecord,
    Subject,
    clip,
)
from converge.model.request import JobRequest
from converge.model.signals import SIGNAL_ITEM_JOB_TYPE
from converge.model.states import FINAL_STATES, LISTED_STATES, OPEN_STATES, Flag, OperationState
from converge.store.clauses import (
    attention,
    bounded_history,
    current_error,
    may_move,
    never_started,
    still_waiting,
)
from converge.store.codecs import entry_value, number_value, record_from_item, request_item, state_key, string_value
from converge.store.conditions import condition_failed, failed_item
from converge.store.transact import TransactItem, cancellation_reasons, failed_index
from converge.store.updates import Update

HELD_FROM = (OperationState.ACCEPTED, OperationState.SCHEDULED, OperationState.IN_PROGRESS)
"""The states a hold moves from: those a delivery may start a job in."""
HELD_FOR = "flow-control"
"""A held job's `waiting_for`: what `wake_held` brings forward (a wait between steps is the runner's, never this)."""


class StateTable:
    """Every read and write of the state table (converge's records; no producer can write it)."""

    def __init__(self, table_name: str, dynamodb_client: Any, clock: Clock | None = None) -> None:
        self._table = table_name
        self._client = dynamodb_client
        self._clock = clock or SystemClock()

    # -- a delivery's writes: one each, reading nothing first -------------------------------------------------

    def acquire(self, subject: Subject, owner: str, lease_seconds: float) -> Lease:
        """Take the operation IN_PROGRESS under a lease, creating its record if it has none.

        Raises Refused (with the record as it stands) when it is settled, leased by a live holder, or
        promised to other content.
        """
        now, at = self._now()
        accepted = HistoryEntry(OperationState.ACCEPTED, subject.accepted_at or at, "accepted")
        started = HistoryEntry(OperationState.IN_PROGRESS, at, "started")
        # The fewest actions that make the change: the happy path's cost is this write and the settle.
        update = Update().set_if_absent("fingerprint", string_value(subject.fingerprint))
        update.set("state", string_value(OperationState.IN_PROGRESS)).set("lease_owner", string_value(owner)).set(
            "lease_until", number_value(now + lease_seconds)
        )
        update.append("history", [entry_value(started)], start=[entry_value(accepted)])
        update.add("attempts").remove("attention", "attention_sk", "stuck", "waiting", "waiting_for")
        may_move(update, OperationState.IN_PROGRESS, now, subject.accepted)
        # A delayed operation is never started before its time, whatever copy of its message arrives.
        run_at = update.name("run_at")
        update.require(f"attribute_not_exists({run_at}) OR {run_at} <= {update.value(number_value(now))}")
        old = self._write(update, subject.operation_id, return_old=True).get("Attributes")
        previous = record_from_item(old) if old else None
        history = previous.history if previous and previous.history else (accepted,)
        return Lease(
            operation_id=subject.operation_id,
            job_type=subject.job_type,
            owner=owner,
            until=now + lease_seconds,
            attempt=(previous.attempts if previous else 0) + 1,
            history=(*history, started),
            errors=previous.errors if previous else (),
            previous=previous,
        )

    def settle(
        self,
        lease: Lease,
        to: OperationState,
        reason: str,
        error: str | None = None,
        extras: Sequence[TransactItem] = (),
    ) -> None:
        """Record the outcome and give the lease back, if this delivery still holds it (else Refused).

        For effect_then_claim this write is the claim. With `extras` (a continuation's request, a batch's
        count), one TransactWriteItems writes the settle first and those items after it, all or none:
        Refused when the settle's own condition failed, ExtraRefused when one of the items' did. Without
        `extras` it is one conditional UpdateItem, as ever. Only `converge.flow.settlement` passes `extras`."""
        states.check(OperationState.IN_PROGRESS, to)
        self._as_holder(lease, to, reason, error, extras)

    def wait(self, lease: Lease, run_at: float, after: str, reason: str, for_signal: bool = False) -> None:
        """A runner waits between two steps: SCHEDULED (listed, with its time and the step it waits after) until
        run_at, the lease given back, if this delivery still holds it (else Refused). `for_signal`: the wait ends
        at a signal too (`ctx.wait_for`), and `wake` may bring its time forward."""
        states.check(OperationState.IN_PROGRESS, OperationState.SCHEDULED)
        kind = "signal" if for_signal else None
        self._as_holder(lease, OperationState.SCHEDULED, reason, None, waiting=(run_at, after), waiting_for=kind)

    def wake(self, operation_id: str, name: str) -> bool:
        """A signal came for the wait `name`: its time brought forward to now, if the operation still waits there for
        a signal with no lease (False otherwise: not there yet, resumed already, or moved on)."""
        now, _ = self._now()
        update = Update().set("run_at", number_value(now))
        update.require(f"{update.name('state')} = {update.value(string_value(OperationState.SCHEDULED))}")
        update.require(f"{update.name('waiting')} = {update.value(string_value(name))}")
        update.require(f"{update.name('waiting_for')} = {update.value(string_value('signal'))}")
        update.require(f"attribute_not_exists({update.name('lease_owner')})")
        return self._applied(update, operation_id)

    def wake_held(self, operation_id: str) -> bool:
        """A held job's key was released: its time brought forward to now, if it is still SCHEDULED by flow control's
        hold for later, with no live lease (False otherwise: started, ended, or held no more)."""
        now, _ = self._now()
        update = Update().set("run_at", number_value(now))
        update.require(f"{update.name('state')} = {update.value(string_value(OperationState.SCHEDULED))}")
        update.require(f"{update.name('waiting_for')} = {update.value(string_value(HELD_FOR))}")
        update.require(f"{update.name('run_at')} > {update.value(number_value(now))}")
        lease_until = update.name("lease_until")
        update.require(f"attribute_not_exists({lease_until}) OR {lease_until} < {update.value(number_value(now))}")
        return self._applied(update, operation_id)

    def release(self, lease: Lease, reason: str, error: str | None = None) -> None:
        """Give the lease back without an outcome (a retry or a hand-back follows), if this delivery still holds it
        (else Refused)."""
        states.check(OperationState.IN_PROGRESS, OperationState.IN_PROGRESS)
        self._as_holder(lease, OperationState.IN_PROGRESS, reason, error)

    def pause(self, subject: Subject, reason: str) -> None:
        """The kill switch is off: PAUSED (listed) until the resumer re-dispatches it. Refused before the
        operation's recorded run_at (a wait's or a delayed request's time): nothing pauses early either."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, OperationState.PAUSED, reason, at, now)
        # Never before its recorded time (a wait's, or a delayed request's): an early copy of its message is refused
        # as early, and the operation stays SCHEDULED, listed with its time, as the lease would leave it.
        run_at = update.name("run_at")
        update.require(f"attribute_not_exists({run_at}) OR {run_at} <= {update.value(number_value(now))}")
        self._write(update, subject.operation_id)

    def schedule(self, subject: Subject, run_at: float, reason: str) -> None:
        """A delayed operation waits: SCHEDULED (listed, with its time) until run_at (else Refused)."""
        now, at = self._now()
        update = self._identified(subject, at)
        update.set("run_at", number_value(float(run_at)))
        self._blind_move(update, subject, OperationState.SCHEDULED, reason, at, now)
        self._write(update, subject.operation_id)

    def hold(self, subject: Subject, run_at: float, reason: str) -> None:
        """A job kept from starting until run_at (a rate limit): SCHEDULED (listed, with its time), counting no attempt,
        from any state a delivery may start it in, a retry's given-back or lapsed lease included (its holder is kept
        on the record, so the lease that follows still asks after a dead holder's effect); else Refused.

        A job held again and again with no write that knows its record between (a paused key, a long holder) would
        grow its history by one entry a hold: once it is past the limit, the hold's entry takes the last one's place
        instead (one more write, the refusal having returned the record's length)."""
        now, at = self._now()
        entry = entry_value(HistoryEntry(OperationState.SCHEDULED, at, clip(reason)))
        update = self._held(subject, run_at, now, at)
        history = update.name("history")
        update.append(
            "history",
            [entry],
            start=[entry_value(HistoryEntry(OperationState.ACCEPTED, subject.accepted_at or at, "accepted"))],
        )
        update.require(
            f"attribute_not_exists({history}) OR size({history}) <= {update.value(number_value(HISTORY_LIMIT))}"
        )
        try:
            self._write(update, subject.operation_id)
            return
        except Refused as refused:
            length = len(refused.current.history)
            if length <= HISTORY_LIMIT:
                raise  # refused for what it holds, not for its length
        # The same conditions again (a record that refused them refuses this too), its length as it was read
        update = self._held(subject, run_at, now, at).set_element("history", length - 1, entry)
        update.require(f"size({update.name('history')}) = {update.value(number_value(length))}")
        self._write(update, subject.operation_id)

    def _held(self, subject: Subject, run_at: float, now: float, at: str) -> Update:
        """A hold's write but its history entry: SCHEDULED at run_at, listed, from a state a delivery may start in, and
        never later than another delivery's hold still ahead (Refused: that one's message comes back then)."""
        update = self._identified(subject, at).set("run_at", number_value(float(run_at)))
        update.set("state", string_value(OperationState.SCHEDULED)).set("waiting_for", string_value(HELD_FOR))
        attention(update, OperationState.SCHEDULED, subject.job_type, at)
        state, lease_until, fp = update.name("state"), update.name("lease_until"), update.name("fingerprint")
        held = ", ".join(update.value(string_value(x)) for x in HELD_FROM)
        update.require(f"attribute_not_exists({state}) OR {state} IN ({held})")
        update.require(f"attribute_not_exists({lease_until}) OR {lease_until} < {update.value(number_value(now))}")
        # A time ahead that is not a hold's own (a wait between steps, a delay) is never brought forward by a hold: an
        # early copy of the message is refused here as the lease would refuse it. Nor is another delivery's hold put
        # off: two copies of one message, each held for its own later slot, would refuse each other's start forever
        ahead, held_for = update.name("run_at"), update.name("waiting_for")
        update.require(
            f"attribute_not_exists({ahead}) OR {ahead} <= {update.value(number_value(now))} "
            f"OR ({held_for} = {update.value(string_value(HELD_FOR))} "
            f"AND {ahead} >= {update.value(number_value(float(run_at)))})"
        )
        admitted = ", ".join(update.value(string_value(v)) for v in subject.accepted)
        update.require(f"attribute_not_exists({fp}) OR {fp} IN ({admitted})")
        return update

    def expire(self, subject: Subject, reason: str, extras: Sequence[TransactItem] = ()) -> None:
        """Not started by its expires_at: EXPIRED (final, listed) with the reason. Refused once any delivery took a
        lease, whatever the state now (expiry ends only work that never began). With `extras` (a batch's count of
        its child), one transaction, as for `settle`."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, OperationState.EXPIRED, reason, at, now)
        self._settling_write(update, subject.operation_id, extras)

    def skip(self, subject: Subject, reason: str, extras: Sequence[TransactItem] = ()) -> None:
        """Ended before it started, with nothing to do (a debounced request whose burst runs a newer payload): NOOP
        (final) with the reason. Refused once any delivery took a lease, as for `expire`. With `extras`, one
        transaction, as for `settle`."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, OperationState.NOOP, reason, at, now)
        never_started(update)
        self._settling_write(update, subject.operation_id, extras)

    def reject(self, subject: Subject, reason: str, extras: Sequence[TransactItem] = ()) -> None:
        """Refuse the operation's input: REJECTED (final, listed) with the reason (else Refused). With `extras` (a
        batch's count of its child), one transaction, as for `settle`."""
        now, at = self._now()
        update = self._identified(subject, at)
        self._blind_move(update, subject, OperationState.REJECTED, reason, at, now)
        update.set("last_error", string_value(clip(reason)))
        update.append("errors", [entry_value(ErrorEntry(at, 0, clip(reason)))], start=[])
        self._settling_write(update, subject.operation_id, extras)

    # -- a signal item's answer (the relay sends the signal a producer wrote into the jobs table) ---------------

    def answer_signal_item(self, item_id: str, answer: str, detail: str, kept: bool, accepted_at: str | None) -> bool:
        """Record what a signal item was answered, on the record under the item's own key: SUCCEEDED when its signal
        is kept, else REJECTED and listed with why (job type `converge.signal`). The first answer stands: False when
        the item had one already (a replay of its stream record answers nothing new)."""
        _, at = self._now()
        final = OperationState.SUCCEEDED if kept else OperationState.REJECTED
        note = clip(f"{answer}: {detail}")
        history = [HistoryEntry(OperationState.ACCEPTED, accepted_at or at, "a signal item")]
        history.append(HistoryEntry(final, at, note))
        update = Update().set("job_type", string_value(SIGNAL_ITEM_JOB_TYPE)).set("state", string_value(final))
        update.set("history", {"L": [entry_value(entry) for entry in history]})
        attention(update, final, SIGNAL_ITEM_JOB_TYPE, at)
        if not kept:
            update.set("last_error", string_value(note)).set("errors", {"L": [entry_value(ErrorEntry(at, 0, note))]})
        update.require(f"attribute_not_exists({update.name('state')})")
        return self._applied(update, item_id)

    def answer_signal_item_again(self, item_id: str, answer: str, detail: str) -> bool:
        """A rewrite of an answered signal item (another payload under its id) answered again: the answer appended
        to the record's `errors` (the first few kept; the record's state, the first answer, stands)."""
        _, at = self._now()
        entry = ErrorEntry(at, 0, clip(f"rewritten: {answer}: {detail}"))
        update = Update().append("errors", [entry_value(entry)], start=[])
        cap = update.value(number_value(ERRORS_LIMIT))
        update.require(f"attribute_not_exists({update.name('errors')}) OR size({update.name('errors')}) < {cap}")
        update.require(f"attribute_exists({update.name('state')})")
        return self._applied(update, item_id)

    # -- a producer's write of other content under the id (the relay and the worker meet it) -------------------

    def record_conflict(
        self,
        operation_id: str,
        conflicting: ConflictEntry,
        original_fingerprint: str,
        original: JobRequest | None = None,
    ) -> bool:
        """Record a producer's write of other content under this id (listed under CONFLICT).

        The operation keeps the fingerprint it was admitted with; `original`, when given, is the
        request as first admitted, kept so that a re-dispatch still runs it although the jobs table
        now holds other content. False when the "other" content is in fact the operation's own.
        """
        at = conflicting.at
        job_type = original.job_type if original else conflicting.job_type
        update = Update()
        update.set_if_absent("fingerprint", string_value(original_fingerprint)).set_if_absent(
            "job_type", string_value(job_type)
        )
        accepted = HistoryEntry(OperationState.ACCEPTED, at, "accepted")
        update.set_if_absent("state", string_value(OperationState.ACCEPTED)).set_if_absent(
            "history", {"L": [entry_value(accepted)]}
        )
        if original is not None:
            kept = {name: value for name, value in request_item(original).items() if name != "operation_id"}
            update.set_if_absent("original", {"M": kept})
        update.append("conflicts", [entry_value(conflicting)], start=[])
        update.set("conflict", string_value(Flag.CONFLICT)).set("conflict_sk", string_value(f"{job_type}#{at}"))
        new = update.value(string_value(conflicting.fingerprint))
        update.require(f"attribute_not_exists({update.name('fingerprint')}) OR {update.name('fingerprint')} <> {new}")
        cap = update.value(number_value(CONFLICTS_LIMIT))
        update.require(f"attribute_not_exists({update.name('conflicts')}) OR size({update.name('conflicts')}) < {cap}")
        try:
            self._write(update, operation_id)
        except Refused as refused:
            if refused.current.fingerprint == conflicting.fingerprint:
                return False
        else:
            return True
        # The receipt keeps the first conflicts; later ones are counted (and the listing refreshed).
        overflow = Update().add("conflicts_dropped").set("conflict", string_value(Flag.CONFLICT))
        overflow.set("conflict_sk", string_value(f"{job_type}#{at}"))
        self._client.update_item(**overflow.request(self._table, state_key(operation_id)))
        return True

    def restore_first_content(
        self, operation_id: str, first_fingerprint: str, original: JobRequest | None, later: ConflictEntry
    ) -> bool:
        """Pin the operation to its first content, read late from its request's INSERT, where a later write's
        content was pinned first: the relay met a rewrite (a MODIFY, whose old image it took for the first
        content) before the INSERT, which it had given up and the reconciler replays after newer records.

        Only while no delivery ever began it (nothing has run either content); the content pinned by mistake is
        listed under CONFLICT as `later`. False when there was nothing to restore (or it had started)."""
        update = Update()
        fingerprint = update.name("fingerprint")
        update.set("fingerprint", string_value(first_fingerprint))
        if original is not None:
            update.set("original", {"M": {k: v for k, v in request_item(original).items() if k != "operation_id"}})
        else:
            update.remove("original")
        update.append("conflicts", [entry_value(later)], start=[])
        update.set("conflict", string_value(Flag.CONFLICT)).set(
            "conflict_sk", string_value(f"{later.job_type}#{later.at}")
        )
        update.require(
            f"attribute_exists({fingerprint}) AND {fingerprint} <> {update.value(string_value(first_fingerprint))}"
        )
        never_started(update)
        try:
            self._write(update, operation_id)
        except Refused:
            return False
        return True

    # -- marks and operator moves (after a read) --------------------------------------------------------------

    def mark_stuck(
        self,
        seen: StateRecord,
        kind: str,
        reason: str,
        subject: Subject | None = None,
        count_redrive: bool = False,
        job_type: str | None = None,
    ) -> bool:
        """List an open operation under STUCK with the reason (its state is unchanged); False if it moved."""
        if seen.state not in OPEN_STATES:
            raise InvalidTransition(f"only open operations are stuck; {seen.operation_id} is {seen.state}")
        _, at = self._now()
        job_type = job_type or seen.job_type or (subject.job_type if subject else "")
        update = Update()
        update.set("attention", string_value(Flag.STUCK)).set("attention_sk", string_value(f"{job_type}#{at}"))
        update.set("stuck", string_value(clip(f"{kind}: {reason}")))
        if count_redrive:
            update.add("redrives")
        if seen.recorded:
            update.require(f"{update.name('state')} = {update.value(string_value(seen.state))}")
        else:
            if subject is not None:
                self._identified(subject, at, into=update)
            else:
                update.set_if_absent("job_type", string_value(job_type))
            update.set("state", string_value(OperationState.ACCEPTED))
            accepted = HistoryEntry(
                OperationState.ACCEPTED, (subject.accepted_at if subject else None) or at, "accepted"
            )
            update.set("history", {"L": [entry_value(accepted)]})
            update.require(f"attribute_not_exists({update.name('state')})")
        return self._applied(update, seen.operation_id)

    def clear_stuck(self, seen: StateRecord) -> bool:
        """What made an open operation stuck is repaired: listed under its state again (or unlisted), the STUCK
        mark gone; False if it moved meanwhile or was not marked."""
        _, at = self._now()
        update = Update()
        attention(update, seen.state, seen.job_type or "", at)
        update.require(f"{update.name('state')} = {update.value(string_value(seen.state))}")
        update.require(f"attribute_exists({update.name('stuck')})")
        return self._applied(update, seen.operation_id)

    def transition(
        self,
        current: Operation,
        to: OperationState,
        reason: str,
        *,
        error: str | None = None,
        count_redrive: bool = False,
        stuck: tuple[str, str] | None = None,
        forget_lease: bool = False,
    ) -> bool:
        """An operator's move (resume, redrive, resolve) of an operation read just before.

        Raises InvalidTransition when the table does not list it; False when the operation changed
        since it was read. `stuck` lists the reopened operation under STUCK until a worker takes it,
        so that one whose message never arrives stays visible. `forget_lease` drops an earlier
        holder's lease, so the next attempt is not a takeover (an operator established what happened).
        """
        update = self._transition(current, to, reason, error, count_redrive, stuck, forget_lease)
        return self._applied(update, current.operation_id)

    def transition_with(
        self,
        current: Operation,
        to: OperationState,
        reason: str,
        extras: Sequence[TransactItem],
        *,
        error: str | None = None,
        forget_lease: bool = False,
    ) -> None:
        """An operator's move to a final state (resolve as succeeded or failed, a cancel) with items in the same
        transaction, as for `settle`: Refused when the operation changed since it was read, ExtraRefused when one
        of the items' condition failed (nothing was written either way)."""
        update = self._transition(current, to, reason, error, False, None, forget_lease)
        self._settling_write(update, current.operation_id, extras)

    def _transition(
        self,
        current: Operation,
        to: OperationState,
        reason: str,
        error: str | None,
        count_redrive: bool,
        stuck: tuple[str, str] | None,
        forget_lease: bool,
    ) -> Update:
        record = current.state_record
        states.check(record.state, to)
        _, at = self._now()
        history = bounded_history([*record.history, HistoryEntry(to, at, clip(reason))])
        update = Update().set("state", string_value(to)).set("job_type", string_value(current.job_type))
        update.set("history", {"L": [entry_value(entry) for entry in history]})
        current_error(update, record.errors, record.attempts, error, at)
        if stuck is not None and to in OPEN_STATES:
            kind, why = stuck
            update.set("attention", string_value(Flag.STUCK)).set(
                "attention_sk", string_value(f"{current.job_type}#{at}")
            )
            update.set("stuck", string_value(clip(f"{kind}: {why}")))
        else:
            attention(update, to, current.job_type, at)
        if count_redrive:
            update.add("redrives")
        if record.state in FINAL_STATES and to not in FINAL_STATES:
            update.set(
                "reopened_from", string_value(record.state)
            )  # what a batch counted it as, until it settles again
        if forget_lease:
            update.remove("lease_owner", "lease_until")
        if to in states.NOTHING_RAN and record.waiting and record.state is OperationState.SCHEDULED:
            still_waiting(update, record.waiting)  # a cancel between two steps: only while no step is in flight
        elif to in states.NOTHING_RAN:  # a cancel: only if no delivery ever began it, however it stands now
            never_started(update)
        if record.recorded:
            update.require(f"{update.name('state')} = {update.value(string_value(record.state))}")
        else:
            # The request stored now is the admitted one only if no producer rewrote it before the relay read it;
            # a cancel or expiry that comes first leaves the fingerprint to the relay, which records the first
            # content it reads (a rewrite is then an identity conflict, never the operation's content).
            if current.request is not None and to not in states.NOTHING_RAN:
                update.set_if_absent("fingerprint", string_value(current.request.fingerprint))
            update.require(f"attribute_not_exists({update.name('state')})")
        return update

    # -- reads (operators, redrive, the reconciler; never the happy path) -------------------------------------

    def record(self, operation_id: str) -> StateRecord:
        """The state record alone (ACCEPTED and not `recorded` when there is none yet)."""
        item = self.item(operation_id)
        return record_from_item(item) if item else StateRecord.absent(operation_id)

    def item(self, operation_id: str) -> dict[str, Any] | None:
        """The record's item, read strongly consistent: what converge decides on must include the latest write."""
        response = self._client.get_item(TableName=self._table, Key=state_key(operation_id), ConsistentRead=True)
        return response.get("Item")  # an item that exists is never empty: it holds its key

    # -- building blocks --------------------------------------------------------------------------------------

    def _as_holder(
        self,
        lease: Lease,
        to: OperationState,
        reason: str,
        error: str | None,
        extras: Sequence[TransactItem] = (),
        waiting: tuple[float, str] | None = None,
        waiting_for: str | None = None,
    ) -> None:
        """A write only the lease's holder may make: it knows the record, so it stores the bounded history."""
        _, at = self._now()
        history = bounded_history([*lease.history, HistoryEntry(to, at, clip(reason))])
        update = (
            Update().set("state", string_value(to)).set("history", {"L": [entry_value(entry) for entry in history]})
        )
        # A success clears `last_error` even when the lease's record had none: an operator may have recorded
        # one while the lease was held, and a SUCCEEDED or SKIPPED record carries no current error.
        current_error(update, lease.errors, lease.attempt, error, at)
        attention(update, to, lease.job_type, at)
        if to in LISTED_STATES:  # the acquire wrote no job type (the happy path stays two small writes)
            update.set_if_absent("job_type", string_value(lease.job_type))
        update.remove("lease_owner", "lease_until")
        if waiting is not None:
            update.set("run_at", number_value(float(waiting[0]))).set("waiting", string_value(waiting[1]))
            if waiting_for is not None:
                update.set("waiting_for", string_value(waiting_for))
        update.require(f"{update.name('lease_owner')} = {update.value(string_value(lease.owner))}")
        self._settling_write(update, lease.operation_id, extras)

    def _settling_write(self, update: Update, operation_id: str, extras: Sequence[TransactItem]) -> None:
        """A write that may settle the operation: one UpdateItem alone, one transaction with extra items."""
        if extras:
            self._transact(update, operation_id, extras)
        else:
            self._write(update, operation_id)

    def _transact(self, update: Update, operation_id: str, extras: Sequence[TransactItem]) -> None:
        """The settle's Update first, then `extras`, in one TransactWriteItems; a cancellation raised as what it met:
        Refused for the settle's own condition, ExtraRefused for an extra item's."""
        first = update.request(self._table, state_key(operation_id), ReturnValuesOnConditionCheckFailure="ALL_OLD")
        try:
            self._client.transact_write_items(TransactItems=[{"Update": first}, *(item.entry() for item in extras)])
        except ClientError as exc:
            reasons = cancellation_reasons(exc)
            index = failed_index(reasons) if reasons is not None else None
            if reasons is None or index is None:
                raise
            if index > 0:
                extra = extras[index - 1]
                held = reasons[index].get("Item")
                current = held if isinstance(held, dict) and held else None
                raise ExtraRefused(index - 1, extra.what, current, extra.unmet) from None
            raise self._refused(reasons[0].get("Item"), operation_id) from None

    def _blind_move(
        self, update: Update, subject: Subject, to: OperationState, reason: str, at: str, now: float
    ) -> None:
        """Move to `to` from any state the table allows, without knowing which: one history entry appended."""
        accepted = HistoryEntry(OperationState.ACCEPTED, subject.accepted_at or at, "accepted")
        update.set("state", string_value(to))
        update.append("history", [entry_value(HistoryEntry(to, at, clip(reason)))], start=[entry_value(accepted)])
        attention(update, to, subject.job_type, at)
        may_move(update, to, now, subject.accepted)

    def _identified(self, subject: Subject, at: str, into: Update | None = None) -> Update:
        """The attributes a record is created with (kept when it exists): job type, fingerprint, creation time."""
        update = into or Update()
        return update.set_if_absent("job_type", string_value(subject.job_type)).set_if_absent(
            "fingerprint", string_value(subject.fingerprint)
        )

    def _write(self, update: Update, operation_id: str, return_old: bool = False) -> dict[str, Any]:
        """One conditional UpdateItem: the service's response (with the old item when `return_old`), or Refused
        with the record that failed its condition."""
        extra: dict[str, Any] = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        if return_old:
            extra["ReturnValues"] = "ALL_OLD"
        try:
            response: dict[str, Any] = self._client.update_item(
                **update.request(self._table, state_key(operation_id), **extra)
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise self._refused(failed_item(exc), operation_id) from None
        return response

    def _applied(self, update: Update, operation_id: str) -> bool:
        """A write after a read (an operator's, a mark): False when the record moved since it was read."""
        try:
            self._write(update, operation_id)
        except Refused:
            return False
        return True

    def _refused(self, item: Mapping[str, Any] | None, operation_id: str) -> Refused:
        """What a failed condition met: the item the service returned with it, else the item read again (written
        once for every write of this table)."""
        current = dict(item) if item else self.item(operation_id)
        return Refused(record_from_item(current) if current else StateRecord.absent(operation_id))

    def _now(self) -> tuple[float, str]:
        now = self._clock.now()
        return now, iso(now)
