"""Lambda SnapStart: a runtime built from a function's environment takes part in the runtime hooks.

Before the snapshot, it loads what a first request needs (clients, the parts the function uses, the runners
of a worker's jobs) so that a restored environment does not. After each restore, it makes the restored
environment unique and fresh again: the random generator is reseeded (backoff jitter), the id source too if
it keeps state (lease owners: `RandomIds` draws from the kernel, unique in every restored environment), the
kill-switch cache is dropped with every time it read, and every client's pooled connections are closed (new
ones are opened on use). See `Converge.before_snapshot` and `Converge.after_restore`.

The hooks hold their runtime weakly: a test's runtimes come and go, and a hook whose runtime is gone does
nothing. The list of hooks is snapshot-restore-py's own (the runtime's, in Lambda).
"""

from __future__ import annotations

import weakref
from typing import Protocol

from snapshot_restore_py import register_after_restore, register_before_snapshot


class Snapshotted(Protocol):
    """What takes part: a runtime (`Converge`)."""

    def before_snapshot(self) -> None: ...

    def after_restore(self) -> None: ...


def take_part(runtime: Snapshotted) -> None:
    """Register the runtime's before-snapshot and after-restore hooks (weakly)."""
    held = weakref.ref(runtime)

    def before_snapshot() -> None:
        alive = held()
        if alive is not None:
            alive.before_snapshot()

    def after_restore() -> None:
        alive = held()
        if alive is not None:
            alive.after_restore()

    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
