"""The extension point: one class whose hooks do nothing, which a feature subclasses for the moments it joins.

A feature joins converge's work by subclassing `Extension` and overriding the hooks it needs, never by
editing the pipeline or the settlement (Dramatiq's middleware is the model):

    extras_for(settling)                      items written in the transaction that settles an operation
                                              (the next operation's request)
    after_settle(settling)                    the settle is recorded (again: a copy found it settled)
    before_record(pipeline, body, delivery)   a delivery is about to run through the pipeline
    before_effect(attempt), after_effect(attempt)
                                              around the runner's effect (`runner.run`), inside the policy
    before_terminal_write(lease, decision, ctx)
                                              the work is decided; the conditional terminal write is next
    hold(envelope, binding, lease_until, accepted_at)
                                              a job is about to take its lease: None lets it, a `Hold` keeps it
                                              SCHEDULED until the hold's time (no attempt counted) or ends it NOOP
                                              (`Hold.ends`), a `Skip` ends it NOOP with its reason, never started
    released(envelope, binding)               the delivery `hold` was asked about ends, however it ends (a
                                              process that dies never calls it)
    abandoned(envelope, binding)              instead of `released`, for a delivery that ends as its process dies
                                              (a BaseException): nothing is given back, what was noted for it is
                                              forgotten (a delivery run inside another, in one process, as the local
                                              cloud runs a takeover, leaves the outer one's notes as they were)

A runtime's `Extensions` holds its extensions, one of each class, registered by the class's name:
continuations (`converge.flow.continuations`) is one, and a tool adds its own (the local cloud's fault
injector); batches count their children from the state table's stream instead (`converge.flow.batch_counter`).
`converge.flow.settlement` asks them for the settle's items and tells them after it; the pipeline calls them at
its moments. A hook may raise to stand for a
failure at that moment (a fault injector's crash), except `extras_for` and `after_settle`, whose failure
the settlement records and carries on past. A hook that no extension overrides costs nothing.

Flow control joins here: debounce (`converge.flow.debounce.Debouncing`), rate limits
(`converge.flow.limits.RateLimits`) and concurrency caps (`converge.flow.concurrency.ConcurrencyCaps`) hold a job
back before its lease (`hold`: it waits SCHEDULED with its reason, as a wait between steps does); a debounced request
that is not its burst's run ends NOOP (`Skip`); a cap's slot, held until the lease would end, is given back when the
delivery ends (`released`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from converge.observability import logger

if TYPE_CHECKING:
    from converge.flow.policies import Attempt, Decision
    from converge.flow.registry import JobBinding
    from converge.flow.runner import Delivery, JobContext
    from converge.model.envelope import Envelope
    from converge.model.records import Lease
    from converge.model.settling import Settling
    from converge.store.transact import TransactItem


class PipelineView(Protocol):
    """What an extension is shown of the pipeline a record arrives at (`converge.flow.pipeline.Pipeline`)."""

    time_margin_ms: int


@dataclass(frozen=True)
class Hold:
    """A job kept from starting until `until` (epoch seconds), and why (shown on its receipt and in its listing)."""

    until: float
    reason: str
    slot_of: str | None = None
    """The limiter whose slot `until` is: the job's message comes back holding it (`Envelope.held_by`)."""
    alone: bool = False
    """The extensions after this one are not asked (a debounced request that is not its burst's run yet takes no
    rate limit's or cap's slot)."""
    ends: bool = False
    """The job is not to wait but to end NOOP with the reason, under a lease (a concurrency cap's skip or replace
    mode): a retry of started work ends so too, its key being taken."""


@dataclass(frozen=True)
class Skip:
    """A job that ends NOOP with `reason`, never started (a debounced request whose burst runs another's payload:
    the reason names it). The other extensions are asked all the same: `otherwise` is their hold, for a job that
    started before (a retry), which carries on instead of ending."""

    reason: str
    otherwise: Hold | None = None


