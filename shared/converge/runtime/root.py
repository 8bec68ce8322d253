"""The composition root: one object that builds converge's parts for a deployment, lazily, from its settings.

Each part gets what it uses, by keyword: the pipeline the state table and the settlement, the dispatcher the
queues, an operator's actions the store, the dispatcher, the toggles, the settlement and a way to build the
redrive. The HTTP API's parts alone are given the runtime, to enqueue and admit batches through it. Each
part's module is imported when the part is first built, so a function loads only what it uses: the relay
never imports the worker's batch machinery, the worker never imports the relay or the scheduler code (a
function's cold start pays for its own parts alone).

A function's part is the one its handler calls (`converge.runtime.handlers`): relay, batch_counter, worker, dlq_redrive,
resumer, reconciler, recurring or enqueue_api, each with `handle(event, context)`. The registry (built
from the catalogue's BINDINGS) and the extensions (`converge.flow.extensions`) belong to the runtime.
A runtime built with `from_env()` takes part in Lambda SnapStart's hooks (`converge.runtime.snapstart`).
"""

from __future__ import annotations

import random
from functools import cached_property
from typing import TYPE_CHECKING, Any

from converge.flow.extensions import Extensions
from converge.flow.registry import Registry, load_catalogue
from converge.model.clock import Clock, IdSource, RandomIds, SystemClock
from converge.model.errors import ConfigurationError
from converge.model.records import Admission
from converge.model.submission import (
    BatchSubmission,
    SignalSubmission,
    Submission,
    submits,
    submits_batch,
    submits_signal,
)
from converge.runtime.clients import Clients
from converge.runtime.lean_models import LEAN_MODELS
from converge.runtime.settings import Settings
from converge.runtime.snapstart import take_part
from converge.store.operations import OperationStore

if TYPE_CHECKING:
    from converge.api.routes import HttpApp
    from converge.flow.batch_counter import BatchCounter
    from converge.flow.batches import Batches
    from converge.flow.concurrency import ConcurrencyCaps
    from converge.flow.continuations import Continuations
    from converge.flow.debounce import Debouncing
    from converge.flow.delays import DelayedDispatch
    from converge.flow.dispatch import Dispatcher
    from converge.flow.held_waiters import HeldWaiters
    from converge.flow.limits import RateLimits
    from converge.flow.pipeline import Pipeline
    from converge.flow.recurring import Recurring
    from converge.flow.relay import Relay
    from converge.flow.resumer import Resumer
    from converge.flow.settlement import Settlement
    from converge.flow.signals import Signals
    from converge.flow.toggles import Toggles
    from converge.flow.wakes import Wakes
    from converge.flow.worker import Worker
    from converge.model.batches import BatchAdmission, BatchCancel
    from converge.model.signals import SignalReceipt
    from converge.operate.actions import Operator
    from converge.operate.cancel import CancelResult
    from converge.operate.deadletters import DlqUrls
    from converge.operate.overview import Overview
    from converge.operate.reconciler import Reconciler
    from converge.operate.redrive import Redrive

