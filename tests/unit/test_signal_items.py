"""A signal written as an item in the jobs table (`converge.signal_put`, in the producer's own transaction): the relay
sends it from the stream as every signal is sent, and records its answer on the record under the item's key.

Over moto: the producer's transaction, the relay fed the stream records of what it wrote, the receipts read back.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from rich.console import Console

from converge.flow.relay import Skip
from converge.model.clock import iso
from converge.model.errors import InvalidMessage
from converge.model.outcomes import Outcome
from converge.model.signals import SignalAnswer, signal_item_id
from converge.model.states import OperationState
from converge.observability import metrics
from converge.operate.listing import Filters, Listing
from converge.runtime import Converge
from converge.store.signal_items import signal_from_image
from converge_cli.support.present import show_operation

from .conftest import deliver
from .test_signals import APPROVED, approving, enqueue, queued

REJECTED_BY = {"decision": "rejected", "operator_id": "op-9"}


@pytest.fixture
def effects() -> list[str]:
    return []


@pytest.fixture
def app(settings, clock, effects) -> Converge:
    """The job of tests/unit/test_signals.py: asks, waits for its approval, then credits or not."""
    return approving(settings, clock, effects)


def producer_table(name: str) -> Any:
    """A producer's own table (key `pk`), made in moto: the other write of its transaction goes there."""
    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return dynamodb


def record(event: str, new: dict[str, Any], old: dict[str, Any] | None = None, sequence: int = 1) -> dict[str, Any]:
    """A stream record of the jobs table, as the relay's event carries it."""
    images: dict[str, Any] = {"Keys": {"operation_id": new["operation_id"]}, "NewImage": new}
    if old is not None:
        images["OldImage"] = old
    return {"eventName": event, "dynamodb": {**images, "SequenceNumber": str(sequence)}}


def stored(app: Converge, key: str) -> dict[str, Any]:
    item = boto3.client("dynamodb").get_item(TableName=app.settings.jobs_table, Key={"operation_id": {"S": key}})
    return dict(item["Item"])


def relay(app: Converge, *records: dict[str, Any]) -> None:
    assert app.relay.handle({"Records": list(records)}) == {"batchItemFailures": []}


def answer_of(app: Converge, key: str) -> dict[str, Any]:
    """What `converge ops show <item key>` shows of a signal item's answer."""
    view = app.operations.require(key).to_json()
    return {"state": view["state"], "job_type": view["job_type"], "note": view["history"][-1]["reason"]}


def rejected(app: Converge) -> set[str]:
    return {str(row["operation_id"]) for row in app.operations.listings.iter_attention("REJECTED")}


def test_a_signal_written_in_the_producers_transaction_resumes_the_wait_once(app, effects):
    # Given an operation waiting for its approval, and the producer's own table
    operation_id = enqueue(app)
    assert deliver(app, operation_id).outcome is Outcome.WAITING
    dynamodb = producer_table("approvals")
    before = queued(app)
    # When the producer records the approval and signals it in one transaction
    put = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")
    own = {"Put": {"TableName": "approvals", "Item": {"pk": {"S": f"approval#{operation_id}"}}}}
    dynamodb.transact_write_items(TransactItems=[own, put])
    key = signal_item_id(operation_id, "approval", "ap-1")
    assert put["Put"]["Item"]["operation_id"] == {"S": key}
    # And the relay reads the item from the stream
    relay(app, record("INSERT", stored(app, key)))
    # Then the signal is kept, and the operation woken now
    assert queued(app) == before + 1
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]
    [kept] = app.operations.signals.all(operation_id)
    assert (kept.signal_id, kept.sent_by, dict(kept.payload)) == ("ap-1", "jobs-table", APPROVED)
    # And the item's answer is readable by an operator, under the item's key
    answer = answer_of(app, key)
    assert (answer["state"], answer["job_type"]) == ("SUCCEEDED", "converge.signal")
    assert answer["note"].startswith("accepted: kept; the operation resumes now")


