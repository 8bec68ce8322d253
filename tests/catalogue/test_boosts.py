"""Boost expiry sweep: pages over the sparse index, conditional updates, stops when time runs short."""

from __future__ import annotations

from catalogue import examples
from catalogue.boosts import BoostExpirySweep, DynamoBoostStore, build_runner
from catalogue.records import boost_key, boost_shard
from tests.catalogue.conftest import App

JOB = "sweep.boost-expiry.v1"


def status(app: App, boost_id: str) -> str:
    row = app.row(boost_key(boost_id))
    assert row is not None
    return str(row["status"]["S"])


def add_due_boosts(app: App, count: int) -> list[str]:
    ids = [f"b-due-{n:03d}" for n in range(count)]
    for n, boost_id in enumerate(ids):
        app.clients["dynamodb"].put_item(
            TableName=app.data.app_table,
            Item={
                "pk": {"S": boost_key(boost_id)},
                "status": {"S": "active"},
                "ends_at": {"N": str(int(app.clock.now()) - 10 - n)},
                "expiry_shard": {"S": boost_shard(boost_id)},
            },
        )
    return ids


def test_a_tick_expires_due_boosts_only_and_a_rerun_is_harmless(app: App) -> None:
    # Given two boosts past their end and one still running
    sweep = build_runner()
    # When the sweep ticks
    first = sweep.tick(app.tick_ctx(JOB))
    # Then both due boosts are expired, the running one is untouched
    assert first["expired"] == 2 and first["complete"] is True
    assert [status(app, b) for b in examples.EXPIRED_BOOSTS] == ["expired", "expired"]
    assert status(app, examples.ACTIVE_BOOST) == "active"
    expired_row = app.row(boost_key(examples.EXPIRED_BOOSTS[0]))
    assert expired_row is not None and "expiry_shard" not in expired_row  # left the sparse index
    # And when it ticks again, nothing is due and nothing changes
    second = sweep.tick(app.tick_ctx(JOB))
    assert (second["examined"], second["expired"]) == (0, 0)


def test_a_boost_already_swept_or_extended_is_skipped_not_rewritten(app: App) -> None:
    # Given one boost already expired and another extended after a sweep listed it
    store = DynamoBoostStore(app.data.app_table, app.clients["dynamodb"])
    now = app.clock.now()
    assert store.expire(examples.EXPIRED_BOOSTS[0], now)
    app.clients["dynamodb"].update_item(
        TableName=app.data.app_table,
        Key={"pk": {"S": boost_key(examples.EXPIRED_BOOSTS[1])}},
        UpdateExpression="SET ends_at = :later",
        ExpressionAttributeValues={":later": {"N": str(int(now) + 3600)}},
    )
    # When a stale listing tries to expire them / Then both conditional updates decline
    assert not store.expire(examples.EXPIRED_BOOSTS[0], now)
    assert not store.expire(examples.EXPIRED_BOOSTS[1], now)
    assert status(app, examples.EXPIRED_BOOSTS[1]) == "active"


def test_the_sweep_pages_and_stops_when_time_runs_short_then_the_next_tick_finishes(app: App) -> None:
    # Given 30 more due boosts, pages of 4, and a Lambda with time for only three pages
    due = add_due_boosts(app, 30)
    sweep = BoostExpirySweep(DynamoBoostStore(app.data.app_table, app.clients["dynamodb"]), page_size=4)
    budget = [60_000] * 3
    short = app.tick_ctx(JOB, remaining_ms=lambda: budget.pop() if budget else 0)
    # When it ticks
    partial = sweep.tick(short)
    # Then it stopped after three bounded pages, having expired what it saw
    assert partial["complete"] is False
    assert partial["pages"] == 3 and partial["examined"] <= 12
    assert partial["expired"] == partial["examined"]
    # And the next tick expires the rest
    rest = sweep.tick(app.tick_ctx(JOB))
    assert rest["complete"] is True
    assert partial["expired"] + rest["expired"] == len(due) + len(examples.EXPIRED_BOOSTS)
    assert {status(app, b) for b in due} == {"expired"}


def test_the_number_of_pages_per_tick_is_bounded(app: App) -> None:
    # Given many due boosts and a cap of two pages of three
    add_due_boosts(app, 20)
    sweep = BoostExpirySweep(DynamoBoostStore(app.data.app_table, app.clients["dynamodb"]), page_size=3, max_pages=2)
    # When it ticks / Then it does at most six expiries and says it is not done
    result = sweep.tick(app.tick_ctx(JOB))
    assert result["pages"] == 2 and result["expired"] <= 6 and result["complete"] is False