REDRIVE_FUNCTION = "function:dlq-redrive"
"""Who a redrive function's reopened operation names when its request names nobody."""


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
        extensions: Extensions | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry if registry is not None else load_catalogue(settings.catalogue)
        # converge's own calls only: SSM's model cut to them (converge.runtime.lean_models)
        self.clients = clients or Clients(region=settings.region, models=LEAN_MODELS)
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.rng = rng or random.Random()
        self.extensions = extensions if extensions is not None else Extensions()
        """This runtime's extensions (`converge.flow.extensions`): what a tool adds (a fault injector), and the
        runtime's own (continuations, batches), registered when its settlement is built."""

    @classmethod
    def from_env(cls, **overrides: Any) -> Converge:
        """The runtime a handler builds: from the function's environment, taking part in SnapStart's hooks."""
        runtime = cls(Settings.from_env(), **overrides)
        take_part(runtime)
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
                    binding.message_class()
                    self.registry.runner(binding.job_type)
        if self.settings.idempotency_table:  # the enqueue API: its routes, and every job's model it may be posted
            self.enqueue_api  # noqa: B018
            for binding in self.registry:
                binding.message_class()
        self.clients.close_connections()  # a connection kept in a snapshot would be shared by every restore

    def after_restore(self) -> None:
        """Make a restored environment unique and fresh again (see `converge.runtime.snapstart`)."""
        self.rng.seed()  # from os.urandom: each restored environment draws its own jitter
        reseed = getattr(self.ids, "reseed", None)
        if callable(reseed):
            reseed()
        if "toggles" in self.__dict__:
            self.toggles.restored()
        self.clients.close_connections()

    # -- the store, the toggles and the way to the queues ----------------------------------------------------------

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
            markers_table=self.settings.markers_table,
        )

    @cached_property
    def toggles(self) -> Toggles:
        from converge.flow.toggles import Toggles

        return Toggles(
            self.settings.toggle_prefix,
            self.clients.ssm,
            max_age=self.settings.toggle_max_age_seconds,
            clock=self.clock,
        )

    @cached_property
    def dispatcher(self) -> Dispatcher:
        """The one way to the work queues (the relay, the resumer, redrive, resolve and the reconciler)."""
        from converge.flow.dispatch import Dispatcher

        return Dispatcher(self.settings.queues, self.registry, self.clients.sqs)

    @cached_property
    def delays(self) -> DelayedDispatch:
        """How a delayed operation waits: a message delay, or a one-time schedule."""
        from converge.flow.delays import DelayedDispatch

        return DelayedDispatch(
            self.settings.schedules,
            self.settings.queues,
            self.dispatcher,
            lambda: self.clients.get("scheduler"),
            self.clock,
        )

    @cached_property
    def pipeline(self) -> Pipeline:
        from converge.flow.pipeline import Pipeline

        return Pipeline(
            registry=self.registry,
            state=self.operations.state,
            toggles=self.toggles,
            settlement=self.settlement,
            markers=self.operations.markers,
            signals=self.operations.signals,
            resume_later=self._resume_later,
            clock=self.clock,
            ids=self.ids,
            time_margin_ms=self.settings.time_margin_ms,
        )

    def _resume_later(self, envelope: Any, at: float) -> object:
        """A waiting operation's message, sent again for its time (a message delay or a one-time schedule)."""
        return self.delays.send(self.dispatcher.outgoing(envelope), at)

    @cached_property
    def settlement(self) -> Settlement:
        """Every settle (a worker's, the relay's, an operator's, a cancel), with the extensions' items: the runtime's
        own extension joins here (continuations); a batch child's settle is counted from the state table's stream
        (`batch_counter`), not here."""
        from converge.flow.settlement import Settlement

        self.extensions.add(self.continuations)
        if self.debouncing is not None:  # before the others: a request that is not its burst's run takes no slot
            self.extensions.add(self.debouncing)
        if self.rate_limits is not None:
            self.extensions.add(self.rate_limits)
        if self.concurrency_caps is not None:
            self.extensions.add(self.concurrency_caps)
        return Settlement(self.extensions)

    @cached_property
    def debouncing(self) -> Debouncing | None:
        """The catalogue's debounced job types, applied before a job's lease (None when no binding debounces)."""
        if not any(binding.debounce is not None for binding in self.registry):
            return None
        from converge.flow.debounce import Debouncing
        from converge.store.debounce import DebounceTable

        return Debouncing(self.registry, DebounceTable(self.settings.markers_table, self.clients.dynamodb), self.clock)

    @cached_property
    def concurrency_caps(self) -> ConcurrencyCaps | None:
        """The catalogue's concurrency caps, applied before a job's lease (None when its bindings name none)."""
        if not self.registry.concurrency:
            return None
        from converge.flow.concurrency import ConcurrencyCaps
        from converge.store.concurrency import ConcurrencyTable

        table = ConcurrencyTable(self.settings.markers_table, self.clients.dynamodb)
        return ConcurrencyCaps(
            self.registry,
            table,
            self.clock,
            waiters=self._held_waiters,
            accepted=self._accepted,
            ended_unrun=self._ended_unrun,
        )

    def _accepted(self, operation_id: str) -> float | None:
        """When an operation was accepted, as its state record keeps it (`StateRecord.accepted_at`), or None."""
        from converge.model.timing import parse_instant

        accepted_at = self.operations.state.record(operation_id).accepted_at
        return parse_instant("accepted_at", accepted_at) if accepted_at else None

    def _ended_unrun(self, operation_id: str) -> bool:
        """Whether an operation ended before any delivery started it (cancelled, expired, rejected), as its state
        record keeps it."""
        from converge.model.states import FINAL_STATES

        record = self.operations.state.record(operation_id)
        return record.state in FINAL_STATES and not record.started

    def _held_waiters(self) -> HeldWaiters:
        """What an operator's release of a cap's key wakes its held jobs with (built when first released)."""
        from converge.flow.held_waiters import HeldWaiters

        return HeldWaiters(self.operations, self.wakes)

    @cached_property
    def rate_limits(self) -> RateLimits | None:
        """The catalogue's limiters, applied before a job's lease and in `ctx.limit` (None when it declares none)."""
        if not self.registry.limiters:
            return None
        from converge.flow.limits import RateLimits
        from converge.store.limits import LimiterTable

        return RateLimits(self.registry, LimiterTable(self.settings.markers_table, self.clients.dynamodb), self.clock)

    @cached_property
    def continuations(self) -> Continuations:
        """The next operations' requests, written with their parents' terminal writes."""
        from converge.flow.continuations import Continuations

        return Continuations(self.registry, self.operations.jobs)

    @cached_property
    def batches(self) -> Batches | None:
        """Batches: their admission, their completion and their callbacks (None without BATCHES_TABLE)."""
        if not self.settings.batches_table:
            return None
        from converge.flow.batches import Batches
        from converge.store.batches import BatchesTable

        table = BatchesTable(self.settings.batches_table, self.settings.jobs_table, self.clients.dynamodb)
        return Batches(self.registry, table, self.clock)

    def require_batches(self) -> Batches:
        if self.batches is None:
            raise ConfigurationError("batches need BATCHES_TABLE (the stack's BatchesTableName)")
        return self.batches

    # -- the functions' parts: each has handle(event, context) -----------------------------------------------------

    @cached_property
    def relay(self) -> Relay:
        from converge.flow.relay import Relay
        from converge.flow.reserved_ids import ReservedIds

        return Relay(
            registry=self.registry,
            state=self.operations.state,
            dispatcher=self.dispatcher,
            settlement=self.settlement,
            reserved=ReservedIds(self.batches.table) if self.batches is not None else None,
            delays=self.delays,
            signals=self.signals if self.operations.signals is not None else None,
            clock=self.clock,
        )

    @cached_property
    def batch_counter(self) -> BatchCounter:
        """The state table's stream, read to count each batch child once it is final (`converge.flow.batch_counter`)."""
        from converge.flow.batch_counter import BatchCounter
        from converge.flow.reserved_ids import ReservedIds

        batches = self.require_batches()
        return BatchCounter(batches, ReservedIds(batches.table), self.clock)

    @cached_property
    def worker(self) -> Worker:
        if not (self.settings.queue_url and self.settings.dlq_url):
            raise ConfigurationError("a worker needs QUEUE_URL and DLQ_URL")
        from converge.flow.worker import Worker

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
    def dlq_redrive(self) -> Redrive:
        """The redrive function's part: every queue's DLQ the settings name."""
        return self.redrive(actor=REDRIVE_FUNCTION)

    @cached_property
    def resumer(self) -> Resumer:
        from converge.flow.resumer import Resumer

        return Resumer(
            self.registry,
            self.operations,
            self.toggles,
            self.dispatcher,
            self.settings.toggle_prefix,
            self.settings.time_margin_ms,
        )

    @cached_property
    def reconciler(self) -> Reconciler:
        from converge.operate.reconciler import Reconciler
        from converge.store.streams import JobsStream

        return Reconciler(
            self.relay,
            self.operations,
            self.dispatcher,
            self.clients.sqs,
            JobsStream(self.clients.get("dynamodbstreams")),
            self.settings.relay_failure_queue_url,
            self.settings.dlq_urls.routes(self.settings.queues),
            self.clock,
            schedule_dlq_url=self.settings.schedule_dlq_url,
            delays=self.delays,
            batches=self.batches,
        )

    @cached_property
    def recurring(self) -> Recurring:
        from converge.flow.recurring import Recurring

        return Recurring(self.registry, self.toggles, self.clock, self.settings.time_margin_ms)

    @cached_property
    def enqueue_api(self) -> HttpApp:
        if not self.settings.idempotency_table:
            raise ConfigurationError("the enqueue API needs IDEMPOTENCY_TABLE")
        from converge.api.http import EnqueueApi
        from converge.api.routes import HttpApp

        api = EnqueueApi(
            self,
            self.registry,
            self.operations,
            self.clock,
            self.settings.idempotency_table,
            self.clients.dynamodb,
            self.settings.idempotency_retention_seconds,
        )
        return HttpApp(api, self._batch_api if self.settings.batches_table else None, self._signal_api)

    def _batch_api(self) -> Any:
        """POST /batches' part, built by the first batch request (a first job request loads none of it)."""
        from converge.api.batches import BatchApi

        return BatchApi(self)

    def _signal_api(self) -> Any:
        """The signal routes' part, built by the first signal request."""
        from converge.api.signals import SignalApi

        return SignalApi(self.signals, self.operations)

    # -- operators' parts ------------------------------------------------------------------------------------------

    def redrive(self, dlq_urls: DlqUrls | None = None, actor: str | None = None, **options: Any) -> Redrive:
        """The DLQ adapter: dead letters back to their queues (`dlq_urls` default to the settings'); `options`
        are Redrive's own (sleep, after_send, wait_seconds)."""
        from converge.operate.redrive import Redrive

        urls = dlq_urls if dlq_urls is not None else self.settings.dlq_urls
        return Redrive(
            self.clients.sqs,
            self.operations,
            self.toggles,
            self.registry,
            urls.routes(self.settings.queues),
            self.dispatcher,
            self.clock,
            actor=actor,
            **options,
        )

    def operator(
        self,
        actor: str,
        dlq_urls: DlqUrls | None = None,
        redrive_options: dict[str, Any] | None = None,
        dispatcher: Dispatcher | None = None,
    ) -> Operator:
        """The operator's actions in the name of `actor` ("cli:alice"); `dlq_urls` default to the settings'."""
        from converge.operate.actions import Operator

        urls = dlq_urls if dlq_urls is not None else self.settings.dlq_urls
        return Operator(
            actor,
            self.operations,
            dispatcher or self.dispatcher,
            self.delays,
            self.registry,
            self.toggles,
            urls,
            lambda named: self.redrive(urls, actor=named, **(redrive_options or {})),
            settlement=self.settlement,
        )

    def overview(self, dlq_urls: DlqUrls | None = None) -> Overview:
        """The deployment at a glance (`converge status`); `dlq_urls` default to the settings'."""
        from converge.operate.overview import Overview

        return Overview(
            self.settings.queues,
            dlq_urls if dlq_urls is not None else self.settings.dlq_urls,
            self.registry,
            self.toggles,
            self.operations.listings,
            self.clients.sqs,
            lambda: self.clients.get("cloudwatch"),
            self.clock,
            self.rate_limits,
            self.concurrency_caps,
        )

    # -- what a producer does ----------------------------------------------------------------------------------------

    @submits.method
    def enqueue(self, submission: Submission) -> Admission:
        """Admit one operation; `run_at` (at most a year ahead) delays it, `expires_at` bounds when it may start."""
        return self.admit(submission)

    def admit(self, submission: Submission) -> Admission:
        """Admit one submission, built at the edge (`enqueue`, the HTTP API): `converge.flow.admission.admit`."""
        from converge.flow import admission

        return admission.admit(self.registry, self.operations, submission, self.clock.now())

    @submits.method
    def enqueue_put(self, submission: Submission) -> dict[str, Any]:
        """The `Put` for the producer's own TransactWriteItems, validated as `enqueue` validates."""
        return self.put_for(submission)

    def put_for(self, submission: Submission) -> dict[str, Any]:
        """The `Put` of one submission (`converge.flow.admission.put_for`)."""
        from converge.flow import admission

        return admission.put_for(self.registry, self.operations, submission, self.clock.now())

    @submits_batch.method
    def enqueue_batch(self, batch: BatchSubmission) -> BatchAdmission:
        """Admit a batch: its children, and its callback once every child is final (`converge.flow.batches`)."""
        return self.admit_batch(batch)

    def admit_batch(self, batch: BatchSubmission) -> BatchAdmission:
        """Admit one batch submission, built at the edge (`enqueue_batch`, the HTTP API)."""
        return self.require_batches().admit(batch)

    def cancel(self, operation_id: str, reason: str, actor: str = "operator") -> CancelResult:
        """Cancel an operation that has not started (CANCELLED, with the reason); too late once it has."""
        from converge.operate import cancel

        return cancel.cancel(self.operations, self.delays, operation_id, reason, actor, settlement=self.settlement)

    @cached_property
    def signals(self) -> Signals:
        """Keeps the signals waiting steps are resumed by, and wakes their operations (`converge.flow.signals`)."""
        from converge.flow.signals import Signals

        return Signals(self.operations, self.wakes, self.clock)

    @cached_property
    def wakes(self) -> Wakes:
        """Sends an operation woken before its time (a signal's wait, a held job whose key was released) now."""
        from converge.flow.wakes import Wakes

        return Wakes(self.operations, self.dispatcher, self.delays)

    @submits_signal.method
    def signal(self, signal: SignalSubmission) -> SignalReceipt:
        """Send the signal `name` to an operation waiting for it (`ctx.wait_for`), or that will: kept once per
        wait, the same `signal_id` again being the same signal (docs/signals.md). A sender other than a producer
        builds its `SignalSubmission` with its own `sent_by` and calls `signals.send` with it."""
        return self.signals.send(signal)

    @submits_signal.method
    def signal_put(self, signal: SignalSubmission) -> dict[str, Any]:
        """The `Put` of a signal item for the producer's own TransactWriteItems, screened as `signal` screens it;
        the relay sends it from the jobs table's stream (docs/signals.md)."""
        return self.signal_put_for(signal)

    def signal_put_for(self, signal: SignalSubmission) -> dict[str, Any]:
        """The `Put` of one signal submission's item, built at the edge (`signal_put`)."""
        from converge.flow.signals import signal_put

        return signal_put(self.operations.jobs, signal)

    def cancel_batch(self, batch_id: str, reason: str, actor: str = "operator") -> BatchCancel:
        """Cancel a batch's children that have not started; the callback still comes, with the counts."""
        from converge.operate import cancel

        batches = self.require_batches()
        return cancel.cancel_batch(
            self.operations, self.delays, batches, batch_id, reason, actor, settlement=self.settlement
        )