def test_a_rewrite_of_the_item_with_another_payload_is_a_duplicate_and_the_same_one_is_nothing(app, effects):
    # Given a signal item sent and answered
    operation_id = enqueue(app)
    deliver(app, operation_id)
    key = signal_item_id(operation_id, "approval", "ap-1")
    first = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    relay(app, record("INSERT", first))
    # When the producer writes it again, once as it was and once with another payload
    other = app.signal_put(operation_id, "approval", REJECTED_BY, signal_id="ap-1")["Put"]["Item"]
    relay(app, record("MODIFY", first, first, 2), record("MODIFY", other, first, 3))
    # Then the first payload stands: one signal, nothing refused
    [kept] = app.operations.signals.all(operation_id)
    assert (dict(kept.payload), kept.refused) == (APPROVED, ())
    # And the item's record keeps its first answer, the rewrite's answer beside it (the same content: nothing)
    view = app.operations.require(key).to_json()
    assert view["state"] == "SUCCEEDED"
    assert [entry["error"].split(":")[:2] for entry in view["errors"]] == [["rewritten", " duplicate"]]
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    assert effects == ["ask", "credit by op-7"]


def test_every_answer_a_signal_item_cannot_be_kept_for_is_listed_rejected_with_why(app, effects):
    # Given an operation that waits and got its approval, one that ended, and none under a third id
    waiting = enqueue(app)
    deliver(app, waiting)
    assert app.signal(waiting, "approval", APPROVED, signal_id="ap-1").answer is SignalAnswer.ACCEPTED
    ended = enqueue(app)
    app.cancel(ended, "not needed")
    items = {
        "refused": app.signal_put(waiting, "approval", REJECTED_BY, signal_id="ap-2"),
        "ended": app.signal_put(ended, "approval", APPROVED, signal_id="ap-3"),
        "not_found": app.signal_put("op-missing", "approval", APPROVED, signal_id="ap-4"),
    }
    # When the relay reads them in one batch
    relay(app, *(record("INSERT", put["Put"]["Item"], sequence=n) for n, put in enumerate(items.values(), 1)))
    # Then each is answered, REJECTED under its own key (job type converge.signal), saying which answer and why
    for answer, put in items.items():
        key = put["Put"]["Item"]["operation_id"]["S"]
        shown = answer_of(app, key)
        assert (shown["state"], shown["job_type"]) == ("REJECTED", "converge.signal"), answer
        assert shown["note"].startswith(f"{answer}: "), shown
        assert key in rejected(app)
    # And the refused one is listed on the wait too
    [kept] = app.operations.signals.all(waiting)
    assert [refused.signal_id for refused in kept.refused] == ["ap-2"]


@pytest.mark.parametrize(
    ("key", "attributes", "says"),
    [
        ("op-1::signal:approval", {}, "a signal item's key is"),
        ("op-1::signal:approval:", {}, "a signal item's key is"),
        ("op-1::signal::ap-1", {}, "a signal item's key is"),
        (
            "o" * 90 + "::signal:approval",
            {},
            f"a signal item's key is '<operation id>::signal:<name>:<signal id>', not '{'o' * 80}'",
        ),
        ("op-1::signal:approval:ap-1::signal:x:y", {}, "holds no '::' ('ap-1::signal:x:y')"),
        ("op-1::signal:approval:" + "s" * 70 + "::1", {}, f"holds no '::' ('{'s' * 60}')"),
        ("op-1::signal:Approval:ap-1", {}, "signal name"),
        ("op-1::signal:approval:ap::1", {}, "holds no '::'"),
        ("op-1::signal:approval:ap-1", {"job_type": {"S": "ledger.approve-credit.v1"}}, "not job_type"),
        ("op-1::signal:approval:ap-1", {"payload": {"S": "approved"}}, "payload must be a map"),
        ("op-1::signal:approval:ap-1", {"payload": {"M": {"email": {"S": "jane@example.com"}}}}, "ids only"),
        ("op-1::signal:approval:ap-1", {"payload": {"M": {f"f{n}": {"N": "1"} for n in range(99)}}}, "fields"),
    ],
)
def test_a_signal_item_converge_cannot_read_is_answered_invalid_and_listed(app, key, attributes, says):
    # Given an item under a signal item's key that converge cannot read as a signal, written among a request
    operation_id = enqueue(app)
    request = stored(app, operation_id)
    before = queued(app)
    # When the relay reads both in one batch
    relay(app, record("INSERT", {"operation_id": {"S": key}, **attributes}), record("INSERT", request, sequence=2))
    # Then the item is answered invalid, REJECTED and listed with why; the request after it is dispatched
    shown = answer_of(app, key)
    assert (shown["state"], shown["note"][:8]) == ("REJECTED", "invalid:")
    assert says in shown["note"], shown["note"]
    assert key in rejected(app)
    assert queued(app) == before + 1


