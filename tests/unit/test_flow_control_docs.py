"""docs/flow-control.md: its examples run as written, over moto, with a partner that counts its calls and answers 429.

The page's first block (the limiters, the job, its binding) and its second (a runner's `ctx.limit` between two
steps) run in one namespace; the test builds a runtime from the page's LIMITERS and BINDINGS and delivers the
job's messages. The fourth (a sharded limiter) is checked for its items' pace; the fifth (a concurrency cap, its job
and binding) runs in a namespace of its own, with a ledger whose sync delivers another job while it runs, and the
sixth (the caps' modes) likewise, with a cache whose refresh does; the seventh (a debounced re-render) in one of its
own too, with a renderer that counts its renders. The bash block (`converge status`) is answered by the overview the
command prints (tests/ops/test_cli.py runs the command itself against the local cloud).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from converge.flow.pipeline import Delivery
from converge.flow.registry import JobBinding, Registry
from converge.model.clock import SequentialIds, iso
from converge.model.outcomes import Outcome
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from tests.readme.blocks import blocks

from .conftest import body_of, sent

PAGE = Path(__file__).resolve().parents[2] / "docs" / "flow-control.md"


@dataclass
class Answer:
    status: int
    retry_after: float = 0.0


class Partner:
    """The listing partner: answers 429 with a retry-after while `refusing`, and counts what it took."""

    def __init__(self) -> None:
        self.refusing: list[float] = []
        self.taken: list[str] = []

    def put(self, listing_id: str) -> Answer:
        if self.refusing:
            return Answer(429, self.refusing.pop(0))
        self.taken.append(listing_id)
        return Answer(200)


class Store:
    def __init__(self) -> None:
        self.rendered: list[str] = []

    def render(self, listing_id: str) -> None:
        self.rendered.append(listing_id)


def python_blocks() -> list[str]:
    return [block.text for block in blocks(PAGE) if block.language == "python"]


def test_the_page_has_the_examples_this_test_runs():
    assert [block.language for block in blocks(PAGE)] == ["python", "python", "bash"] + ["python"] * 4


@pytest.fixture
def page(settings, clock) -> dict[str, Any]:
    namespace: dict[str, Any] = {"PARTNER": Partner(), "STORE": Store()}
    exec(compile(python_blocks()[0], f"{PAGE.name}: the limiters", "exec", dont_inherit=True), namespace)
    namespace["app"] = runtime(settings, clock, namespace["BINDINGS"], namespace["LIMITERS"])
    return namespace


def runtime(settings: Any, clock: Any, bindings: Any, limiters: Any) -> Converge:
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    registry = Registry(bindings, limiters)
    return Converge(settings, registry=registry, clients=clients, clock=clock, ids=SequentialIds("attempt"))


def deliver(app: Converge, operation_id: str, body: str | None = None) -> Any:
    body = body or body_of(app, operation_id)
    return app.pipeline.process(body, Delivery(f"m-{operation_id}", 1, 3, lambda: 30_000))


def enqueue(app: Converge, n: int, tenant: str = "t-1") -> str:
    operation_id = f"sync-{tenant}-{n}"
    app.enqueue("listings.partner-sync.v1", operation_id, {"listing_id": f"l-{n}", "tenant_id": tenant})
    return operation_id


def test_the_tenants_pace_holds_the_sixth_sync_of_one_tenant_in_a_second(page, clock):
    # Given the page's catalogue: a sync takes two units of its tenant's ten a second (and nine more at once), and
    # one of the partner's
    app = page["app"]
    # When six syncs of one tenant arrive at once
    outcomes = [deliver(app, enqueue(app, n)).outcome for n in range(6)]
    # Then five start (ten units), and the sixth waits SCHEDULED for its tenant's slot, not failed
    assert outcomes == [Outcome.SUCCEEDED] * 5 + [Outcome.HELD]
    assert page["SYNC"].calls == [f"l-{n}" for n in range(5)]
    record = app.operations.require("sync-t-1-5").state_record
    assert (record.state, record.attempts, record.run_at) == (OperationState.SCHEDULED, 0, clock.now() + 0.1)
    assert "rate limited by tenant-calls (key t-1: 10 per 1 s, burst 9 per tenant_id)" in record.history[-1].reason
    # And another tenant's sync is not held by it
    assert deliver(app, enqueue(app, 0, "t-2")).outcome is Outcome.SUCCEEDED


def test_the_partners_pace_and_burst_hold_the_twelfth_call_of_a_minute(page, clock):
    # Given syncs of many tenants (the tenants' paces never bind), the partner's 50 a minute with a burst of 10
    app = page["app"]
    outbox = sent(app.clients.sqs)
    # When twelve arrive at once
    outcomes = [deliver(app, enqueue(app, 0, f"t-{n}")).outcome for n in range(12)]
    # Then eleven start (the first and its burst of ten), the twelfth waits 1.2 s, its message sent again for it
    assert outcomes == [Outcome.SUCCEEDED] * 11 + [Outcome.HELD]
    [entry] = [entry for _, params in outbox for entry in params.get("Entries", [])]
    body = json.loads(entry["MessageBody"])
    assert (body["held_until"], body["held_by"], entry["DelaySeconds"]) == (clock.now() + 1.2, "partner-api", 2)
    # When it comes back on its slot, Then it runs without taking another
    clock.advance(2)
    assert deliver(app, "sync-t-11-0", entry["MessageBody"]).outcome is Outcome.SUCCEEDED


def test_a_429_pauses_the_partners_key_and_the_job_waits_for_the_first_slot_after_it(page, clock):
    # Given the partner answers the first call with 429, retry after 30 s
    app = page["app"]
    page["PARTNER"].refusing.append(30.0)
    # When the sync runs
    result = deliver(app, enqueue(app, 0))
    # Then it waits SCHEDULED for the retry-after, no attempt spent, and the partner's key is paused for everyone
    assert result.outcome is Outcome.WAITING
    record = app.operations.require("sync-t-1-0").state_record
    assert (record.state, record.run_at) == (OperationState.SCHEDULED, clock.now() + 30)
    held = deliver(app, enqueue(app, 0, "t-2"))
    assert held.outcome is Outcome.HELD and f"starts at {iso(clock.now() + 30 + 1.2)}" in held.reason


def test_ctx_limit_between_two_steps_waits_for_its_slot(page, settings, clock):
    # Given the page's second block as the job's run: render, take a slot of the partner's pace, upload
    namespace = page
    exec(compile(python_blocks()[1], f"{PAGE.name}: ctx.limit", "exec", dont_inherit=True), namespace)
    steps_sync = type("StepsSync", (namespace["ListingSync"],), {"run": namespace["run"]})()
    binding = namespace["BINDINGS"][0]
    limited = JobBinding(
        "listings.partner-upload.v1", binding.message, lambda: steps_sync, binding.queue, binding.policy
    )
    app = runtime(settings, clock, [*namespace["BINDINGS"], limited], namespace["LIMITERS"])
    # And the partner's pace used up (the first and its burst of ten, just now)
    for n in range(11):
        deliver(app, enqueue(app, 0, f"t-{n}"))
    # When the job of steps runs
    app.enqueue("listings.partner-upload.v1", "upload-1", {"listing_id": "l-9", "tenant_id": "t-9"})
    assert deliver(app, "upload-1").outcome is Outcome.WAITING
    # Then it rendered, and waits for its slot between its steps
    assert (namespace["STORE"].rendered, namespace["PARTNER"].taken[-1:]) == (["l-9"], ["l-0"])
    # When its slot comes, Then it uploads, rendering nothing again
    clock.advance(1.2)
    assert deliver(app, "upload-1").outcome is Outcome.SUCCEEDED
    assert (namespace["STORE"].rendered, namespace["PARTNER"].taken[-1]) == (["l-9"], "l-9")


def test_the_status_block_lists_the_keys_jobs_wait_on(page, clock):
    # Given the partner's pace used up and a sync held
    app = page["app"]
    for n in range(12):
        deliver(app, enqueue(app, 0, f"t-{n}"))
    # When the overview `converge status` prints is taken
    snapshot = app.overview().snapshot()
    # Then it lists the partner's key with its pace, the units queued ahead and the next start
    [row] = snapshot["rate_limits"]
    assert row == {
        "limiter": "partner-api",
        "key": "*",
        "pace": "50 per 60 s, burst 10",
        "queued": 1,
        "next_start": iso(clock.now() + 2.4),
    }


class Ledger:
    """The partner's ledger: each sync is recorded; `meanwhile` runs while one is in progress (another delivery)."""

    def __init__(self) -> None:
        self.synced: list[str] = []
        self.meanwhile: list[Any] = []

    def sync(self, partner_id: str) -> None:
        self.synced.append(partner_id)
        if self.meanwhile:
            self.meanwhile.pop(0)()


