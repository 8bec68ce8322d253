"""What one explored history concentrates on (swarm testing).

A history that may do everything does a little of everything: with some fifty rules and five jobs,
twenty steps rarely hold the few steps, in their order, on the same operation, that a deep break
needs. So each history first draws its *focus* (Groce et al., "Swarm testing", ISSTA 2012): the jobs
and timings its operations use, how many operations it makes (one to three), and a few rules of each
group (one or two ways in, a few faults, some cancels, operators and platform steps). Its steps are
drawn from those alone, so they go deep on a few things: a fault, a kill switch and a cancel meet the
same operation, again and again. Across histories every combination of groups comes up.

A history's focus starts from a *theme*: one area of converge (the reference jobs, steps and waits,
signals, batches, caps, rate limits, debounce), or everything. A theme names its jobs, the groups of rules
that act on them (all allowed) and the groups that would act on no job of it (none allowed), so a history
spends its steps where its operations are: a cap's rules meet capped jobs, a wait's rules meet jobs that
wait. A theme is an area, not a break: each holds every rule that can touch its jobs, and the rest of the
focus (the other groups' few rules, how many jobs of the theme, their timings) is drawn as before.

The focus is drawn from the history's own data (not printed: a printed history replays as written,
whatever its focus), and every choice shrinks towards "everything allowed", so shrinking can always
drop the focus and keep the steps. It replaces Hypothesis' own rule-level swarm (which would switch
off, at random, rules of the focus too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import precondition

F = TypeVar("F", bound=Callable[..., Any])

GROUPS: dict[str, list[str]] = {}
"""Each group's rules (by name), in the order the machine defines them (`member_of` fills it)."""
UNTIL_AN_OPERATION: set[str] = set()
"""The rules not drawn until the history has made an operation (the platform's moves: a drain, a poll, the clock):
every rule of the group "platform", and those `member_of` is told move the platform."""
ALL = 10**6
"""A count that allows every item of its kind, however many a group, the jobs or the timings come to hold (a count
written as the number of rules a group had once allowed only some of them after rules were added)."""
GROUP_SIZES: dict[str, tuple[int, ...]] = {
    # how many of a group's rules a history allows, drawn from these (the first, where shrinking goes: all of them)
    "ways in": (ALL, 1, 1, 2),
    "rewrites": (ALL, 0, 0, 0, 1, 2),
    "switches": (ALL, 1, 1, 2, 0),
    "cancels": (ALL, 0, 1, 1, 2),
    "operators": (ALL, 0, 0, 1, 2),
    "platform": (ALL, 3, 4, 4, 5, 6),
    "faults": (ALL, 0, 1, 1, 2, 2, 3),
    "steps": (ALL, 0, 2, 2, 3, 4),
    "signals": (ALL, 0, 1, 2, 3),
    "batches": (ALL, 0, 2, 3, 4, 5),
    "caps": (ALL, 0, 0, 1, 2, 3),
    "rate limits": (ALL, 0, 0, 1, 2, 3),
    "debounce": (ALL, 0, 1),
}
JOB_COUNTS = (ALL, 1, 1, 1, 2, 2)
TIMING_COUNTS = (ALL, 1, 1, 2, 2, 3)
OPERATION_COUNTS = (3, 1, 1, 1, 2, 2)


def member_of(group: str, moves_the_platform: bool = False) -> Callable[[F], F]:
    """Put a rule in a group: a history draws it only if its focus allows it (put under `@rule`), and one of the
    platform's moves (the group "platform", or `moves_the_platform`) only once the history has an operation
    (`Explorer.waiting_for_a_first_operation`)."""

    def mark(function: F) -> F:
        name = function.__name__
        GROUPS.setdefault(group, []).append(name)
        if group == "platform" or moves_the_platform:
            UNTIL_AN_OPERATION.add(name)

        def allowed(machine: Any) -> bool:
            if not machine.focus.allows(name):
                return False
            return name not in UNTIL_AN_OPERATION or not machine.waiting_for_a_first_operation()

        return precondition(allowed)(function)  # type: ignore[no-any-return]

    return mark


EVERYTHING = "everything"
"""The theme of no one area (every job; each group's rules drawn as its sizes say): where shrinking goes."""


