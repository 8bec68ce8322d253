"""The settlement and the extension point: every settle's items, a refused item dropped and said, what follows it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import boto3
import pytest

from converge.flow.extensions import Extension, Extensions
from converge.flow.registry import JobBinding, Policy, Queue, Registry
from converge.flow.settlement import Settlement
from converge.model.clock import SequentialIds, iso
from converge.model.envelope import Envelope
from converge.model.outcomes import Outcome
from converge.model.records import ExtraRefused, Refused, StateRecord
from converge.model.request import JobRequest
from converge.model.settling import Settling
from converge.model.states import OperationState
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.store.transact import TransactItem

from .conftest import deliver, sent, throttle
from .debounce_jobs import RERENDER, Edited, Render
from .sqs_deliveries import dispatch

SETTLING = Settling("op-1", "mail.notice.v1", OperationState.SUCCEEDED, {})


def item(what: str) -> TransactItem:
    return TransactItem("ConditionCheck", {"TableName": "t", "Key": {}}, what=what, unmet="exists already")


class Provides(Extension):
    """An extension that writes these items with every settle, and writes down each settle it is told of."""

    def __init__(self, *items: TransactItem) -> None:
        self.items = list(items)
        self.told: list[Settling] = []

    def extras_for(self, settling: Settling) -> Sequence[TransactItem]:
        return self.items

    def after_settle(self, settling: Settling) -> None:
        self.told.append(settling)


class AlsoProvides(Provides):
    """A second provider (another class, so another name)."""


class Breaks(Extension):
    """An extension whose items cannot be built, and whose look after a settle fails."""

    def extras_for(self, settling: Settling) -> Sequence[TransactItem]:
        raise ValueError("no such binding")

    def after_settle(self, settling: Settling) -> None:
        raise RuntimeError("the batch table is down")


class Store:
    """The store's write of one settle: refuses the items named in `refuse`, one at a time, as a transaction would."""

    def __init__(self, refuse: Sequence[str] = (), refused: StateRecord | None = None) -> None:
        self.refuse = list(refuse)
        self.refused = refused
        self.writes: list[tuple[str, list[str]]] = []

    def write(self, reason: str, items: Sequence[TransactItem]) -> None:
        self.writes.append((reason, [extra.what for extra in items]))
        if self.refused is not None:
            raise Refused(self.refused)
        for index, extra in enumerate(items):
            if extra.what in self.refuse:
                raise ExtraRefused(index, extra.what, None, extra.unmet)


def test_a_settle_writes_every_extensions_items_in_one_write_then_tells_them():
    # Given two extensions that write items with a settle
    first, second = Provides(item("next op-1:next")), AlsoProvides(item("count b::1"))
    store = Store()
    # When an operation settles
    recorded = Settlement(Extensions(first, second)).settle(SETTLING, "done", store.write)
    # Then one write holds both items, in the order the extensions were added, and both are told once
    assert store.writes == [("done", ["next op-1:next", "count b::1"])]
    assert recorded == "done"
    assert (first.told, second.told) == ([SETTLING], [SETTLING])


def test_an_item_refused_is_dropped_and_said_and_the_settle_written_again_without_it():
    # Given three items, the first and the third of which are refused (a continuation written by an earlier settle)
    extension = Provides(item("a"), item("b"), item("c"))
    store = Store(refuse=["a", "c"])
    # When it settles
    recorded = Settlement(Extensions(extension)).settle(SETTLING, "done", store.write)
    # Then each refusal drops that item alone, and the reason says what was not written and why
    assert store.writes == [
        ("done", ["a", "b", "c"]),
        ("done; a exists already", ["b", "c"]),
        ("done; a exists already; c exists already", ["b"]),
    ]
    assert recorded == "done; a exists already; c exists already"
    assert extension.told == [SETTLING]


