"""A debounced job the unit tests share: a profile's render after its edits, debounced per profile by version (a
burst's start 10 s after its last request, 60 s at most after its first), whose runs are noted and whose failures are
given by the test."""

from __future__ import annotations

from converge import Identifier, JobMessage
from converge.flow.runner import JobContext
from converge.model.debounce import Debounce

RERENDER = Debounce(key="profile_id", newest_by="version", period=10, max_wait=60)


class Edited(JobMessage):
    profile_id: Identifier
    version: int = 0


class Render:
    def __init__(self, runs: list[tuple[str, int]], fail: list[Exception]) -> None:
        self.runs, self.fail = runs, fail

    def load(self, message: Edited, ctx: JobContext) -> str:
        return "ready"  # (a load of None is "nothing to do")

    def run(self, message: Edited, loaded: str, ctx: JobContext) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.runs.append((ctx.operation_id, message.version))