def test_the_concurrency_cap_holds_a_second_sync_of_a_partner_while_one_runs(settings, clock):
    # Given the page's cap: one statement sync at a time per partner
    namespace: dict[str, Any] = {"LEDGER": Ledger()}
    exec(compile(python_blocks()[3], f"{PAGE.name}: the concurrency cap", "exec", dont_inherit=True), namespace)
    app = runtime(settings, clock, [namespace["CAPPED"]], [])
    for operation_id, partner in (("sync-1", "p-1"), ("sync-2", "p-1"), ("sync-3", "p-2")):
        app.enqueue("billing.statement-sync.v1", operation_id, {"partner_id": partner})
    seen: dict[str, Any] = {}
    ledger = namespace["LEDGER"]
    ledger.meanwhile.append(lambda: seen.update({"sync-2": deliver(app, "sync-2"), "sync-3": deliver(app, "sync-3")}))
    # When a second sync of the partner, and one of another partner, are delivered while the first runs
    assert deliver(app, "sync-1").outcome is Outcome.SUCCEEDED
    # Then the partner's second waits SCHEDULED with the page's reason, and the other partner's ran
    assert (seen["sync-2"].outcome, seen["sync-3"].outcome) == (Outcome.HELD, Outcome.SUCCEEDED)
    assert (
        seen["sync-2"].reason
        == f"concurrency statement-sync (key p-1: 1 of 1 running); tries again at {iso(clock.now() + 30)}"
    )
    record = app.operations.require("sync-2").state_record
    assert (record.state, record.attempts, record.run_at) == (OperationState.SCHEDULED, 0, clock.now() + 30)
    # When it tries again, the first ended, Then it runs
    clock.advance(30)
    assert deliver(app, "sync-2").outcome is Outcome.SUCCEEDED
    assert ledger.synced == ["p-1", "p-2", "p-1"]