def test_the_operations_own_refusal_is_the_callers_answer_and_nothing_is_told():
    # Given a settle whose own condition fails (the lease was taken over)
    extension = Provides(item("a"))
    current = StateRecord("op-1", OperationState.IN_PROGRESS, lease_owner="m-2")
    store = Store(refused=current)
    # When it settles / Then Refused carries the record it met, and no extension is told
    with pytest.raises(Refused) as refused:
        Settlement(Extensions(extension)).settle(SETTLING, "done", store.write)
    assert refused.value.current is current
    assert store.writes == [("done", ["a"])]
    assert extension.told == []


def test_items_that_cannot_be_built_are_left_out_and_said_and_a_failing_follower_changes_nothing(counted):
    # Given one extension whose items cannot be built and whose look fails, and one that works
    works = AlsoProvides(item("count b::1"))
    store = Store()
    # When it settles
    recorded = Settlement(Extensions(Breaks(), works)).settle(SETTLING, "done", store.write)
    # Then the settle is written with the items that could be built, the reason says what was not, and it is counted
    assert store.writes == [("done; not written with it: ValueError: no such binding", ["count b::1"])]
    assert recorded == "done; not written with it: ValueError: no such binding"
    assert ("continuation_not_built", "mail.notice.v1", 1) in counted
    # And the extension after the failing one is told all the same
    assert works.told == [SETTLING]


def test_a_settle_told_later_is_told_by_its_caller_alone():
    # Given a settle that leaves telling to its caller (a batch's cancel looks once, after every child)
    extension = Provides()
    settlement = Settlement(Extensions(extension))
    # When it settles without following / Then nobody is told until the caller follows
    settlement.settle(SETTLING, "cancelled", Store().write, follow=False)
    assert extension.told == []
    settlement.follow(SETTLING)
    assert extension.told == [SETTLING]


# -- the extension point ------------------------------------------------------------------------------------


class Watches(Extension):
    def before_effect(self, attempt) -> None:
        pass


def test_extensions_are_registered_by_class_name_once_each():
    # Given a set with one extension
    first = Provides()
    extensions = Extensions(first)
    # When the same one is added again / Then nothing changes
    extensions.add(first)
    assert list(extensions) == [first] and len(extensions) == 1
    # When another of the same class is added / Then it is refused, naming the class
    with pytest.raises(ValueError, match="Provides is registered already"):
        extensions.add(Provides())
    # And one is found by its class, and not by another
    assert extensions.get(Provides) is first
    assert extensions.get(AlsoProvides) is None


def test_only_an_extension_joins_and_removing_one_takes_it_off_every_hook():
    # Given an object that is no Extension / Then it is refused with what it is
    extensions = Extensions()
    with pytest.raises(TypeError, match="not object"):
        extensions.add(object())  # type: ignore[arg-type]
    # Given a provider and an effect watcher
    provider, watcher = Provides(), Watches()
    extensions.add(provider)
    extensions.add(watcher)
    # Then each hook lists only the extensions that override it
    assert (extensions.providers, extensions.followers) == ((provider,), (provider,))
    # When one of the same name that is not the registered one is removed / Then nothing changes
    extensions.remove(Provides())
    assert extensions.providers == (provider,)
    # When the registered one is removed / Then no hook lists it
    extensions.remove(provider)
    assert (extensions.providers, extensions.followers, list(extensions)) == ((), (), [watcher])


def test_an_attempt_is_wrapped_only_when_an_extension_watches_effects():
    # Given an attempt (anything with a runner), and a set whose extensions watch no effect
    class Attempt:
        runner = object()

    attempt = Attempt()
    # Then the attempt is the policy's as it is
    assert Extensions(Provides()).observed(attempt) is attempt  # type: ignore[arg-type]


