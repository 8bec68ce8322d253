"""Wiring: one object that builds converge's parts for a deployment, lazily, from its settings."""

from __future__ import annotations

import random
from functools import cached_property
from typing import Any

from converge import admission
from converge.aws import Clients
from converge.clock import Clock, IdSource, RandomIds, SystemClock
from converge.config import ConfigurationError, Settings
from converge.dispatch import Dispatcher
from converge.markers import MarkerStore
from converge.operations import Admission, OperationStore
from converge.pipeline import Pipeline
from converge.registry import Registry, load_catalogue
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
        return cls(Settings.from_env(), **overrides)

    @cached_property
    def operations(self) -> OperationStore:
        return OperationStore(
            self.settings.jobs_table,
            self.settings.state_table,
            self.clients.dynamodb,
            attention_index=self.settings.attention_index,
            conflict_index=self.settings.conflict_index,
            clock=self.clock,
        )

    @cached_property
    def markers(self) -> MarkerStore:
        return MarkerStore(self.settings.markers_table, self.clients.dynamodb, self.clock)

    @cached_property
    def toggles(self) -> Toggles:
        return Toggles(
            self.settings.toggle_prefix,
            self.clients.ssm,
            max_age=self.settings.toggle_max_age_seconds,
            clock=self.clock,
        )

    @cached_property
    def pipeline(self) -> Pipeline:
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
        return Dispatcher(self.settings, self.registry, self.clients.sqs)

    @cached_property
    def relay(self) -> Relay:
        return Relay(self.registry, self.operations, self.dispatcher, self.clock)

    @cached_property
    def worker(self) -> Worker:
        if not (self.settings.queue_url and self.settings.dlq_url):
            raise ConfigurationError("a worker needs QUEUE_URL and DLQ_URL")
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
        return Resumer(self.registry, self.operations, self.toggles, self.dispatcher, self.settings.toggle_prefix)

    def enqueue(
        self,
        job_type: str,
        operation_id: str,
        payload: Any,
        correlation_id: str | None = None,
        submitted_by: str | None = None,
    ) -> Admission:
        return admission.enqueue(
            self.registry, self.operations, job_type, operation_id, payload, correlation_id, submitted_by
        )

    def enqueue_put(
        self, job_type: str, operation_id: str, payload: Any, correlation_id: str | None = None
    ) -> dict[str, Any]:
        return admission.enqueue_put(self.registry, self.operations, job_type, operation_id, payload, correlation_id)
