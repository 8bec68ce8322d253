"""Bindings: the registry entry tying a versioned job type to its model, runner, queue and policy.

A binding may name its message model, its runner's factory and a continuation's payload function as
`"package.module:attribute"` instead of holding them: a catalogue declared that way imports none of its jobs'
modules, and each is imported by the first record (or request) of its job type that needs it. A worker then
loads only the jobs of its queue that it runs, the relay none (docs/lean-lambdas.md).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from converge.model.concurrency import Concurrency
from converge.model.debounce import Debounce
from converge.model.errors import ConfigurationError, RegistryError, UnknownJobType
from converge.model.limits import Limiter, Uses

if TYPE_CHECKING:
    from converge.screening.message import JobMessage

JOB_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.v[1-9][0-9]*$")
"""`<area>.<name>.v<N>`: a public API, add-only; a payload change is a new version."""
NAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
"""What names a message model, a runner's factory or a payload function: `"package.module:attribute"`."""


@cache
def load_named(name: str) -> Any:
    """The attribute `"package.module:attribute"` names, its module imported now (once per process)."""
    module_name, _, attribute = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise RegistryError(f"cannot load {name!r}: {exc}") from exc


class NamedFunction:
    """A function named as `"package.module:function"`, imported when first called."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any) -> Any:
        return load_named(self.name)(*args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedFunction) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"NamedFunction({self.name!r})"


class Queue(StrEnum):
    """The work queue a job runs on: each has its own worker function, DLQ and maximum concurrency
    (parameters of converge's application: `<Queue>MaxReceiveCount`, `<Queue>MaximumConcurrency`)."""

    CRITICAL = "critical"
    """Work someone waits for (e-mails a user asked for, money)."""
    DEFAULT = "default"
    """Ordinary work."""
    BULK = "bulk"
    """Heavy or plentiful work that must not crowd out the rest (image processing)."""


@dataclass(frozen=True)
class Queues:
    """Where each work queue is: its URL (to send to) and its ARN (a one-time schedule's target)."""

    urls: Mapping[Queue, str | None]
    arns: Mapping[Queue, str | None] = field(default_factory=dict)

    def url(self, queue: Queue) -> str:
        url = self.urls.get(queue)
        if not url:
            raise ConfigurationError(f"no URL configured for the {queue.value} queue ({queue.value.upper()}_QUEUE_URL)")
        return url

    def arn(self, queue: Queue) -> str:
        arn = self.arns.get(queue)
        if not arn:
            raise ConfigurationError(f"no ARN configured for the {queue.value} queue ({queue.value.upper()}_QUEUE_ARN)")
        return arn


class Policy(StrEnum):
    """How a job's effect and its claim are ordered (docs/how-it-works.md, the policies)."""

    EFFECT_THEN_CLAIM = "effect_then_claim"
    """Lease, effect, claim: a crash between the effect and the claim costs at worst one duplicate, never a loss
    (e-mail)."""
    CLAIM_THEN_EFFECT = "claim_then_effect"
    """The lease is the claim; the provider is called with the operation id as its idempotency key, and an
    ambiguous outcome is settled by asking it by that id (`confirm`), or becomes UNKNOWN (money)."""
    KEYED_EFFECT = "keyed_effect"
    """The effect is idempotent by its key: a re-run overwrites the same object (content-addressed objects)."""
    RECURRING = "recurring"
    """A scheduled job: each tick does a bounded amount of idempotent work (`RecurringRunner`)."""


@dataclass(frozen=True)
class Then:
    """What comes next after an operation settles: a job type, and its payload from the parent's message.

    The next operation's request is written in the same transaction as the parent's terminal write, under an
    id derived from the parent's (`converge.model.links.continuation_id`), so it exists exactly once when the
    parent settles that way, and never otherwise."""

    job_type: str
    payload: Callable[[Any], Mapping[str, Any]] | str
    """Builds the next job's payload (identifiers only, as any message) from the parent's validated message; or
    that function's name, `"package.module:function"`, imported when the first continuation is built."""

    def __post_init__(self) -> None:
        if not JOB_TYPE.match(self.job_type):
            raise RegistryError(f"continuation job type {self.job_type!r} must look like '<area>.<name>.v<N>'")
        if isinstance(self.payload, str):
            if not NAME.match(self.payload):
                raise RegistryError(
                    f"continuation {self.job_type}: payload {self.payload!r} must look like 'package.module:function'"
                )
            object.__setattr__(self, "payload", NamedFunction(self.payload))  # callable, as a function given is
        if not callable(self.payload):
            raise RegistryError(f"continuation {self.job_type}: payload must build the payload from the message")

    def payload_of(self, message: Any) -> Mapping[str, Any]:
        """The next job's payload, from the parent's validated message."""
        build = cast("Callable[[Any], Mapping[str, Any]]", self.payload)  # a name was made callable in __post_init__
        return build(message)


def toggle_key(job_type: str) -> str:
    """The kill-switch name of a job: its type without the version (`billing.invoice-email`)."""
    return job_type.rsplit(".v", 1)[0]


@dataclass(frozen=True)
class JobBinding:
    """One job type: its message model, how to build its runner, where it runs and how it converges.

    `runner` is a zero-argument factory, or its name as `"package.module:factory"`; the registry
    imports a named factory and builds each runner once per process, on first use. So ports, AWS
    clients and a runner's libraries (an image or PDF library) are loaded only by a function that
    runs the job, never by the relay or the enqueue API that merely know its binding.

    `message` is the model class, or its name as `"package.module:Model"` (see `message_class`): a catalogue
    whose bindings name both imports none of its jobs' modules, pydantic included, until a record needs one.
    """

    job_type: str
    message: type[JobMessage] | str
    runner: Callable[[], Any] | str
    queue: Queue | None
    policy: Policy
    default_enabled: bool = True
    max_attempts: int = 5
    """At most this many runs; the queue's receive count (its `*MaxReceiveCount`) caps it: a job's context gets the
    smaller of the two (docs/add-a-job.md)."""
    description: str = ""
    example_payload: dict[str, Any] = field(default_factory=dict)
    tenant_field: str | None = None
    """A payload field naming the tenant: its value becomes the SQS message group (fair queues), so one
    tenant's flood cannot starve the others on the shared queue."""
    on_success: Then | None = None
    """The job that follows when an operation SUCCEEDED (docs/steps-and-continuations.md)."""
    on_failure: Then | None = None
    """The job that follows when an operation ended FAILED or UNKNOWN (an operator's resolve as failed too)."""
    limits: tuple[Limiter | Uses | str, ...] = ()
    """The limiters a job takes a slot of before it starts: a `Limiter` (or its name, declared elsewhere) takes one
    unit, `Uses(limiter, units=n)` n; over a limit it waits SCHEDULED for its slot (docs/flow-control.md)."""
    concurrency: Concurrency | None = None
    """At most so many of the job types naming this cap run at once per key; over it a job waits SCHEDULED and tries
    again (docs/flow-control.md)."""
    debounce: Debounce | None = None
    """Requests of one key within its period of each other become one run with the newest request's payload; the
    others end NOOP, "debounced into <the run's id>" (docs/flow-control.md)."""

    def __post_init__(self) -> None:
        uses = tuple(use if isinstance(use, Uses) else Uses(use) for use in self.limits)
        object.__setattr__(self, "limits", uses)
        if len({use.name for use in uses}) != len(uses):
            raise RegistryError(f"{self.job_type}: limits names each limiter once")
        if not JOB_TYPE.match(self.job_type):
            raise RegistryError(f"job type {self.job_type!r} must look like '<area>.<name>.v<N>'")
        if isinstance(self.message, str):
            if not NAME.match(self.message):
                raise RegistryError(f"{self.job_type}: message {self.message!r} must look like 'package.module:Model'")
        else:
            self._check_message(self.message)
        if (self.policy is Policy.RECURRING) != (self.queue is None):
            raise RegistryError(f"{self.job_type}: recurring jobs have no queue; every other job needs one")
        if not 1 <= self.max_attempts <= 100:
            raise RegistryError(f"{self.job_type}: max_attempts must be between 1 and 100")
        if self.concurrency is not None and not isinstance(self.concurrency, Concurrency):
            raise RegistryError(f"{self.job_type}: concurrency is a Concurrency declaration, not {self.concurrency!r}")
        if self.debounce is not None and not isinstance(self.debounce, Debounce):
            raise RegistryError(f"{self.job_type}: debounce is a Debounce declaration, not {self.debounce!r}")
        if self.policy is Policy.RECURRING and (
            self.on_success or self.on_failure or self.limits or self.concurrency or self.debounce
        ):
            raise RegistryError(f"{self.job_type}: a recurring job has no operations to continue from or to limit")
        if isinstance(self.runner, str) and not NAME.match(self.runner):
            raise RegistryError(f"{self.job_type}: runner {self.runner!r} must look like 'package.module:factory'")
        if not isinstance(self.runner, str) and not callable(self.runner):
            raise RegistryError(f"{self.job_type}: runner must be a factory or its 'package.module:factory' name")

    def _check_message(self, model: object) -> None:
        from converge.screening.message import JobMessage  # only now: a named message loads it with its model

        if not (isinstance(model, type) and issubclass(model, JobMessage)):
            raise RegistryError(f"{self.job_type}: message must be a JobMessage subclass")
        if self.tenant_field is not None and self.tenant_field not in model.model_fields:
            raise RegistryError(f"{self.job_type}: tenant_field {self.tenant_field!r} is not a field of its message")
        if self.debounce is not None:
            for role, name in (("key", self.debounce.key), ("newest_by", self.debounce.newest_by)):
                if name is not None and name not in model.model_fields:
                    raise RegistryError(f"{self.job_type}: debounce {role} {name!r} is not a field of its message")

    def message_class(self) -> type[JobMessage]:
        """The message model, imported now (once per process) if the binding names it, and checked then."""
        if not isinstance(self.message, str):
            return self.message
        try:
            model = load_named(self.message)
        except RegistryError as exc:
            raise RegistryError(f"{self.job_type}: its message: {exc}") from exc.__cause__
        self._check_message(model)
        return model

    def runner_factory(self) -> Callable[[], Any]:
        """The factory itself, imported now if the binding names it."""
        if not isinstance(self.runner, str):
            return self.runner
        try:
            factory = load_named(self.runner)
        except RegistryError as exc:
            raise RegistryError(f"{self.job_type}: its runner: {exc}") from exc.__cause__
        if not callable(factory):
            raise RegistryError(f"{self.job_type}: runner {self.runner!r} is not callable")
        return factory

    @property
    def uses(self) -> tuple[Uses, ...]:
        """Its limits, each as `Uses` (a name given was made one when the binding was built)."""
        return cast("tuple[Uses, ...]", self.limits)

    @property
    def toggle_key(self) -> str:
        return toggle_key(self.job_type)

    @property
    def fail_closed(self) -> bool:
        return not self.default_enabled


class Registry:
    """Job bindings by type. Registering a type twice is an error, never a silent override.

    Each runtime has its own (`load_catalogue` builds it from a catalogue's BINDINGS), and builds each runner
    once, on first use, for the life of its process."""

    def __init__(self, bindings: Iterable[JobBinding] = (), limiters: Iterable[Limiter] = ()) -> None:
        self._bindings: dict[str, JobBinding] = {}
        self._runners: dict[str, Any] = {}
        self.concurrency: dict[str, Concurrency] = {}
        """The concurrency caps by name, as the bindings declare them (docs/flow-control.md)."""
        self.limiters: dict[str, Limiter] = {}
        """The limiters by name: the catalogue's `LIMITERS`, and those its bindings declare (docs/flow-control.md)."""
        bindings = list(bindings)
        declared = [use.limiter for binding in bindings for use in binding.uses if isinstance(use.limiter, Limiter)]
        for limiter in [*limiters, *declared]:
            if not isinstance(limiter, Limiter) or self.limiters.get(limiter.name, limiter) != limiter:
                raise RegistryError(f"limiters are Limiter declarations, one per name: {limiter!r}")
            self.limiters[limiter.name] = limiter
        for binding in bindings:
            self.register(binding)

    def register(self, binding: JobBinding) -> JobBinding:
        if binding.job_type in self._bindings:
            raise RegistryError(f"job type {binding.job_type!r} is already registered")
        for use in binding.uses:
            if isinstance(use.limiter, Limiter) and self.limiters.setdefault(use.name, use.limiter) != use.limiter:
                raise RegistryError(f"{binding.job_type}: another limiter is declared as {use.name!r}")
            if use.name not in self.limiters:
                raise RegistryError(f"{binding.job_type}: limiter {use.name!r} is declared nowhere (LIMITERS)")
        cap = binding.concurrency
        if cap is not None and self.concurrency.setdefault(cap.name, cap) != cap:
            raise RegistryError(f"{binding.job_type}: another concurrency cap is declared as {cap.name!r}")
        self._bindings[binding.job_type] = binding
        return binding

    def get(self, job_type: str) -> JobBinding:
        try:
            return self._bindings[job_type]
        except KeyError:
            shown = job_type if len(job_type) <= 80 else job_type[:80] + "…"
            raise UnknownJobType(f"unknown job type {shown!r}") from None

    def runner(self, job_type: str) -> Any:
        """The job's runner, built on first use and kept for the life of the process."""
        if job_type not in self._runners:
            self._runners[job_type] = self.get(job_type).runner_factory()()
        return self._runners[job_type]

    def forget_runners(self) -> None:
        """Drop built runners (and the clients they hold), e.g. when a local cloud is redeployed."""
        self._runners.clear()

    def __contains__(self, job_type: object) -> bool:
        return job_type in self._bindings

    def __iter__(self) -> Iterator[JobBinding]:
        return iter(sorted(self._bindings.values(), key=lambda binding: binding.job_type))

    def __len__(self) -> int:
        return len(self._bindings)


def load_catalogue(module: str | None) -> Registry:
    """A registry of the bindings a catalogue module declares (its `BINDINGS`); empty when none is named.

    Importing a catalogue registers nothing anywhere: it declares its jobs, and each runtime builds its own
    registry from them."""
    if not module:
        return Registry()
    bindings = getattr(importlib.import_module(module), "BINDINGS", None)
    if bindings is None:
        raise RegistryError(f"the catalogue {module!r} declares no BINDINGS (a sequence of its JobBindings)")
    return Registry(bindings, getattr(importlib.import_module(module), "LIMITERS", ()))