class CountingGets:
    """The DynamoDB client, counting its GetItem calls."""

    def __init__(self, client) -> None:
        self._client = client
        self.gets = 0

    def get_item(self, **request):
        self.gets += 1
        return self._client.get_item(**request)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_pipeline_whose_settlement_has_no_extension_rejects_without_reading_the_record(app):
    # Given a pipeline with no extension (nothing counts an operation, so nothing asks what it was counted as)
    from converge.flow.pipeline import Delivery, Pipeline
    from converge.model.envelope import Envelope
    from converge.model.outcomes import Outcome

    counting = CountingGets(app.operations.state._client)
    app.operations.state._client = counting
    pipeline = Pipeline(
        registry=app.registry,
        state=app.operations.state,
        toggles=app.toggles,
        settlement=Settlement(Extensions()),
        clock=app.clock,
    )
    body = Envelope(operation_id="op-bad", job_type="mail.notice.v1", payload={"user_id": "not-a-uuid"}).to_body()
    # When a message with a payload its job refuses arrives / Then it is REJECTED, and its record was not read
    result = pipeline.process(body, Delivery("m-1", 1, 3, lambda: 30_000))
    assert result.outcome is Outcome.REJECTED
    assert counting.gets == 0
    assert app.operations.state.record("op-bad").state is OperationState.REJECTED


# -- every way an operation ends writes the extensions' items with it ------------------------------------------


class Notes(Extension):
    """An extension that writes a note into the markers table with every settle, in the settle's transaction, once:
    a note there already refuses it, which the settle's reason says in the extension's own words."""

    def __init__(self, table: str) -> None:
        self.table = table

    def extras_for(self, settling: Settling) -> Sequence[TransactItem]:
        note = {"pk": {"S": f"note#{settling.operation_id}"}, "sk": {"S": settling.state.value}}
        put = {"TableName": self.table, "Item": note, "ConditionExpression": "attribute_not_exists(pk)"}
        return [TransactItem("Put", put, what=f"note {settling.operation_id}", unmet="was noted before")]


def notes(tables: dict[str, str]) -> list[tuple[str, str]]:
    items = boto3.client("dynamodb").scan(TableName=tables["markers"])["Items"]
    return sorted((item["pk"]["S"], item["sk"]["S"]) for item in items if item["pk"]["S"].startswith("note#"))


@pytest.fixture
def noted(app, tables):
    extension = Notes(tables["markers"])
    app.extensions.add(extension)
    yield lambda: notes(tables)
    app.extensions.remove(extension)


def test_a_rejection_at_the_relay_writes_the_extensions_items_with_it(app, noted):
    # Given an extension that writes an item with every settle, and a request of a job type nobody registered
    app.operations.admit(JobRequest("op-stray", "no.such.v1", {"user_id": "u-1"}))
    # When the relay carries it
    dispatch(app, "op-stray")
    # Then it is REJECTED, and the extension's item was written with it
    assert app.operations.require("op-stray").state is OperationState.REJECTED
    assert noted() == [("note#op-stray", "REJECTED")]


def test_a_rejection_at_the_worker_writes_the_extensions_items_with_it(app, noted):
    # Given an operation stored with a payload its job's model refuses (written past the enqueue checks)
    app.operations.admit(JobRequest("op-raw", "mail.notice.v1", {"user_id": "not-a-uuid"}))
    # When its message is delivered / Then it is REJECTED, and the extension's item was written with it
    assert deliver(app, "op-raw").outcome is Outcome.REJECTED
    assert noted() == [("note#op-raw", "REJECTED")]


def test_an_expiry_at_the_worker_writes_the_extensions_items_with_it(app, noted, clock):
    # Given an operation whose expires_at passes before its message is delivered
    app.enqueue("mail.notice.v1", "op-late", {"user_id": str(uuid.uuid4())}, expires_at=iso(clock.now() + 5))
    clock.advance(10)
    body = Envelope(
        operation_id="op-late",
        job_type="mail.notice.v1",
        payload=app.operations.require("op-late").payload,
        expires_at=iso(clock.now() - 5),
    ).to_body()
    # When it is delivered / Then it is EXPIRED, and the extension's item was written with it
    assert deliver(app, "op-late", body=body).outcome is Outcome.EXPIRED
    assert noted() == [("note#op-late", "EXPIRED")]


