"""Steps: a job with several effects, each run once under its own policy, claimed by a marker.

A runner calls `ctx.step(name, effect, policy=...)` for each effect, in order. Each step is one marker item in
the markers table, keyed by the operation and the step's name (`converge.store.markers`):

- `effect_then_claim`: the effect, then the marker. A crash between the two repeats this step's effect on
  the retry (duplicates over loss, for this step only), never an earlier step's.
- `keyed_effect`: the effect is idempotent by its key (the same object written again); the marker records it.
- `claim_then_effect`: the marker first (CLAIMED), then the effect with the step's key ("<operation>:<name>"),
  then the marker again (DONE, with the result): two writes. A claim found by a later delivery, or an
  ambiguous answer, is settled by the step's `confirm`; if the provider cannot tell, the operation becomes
  UNKNOWN naming the step, and an operator's resolve settles that step.

A step recorded by an earlier delivery is never run again: its recorded result comes back. On a delivery's
first attempt no marker can exist, so nothing is read; on any later one, the first step reads all of the
operation's markers with one Query. A job that calls no step reads and writes no marker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from converge.flow.registry import Policy
from converge.flow.runner import Confirmation
from converge.model.clock import Clock, iso
from converge.model.errors import (
    ConfigurationError,
    ConvergeError,
    OutcomeUnknown,
    OutOfTime,
    PermanentError,
    TransientError,
)
from converge.model.records import StepRecord, StepResult, StepState
from converge.model.signals import SIGNAL_WAIT, WaitResult
from converge.observability import logger
from converge.screening.message import sensitive_value_reason
from converge.store.markers import MarkerStore
from converge.store.signals import SignalStore

STEP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
"""A step's name: public like a job type, add-only while operations are in flight."""

RESULT_LIMIT = 512
"""The largest result a step may record, as compact JSON (identifiers and small numbers, never content)."""

STEP_POLICIES = (Policy.EFFECT_THEN_CLAIM, Policy.CLAIM_THEN_EFFECT, Policy.KEYED_EFFECT)

WAIT = "wait"
"""The policy a wait's marker records (it is listed among the steps, in the runner's order)."""


class Waiting(ConvergeError):
    """A runner waits (`ctx.wait`, or `ctx.wait_for` a signal): the delivery ends here and the operation resumes at
    `until`, or at its signal when `for_signal`."""

    def __init__(self, name: str, until: float, for_signal: bool = False) -> None:
        what = f"waiting for signal {name!r}" if for_signal else f"waiting at {name!r}"
        super().__init__(f"{what} until {iso(until)}")
        self.name = name
        self.until = until
        self.for_signal = for_signal