def test_a_replayed_signal_item_is_delivered_once_and_its_first_answer_stands(app, effects):
    # Given a signal item the relay sent, and the operation resumed by it
    operation_id = enqueue(app)
    deliver(app, operation_id)
    item = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    key = item["operation_id"]["S"]
    relay(app, record("INSERT", item))
    assert deliver(app, operation_id, message_id="m-2").outcome is Outcome.SUCCEEDED
    # When its stream batch comes again (the stream's retry, or the reconciler's replay of a batch given up)
    assert app.relay.restore_first_content(record("INSERT", item)) is None
    relay(app, record("INSERT", item))
    # Then nothing is delivered again, and the item's record still says what it was first answered
    assert effects == ["ask", "credit by op-7"]
    shown = answer_of(app, key)
    assert (shown["state"], shown["note"][:9]) == ("SUCCEEDED", "accepted:")
    assert app.operations.require(key).to_json()["errors"] == []


@pytest.mark.parametrize(
    ("operation_id", "payload", "signal_id", "says"),
    [
        ("op-1", {"email": "jane@example.com"}, "ap-1", "ids only"),
        ("op-1", APPROVED, "ap::1", "holds no '::'"),
        ("op-1::signal:approval:ap-1", APPROVED, "ap-1", "a signal item's key"),
        ("op 1", APPROVED, "ap-1", "operation_id"),
    ],
)
def test_a_signal_put_converge_cannot_keep_is_refused_before_anything_is_built(
    app, operation_id, payload, signal_id, says
):
    with pytest.raises(InvalidMessage, match=says):
        app.signal_put(operation_id, "approval", payload, signal_id=signal_id)


def test_a_signal_sent_to_a_signal_items_key_finds_no_operation(app):
    # Given a signal item answered
    operation_id = enqueue(app)
    item = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    relay(app, record("INSERT", item))
    # When a signal is sent to the item's key as if it were an operation
    receipt = app.signal(item["operation_id"]["S"], "approval", APPROVED, signal_id="ap-2")
    # Then there is no operation under it
    assert receipt.answer is SignalAnswer.NOT_FOUND
    assert app.operations.require(item["operation_id"]["S"]).state is OperationState.SUCCEEDED


