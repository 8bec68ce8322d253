"""The runner pipeline, in the order docs/how-it-works.md gives, for every record: validate, kill switch, lease,
load, policy, classify. It decides; the worker turns each decision into one SQS action.

The happy path is two DynamoDB calls and no read: the lease (one conditional write that also tells,
when it is refused, why: a settled operation is a duplicate, a live lease is busy, other content
is an identity conflict) and the terminal write, conditional on still holding that lease.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any

from converge.flow.extensions import Hold, Skip
from converge.flow.limits import PushedBack, RateLimits
from converge.flow.policies import POLICIES, Attempt, Decision
from converge.flow.registry import JobBinding, Registry
from converge.flow.runner import Delivery, JobContext
from converge.flow.settlement import Settlement
from converge.flow.steps import Steps, Waiting
from converge.flow.toggles import Toggles
from converge.model.clock import Clock, IdSource, RandomIds, SystemClock, iso
from converge.model.envelope import Envelope
from converge.model.errors import ConfigurationError, InvalidMessage, InvalidTiming, RateLimited, UnknownJobType
from converge.model.outcomes import Outcome, Result, classify, describe, unforeseen
from converge.model.records import ConflictEntry, Lease, Refused, StateRecord, Subject
from converge.model.request import envelope_fingerprints
from converge.model.settling import Settling
from converge.model.states import FINAL_STATES, OperationState, StuckKind
from converge.model.timing import Timing, parse_instant
from converge.observability import count, logger
from converge.screening.message import read_envelope, validate_payload
from converge.store.markers import MarkerStore
from converge.store.signals import SignalStore
from converge.store.state import HELD_FOR, StateTable

LEASE_GRACE_SECONDS = 2.0
"""A lease outlives its holder's remaining Lambda time by this much, so it cannot expire under a live holder."""
SLOT_MARGIN_SECONDS = 1.0
"""A concurrency cap's slot lapses this long after the lease its holder takes next (converge.flow.concurrency)."""


def _slot_spent(envelope: Envelope, delivery: Delivery, now: float) -> Envelope:
    """The envelope as flow control reads it: a held job's message starts on the slot it carries (`held_until`) at its
    first receive only. Received again once due (a retry after its start, a takeover, its lost receive) it calls
    again, so it takes a new slot: without the one it carries, it is charged as any start is (stricter, never looser).
    An early copy keeps it: the lease refuses it by the recorded time."""
    if envelope.held_until is None or delivery.attempt <= 1 or now < envelope.held_until:
        return envelope
    return envelope.model_copy(update={"held_until": None, "held_by": None})


def _accepted(delivery: Delivery) -> float | None:
    """When the delivery's request was accepted (the relay's attribute), or None when unknown or unreadable."""
    try:
        return parse_instant("accepted_at", delivery.accepted_at) if delivery.accepted_at else None
    except InvalidTiming:
        return None


class Refusal(StrEnum):
    """Why a conditional write on the operation did not apply, read from the record that refused it."""

    CONFLICT = "conflict"
    SETTLED = "settled"
    BUSY = "busy"
    PAUSED = "paused"
    EARLY = "early"
    MOVED = "moved"


def refusal(current: StateRecord, subject: Subject, now: float) -> Refusal:
    """Decide what a refused write means (a pure function of the record as it stood)."""
    if current.fingerprint is not None and current.fingerprint not in subject.accepted:
        return Refusal.CONFLICT
    if current.state in FINAL_STATES:
        return Refusal.SETTLED
    if current.lease_live(now):
        return Refusal.BUSY
    if current.state is OperationState.PAUSED:
        return Refusal.PAUSED
    if current.run_at is not None and current.run_at > now:
        return Refusal.EARLY
    return Refusal.MOVED


_FAILED_STATE = {Outcome.REJECTED: OperationState.REJECTED, Outcome.UNKNOWN: OperationState.UNKNOWN}
_HAND_BACKS = {
    Outcome.RETRY: "attempt {attempt} failed; retrying",
    Outcome.REQUEUE: "handed back: too little time left",
    Outcome.BUSY: "handed back: held elsewhere",
}