class Extension:
    """A feature that joins converge's work at some of these moments; each hook does nothing until overridden."""

    def extras_for(self, settling: Settling) -> Sequence[TransactItem]:
        """Items to write in the same transaction as this settle (all or none with it)."""
        return ()

    def after_settle(self, settling: Settling) -> None:
        """The settle is recorded (or a copy of the delivery found the operation settled already)."""

    def before_record(self, pipeline: PipelineView, body: str, delivery: Delivery) -> None:
        """A delivery is about to run through the pipeline."""

    def before_effect(self, attempt: Attempt) -> None:
        """The runner's effect is about to run."""

    def after_effect(self, attempt: Attempt) -> None:
        """The runner's effect returned."""

    def before_terminal_write(self, lease: Lease, decision: Decision, ctx: JobContext) -> None:
        """The work is decided; the conditional terminal write is next."""

    def hold(
        self, envelope: Envelope, binding: JobBinding, lease_until: float, accepted_at: float | None = None
    ) -> Hold | Skip | None:
        """A job is about to take its lease (one ending at `lease_until`; its request accepted at `accepted_at`,
        when known): None lets it start, a Hold keeps it SCHEDULED until then (or ends it: `Hold.ends`), a Skip ends
        it NOOP."""
        return None

    def released(self, envelope: Envelope, binding: JobBinding) -> None:
        """The delivery `hold` was asked about has ended (run and recorded, held, refused its lease, or failed): give
        back what `hold` took for it. Called once for each call of `hold` (one that raised too), the innermost
        delivery first; never for a delivery whose `hold` was not asked (an earlier extension's `alone` hold
        decided it)."""

    def abandoned(self, envelope: Envelope, binding: JobBinding) -> None:
        """The delivery `hold` was asked about dies with its process: forget what was noted for it, giving nothing
        back (what it took lapses on its own, as a dead process's would). Called instead of `released`."""


E = TypeVar("E", bound=Extension)


def _stricter(held: Hold, than: Hold) -> bool:
    """Whether `held` applies over `than`: one that ends the job first, then the later time."""
    return (held.ends, held.until) > (than.ends, than.until)