class Steps:
    """The steps of one delivery of one operation (the pipeline builds one per delivery, after its lease)."""

    def __init__(
        self,
        markers: MarkerStore,
        operation_id: str,
        owner: str,
        first_attempt: bool,
        job_policy: Policy,
        clock: Clock,
        signals: SignalStore | None = None,
    ) -> None:
        self._clock = clock
        self._signals = signals
        self._markers = markers
        self._operation_id = operation_id
        self._owner = owner
        self._job_policy = job_policy
        self._known: dict[str, StepRecord] | None = {} if first_attempt else None
        self._ran: list[str] = []

    @property
    def ran(self) -> tuple[str, ...]:
        """The steps this delivery passed, run or recorded before, in order."""
        return tuple(self._ran)

    def run(
        self,
        name: str,
        effect: Callable[[str], Any],
        policy: str,
        confirm: Callable[[str], Confirmation] | None,
    ) -> Any:
        chosen = self._check(name, policy, confirm)
        self._ran.append(name)
        recorded = self._recorded().get(name)
        if recorded is not None and recorded.state is StepState.DONE:
            logger.info("step already done; its recorded result is used", step=name)
            return recorded.result
        if recorded is not None and recorded.state is StepState.FAILED:
            raise PermanentError(f"step {name!r} was settled as failed: {recorded.note}")
        key = f"{self._operation_id}:{name}"
        if chosen is Policy.CLAIM_THEN_EFFECT:
            assert confirm is not None  # checked above
            return self._claimed_first(name, effect, confirm, key, recorded)
        result = effect(key)
        note = "effect applied, then claimed" if chosen is Policy.EFFECT_THEN_CLAIM else "keyed effect written"
        return self._record(name, chosen, result, note)

    def wait(self, name: str, until: float) -> None:
        """Pass a wait whose time has come; else record it (once: a resumed run finds its time) and end here."""
        self._check_wait(name)
        self._ran.append(name)
        recorded = self._recorded().get(name)
        if recorded is None:
            recorded = self._markers.record_step(
                self._operation_id, name, len(self._ran), WAIT, self._owner, _wait_result(until), "waiting"
            )
        until = _waited_until(recorded, until)
        if self._clock.now() >= until:
            return
        raise Waiting(name, until)

    def limit(self, limiter: str, reserve: Callable[[], float]) -> None:
        """Take a slot before a call to a limited partner (`ctx.limit`): a slot now passes at once and records
        nothing; a later one is waited for as `wait` does, and the resumed run passes on the slot it waited for."""
        name = f"limit-{limiter}-{sum(1 for ran in self._ran if ran.startswith('limit-')) + 1}"
        if name not in self._recorded():
            until = reserve()
            if until <= self._clock.now():
                self._ran.append(name)
                return
            return self.wait(name, until)
        return self.wait(name, 0.0)  # the recorded slot's time is the one waited for

    def wait_for(self, name: str, until: float) -> WaitResult:
        """The wait's outcome: the signal kept for `name`, or its timeout once `until` has come; else record the
        wait (once: a resumed run finds its time) and end here (`Waiting`, for a signal).

        The outcome is the one signal item of (operation, name), whichever wrote it first: a sender's signal or
        this timeout (`SignalStore.time_out`, a conditional put that a signal already there refuses). The wait's
        marker then records what resumed it, for the receipt."""
        self._check_wait(name)
        if self._signals is None:
            raise ConfigurationError("a wait for a signal needs the markers table (MARKERS_TABLE)")
        self._ran.append(name)
        recorded = self._recorded().get(name)
        until = _waited_until(recorded, until)
        # A signal may be kept before the operation gets here: asked every time (one strongly consistent read).
        outcome = self._signals.get(self._operation_id, name)
        if outcome is None and self._clock.now() >= until:
            outcome = self._signals.time_out(self._operation_id, name)
            if outcome is None:  # recorded: the timeout came first; a signal after it is refused
                outcome = self._signals.get(self._operation_id, name)
        if outcome is not None:
            if recorded is None or recorded.state is not StepState.DONE:
                note = "timed out" if outcome.timed_out else f"resumed by signal {outcome.signal_id!r}"
                result = {"timed_out": outcome.timed_out, "signal_id": None if outcome.timed_out else outcome.signal_id}
                self._markers.record_step(
                    self._operation_id, name, len(self._ran), SIGNAL_WAIT, self._owner, result, note
                )
            return WaitResult.of(outcome)
        if recorded is None:
            held = self._markers.claim_step(
                self._operation_id,
                name,
                len(self._ran),
                SIGNAL_WAIT,
                self._owner,
                _wait_result(until),
                "waiting for its signal",
            )
            until = _waited_until(held, until)
        raise Waiting(name, until, for_signal=True)

    # -- claim_then_effect ------------------------------------------------------------------------------------

    def _claimed_first(
        self,
        name: str,
        effect: Callable[[str], Any],
        confirm: Callable[[str], Confirmation],
        key: str,
        recorded: StepRecord | None,
    ) -> Any:
        if recorded is None:
            held = self._markers.claim_step(
                self._operation_id, name, len(self._ran), Policy.CLAIM_THEN_EFFECT, self._owner
            )
            if held is not None and held.state is StepState.DONE:
                return held.result
            recorded = held
        # A claim an earlier delivery never recorded done: it may or may not have reached the provider.
        if recorded is not None and self._confirm(name, confirm, key, "claimed by an earlier delivery"):
            return self._record(name, Policy.CLAIM_THEN_EFFECT, None, "the provider confirms it was applied")
        try:
            result = effect(key)
        except (TransientError, PermanentError, OutOfTime):
            # The provider refused before acting (or failed for good): no effect, so the claim goes.
            self._markers.release_step(self._operation_id, name)
            raise
        except Exception as exc:
            why = f"ambiguous outcome ({exc.__class__.__name__})"
            if self._confirm(name, confirm, key, why):
                return self._record(
                    name, Policy.CLAIM_THEN_EFFECT, None, f"{why}; the provider confirms it was applied"
                )
            self._markers.release_step(self._operation_id, name)
            raise TransientError(f"step {name!r}: the provider confirms it was not applied; retrying") from exc
        return self._record(name, Policy.CLAIM_THEN_EFFECT, result, "claimed, then effect applied")

    def _confirm(self, name: str, confirm: Callable[[str], Confirmation], key: str, why: str) -> bool:
        """Ask the provider by the step's key: True when applied, False when not; UNKNOWN when it cannot tell."""
        try:
            answer = confirm(key)
        except Exception as exc:
            raise OutcomeUnknown(f"step {name!r}: {why}; asking the provider failed: {exc}") from exc
        if answer is Confirmation.APPLIED:
            return True
        if answer is Confirmation.NOT_APPLIED:
            return False
        raise OutcomeUnknown(f"step {name!r}: {why}; the provider can neither deduplicate nor be queried")

    # -- building blocks --------------------------------------------------------------------------------------

    def _check(self, name: str, policy: str, confirm: Callable[[str], Confirmation] | None) -> Policy:
        if not isinstance(name, str) or not STEP_NAME.match(name):
            raise ConfigurationError(f"step name {name!r} must be lowercase letters, digits and '-' (at most 48)")
        if name in self._ran:
            raise ConfigurationError(f"step {name!r} is run twice in one delivery; each step needs its own name")
        try:
            chosen = Policy(policy)
        except ValueError:
            chosen = None
        if chosen not in STEP_POLICIES:
            allowed = ", ".join(each.value for each in STEP_POLICIES)
            raise ConfigurationError(f"step {name!r}: policy {policy!r} is not one of {allowed}")
        assert chosen is not None
        if chosen is Policy.CLAIM_THEN_EFFECT and confirm is None:
            raise ConfigurationError(f"step {name!r}: claim_then_effect needs confirm(key), to ask the provider")
        if self._job_policy is Policy.CLAIM_THEN_EFFECT:  # the takeover's confirm would answer for every step
            raise ConfigurationError(
                "a job made of steps binds effect_then_claim or keyed_effect: each step carries its own policy"
            )
        return chosen

    def _check_wait(self, name: str) -> None:
        if not isinstance(name, str) or not STEP_NAME.match(name):
            raise ConfigurationError(f"wait name {name!r} must be lowercase letters, digits and '-' (at most 48)")
        if name in self._ran:
            raise ConfigurationError(f"{name!r} is run twice in one delivery; each step and wait needs its own name")
        if self._job_policy is Policy.CLAIM_THEN_EFFECT:
            raise ConfigurationError(
                "a job that waits binds effect_then_claim or keyed_effect, with its effects as steps"
            )

    def _recorded(self) -> dict[str, StepRecord]:
        """The operation's markers: none on a first attempt (no read), else one Query, once per delivery."""
        if self._known is None:
            self._known = self._markers.steps(self._operation_id)
        return self._known

    def _record(self, name: str, policy: Policy, result: Any, note: str) -> Any:
        problem = result_problem(result)
        kept: StepResult = None if problem else result
        before = self._markers.record_step(
            self._operation_id, name, self._ran.index(name) + 1, policy, self._owner, kept, note
        )
        if before is not None and before.state is StepState.DONE:
            return before.result  # recorded meanwhile by another delivery: its result is the step's
        if problem:
            # The effect happened and is claimed (never repeated); its result is not kept: a bug to fix.
            raise PermanentError(f"step {name!r}: its result was not recorded: {problem}")
        return result


