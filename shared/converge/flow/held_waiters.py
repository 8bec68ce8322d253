"""What an operator's release of a paused concurrency key wakes: the jobs held on it, each brought forward and sent.

`converge.flow.concurrency` notes each job it holds on its key; `ConcurrencyCaps.resume` hands the noted ones to
`HeldWaiters.wake`, which answers with a `KeyReleased` (docs/flow-control.md, "Concurrency caps").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.observability import logger

if TYPE_CHECKING:
    from converge.flow.wakes import Wakes
    from converge.store.operations import OperationStore


@dataclass(frozen=True)
class KeyReleased:
    """What an operator's release of a cap's key did: whether it was paused, and what became of the jobs held on it."""

    released: bool
    """False when the key was not paused (its noted waiters are woken all the same: a release tried again after one
    that stopped halfway wakes the rest)."""
    woken: tuple[str, ...] = ()
    """The held jobs whose time was brought forward to now and whose messages were sent."""
    unsent: tuple[str, ...] = ()
    """Woken (due now), but their messages could not be sent: the reconciler sends them (listed under STUCK, or
    found overdue)."""
    missed: tuple[str, ...] = ()
    """Not woken (the write that brings one forward failed): each starts when it next tries; a release again wakes
    them."""


class HeldWaiters:
    """Wakes the jobs held on a released key: each still held is brought forward (one conditional write) and sent."""

    def __init__(self, operations: OperationStore, wakes: Wakes) -> None:
        self._operations = operations
        self._wakes = wakes

    def wake(self, operation_ids: Iterable[str], why: str, *, released: bool) -> KeyReleased:
        """Wake each of these that is still held (in this order); one that fails is missed, the others go on.
        `released`: whether the release that wakes them found the key paused, as it says."""
        woken: list[str] = []
        unsent: list[str] = []
        missed: list[str] = []
        for operation_id in operation_ids:
            try:
                if not self._operations.state.wake_held(operation_id):
                    continue  # started, ended or no longer held: nothing to wake
            except Exception:
                logger.exception("could not wake a held job; it starts when it next tries", operation=operation_id)
                missed.append(operation_id)
                continue
            try:  # woken: due now, so the reconciler sends it (overdue) if nothing here does
                operation = self._operations.get(operation_id)
                sent = operation is None or self._wakes.send_now(operation, why)  # (None: its records deleted)
            except Exception:
                logger.exception("could not send a woken job; the reconciler sends it", operation=operation_id)
                sent = False
            (woken if sent else unsent).append(operation_id)
        return KeyReleased(released, tuple(woken), tuple(unsent), tuple(missed))