class Extensions:
    """A runtime's extensions, one of each class, called in the order they were added; each hook's callers are
    worked out when the set changes, so a hook nobody overrides costs one empty loop."""

    def __init__(self, *extensions: Extension) -> None:
        self._by_name: dict[str, Extension] = {}
        self._asked: list[list[Extension]] = []
        """For each delivery between `hold` and `released`, innermost last, the extensions its `hold` asked."""
        self._index()
        for extension in extensions:
            self.add(extension)

    def add(self, extension: Extension) -> None:
        """Register an extension under its class's name; adding the same one again changes nothing."""
        if not isinstance(extension, Extension):
            raise TypeError(f"an extension subclasses converge.Extension, not {type(extension).__name__}")
        name = type(extension).__name__
        held = self._by_name.get(name)
        if held is extension:
            return
        if held is not None:
            raise ValueError(f"an extension named {name} is registered already; remove it first")
        self._by_name[name] = extension
        self._index()

    def remove(self, extension: Extension) -> None:
        if self._by_name.get(type(extension).__name__) is extension:
            del self._by_name[type(extension).__name__]
            self._index()

    def get(self, kind: type[E]) -> E | None:
        """The registered extension of this class (by its name), or None."""
        held = self._by_name.get(kind.__name__)
        return held if isinstance(held, kind) else None

    def __iter__(self) -> Iterator[Extension]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def _index(self) -> None:
        members = list(self._by_name.values())
        base = Extension
        self.providers = tuple(e for e in members if type(e).extras_for is not base.extras_for)
        """The extensions that write items with a settle."""
        self.followers = tuple(e for e in members if type(e).after_settle is not base.after_settle)
        """The extensions told after a settle."""
        self._arrivals = tuple(e for e in members if type(e).before_record is not base.before_record)
        self._effects = tuple(
            e
            for e in members
            if type(e).before_effect is not base.before_effect or type(e).after_effect is not base.after_effect
        )
        self._terminal = tuple(e for e in members if type(e).before_terminal_write is not base.before_terminal_write)
        self._holders = tuple(e for e in members if type(e).hold is not base.hold)
        self._releasers = tuple(e for e in members if type(e).released is not base.released)

    # -- the pipeline's moments ----------------------------------------------------------------------------------

    def before_record(self, pipeline: PipelineView, body: str, delivery: Delivery) -> None:
        for extension in self._arrivals:
            extension.before_record(pipeline, body, delivery)

    def before_terminal_write(self, lease: Lease, decision: Decision, ctx: JobContext) -> None:
        for extension in self._terminal:
            extension.before_terminal_write(lease, decision, ctx)

    def hold(
        self, envelope: Envelope, binding: JobBinding, lease_until: float, accepted_at: float | None = None
    ) -> Hold | Skip | None:
        """The latest of the extensions' holds on a job about to start (the stricter applies; one that `ends` the job
        before any), or None; a Hold that is `alone` ends the asking; a `Skip` (the first) wins, the others' latest
        hold as its `otherwise`. Each extension asked is told `released` once, when the delivery ends. When one
        raises, those asked so far (itself included) are told `released` before the error goes on: the delivery ends
        there."""
        latest: Hold | None = None
        skip: Skip | None = None
        asked: list[Extension] = []
        try:
            for extension in self._holders:
                asked.append(extension)
                held = extension.hold(envelope, binding, lease_until, accepted_at=accepted_at)
                if isinstance(held, Skip):
                    skip = skip or held
                elif held is not None and held.alone and skip is None:
                    self._asked.append(asked)
                    return held
                elif held is not None and (latest is None or _stricter(held, than=latest)):
                    latest = held
        except Exception:
            self._released([e for e in self._releasers if e in asked], envelope, binding)
            raise
        except BaseException:
            self._abandoned([e for e in self._releasers if e in asked], envelope, binding)
            raise
        self._asked.append(asked)
        return dataclasses.replace(skip, otherwise=latest) if skip is not None else latest

    def released(self, envelope: Envelope, binding: JobBinding) -> None:
        """The delivery asked about in `hold` has ended (the innermost one still open); a failure to give something
        back is logged (what a hold takes lapses on its own)."""
        asked = self._asked.pop() if self._asked else list(self._releasers)
        self._released([e for e in self._releasers if e in asked], envelope, binding)

    def abandoned(self, envelope: Envelope, binding: JobBinding) -> None:
        """The delivery asked about in `hold` dies with its process (the innermost one still open): each extension
        asked forgets it, giving nothing back."""
        asked = self._asked.pop() if self._asked else list(self._releasers)
        self._abandoned([e for e in self._releasers if e in asked], envelope, binding)

    @staticmethod
    def _abandoned(extensions: Sequence[Extension], envelope: Envelope, binding: JobBinding) -> None:
        for extension in extensions:
            extension.abandoned(envelope, binding)

    @staticmethod
    def _released(extensions: Sequence[Extension], envelope: Envelope, binding: JobBinding) -> None:
        for extension in extensions:
            try:
                extension.released(envelope, binding)
            except Exception:
                logger.exception("could not give back what a hold took; it lapses on its own")

    def observed(self, attempt: Attempt) -> Attempt:
        """The attempt with its runner's effect (`run`) between `before_effect` and `after_effect` (unchanged when no
        extension watches effects)."""
        if not self._effects:
            return attempt
        return dataclasses.replace(attempt, runner=_ObservedRunner(attempt, self._effects))


class _ObservedRunner:
    """The job's runner as a policy sees it: every method its own, `run` between the extensions' calls."""

    def __init__(self, attempt: Attempt, watchers: tuple[Extension, ...]) -> None:
        self._attempt = attempt
        self._inner = attempt.runner
        self._watchers = watchers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def run(self, message: Any, loaded: Any, ctx: Any) -> None:
        for extension in self._watchers:
            extension.before_effect(self._attempt)
        self._inner.run(message, loaded, ctx)
        for extension in self._watchers:
            extension.after_effect(self._attempt)
