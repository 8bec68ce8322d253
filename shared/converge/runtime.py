"""Wiring: one object that builds converge's parts for a deployment, lazily, from its settings.

Each part's module is imported when the part is first built, so a function loads only what it uses:
the relay never imports the worker's batch machinery, the worker never imports the relay or the
scheduler code (a function's cold start pays for its own parts alone).

Lambda SnapStart: every runtime a handler builds with `from_env()` takes part in the runtime hooks
(snapshot-restore-py). Before the snapshot, it loads what a first request needs (clients, the parts the
function uses, the runners of a worker's jobs) so that a restored environment does not. After each
restore, it makes the restored environment unique and fresh again: the random generator is reseeded
(backoff jitter), the id source too if it keeps state (lease owners: `RandomIds` draws from the
kernel, unique in every restored environment), the kill-switch cache is dropped with every time it
read, and every client's pooled connections are closed (new ones are opened on use).
"""

from __future__ import annotations

import random
import weakref
from functools import cached_property
from typing import TYPE_CHECKING, Any

from snapshot_restore_py import register_after_restore, register_before_snapshot

from converge.aws import Clients
from converge.clock import Clock, IdSource, RandomIds, SystemClock
from converge.config import ConfigurationError, Settings
from converge.operations import Admission, OperationStore
from converge.registry import Registry, load_catalogue

if TYPE_CHECKING:
    from converge.admission import When
    from converge.cancel import CancelResult
    from converge.delays import DelayedDispatch
    from converge.dispatch import Dispatcher
    from converge.markers import MarkerStore
    from converge.pipeline import Pipeline
    from converge.relay import Relay
    from converge.resumer import Resumer
    from converge.toggles import Toggles
    from converge.worker import Worker


class Converge:
    """Everything a handler, the CLI or a test needs, built on first use (no AWS calls at construction)."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry | None = None,
        clients: Clients | None = None,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else load_catalogue(settings.catalogue)
        self.clients = clients or Clients()
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.rng = rng or random.Random()

    @classmethod
    def from_env(cls, **overrides: Any) -> Converge:
        """The runtime a handler builds: from the function's environment, taking part in SnapStart's hooks."""
        runtime = cls(Settings.from_env(), **overrides)
        _SNAPSHOTTED.add(runtime)
        return runtime

    # -- SnapStart ------------------------------------------------------------------------------------------------

    def before_snapshot(self) -> None:
        """Load what a first request needs into the snapshot (nothing here calls AWS)."""
        self.clients.get("dynamodb")
        self.operations  # noqa: B018 (a cached part: building it is the point)
        if self.settings.queue_url and self.settings.dlq_url:
            self.clients.get("sqs")
            self.clients.get("ssm")
            self.toggles  # noqa: B018
            self.worker  # noqa: B018
            for binding in self.registry:
                if binding.queue == self.settings.queue_name:
                    self.registry.runner(binding.job_type)
        self.clients.close_connections()  # a connection kept in a snapshot would be shared by every restore

    def after_restore(self) -> None:
        """Make a restored environment unique and fresh again (see the module docstring)."""
        self.rng.seed()  # from os.urandom: each restored environment draws its own jitter
        reseed = getattr(self.ids, "reseed", None)
        if callable(reseed):
            reseed()
        if "toggles" in self.__dict__:
            self.toggles.restored()
        self.clients.close_connections()

    @cached_property
    def operations(self) -> OperationStore:
        return OperationStore(
            self.settings.jobs_table,
            self.settings.state_table,
            self.clients.dynamodb,
            attention_index=self.settings.attention_index,
            conflict_index=self.settings.conflict_index,
            clock=self.clock,
            schedule_index=self.settings.schedule_index,
        )

    @cached_property
    def markers(self) -> MarkerStore:
        from converge.markers import MarkerStore

        return MarkerStore(self.settings.markers_table, self.clients.dynamodb, self.clock)

    @cached_property
    def toggles(self) -> Toggles:
        from converge.toggles import Toggles

        return Toggles(
            self.settings.toggle_prefix,
            self.clients.ssm,
            max_age=self.settings.toggle_max_age_seconds,
            clock=self.clock,
        )

    @cached_property
    def pipeline(self) -> Pipeline:
        from converge.pipeline import Pipeline

        return Pipeline(
            self.registry,
            self.operations,
            self.toggles,
            self.clock,
            self.ids,
            self.settings.time_margin_ms,
        )

    @cached_property
    def dispatcher(self) -> Dispatcher:
        """The one way to the work queues (the relay, the resumer, redrive, resolve and the reconciler)."""
        from converge.dispatch import Dispatcher

        return Dispatcher(self.settings, self.registry, self.clients.sqs)

    @cached_property
    def delays(self) -> DelayedDispatch:
        """How a delayed operation waits: a message delay, or a one-time schedule."""
        from converge.delays import DelayedDispatch

        return DelayedDispatch(self.settings, self.dispatcher, lambda: self.clients.get("scheduler"), self.clock)

    @cached_property
    def relay(self) -> Relay:
        from converge.relay import Relay

        return Relay(self.registry, self.operations, self.dispatcher, self.clock, self.delays)

    @cached_property
    def worker(self) -> Worker:
        if not (self.settings.queue_url and self.settings.dlq_url):
            raise ConfigurationError("a worker needs QUEUE_URL and DLQ_URL")
        from converge.worker import Worker

        return Worker(
            self.pipeline,
            lambda: self.clients.sqs,
            self.settings.queue_url,
            self.settings.dlq_url,
            self.settings.max_receive_count,
            self.clock,
            self.rng,
        )

    @cached_property
    def resumer(self) -> Resumer:
        from converge.resumer import Resumer

        return Resumer(self.registry, self.operations, self.toggles, self.dispatcher, self.settings.toggle_prefix)

    def enqueue(
        self,
        job_type: str,
        operation_id: str,
        payload: Any,
        correlation_id: str | None = None,
        submitted_by: str | None = None,
        run_at: When = None,
        expires_at: When = None,
    ) -> Admission:
        """Admit one operation; `run_at` (at most a year ahead) delays it, `expires_at` bounds when it may start."""
        from converge import admission

        return admission.enqueue(
            self.registry,
            self.operations,
            job_type,
            operation_id,
            payload,
            correlation_id,
            submitted_by,
            run_at=run_at,
            expires_at=expires_at,
            now=self.clock.now(),
        )

    def enqueue_put(
        self,
        job_type: str,
        operation_id: str,
        payload: Any,
        correlation_id: str | None = None,
        run_at: When = None,
        expires_at: When = None,
    ) -> dict[str, Any]:
        from converge import admission

        return admission.enqueue_put(
            self.registry,
            self.operations,
            job_type,
            operation_id,
            payload,
            correlation_id,
            run_at=run_at,
            expires_at=expires_at,
            now=self.clock.now(),
        )

    def cancel(self, operation_id: str, reason: str, actor: str = "operator") -> CancelResult:
        """Cancel an operation that has not started (CANCELLED, with the reason); too late once it has."""
        from converge import cancel

        return cancel.cancel(self.operations, self.delays, operation_id, reason, actor)


_SNAPSHOTTED: weakref.WeakSet[Converge] = weakref.WeakSet()
"""Every runtime built by `from_env()` (weakly: a test's runtimes come and go)."""


@register_before_snapshot
def _before_snapshot() -> None:
    for runtime in list(_SNAPSHOTTED):
        runtime.before_snapshot()


@register_after_restore
def _after_restore() -> None:
    for runtime in list(_SNAPSHOTTED):
        runtime.after_restore()