def result_problem(result: Any) -> str | None:
    """Why a step's result cannot be recorded (None when it can): small identifiers only, screened."""
    values = list(result.values()) if isinstance(result, Mapping) else [result]
    if isinstance(result, Mapping) and not all(isinstance(key, str) for key in result):
        return "a mapping result needs string keys"
    for value in values:
        if value is not None and not isinstance(value, (str, int, float, bool)):
            return f"a result holds identifiers and small numbers, not {type(value).__name__}"
    try:
        size = len(json.dumps(result, separators=(",", ":")))
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    if size > RESULT_LIMIT:
        return f"{size} bytes as JSON, over the {RESULT_LIMIT}-byte limit (record identifiers, not content)"
    texts = [*(result.keys() if isinstance(result, Mapping) else ()), *(v for v in values if isinstance(v, str))]
    for text in texts:
        reason = sensitive_value_reason(text)
        if reason:
            return reason
    return None


def _wait_result(until: float) -> dict[str, str | float]:
    """What a wait's marker records: its time, as a number and as the receipt shows it."""
    return {"until": round(until, 3), "at": iso(until)}


def _waited_until(marker: StepRecord | None, until: float) -> float:
    """The time a wait's marker recorded first (a resumed run never waits twice, nor waits anew), else `until`."""
    recorded = marker.result.get("until") if marker is not None and isinstance(marker.result, Mapping) else None
    return float(recorded) if recorded else until
