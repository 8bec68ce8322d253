"""LocalCloud: the deployed template plus the emulated event sources, driven deterministically.

    from localcloud import LocalCloud

    with LocalCloud.start() as cloud:                  # in-process, under moto's mock_aws()
        ddb = cloud.client("dynamodb")
        ddb.put_item(TableName=cloud.outputs["JobsTableName"], Item={...})
        stats = cloud.drain()                           # stream -> relay -> queues -> workers, until quiet
        cloud.advance(300); cloud.tick_schedules()      # emulated time (expired DynamoDB items go); due schedules
        cloud.invoke("DlqRedriveFunction", {...})       # direct invocation (or the Lambda Invoke API)
        cloud.http("POST", "/jobs/x.v1", headers=..., body=...)  # a template HTTP API, if any
        cloud.override_handler("CriticalWorkerFunction", fake)   # tests: substitute a handler
        cloud.iam.denials                               # calls a function's role was refused (see iam/)

`drain()` alternates one stream batch per mapping with emptying the queues (moto's receive slows
with queue depth, so the relay is paced by the workers), delivers Parameter Store change events, and,
when only hidden messages remain, fast-forwards the emulated clock to the next time one becomes
visible (bounded by `max_fast_forward`; one hidden at the round's poll and visible by the time the drain looks is
due at once: on the real clock it can reappear in between). The template's recurring schedules never fire inside
drain(): call tick_schedules(). One-time schedules (a delayed operation's) do: drain() fires each when due, and
fast-forwards to the next one as to a hidden message (schedule_runs.py).
Every AWS call a function makes is authorised against its role's policies from the template (iam/); a
cloud started with `check_iam=False` runs them unchecked.
Server mode (server.py) runs the same pieces from a background thread in real time.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moto import mock_aws

from converge.flow.registry import Registry, load_catalogue

from . import lambda_invoke, sqs_time, stream_source, wiring
from .clients import Clients
from .clock import EmulatedClock
from .deployment import Deployment, deploy
from .effect_log import EffectLog, TeamResources
from .functions import FunctionRuntime, FunctionSpec, Handler
from .hooks import load_hooks
from .http_api import HttpApi, HttpResponse, http_apis
from .iam import AccessCheck, function_roles
from .parameter_events import ParameterChangeDetector
from .rules import Delivery, EventBus
from .schedule_runs import Firing, OneTimeSchedules, schedule_groups, scheduler_grants
from .schedules import Scheduler
from .sqs_source import SqsEventSource, SqsMapping
from .stream_source import StreamEventSource, StreamMapping
from .time_to_live import TimeToLive

Seeder = Callable[["LocalCloud"], None]
DEFAULT_MAX_FAST_FORWARD = 12 * 3600.0  # SQS's longest visibility timeout


@dataclass
class DrainStats:
    """What one drain() did. `invocations` counts every invocation by function logical id (event
    sources, rule targets, Lambda Invoke); `failed_invocations` counts batches an event source saw fail
    (wholly or partly)."""

    rounds: int = 0
    quiescent: bool = False
    invocations: Counter[str] = field(default_factory=Counter)
    failed_invocations: Counter[str] = field(default_factory=Counter)
    stream_records_read: int = 0
    stream_records_filtered: int = 0
    stream_records_skipped: int = 0
    messages_deleted: int = 0
    messages_failed: int = 0
    messages_filtered: int = 0
    parameter_events: int = 0
    schedules_fired: int = 0
    fast_forwarded_seconds: float = 0.0


def _function_specs(parts: list[Deployment]) -> dict[str, FunctionSpec]:
    """Every function of the deployment by logical id, wherever it is declared (ids must not repeat across parts)."""
    specs: dict[str, FunctionSpec] = {}
    for part in parts:
        found = wiring.function_specs(part.resources, part.resolver, part.stack, part.code_dirs)
        clash = sorted(set(found) & set(specs))
        if clash:
            raise ValueError(
                f"functions {clash} are declared both in {part.template_path} and in another part of the "
                "deployment: the local cloud names functions by logical id, so give them different ones"
            )
        specs.update(found)
    return specs


class LocalCloud:
    def __init__(
        self,
        *,
        template_path: Path | str | None = None,
        stage: str = "dev",
        parameters: dict[str, str] | None = None,
        stack_name: str = "converge",
        endpoint_url: str | None = None,
        history_limit: int | None = None,
        catalogue: str | None = None,
        check_iam: bool = True,
    ) -> None:
        self.clients = Clients(endpoint_url)
        self._check_iam = check_iam
        self._catalogue = catalogue
        self.clock = EmulatedClock()
        self.clock.on_advance(lambda seconds: sqs_time.age_messages(seconds, self.clients.region))
        self.time_to_live: TimeToLive | None = None
        """The tables whose items expire on the emulated clock (time_to_live.py): swept on every advance."""
        self.clock.on_advance(lambda _: self.expire_items())
        self._template_path = template_path
        self._parameters = {"Stage": stage, **(parameters or {})}
        self._stack_name = stack_name
        self._history_limit = history_limit
        self._seeders: list[Seeder] = []
        self.deployment: Deployment | None = None
        self.http_api_urls: dict[str, str] = {}  # server mode: API logical id -> loopback URL

    # --- lifecycle ---
    @classmethod
    @contextlib.contextmanager
    def start(
        cls,
        template_path: Path | str | None = None,
        stage: str = "dev",
        *,
        seeders: list[Seeder] | tuple[Seeder, ...] = (),
        **kwargs: Any,
    ) -> Iterator[LocalCloud]:
        """Deploy into an in-process moto (mock_aws) and yield the cloud; everything vanishes on exit."""
        with mock_aws():
            cloud = cls(template_path=template_path, stage=stage, **kwargs)
            cloud.deploy()
            try:
                for seeder in seeders:
                    cloud.add_seeder(seeder)
                yield cloud
            finally:
                cloud.close()

    def deploy(self) -> LocalCloud:
        self.deployment = deploy(
            self.clients,
            template_path=self._template_path,
            stack_name=self._stack_name,
            parameter_overrides=self._parameters,
        )
        d = self.deployment
        parts = list(d.parts())  # the template's own stack, then each nested application's: all emulated alike
        specs = _function_specs(parts)
        # Each function imports its own module, so its runtime, registry and runners are its own (a new cloud's
        # functions never reuse the last one's).
        self.runtime = FunctionRuntime(
            specs, self.clock, self._platform_environment(), self._history_limit, catalogue=self._catalogue
        )
        if self._check_iam:
            roles = function_roles(d, list(specs))
            arns = {logical_id: spec.arn for logical_id, spec in specs.items()}
            self.runtime.access = AccessCheck(roles, arns, self.clients, self.clock, self.runtime.log)
        # What the functions write to the template's own resources, by operation (localcloud.effect_log)
        self.effect_log = EffectLog(TeamResources(d, self.clients), self.clock)
        self.runtime.effects = self.effect_log
        self.runtime.extensions.add(self.effect_log)
        lambda_invoke.register(self.runtime)
        sqs_mappings: list[SqsMapping] = []
        stream_mappings: list[StreamMapping] = []
        for part in parts:
            queues, streams = wiring.event_source_mappings(part.resources, part.resolver, specs, self.clients)
            sqs_mappings += queues
            stream_mappings += streams
        self.queue_sources = [SqsEventSource(m, self.clients, self.runtime, self.clock) for m in sqs_mappings]
        self.stream_sources = [StreamEventSource(m, self.clients, self.runtime, self.clock) for m in stream_mappings]
        for source in self.stream_sources:
            source.start()
        self.http_apis: list[HttpApi] = [
            api
            for part in parts
            for api in http_apis(part.resources, part.resolver, part.stack, specs, self.runtime, self.clients.region)
        ]
        rules = [
            rule
            for part in parts
            for rule in wiring.event_rules(part.resources, part.resolver, part.stack, specs, self.clients)
        ]
        self.bus = EventBus(rules, self.runtime.invoke, self.clients, self.clock)
        self.scheduler = Scheduler(self.bus, self.clock.now())
        grants = {}
        for part in parts:
            grants.update(scheduler_grants(part.resources, part.resolver, part.stack))
        self.one_time_schedules = OneTimeSchedules(
            self.clients,
            self.clock,
            [group for part in parts for group in schedule_groups(part.resources, part.resolver, part.stack)],
            grants,
        )
        self.parameter_changes = ParameterChangeDetector(self.clients, self.clock)
        self.parameter_changes.start()
        tables = [
            part.stack.ref(logical_id)
            for part in parts
            for logical_id, resource in part.resources.items()
            if resource.get("Type") == "AWS::DynamoDB::Table" and logical_id in part.stack
        ]
        self.time_to_live = TimeToLive.of(self.clients, tables)
        for seeder in self._seeders:
            seeder(self)
        return self

    @property
    def catalogue(self) -> str | None:
        """The job catalogue: as given, else what the deployed functions set as CONVERGE_CATALOGUE."""
        if self._catalogue:
            return self._catalogue
        if self.deployment is None:
            return None
        named = (spec.environment.get("CONVERGE_CATALOGUE") for spec in self.runtime.specs.values())
        return next((name for name in named if name), None)

    @functools.cached_property
    def registry(self) -> Registry:
        """The catalogue's jobs, as the functions load them (each function's runtime has a registry of its own)."""
        return load_catalogue(self.catalogue)

    @property
    def extensions(self) -> Any:
        """The extensions every function's runtime has (converge.flow.extensions): how faults get in."""
        return self.runtime.extensions

    @functools.cached_property
    def hooks(self) -> Any:
        """The catalogue's local hooks (localcloud.hooks), or the defaults when it has none."""
        return load_hooks(self.catalogue, self.registry)

    def close(self) -> None:
        """Stop routing Lambda Invoke to this cloud's functions."""
        if self.deployment is not None:
            lambda_invoke.unregister(self.runtime)

    def _platform_environment(self) -> dict[str, str]:
        """What the Lambda platform sets, pointed at this cloud, with dummy credentials."""
        environment = {
            "AWS_REGION": self.clients.region,
            "AWS_DEFAULT_REGION": self.clients.region,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            # No X-Ray daemon locally; Tracing: Active must not make handlers try to reach one.
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }
        if self.clients.endpoint_url:
            environment["AWS_ENDPOINT_URL"] = self.clients.endpoint_url
        return environment

    def add_seeder(self, seeder: Seeder) -> None:
        """Run `seeder(cloud)` now if deployed (and after any later deploy); e.g. demo data."""
        self._seeders.append(seeder)
        if self.deployment is not None:
            seeder(self)

    # --- discovery ---
    @property
    def outputs(self) -> dict[str, str]:
        assert self.deployment is not None, "deploy() first"
        return self.deployment.outputs

    @property
    def functions(self) -> dict[str, FunctionSpec]:
        return self.runtime.specs

    @property
    def iam(self) -> AccessCheck | None:
        """The IAM check (its `denials`), or None when the cloud was started with check_iam=False."""
        return self.runtime.access

    @property
    def invocations(self) -> Any:
        return self.runtime.invocations

    def client(self, service: str) -> Any:
        return self.clients(service)

    # --- running ---
    def invoke(self, logical_id: str, event: Any) -> Any:
        return self.runtime.invoke(logical_id, event)

    def http(self, method: str, path: str, *, api: str | None = None, **request: Any) -> HttpResponse:
        """Send one request to an HTTP API of the template (the only one, or the one with logical id `api`).

        Keyword arguments: headers, body, query (raw query string), source_ip."""
        candidates = [a for a in self.http_apis if api in (None, a.logical_id)]
        if len(candidates) != 1:
            raise LookupError(f"name one of the template's HTTP APIs: {[a.logical_id for a in self.http_apis]}")
        return candidates[0].handle(method, path, **request)

    def override_handler(self, logical_id: str, handler: Handler | None) -> None:
        self.runtime.override_handler(logical_id, handler)

    def advance(self, seconds: float) -> None:
        """Move the emulated clock (and every hidden SQS message) forward; DynamoDB's expired items are deleted."""
        self.clock.advance(seconds)

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """Time passes only as the emulated clock is advanced (`EmulatedClock.ticking`), for the clock and for the
        stamps moto puts on DynamoDB's stream records; SQS has its own (`sqs_time.frozen`)."""
        with self.clock.ticking(), stream_source.stamped_by(self.clock):
            yield

    def expire_items(self) -> int:
        """Delete the items whose time to live has passed on the emulated clock, as DynamoDB's TTL does (run on
        every advance of the clock; time_to_live.py says when and how)."""
        return self.time_to_live.expire(self.clock.now()) if self.time_to_live is not None else 0

    def tick_schedules(self, now: float | None = None) -> list[Delivery]:
        """Fire schedules due at `now` (default: the emulated now; a later `now` advances the clock)."""
        if now is not None and now > self.clock.now():
            self.advance(now - self.clock.now())
        return self.scheduler.tick(self.clock.now())

    def fire_one_time_schedules(self, duplicates: int = 0) -> list[Firing]:
        """Fire the one-time schedules due now (`duplicates`: send each message that many more times)."""
        return self.one_time_schedules.fire_due(self.clock.now(), duplicates)

    def deliver_parameter_changes(self) -> int:
        """Emit "Parameter Store Change" events for SSM changes since the last check; returns how many."""
        events = self.parameter_changes.poll()
        for event in events:
            self.bus.put_event(event)
        return len(events)

    def drain(self, max_rounds: int = 200, max_fast_forward: float = DEFAULT_MAX_FAST_FORWARD) -> DrainStats:
        """Process streams and queues until nothing is left to do (see the module docstring)."""
        stats = DrainStats()
        invocations_before = Counter(self.runtime.invocation_counts)
        try:
            self._drain(stats, max_rounds, max_fast_forward)
        finally:
            stats.invocations = self.runtime.invocation_counts - invocations_before
        return stats

    def _drain(self, stats: DrainStats, max_rounds: int, max_fast_forward: float) -> None:
        while stats.rounds < max_rounds:
            stats.rounds += 1
            polled_at = sqs_time.now_ms()
            delivered = self.deliver_parameter_changes()
            stats.parameter_events += delivered
            progressed = self._stream_round(stats)
            progressed = self._empty_queues(stats) or progressed or delivered > 0
            fired = len(self.fire_one_time_schedules())
            stats.schedules_fired += fired
            if progressed or fired:
                continue
            wait = sqs_time.seconds_until_next_visible(self.clients.region, self._source_queue_names(), polled_at)
            due = self.one_time_schedules.next_due()
            if due is not None:
                wait = max(0.0, due - self.clock.now()) if wait is None else min(wait, max(0.0, due - self.clock.now()))
            if wait is not None and wait <= max_fast_forward:
                self.advance(wait + 0.001)
                stats.fast_forwarded_seconds += wait + 0.001
                continue
            stats.quiescent = True
            return

    def _stream_round(self, stats: DrainStats) -> bool:
        progressed = False
        for source in self.stream_sources:
            result = source.poll(flush=True)
            function_id = source.mapping.function_id
            stats.stream_records_read += result.read
            stats.stream_records_filtered += result.filtered
            stats.stream_records_skipped += result.skipped
            if result.failed_invocations:
                stats.failed_invocations[function_id] += result.failed_invocations
            progressed = progressed or result.progressed
        return progressed

    def _empty_queues(self, stats: DrainStats) -> bool:
        progressed = False
        while True:
            received_any = False
            for source in self.queue_sources:
                result = source.poll(flush=True)
                if not result.received:
                    continue
                received_any = progressed = True
                if result.invoked and result.failed:
                    stats.failed_invocations[source.mapping.function_id] += 1
                stats.messages_deleted += result.deleted
                stats.messages_failed += result.failed
                stats.messages_filtered += result.filtered
            if not received_any:
                return progressed

    def _source_queue_names(self) -> list[str]:
        return [source.mapping.queue_name for source in self.queue_sources]

    def poll_once(self) -> None:
        """One real-time step for server mode: events, one batch per source if due, due schedules."""
        self.deliver_parameter_changes()
        for stream in self.stream_sources:
            stream.poll()
        for queue in self.queue_sources:
            queue.poll()
        self.scheduler.tick(self.clock.now())
        self.fire_one_time_schedules()