def test_a_signal_items_record_says_when_it_was_written_and_a_refused_ones_says_why_as_its_error(app):
    # Given a signal item for an operation that never existed, written at a time the stream record carries
    item = app.signal_put("op-missing", "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    key = item["operation_id"]["S"]
    written = record("INSERT", item)
    written["dynamodb"]["ApproximateCreationDateTime"] = 1_900_000_000.0
    # When the relay reads it
    relay(app, written)
    # Then its record's history starts when it was written, as a signal item, and ends REJECTED with why
    view = app.operations.require(key).to_json()
    first, last = view["history"]
    assert (first["state"], first["at"], first["reason"]) == ("ACCEPTED", iso(1_900_000_000.0), "a signal item")
    assert (last["state"], last["reason"][:11]) == ("REJECTED", "not_found: ")
    # And the reason is its error too, stored as any refused operation's is: the last error, and the errors' last
    assert view["last_error"] == last["reason"]
    stored_item = boto3.client("dynamodb").get_item(
        TableName=app.settings.state_table, Key={"operation_id": {"S": key}}
    )["Item"]
    [error] = stored_item["errors"]["L"]
    assert (error["M"]["error"], error["M"]["attempt"]) == ({"S": last["reason"]}, {"N": "0"})  # no attempt made


def test_a_refused_items_rewrite_is_shown_after_its_first_answer_each_once(app, clock):
    # Given an operation whose wait has its approval, and a signal item with another id for it, refused
    operation_id = enqueue(app)
    deliver(app, operation_id)
    assert app.signal(operation_id, "approval", APPROVED, signal_id="ap-1").answer is SignalAnswer.ACCEPTED
    first = app.signal_put(operation_id, "approval", REJECTED_BY, signal_id="ap-2")["Put"]["Item"]
    key = first["operation_id"]["S"]
    relay(app, record("INSERT", first))
    # When the producer rewrites the item with another payload, later
    clock.advance(30)
    other = app.signal_put(operation_id, "approval", {"decision": "rejected", "operator_id": "op-2"}, signal_id="ap-2")
    relay(app, record("MODIFY", other["Put"]["Item"], first, 2))
    # Then `ops show` has the first answer as the current error, and the rewrite's after it, neither twice
    shown = app.operations.require(key)
    view = shown.to_json()
    assert (view["state"], view["last_error"]) == ("REJECTED", view["history"][-1]["reason"])
    assert view["last_error"].startswith("refused: ")
    assert [entry["error"] for entry in view["errors"]] == [f"rewritten: {view['last_error']}"]
    console = Console(record=True, width=400)
    show_operation(console, shown)
    lines = console.export_text().splitlines()
    errors = [(n, line.split(None, 1)[1]) for n, line in enumerate(lines) if line.startswith("error ")]
    rewrites = [n for n, line in enumerate(lines) if f"rewritten: {view['last_error']}" in line]
    assert [error for _, error in errors] == [view["last_error"]] and len(rewrites) == 1
    assert errors[0][0] < rewrites[0]


def test_the_same_signal_item_written_again_is_skipped_and_counted(app):
    # Given a signal item the relay answered
    operation_id = enqueue(app)
    deliver(app, operation_id)
    item = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    relay(app, record("INSERT", item))
    metrics.clear_metrics()
    # When the producer writes it again as it was / Then the relay skips it, saying so, and counts it
    assert app.relay.decide(record("MODIFY", item, item, 2)) == Skip("2", "the same signal item written again: a no-op")
    assert metrics.metric_set["signal_item_rewrite_same"]["Value"] == [1.0]
    metrics.clear_metrics()


def test_an_unreadable_rewrite_of_an_answered_signal_item_is_answered_again_beside_the_first(app):
    # Given a signal item the relay answered
    operation_id = enqueue(app)
    deliver(app, operation_id)
    item = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    key = item["operation_id"]["S"]
    relay(app, record("INSERT", item))
    # When the producer writes it again with a payload converge cannot read
    unreadable = {**item, "payload": {"S": "approved"}}
    relay(app, record("MODIFY", unreadable, item, 2))
    # Then the first answer stands, and the rewrite's answer (invalid, with why) is kept beside it
    view = app.operations.require(key).to_json()
    assert view["state"] == "SUCCEEDED"
    [again] = view["errors"]
    assert again["error"].startswith("rewritten: invalid: ") and "payload must be a map" in again["error"]


def test_a_relay_without_the_markers_table_refuses_a_signal_item_naming_what_it_needs(app, settings, clock):
    # Given a relay configured without the markers table (where signals are kept)
    bare = Converge(
        settings.model_copy(update={"markers_table": None}),
        registry=app.registry,
        clients=app.clients,
        clock=clock,
    )
    item = app.signal_put("op-1", "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    # When it reads a signal item / Then it leaves the record for the stream to retry, naming what signals need
    assert bare.relay.handle({"Records": [record("INSERT", item)]}) == {"batchItemFailures": [{"itemIdentifier": "1"}]}
    assert bare.relay.last_failure == (
        "ConfigurationError: the relay cannot send a signal item: signals need the markers table"
    )


def test_each_rewrite_with_another_payload_is_answered_on_the_record_the_first_five_kept(app, clock):
    # Given a signal item sent and answered
    operation_id = enqueue(app)
    deliver(app, operation_id)
    key = signal_item_id(operation_id, "approval", "ap-1")
    first = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")["Put"]["Item"]
    kept_at = iso(clock.now())
    relay(app, record("INSERT", first))
    # When the producer rewrites it six times, each time with another payload
    clock.advance(30)
    rewrites = [
        app.signal_put(operation_id, "approval", {"decision": "rejected", "operator_id": f"op-{n}"}, signal_id="ap-1")
        for n in range(6)
    ]
    relay(app, *(record("MODIFY", put["Put"]["Item"], first, n) for n, put in enumerate(rewrites, 2)))
    # Then each rewrite is the same signal again, its answer appended to the record's errors (no attempt of its
    # own), the first five kept; the record's first answer stands
    view = app.operations.require(key).to_json()
    assert view["state"] == "SUCCEEDED"
    assert (
        view["errors"]
        == [
            {
                "at": iso(clock.now()),
                "attempt": 0,
                "error": f"rewritten: duplicate: received already at {kept_at}: one signal",
            }
        ]
        * 5
    )


def test_a_signal_item_with_other_attributes_is_answered_invalid_naming_the_first_five(app):
    # Given an item under a signal item's key that holds six attributes besides its key, one with a long name
    key = "op-1::signal:approval:ap-1"
    others = {name: {"S": "x"} for name in ("a" * 50, "b", "c", "d", "e", "f")}
    # When the relay reads it
    relay(app, record("INSERT", {"operation_id": {"S": key}, **others}))
    # Then its answer names the first five, each cut to 40 characters
    assert answer_of(app, key)["note"] == (
        f"invalid: a signal item holds operation_id and payload only, not {'a' * 40}, b, c, d, e"
    )


@pytest.mark.parametrize("operation_id", [{"N": "7"}, "op-1::signal:approval:ap-1"])
def test_an_image_whose_key_is_not_a_string_value_is_not_read_as_a_signal(operation_id):
    with pytest.raises(InvalidMessage) as refused:
        signal_from_image({"operation_id": operation_id})
    assert str(refused.value) == "a signal item's operation_id must be a string (S)"


def test_a_signal_item_not_yet_sent_is_listed_as_a_signal_and_a_request_without_a_job_type_is_not(app):
    # Given, in the jobs table, a signal item and a request without a job type, neither read by the relay yet
    operation_id = enqueue(app)
    put = app.signal_put(operation_id, "approval", APPROVED, signal_id="ap-1")
    dynamodb = boto3.client("dynamodb")
    dynamodb.transact_write_items(TransactItems=[put])
    dynamodb.put_item(TableName=app.settings.jobs_table, Item={"operation_id": {"S": "op-untyped"}})
    # When an operator lists every operation (`converge ops list`, a scan)
    rows = {row["operation_id"]: row for row in Listing(app.operations.listings).page(Filters()).operations}
    # Then the signal item shows as what it is, waiting for the relay; the request shows no job type
    key = signal_item_id(operation_id, "approval", "ap-1")
    assert (rows[key]["job_type"], rows[key]["state"]) == ("converge.signal", "ACCEPTED")
    assert (rows["op-untyped"]["job_type"], rows["op-untyped"]["state"]) == (None, "ACCEPTED")
    assert rows[operation_id]["job_type"] == "ledger.approve-credit.v1"


def test_a_signal_put_refused_for_its_key_or_id_shows_their_first_sixty_characters(app):
    # Given an operation id that is a signal item's key, and a signal id holding '::', each long
    item_key = signal_item_id("op-" + "1" * 70, "approval", "ap-1")
    signal_id = "ap-" + "2" * 70 + "::1"
    # When a producer builds their puts, Then each is refused, showing what it refuses, cut short
    with pytest.raises(InvalidMessage) as refused:
        app.signal_put(item_key, "approval", APPROVED, signal_id="ap-1")
    assert str(refused.value) == f"operation_id {item_key[:60]!r} is a signal item's key, not an operation's"
    with pytest.raises(InvalidMessage) as refused:
        app.signal_put("op-1", "approval", APPROVED, signal_id=signal_id)
    assert str(refused.value) == f"signal_id {signal_id[:60]!r} is invalid in a signal item: it holds no '::'"