def test_an_extensions_item_refused_in_the_stores_transaction_is_said_in_the_extensions_words(app, noted, tables):
    # Given an extension whose item for this operation is refused (its note is there already)
    boto3.client("dynamodb").put_item(
        TableName=tables["markers"], Item={"pk": {"S": "note#op-raw"}, "sk": {"S": "REJECTED"}}
    )
    app.operations.admit(JobRequest("op-raw", "mail.notice.v1", {"user_id": "not-a-uuid"}))
    # When the operation settles / Then it is recorded without the item, the reason saying why as the item says it
    assert deliver(app, "op-raw").outcome is Outcome.REJECTED
    stored = app.operations.require("op-raw")
    assert stored.state is OperationState.REJECTED
    assert stored.last_error is not None and stored.last_error.endswith("; note op-raw was noted before")


# -- a debounced request ended before it started (a skip) settles as every other end does ---------------------------


@pytest.fixture
def debounced(settings, clock) -> tuple[Converge, list[tuple[str, int]]]:
    """A converge whose one job is debounced per profile (a burst's start 10 s after its last request), and its runs."""
    runs: list[tuple[str, int]] = []
    binding = JobBinding(
        "profile.rerender.v1",
        Edited,
        lambda: Render(runs, []),
        Queue.DEFAULT,
        Policy.EFFECT_THEN_CLAIM,
        debounce=RERENDER,
    )
    clients = Clients(dynamodb=boto3.client("dynamodb"), sqs=boto3.client("sqs"), ssm=boto3.client("ssm"))
    app = Converge(settings, registry=Registry([binding]), clients=clients, clock=clock, ids=SequentialIds("attempt"))
    return app, runs


def run_then_edit_older(app: Converge, clock: Any) -> tuple[str, str]:
    """A profile's burst run to its end (version 5), then an older edit (version 4) enqueued late: its delivery ends
    it NOOP at once, into the run. The two operation ids, newer first."""
    outbox = sent(app.clients.sqs)
    profile = f"p-{uuid.uuid4().hex[:6]}"
    app.enqueue("profile.rerender.v1", "op-newer", {"profile_id": profile, "version": 5})
    assert deliver(app, "op-newer").outcome is Outcome.HELD
    (resent,) = [entry["MessageBody"] for _, params in outbox for entry in params.get("Entries", [])]
    clock.advance(10)
    assert deliver(app, "op-newer", body=resent, message_id="m-2").outcome is Outcome.SUCCEEDED
    app.enqueue("profile.rerender.v1", "op-older", {"profile_id": profile, "version": 4})
    return "op-newer", "op-older"


def test_a_debounced_request_ended_before_it_starts_writes_the_extensions_items_and_is_counted_as_noop(
    debounced, tables, clock, counted
):
    # Given an extension that writes an item with every settle, and an edit older than a burst's finished run
    app, runs = debounced
    app.extensions.add(Notes(tables["markers"]))
    newer, older = run_then_edit_older(app, clock)
    counted.clear()
    # When the older edit is delivered
    result = deliver(app, older)
    # Then it ends NOOP into the run, never started, with the extension's item written with it
    assert (result.outcome, result.reason) == (Outcome.NOOP, f"debounced into {newer}")
    assert runs == [(newer, 5)]
    assert ("note#op-older", "NOOP") in notes(tables)
    # And it is counted as a NOOP of its job type
    assert ("noop", "profile.rerender.v1", 1) in counted


def test_a_debounced_end_that_cannot_be_recorded_comes_back_and_stores_nothing(debounced, clock, counted, monkeypatch):
    # Given an edit older than a burst's finished run, and the state table throttling the NOOP's write
    app, runs = debounced
    newer, older = run_then_edit_older(app, clock)
    monkeypatch.setattr(app.operations.state, "skip", throttle)
    counted.clear()
    # When the older edit is delivered
    result = deliver(app, older)
    # Then it goes back to be tried again, saying what could not be recorded, counted as retried under its job type
    assert result.outcome is Outcome.RETRY
    assert result.reason.startswith("could not record NOOP: ClientError: ")
    assert counted == [("retried", "profile.rerender.v1", 1)]
    monkeypatch.undo()
    assert app.operations.require(older).state is OperationState.ACCEPTED
    assert runs == [(newer, 5)]