class Renderer:
    def __init__(self) -> None:
        self.rendered: list[tuple[str, int]] = []

    def render(self, profile_id: str, version: int) -> None:
        self.rendered.append((profile_id, version))


def test_a_burst_of_edits_renders_once_from_the_newest_and_the_others_name_that_run(settings, clock):
    # Given the page's debounced re-render (10 s quiet, at most 60 s), and edits of one profile the relay meets out of
    # order (versions 2, 3, 1), two seconds apart, and one edit of another profile
    namespace: dict[str, Any] = {"RENDERER": Renderer()}
    exec(compile(python_blocks()[5], f"{PAGE.name}: the debounce", "exec", dont_inherit=True), namespace)
    app = runtime(settings, clock, [namespace["DEBOUNCED"]], [])
    outbox = sent(app.clients.sqs)
    for version in (2, 3, 1):
        app.enqueue("profiles.rerender.v1", f"edit-{version}", {"profile_id": "p-1", "version": version})
    app.enqueue("profiles.rerender.v1", "other-1", {"profile_id": "p-2", "version": 1})
    held = {}
    for operation_id in ("edit-2", "edit-3", "edit-1", "other-1"):
        held[operation_id] = deliver(app, operation_id)
        clock.advance(2)
    # Then each waits SCHEDULED with the page's reason: the burst's start is 10 s after its last edit
    assert held["edit-1"].reason == (
        f"debounced (key p-1: a burst since {iso(clock.now() - 8)}, newest edit-3); starts by {iso(clock.now() + 6)}"
    )
    assert app.operations.require("edit-1").state_record.state is OperationState.SCHEDULED
    # When their messages come back when sent (each for its start)
    clock.advance(10)
    bodies = {
        json.loads(entry["MessageBody"])["operation_id"]: entry["MessageBody"]
        for _, params in outbox
        for entry in params.get("Entries", [])
    }
    outcomes = {op: deliver(app, op, bodies[op]).outcome for op in ("edit-1", "edit-2", "edit-3", "other-1")}
    # Then each profile rendered once, p-1 from its newest edit; its other edits NOOP, naming the run
    assert sorted(namespace["RENDERER"].rendered) == [("p-1", 3), ("p-2", 1)]
    assert outcomes == {
        "edit-1": Outcome.NOOP,
        "edit-2": Outcome.NOOP,
        "edit-3": Outcome.SUCCEEDED,
        "other-1": Outcome.SUCCEEDED,
    }
    assert app.operations.require("edit-2").state_record.history[-1].reason == "debounced into edit-3"