@dataclass(frozen=True)
class Theme:
    """One area of converge a history may concentrate on."""

    jobs: tuple[str, ...]
    """The jobs its operations use (a few of them, drawn as `JOB_COUNTS` says)."""
    full: tuple[str, ...] = ()
    """The groups whose rules act on its jobs: every rule of them allowed."""
    off: tuple[str, ...] = ()
    """The groups whose rules act on no job of it: none of their rules allowed."""
    operations: tuple[int, ...] = OPERATION_COUNTS
    """How many operations its histories make, drawn from these (flow control needs two or more to meet)."""


@dataclass(frozen=True)
class Focus:
    jobs: tuple[str, ...]
    timings: tuple[str, ...]
    operations: int
    rules: frozenset[str] | None
    """The rules allowed (None: all)."""
    theme: str = EVERYTHING

    def allows(self, rule: str) -> bool:
        return self.rules is None or rule in self.rules

    def describe(self) -> str:
        rules = "all rules" if self.rules is None else ", ".join(sorted(self.rules))
        return (
            f"theme {self.theme}; jobs {', '.join(self.jobs)}; timings {', '.join(self.timings)}; "
            f"{self.operations} operations; {rules}"
        )


def some_of(items: Sequence[str], counts: Sequence[int]) -> st.SearchStrategy[tuple[str, ...]]:
    """`n` of the items (n drawn from counts, the first where shrinking goes), in their given order."""
    return st.sampled_from(counts).flatmap(
        lambda n: st.permutations(items).map(lambda order: tuple(i for i in items if i in order[:n]))
    )


def in_play(name: str, items: Sequence[str], counts: Sequence[int]) -> st.SearchStrategy[tuple[str, ...]]:
    """The history's share of `items`: drawn once per history (a shared strategy), the same for every rule."""
    return st.shared(some_of(items, counts), key=f"explorer: {name} in play")


def one_of_in_play(name: str, items: Sequence[str], counts: Sequence[int]) -> st.SearchStrategy[str]:
    """An argument drawn from the history's share of `items` (a rule's `job=`, `timing=`)."""
    return in_play(name, items, counts).flatmap(st.sampled_from)


def sizes_in(theme: Theme | None, group: str) -> tuple[int, ...]:
    """How many of a group's rules a history of this theme may allow."""
    if theme is not None and group in theme.full:
        return (ALL,)
    if theme is not None and group in theme.off:
        return (0,)
    return GROUP_SIZES[group]


def themed_jobs(jobs: Sequence[str], themes: Mapping[str, Theme]) -> st.SearchStrategy[tuple[str, tuple[str, ...]]]:
    """The history's theme and its share of the theme's jobs (every job, for `EVERYTHING`): drawn once per history
    (a shared strategy, built once: the focus and every rule's `job=` draw this same one)."""

    def jobs_of(name: str) -> st.SearchStrategy[tuple[str, tuple[str, ...]]]:
        return some_of(themes[name].jobs if name in themes else jobs, JOB_COUNTS).map(lambda some: (name, some))

    return st.shared(st.sampled_from((EVERYTHING, *themes)).flatmap(jobs_of), key="explorer: theme and jobs in play")


def draw(
    themed: st.SearchStrategy[tuple[str, tuple[str, ...]]],
    jobs: Sequence[str],
    timings: Sequence[str],
    themes: Mapping[str, Theme],
) -> Focus:
    """The focus of the history being generated (everything, outside Hypothesis: a replay by hand); `themed` is
    `themed_jobs(jobs, themes)`, the strategy the rules draw their jobs from."""
    try:
        data = current_build_context().data
    except InvalidArgument:
        return Focus(tuple(jobs), tuple(timings), 10**6, None)
    name, in_play_jobs = data.draw(themed)
    theme = themes.get(name)
    rules: set[str] = set()
    for group in GROUP_SIZES:
        rules |= set(data.draw(some_of(GROUPS[group], sizes_in(theme, group))))
    return Focus(
        in_play_jobs,
        data.draw(in_play("timings", timings, TIMING_COUNTS)),
        data.draw(st.sampled_from(theme.operations if theme else OPERATION_COUNTS)),
        frozenset(rules),
        name,
    )
