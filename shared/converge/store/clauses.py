"""The clauses every write of the state table shares, each added to one conditional UpdateItem.

The transition table becomes a condition here (`may_move`): a write moves only from a state the table lets
move to its target, never under a live lease, and only for the content the operation was admitted with.
The rest keeps the record's other promises: a final state that says nothing ran is written only if no
lease was ever taken (`never_started`), the current error stands apart from earlier ones (`current_error`),
the sparse indexes list exactly the states that need listing (`attention`), and the history stays bounded.
"""

from __future__ import annotations

from converge.model import states
from converge.model.records import ERRORS_LIMIT, HISTORY_LIMIT, ErrorEntry, HistoryEntry, clip
from converge.model.states import LISTED_STATES, OperationState
from converge.store.codecs import entry_value, number_value, string_value
from converge.store.updates import Update


def may_move(update: Update, to: OperationState, now: float, content: tuple[str, ...]) -> None:
    """Apply only from a state the table lets move to `to` (no record at all is ACCEPTED), never under a
    live lease, and only for the content the operation was admitted with."""
    state, lease_until, fp = update.name("state"), update.name("lease_until"), update.name("fingerprint")
    allowed = ", ".join(update.value(string_value(source)) for source in sorted(blind_sources(to)))
    absent = f"attribute_not_exists({state}) OR " if OperationState.ACCEPTED in states.sources(to) else ""
    update.require(f"{absent}{state} IN ({allowed})")
    # Only an IN_PROGRESS record holds a live lease; an expired one is a takeover.
    update.require(f"attribute_not_exists({lease_until}) OR {lease_until} < {update.value(number_value(now))}")
    admitted = ", ".join(update.value(string_value(value)) for value in content)
    update.require(f"attribute_not_exists({fp}) OR {fp} IN ({admitted})")
    if to in states.NOTHING_RAN:
        never_started(update)


def blind_sources(to: OperationState) -> frozenset[OperationState]:
    """The states a write that does not hold the lease may move from: the table's, except that only the lease's
    holder moves IN_PROGRESS to SCHEDULED (a wait between two steps), and only a rate limit's hold
    (`StateTable.hold`) SCHEDULED to SCHEDULED, never a blind write such as the relay's."""
    sources = states.sources(to)
    if to is OperationState.SCHEDULED:
        return sources - {OperationState.IN_PROGRESS, OperationState.SCHEDULED}
    return sources


def never_started(update: Update) -> None:
    """Require that no lease was ever taken: the lease write adds to `attempts`, and nothing takes it away."""
    attempts = update.name("attempts")
    update.require(f"attribute_not_exists({attempts}) OR {attempts} = {update.value(number_value(0))}")


def still_waiting(update: Update, after: str) -> None:
    """Require that the operation still waits after the step it was read waiting after, with no lease: between
    two steps, every earlier one claimed and none in flight (a cancel then stops only what has not begun)."""
    waiting, owner = update.name("waiting"), update.name("lease_owner")
    update.require(f"{waiting} = {update.value(string_value(after))} AND attribute_not_exists({owner})")


def bounded_history(history: list[HistoryEntry]) -> list[HistoryEntry]:
    """The first entry (when the operation was accepted) and the latest changes, HISTORY_LIMIT in all."""
    return history if len(history) <= HISTORY_LIMIT else [history[0], *history[-(HISTORY_LIMIT - 1) :]]


def current_error(update: Update, earlier: tuple[ErrorEntry, ...], attempt: int, error: str | None, at: str) -> None:
    """The current outcome's error apart from earlier ones: a success clears `last_error` and keeps `errors`."""
    if error is None:
        update.remove("last_error")
        return
    text = clip(error)
    errors = [*earlier, ErrorEntry(at, attempt, text)][-ERRORS_LIMIT:]
    update.set("last_error", string_value(text)).set("errors", {"L": [entry_value(entry) for entry in errors]})


def attention(update: Update, to: OperationState, job_type: str, at: str) -> None:
    """List the operation under its state in the attention index when the state is listed, else unlist it
    (a STUCK mark goes either way: what made it stuck has moved)."""
    if to in LISTED_STATES:
        update.set("attention", string_value(to)).set("attention_sk", string_value(f"{job_type}#{at}"))
    else:
        update.remove("attention", "attention_sk")
    update.remove("stuck")