class Pipeline:
    """What happens to one delivery of a message, decided and recorded: one `Result`, which the worker turns into
    one SQS action. Every settle goes through the settlement; its extensions are called at the pipeline's
    moments (`converge.flow.extensions`)."""

    def __init__(
        self,
        *,
        registry: Registry,
        state: StateTable,
        toggles: Toggles,
        settlement: Settlement,
        markers: MarkerStore | None = None,
        signals: SignalStore | None = None,
        resume_later: Callable[[Envelope, float], object] | None = None,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        time_margin_ms: int = 5_000,
    ) -> None:
        self.registry = registry
        self.state = state
        self.toggles = toggles
        self.settlement = settlement
        """Every settle, with its extensions' items (`converge.flow.settlement`)."""
        self.extensions = settlement.extensions
        """What the pipeline calls at its moments: the settlement's own extensions."""
        self.markers = markers
        """Where a runner's steps are claimed (`ctx.step`); None: a runner that calls a step is misconfigured."""
        self.signals = signals
        """Where the signals a runner waits for are kept (`ctx.wait_for`), beside its markers."""
        self.resume_later = resume_later
        """Sends an operation's message again at a time (the delayed dispatch of `run_at`): how a wait resumes."""
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.time_margin_ms = time_margin_ms

    def process(self, body: str, delivery: Delivery) -> Result:
        """Run one delivery through the pipeline and say what happened to it."""
        self.extensions.before_record(self, body, delivery)
        if delivery.remaining_ms() < self.time_margin_ms:
            return Result(Outcome.REQUEUE, "too little time left to start")
        try:
            envelope = read_envelope(body)
        except InvalidMessage as exc:
            logger.error("message rejected", reason=describe(exc))
            count("rejected")
            return Result(Outcome.REJECTED, describe(exc), exc.__class__.__name__)
        logger.append_keys(
            operation_id=envelope.operation_id,
            job_type=envelope.job_type,
            correlation_id=envelope.correlation_id,
            attempt=delivery.attempt,
        )
        try:
            return self._process(envelope, delivery)
        finally:
            logger.remove_keys(["operation_id", "job_type", "correlation_id", "attempt"])

    def _process(self, envelope: Envelope, delivery: Delivery) -> Result:
        subject = Subject.of(
            envelope.operation_id, envelope.job_type, envelope_fingerprints(envelope), delivery.accepted_at
        )
        try:
            binding = self.registry.get(envelope.job_type)
            message = validate_payload(binding.message_class(), envelope.payload)
            timing = Timing.parse(envelope.run_at, envelope.expires_at)
        except (UnknownJobType, InvalidMessage) as exc:
            return self._reject(subject, exc)
        ctx = JobContext(
            operation_id=envelope.operation_id,
            job_type=envelope.job_type,
            correlation_id=envelope.correlation_id,
            attempt=delivery.attempt,
            max_attempts=min(binding.max_attempts, delivery.max_receive_count),
            clock=self.clock,
            remaining_ms=delivery.remaining_ms,
            time_margin_ms=self.time_margin_ms,
        )

        # Time before the kill switch: an early copy runs nothing, an expired operation is never started.
        now = self.clock.now()
        if not timing.due(now):
            return Result(Outcome.EARLY, f"not due until {envelope.run_at}", retry_after=timing.delay(now))
        if timing.expired(now):
            expired = self._expire(subject, envelope.expires_at or "", ctx)
            if expired is not None:
                return expired

        # The kill switch is the first line of work: a disabled job runs nothing.
        # A cached "off" is confirmed with one fresh read before pausing (pausing is rare), so a job
        # whose toggle was just turned on, and resumed, is not paused again by a stale cache.
        key, default = binding.toggle_key, binding.default_enabled
        if not self.toggles.is_enabled(key, default) and not self.toggles.state(key, default, fresh=True).enabled:
            return self._pause(subject, ctx)

        # Flow control holds a job back before its lease: not started, no attempt counted (rate limits and concurrency
        # caps, converge.flow.limits and converge.flow.concurrency). What a hold took for this delivery is given back
        # when it ends, however it ends; a process that dies gives back nothing (a cap's slot lapses with the lease,
        # which it outlives by a second: the lease is taken just after).
        lease_seconds = delivery.remaining_ms() / 1000 + LEASE_GRACE_SECONDS
        envelope = _slot_spent(envelope, delivery, now)
        try:
            lease_until = self.clock.now() + lease_seconds + SLOT_MARGIN_SECONDS
            held = self.extensions.hold(envelope, binding, lease_until, accepted_at=_accepted(delivery))
        except Exception as exc:  # (those asked were told `released`)
            return self._unrecorded(exc, ctx.job_type, "could not take a flow control's slot")

        def proceed(hold: Hold | None) -> Result:
            if hold is None:
                return self._start(subject, envelope, binding, message, ctx, delivery, lease_seconds)
            if hold.ends:
                return self._ended(subject, hold, ctx, delivery, lease_seconds, envelope.payload)
            return self._hold(subject, hold, envelope, ctx)

        try:
            # A skipped job that started before carries on (`_skip` says None), under the other extensions' holds
            result = (
                (self._skip(subject, held, ctx) or proceed(held.otherwise)) if isinstance(held, Skip) else proceed(held)
            )
        except Exception:
            self.extensions.released(envelope, binding)
            raise
        except BaseException:  # the process dies here: nothing given back (it lapses), what it noted forgotten
            self.extensions.abandoned(envelope, binding)
            raise
        self.extensions.released(envelope, binding)
        return result

    def _start(
        self,
        subject: Subject,
        envelope: Envelope,
        binding: JobBinding,
        message: Any,
        ctx: JobContext,
        delivery: Delivery,
        lease_seconds: float,
    ) -> Result:
        """Take the lease and run the job under it: its outcome recorded, its wait or its failure."""
        taken = self._lease(subject, ctx, delivery, lease_seconds)
        if isinstance(taken, Result):
            return taken
        owner = taken.owner
        runner = self.registry.runner(binding.job_type)
        if self.markers is not None:
            # No marker can exist before a first attempt: its steps read nothing; a later one reads them once.
            steps = Steps(
                self.markers,
                subject.operation_id,
                owner,
                taken.attempt == 1,
                binding.policy,
                self.clock,
                self.signals,
            )
            limits = self.extensions.get(RateLimits)
            ctx = replace(ctx, steps=steps, limits=limits.slot if limits is not None else None)
        try:
            loaded = runner.load(message, ctx)
            if loaded is None:
                decision = Decision(OperationState.NOOP, "nothing to do (already done or no longer needed)")
            else:
                attempt = Attempt(runner, message, loaded, ctx, taken)
                decision = POLICIES[binding.policy](self.extensions.observed(attempt))
        except Waiting as waiting:
            return self._wait(taken, waiting, ctx, envelope)
        except RateLimited as limited:
            return self._pushed_back(taken, limited, ctx, envelope)
        except Exception as exc:
            return self._failure(taken, exc, ctx, envelope.payload)
        return self._finish(taken, decision, ctx, envelope.payload)

    # -- refusals --------------------------------------------------------------------------------------------

    def _refused(self, subject: Subject, current: StateRecord, ctx: JobContext) -> Result:
        now = self.clock.now()
        why = refusal(current, subject, now)
        if why is Refusal.CONFLICT:
            return self._conflict(subject, current, ctx)
        if why is Refusal.SETTLED:
            # A copy after a crash between the terminal write and what follows it: told again (idempotent; only
            # a batch listens here, by operation id, and looks whether it is complete: counted as nothing else).
            self.settlement.follow(Settling(subject.operation_id, subject.job_type, current.state, {}))
            count("duplicate_skipped", ctx.job_type)
            logger.info("operation already settled; duplicate delivery skipped", state=current.state.value)
            return Result(Outcome.DUPLICATE, f"already {current.state.value}")
        if why is Refusal.BUSY:
            until = current.lease_until or now
            return Result(Outcome.BUSY, f"leased by another delivery until {until:.0f}", retry_after=until - now)
        if why is Refusal.PAUSED:
            return Result(Outcome.PAUSED, "already paused")
        if why is Refusal.EARLY:
            wait = (current.run_at or now) - now
            return Result(Outcome.EARLY, "not due yet (its recorded run_at)", retry_after=wait)
        logger.warning("the operation moved while taking it; trying again", state=current.state.value)
        return Result(Outcome.RETRY, f"the operation moved to {current.state.value} meanwhile")

    def _conflict(self, subject: Subject, current: StateRecord, ctx: JobContext) -> Result:
        """A delivery of other content than the operation was admitted with: recorded, listed, never run."""
        reason = "the message's content differs from the content this operation id was admitted with"
        entry = ConflictEntry(iso(self.clock.now()), subject.fingerprint, subject.job_type, f"worker: {reason}")
        try:
            self.state.record_conflict(subject.operation_id, entry, current.fingerprint or subject.fingerprint)
        except Exception as exc:
            return self._unrecorded(exc, ctx.job_type, "could not record the identity conflict")
        count("identity_conflict", ctx.job_type)
        logger.error("identity conflict: message not run", reason=reason)
        return Result(Outcome.CONFLICT, reason)

    # -- recording outcomes ----------------------------------------------------------------------------------

    def _finish(self, lease: Lease, decision: Decision, ctx: JobContext, payload: Mapping[str, Any]) -> Result:
        """The terminal write, conditional on the lease: if another delivery took it over, that one records."""
        self.extensions.before_terminal_write(lease, decision, ctx)
        try:
            self._settle(lease, decision.state, decision.reason, None, ctx, payload)
        except Refused:
            count("duplicate_skipped", ctx.job_type)
            logger.warning("the lease was taken over meanwhile", intended=decision.state.value)
            return Result(Outcome.DUPLICATE, "settled by another delivery")
        except Exception as exc:
            # The work is done but not recorded: the lease expires, and a later delivery settles it.
            return self._unrecorded(exc, ctx.job_type, f"could not record {decision.state.value}")
        outcome = Outcome.SUCCEEDED if decision.state is OperationState.SUCCEEDED else Outcome.NOOP
        count(outcome.value, ctx.job_type)
        # The happy path's line is DEBUG: formatting it was a tenth of a message's CPU, and the outcome is in the
        # operation's receipt and the batch's metrics. Every other outcome is logged at INFO or above.
        logger.debug("operation settled", state=decision.state.value, reason=decision.reason)
        return Result(outcome, decision.reason)

    def _failure(self, lease: Lease, exc: Exception, ctx: JobContext, payload: Mapping[str, Any]) -> Result:
        """Record what the attempt's error means. An expected failure is one log line without a traceback;
        an unforeseen one (a bug, most likely) is one ERROR line per attempt with its traceback, for its author."""
        outcome = classify(exc, ctx.final_attempt)
        reason = describe(exc)
        error_class = exc.__class__.__name__
        bug = unforeseen(exc)
        if outcome in _HAND_BACKS:
            # The attempt did not finish: give the lease back now, so the next delivery starts at once
            # and is no takeover (nothing happened that a provider would need to be asked about).
            note = _HAND_BACKS[outcome].format(attempt=ctx.attempt)
            try:
                self.state.release(lease, note, reason if outcome is Outcome.RETRY else None)
            except Refused:
                pass  # taken over meanwhile: nothing of it to give back
            except Exception:
                logger.exception("could not give the lease back; it expires by itself")
            until = getattr(exc, "until", None)
            retry_after = max(0.0, until - self.clock.now()) if until is not None else None
            if outcome is Outcome.RETRY:
                if bug:
                    logger.exception("unforeseen error in the job; will retry", reason=reason, exc_info=exc)
                else:
                    logger.warning("transient failure; will retry", reason=reason)
                count("retried", ctx.job_type)
            else:
                logger.info("handing the message back", outcome=outcome.value, reason=reason)
            return Result(outcome, reason, error_class, retry_after=retry_after)
        state = _FAILED_STATE.get(outcome, OperationState.FAILED)
        if bug:
            logger.exception(
                "unforeseen error in the job; operation did not succeed",
                outcome=outcome.value,
                reason=reason,
                exc_info=exc,
            )
        else:
            logger.error("operation did not succeed", outcome=outcome.value, reason=reason)
        try:
            self._settle(lease, state, reason, reason, ctx, payload)
        except Refused:
            pass  # taken over meanwhile: the delivery that holds the lease records the outcome
        except Exception as write_error:
            return self._unrecorded(write_error, ctx.job_type, f"could not record {state.value}")
        count(state.value.lower(), ctx.job_type)
        return Result(outcome, reason, error_class)

    def _wait(self, lease: Lease, waiting: Waiting, ctx: JobContext, envelope: Envelope) -> Result:
        """A runner waits between two steps: SCHEDULED until its time, the lease given back, the message sent
        again for then (a message delay, or a one-time schedule). A crash before the state write finds the wait's
        marker on the retry, with its time; a crash after it leaves this delivery's message, which comes back.

        A resumption that does not go out (SQS refuses the message, the schedule group is missing) is listed under
        STUCK (`undispatched`, with the error) and the delivery still ends here: the reconciler sends it again on
        each run from the stored request, and clears the mark once it is out (`ReopenedWork._resend_wait`); past
        its time the overdue pass sends it too. Failing the delivery instead would not retry the send: its message
        comes back to an operation SCHEDULED until its time, which the lease refuses to start early, until SQS
        dead-letters it; and a runner made to wait again on every retry would hold a lease and read its markers
        each time, for a failure that may last hours. The resumed delivery passes every recorded step by its
        marker, so nothing the wait followed runs twice."""
        reason = str(waiting)
        try:
            self.state.wait(lease, waiting.until, waiting.name, reason, for_signal=waiting.for_signal)
        except Refused:
            count("duplicate_skipped", ctx.job_type)
            return Result(Outcome.DUPLICATE, "taken over by another delivery while starting to wait")
        except Exception as exc:
            return self._unrecorded(exc, ctx.job_type, "could not record the wait")
        at = waiting.until
        try:
            if waiting.for_signal and self._signal_came(lease, waiting.name):
                at = self.clock.now()
                reason = f"{reason}; its signal came meanwhile: resumed now"
            if self.resume_later is None:
                raise ConfigurationError("no delayed dispatch configured")
            self.resume_later(envelope, at)
        except Exception as exc:
            logger.exception("could not send the resumption; listed under STUCK until the reconciler sends it")
            self._resumption_unsent(lease.operation_id, lease.job_type, waiting, exc)
            reason = f"{reason}; its resumption is not sent yet ({describe(exc)})"
        count("waiting", ctx.job_type)
        logger.info("operation waiting", until=iso(waiting.until), wait=waiting.name)
        return Result(Outcome.WAITING, reason)

    def _hold(self, subject: Subject, held: Hold, envelope: Envelope, ctx: JobContext) -> Result:
        """Held by flow control (a rate limit's slot later, a concurrency cap full): SCHEDULED until then (listed with
        the reason), no attempt counted, and the message sent again for then, carrying a rate limit's slot; this one
        is acknowledged, so SQS counts no receive against it. A send that fails is listed under STUCK for the
        reconciler, as a wait's resumption is (`_wait`)."""
        try:
            self.state.hold(subject, held.until, held.reason)
        except Refused as refused:
            current, now = refused.current, self.clock.now()
            if current.waiting_for == HELD_FOR and current.run_at is not None and current.run_at > now:
                # Another delivery of it is held until then, and its message comes back then: this copy is done
                reason = f"held already until {iso(current.run_at)} (another delivery's hold)"
                return Result(Outcome.HELD, reason)
            return self._refused(subject, current, ctx)
        except Exception as exc:
            return self._unrecorded(exc, ctx.job_type, "could not record the hold")
        reason = held.reason
        try:
            if self.resume_later is None:
                raise ConfigurationError("no delayed dispatch configured")
            carried = {"held_until": round(held.until, 3), "held_by": held.slot_of}
            self.resume_later(envelope.model_copy(update=carried), held.until)
        except Exception as exc:
            logger.exception("could not send the held job again; listed under STUCK until the reconciler sends it")
            self._resumption_unsent(subject.operation_id, subject.job_type, Waiting("rate-limit", held.until), exc)
            reason = f"{reason}; its message is not sent yet ({describe(exc)})"
        logger.info("operation held by flow control", until=iso(held.until), reason=held.reason)
        return Result(Outcome.HELD, reason)

    def _skip(self, subject: Subject, skip: Skip, ctx: JobContext) -> Result | None:
        """Ended by flow control before it started (a debounced request whose burst runs a newer payload): NOOP with
        the reason, through the settlement (a batch counts it, a continuation follows), never started. None when a
        delivery had started it before (a retry of a burst's run whose key has moved on since): started work carries
        on, as for an expiry (`_expire`)."""
        settling = Settling(subject.operation_id, subject.job_type, OperationState.NOOP, {})
        try:
            self.settlement.settle(settling, skip.reason, lambda noted, items: self.state.skip(subject, noted, items))
        except Refused as refused:
            return self._unless_started(subject, refused.current, ctx)
        except Exception as exc:
            return self._unrecorded(exc, subject.job_type, "could not record NOOP")
        count(Outcome.NOOP.value, subject.job_type)
        logger.info("operation ended before it started", reason=skip.reason)
        return Result(Outcome.NOOP, skip.reason)

    def _unless_started(self, subject: Subject, current: StateRecord, ctx: JobContext) -> Result | None:
        """An end before the start (an expiry, a skip) refused: None when a delivery had started the operation before
        and it is open, its lease lapsed and its content the same, so the started work carries on (the lease decides,
        as for any retry); else the refusal's own result."""
        carries_on = (
            current.started
            and current.state not in FINAL_STATES
            and not current.lease_live(self.clock.now())
            and current.fingerprint in (None, *subject.accepted)
        )
        return None if carries_on else self._refused(subject, current, ctx)

    def _lease(self, subject: Subject, ctx: JobContext, delivery: Delivery, lease_seconds: float) -> Lease | Result:
        """The lease, the peek: one conditional write, and its refusal says why (settled, busy, conflict) as the
        delivery's result."""
        owner = f"{delivery.message_id}:{self.ids.new_id()}"
        try:
            return self.state.acquire(subject, owner, lease_seconds)
        except Refused as refused:
            return self._refused(subject, refused.current, ctx)
        except Exception as exc:
            return self._unrecorded(exc, ctx.job_type, "could not take the lease")

    def _ended(
        self,
        subject: Subject,
        held: Hold,
        ctx: JobContext,
        delivery: Delivery,
        lease_seconds: float,
        payload: Mapping[str, Any],
    ) -> Result:
        """Ended by flow control (a concurrency cap's skip or replace mode): the lease taken and the operation settled
        NOOP with the reason, nothing run; a copy finds it settled."""
        taken = self._lease(subject, ctx, delivery, lease_seconds)
        if isinstance(taken, Result):
            return taken
        logger.info("operation ended by flow control", reason=held.reason)
        return self._finish(taken, Decision(OperationState.NOOP, held.reason), ctx, payload)

    def _pushed_back(self, lease: Lease, limited: RateLimited, ctx: JobContext, envelope: Envelope) -> Result:
        """A runner's upstream asked it to wait (`RateLimited`, a 429's retry-after): the limiter's key pauses that
        long, and the operation waits for it as a wait between steps does, its message holding the first slot after
        the pause; no attempt of its budget is spent (the message sent again is a new one)."""
        limits = self.extensions.get(RateLimits)
        try:
            if limits is None or limited.limiter not in limits.limiters:
                # Nothing to push back: the job still waits the time its upstream asked for (its author is told).
                logger.error("RateLimited names a limiter the catalogue does not declare", limiter=limited.limiter)
                until = self.clock.now() + max(0.0, float(limited.retry_after))
                held = PushedBack(until)
            else:
                held = limits.push_back(envelope, self.registry.get(envelope.job_type), limited)
        except Exception as exc:
            return self._failure(lease, exc, ctx, envelope.payload)
        carried = envelope.model_copy(update={"held_until": round(held.until, 3), "held_by": held.slot_of})
        return self._wait(lease, Waiting(f"{limited.limiter}-retry-after"[:48], held.until), ctx, carried)

    def _signal_came(self, lease: Lease, name: str) -> bool:
        """After the SCHEDULED write, whether a signal came for the wait since the runner asked: its sender's wake may
        have found the operation still IN_PROGRESS, so this delivery wakes it (docs/signals.md: one of the two
        always sees the other, and a second wake is a duplicate message the lease absorbs)."""
        if self.signals is None or self.signals.get(lease.operation_id, name) is None:
            return False
        return self.state.wake(lease.operation_id, name)

    def _resumption_unsent(self, operation_id: str, job_type: str, waiting: Waiting, exc: Exception) -> None:
        """List a waiting operation whose resumption did not go out under STUCK, with the error (see `_wait`)."""
        why = (
            f"waiting at {waiting.name!r} until {iso(waiting.until)}, and its resumption could not be sent "
            f"({describe(exc)}); the reconciler sends it again on each run and lists it under SCHEDULED once sent"
        )
        seen = StateRecord(operation_id, OperationState.SCHEDULED, job_type=job_type)
        try:
            listed = self.state.mark_stuck(seen, StuckKind.UNDISPATCHED, why)
        except Exception:
            logger.exception("could not list the wait under STUCK; the reconciler's overdue pass resumes it")
            return
        if listed:
            count("stuck", job_type)

    def _settle(
        self,
        lease: Lease,
        state: OperationState,
        reason: str,
        error: str | None,
        ctx: JobContext,
        payload: Mapping[str, Any],
    ) -> None:
        """The terminal write as the lease's holder, through the settlement; Refused when the lease was taken over."""
        settling = Settling(ctx.operation_id, ctx.job_type, state, payload, ctx.correlation_id)
        self.settlement.settle(
            settling, reason, lambda noted, items: self.state.settle(lease, state, noted, error, items)
        )

    def _unrecorded(self, exc: Exception, job_type: str | None, what: str) -> Result:
        """A failure talking to the state table itself: back to the queue with a backoff, nothing written."""
        outcome = classify(exc, final_attempt=False)
        if outcome not in (Outcome.RETRY, Outcome.REQUEUE, Outcome.BUSY):
            outcome = Outcome.RETRY
        reason = f"{what}: {describe(exc)}"
        logger.warning("state table unavailable; will retry", reason=reason)
        count("retried", job_type if job_type in self.registry else None)
        return Result(outcome, reason, exc.__class__.__name__)

    def _reject(self, subject: Subject, exc: Exception) -> Result:
        """Invalid input: REJECTED on its operation with the reason, and the message to the DLQ."""
        reason = describe(exc)
        logger.error("message rejected", reason=reason)
        try:
            settling = Settling(subject.operation_id, subject.job_type, OperationState.REJECTED, {})
            self.settlement.settle(settling, reason, lambda noted, items: self.state.reject(subject, noted, items))
        except Refused:
            pass  # settled meanwhile, or moved on: the message goes to the DLQ all the same
        except Exception as write_error:
            return self._unrecorded(write_error, subject.job_type, "could not record REJECTED")
        count("rejected", subject.job_type if subject.job_type in self.registry else None)
        return Result(Outcome.REJECTED, reason, exc.__class__.__name__)

    def _expire(self, subject: Subject, expires_at: str, ctx: JobContext) -> Result | None:
        """Not started by its expires_at: EXPIRED (final, listed) with the reason, and the message acknowledged.
        None when a delivery had started it before (a retry, perhaps paused and resumed since): expiry ends
        only work that never began, and started work carries on (the lease decides, as for any retry)."""
        reason = f"not started by its expires_at {expires_at}"
        settling = Settling(subject.operation_id, subject.job_type, OperationState.EXPIRED, {})
        try:
            self.settlement.settle(settling, reason, lambda noted, items: self.state.expire(subject, noted, items))
        except Refused as refused:
            return self._unless_started(subject, refused.current, ctx)
        except Exception as exc:
            return self._unrecorded(exc, subject.job_type, "could not record EXPIRED")
        count("expired", subject.job_type)
        logger.info("operation expired before it started", expires_at=expires_at)
        return Result(Outcome.EXPIRED, reason)

    def _pause(self, subject: Subject, ctx: JobContext) -> Result:
        """A disabled one-off job: the operation waits as PAUSED and the message is acknowledged."""
        try:
            self.state.pause(subject, "kill switch is off")
        except Refused as refused:
            return self._refused(subject, refused.current, ctx)
        except Exception as exc:
            return self._unrecorded(exc, ctx.job_type, "could not record PAUSED")
        count("paused", subject.job_type)
        logger.info("job disabled; operation paused until its toggle is turned on")
        return Result(Outcome.PAUSED, "kill switch is off")