class Cache:
    """The user cache: a refresh delivers another request of its user while it runs (`meanwhile`)."""

    def __init__(self) -> None:
        self.refreshed: list[str] = []
        self.meanwhile: list[Any] = []

    def refresh(self, user_id: str) -> None:
        self.refreshed.append(user_id)
        while self.meanwhile:
            self.meanwhile.pop(0)()


def test_the_skip_mode_ends_a_second_refresh_noop_naming_the_one_that_runs(settings, clock):
    # Given the page's skip-mode cap: a cache refresh while one runs for the user is not needed
    namespace: dict[str, Any] = {"CACHE": Cache()}
    exec(compile(python_blocks()[4], f"{PAGE.name}: the modes", "exec", dont_inherit=True), namespace)
    assert namespace["RENDER_LATEST"].mode == "replace"
    app = runtime(settings, clock, [namespace["SKIPPING"]], [])
    for operation_id in ("refresh-1", "refresh-2"):
        app.enqueue("users.cache-refresh.v1", operation_id, {"user_id": "u-1"})
    seen: dict[str, Any] = {}
    cache = namespace["CACHE"]
    cache.meanwhile.append(lambda: seen.update({"refresh-2": deliver(app, "refresh-2")}))
    # When a second refresh of the user is delivered while the first runs
    assert deliver(app, "refresh-1").outcome is Outcome.SUCCEEDED
    # Then it ended NOOP with the page's reason, and the cache was refreshed once
    assert seen["refresh-2"].outcome is Outcome.NOOP
    assert seen["refresh-2"].reason == (
        "skipped: concurrency cache-refresh (key u-1: 1 of 1 running) is held by refresh-1"
    )
    assert app.operations.require("refresh-2").state is OperationState.NOOP and cache.refreshed == ["u-1"]


def test_the_sharded_limiter_spreads_a_key_over_four_items_each_at_its_share():
    # Given the page's sharded limiter
    namespace: dict[str, Any] = {}
    exec(compile(python_blocks()[2], f"{PAGE.name}: a sharded key", "exec", dont_inherit=True), namespace)
    limiter = namespace["SEARCH_INDEX"]
    # Then each of its four items paces a thousand a second with a hundred more at once, as the page says
    assert (limiter.shards, limiter.interval, limiter.burst // limiter.shards) == (4, 0.001, 100)
    assert set(limiter.items_of("*")) == {limiter.item_of("*", f"op-{n}") for n in range(100)}
