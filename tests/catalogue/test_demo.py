"""Demo data: every state the jobs distinguish is present, and seeding twice changes nothing."""

from __future__ import annotations

from catalogue import examples
from catalogue.demo import seed
from catalogue.ledger import DynamoLedger, LedgerMode
from catalogue.records import ad_key, boost_key, partner_key, profile_key, upload_key, user_key
from tests.catalogue.conftest import App


def test_the_seed_covers_every_case_the_jobs_distinguish(app: App) -> None:
    # Given the seeded app (the fixture seeds it)
    # Then users exist unconfirmed, confirmed and deleted
    unconfirmed, confirmed, deleted = (
        app.row(user_key(u)) for u in (examples.UNCONFIRMED_USER, examples.CONFIRMED_USER, examples.DELETED_USER)
    )
    assert unconfirmed and not unconfirmed["email_confirmed"]["BOOL"]
    assert confirmed and confirmed["email_confirmed"]["BOOL"]
    assert deleted and "deleted_at" in deleted and "email" not in deleted
    # And partners with ledger balances, ads pending and processed, two profiles, boosts both sides of now
    assert app.row(partner_key(examples.PARTNER))
    assert DynamoLedger(app.data.ledger_table, app.clients["dynamodb"]).balance(examples.PARTNER) == 15_000
    assert app.row(ad_key(examples.PENDING_AD))["image_status"]["S"] == "pending"  # type: ignore[index]
    assert app.row(ad_key(examples.PROCESSED_AD))["image_status"]["S"] == "processed"  # type: ignore[index]
    assert app.row(profile_key(examples.PROFILE)) and app.row(profile_key(examples.EDITED_PROFILE))
    ends = {b: int(app.row(boost_key(b))["ends_at"]["N"]) for b in (*examples.EXPIRED_BOOSTS, examples.ACTIVE_BOOST)}  # type: ignore[index]
    assert all(ends[b] < app.clock.now() for b in examples.EXPIRED_BOOSTS)
    assert ends[examples.ACTIVE_BOOST] > app.clock.now()
    # And the uploads are in the bucket, the ledger deduplicates, and the sender can send
    assert app.objects(upload_key(examples.PARTNER, examples.UPLOAD))
    assert app.objects(app.data.ad_sources[examples.PENDING_AD])
    assert DynamoLedger(app.data.ledger_table, app.clients["dynamodb"]).mode() is LedgerMode.DEDUP
    identities = app.clients["sesv2"].list_email_identities()["EmailIdentities"]
    assert app.data.sender_email in {identity["IdentityName"] for identity in identities}


def test_seeding_twice_is_harmless(app: App) -> None:
    # Given a seeded app / When seeded again / Then the same rows and the same objects
    before = app.clients["dynamodb"].scan(TableName=app.data.app_table)["Count"]
    objects = app.objects("")
    seed(app.clients, app.outputs, now=app.clock.now())
    assert app.clients["dynamodb"].scan(TableName=app.data.app_table)["Count"] == before
    assert app.objects("") == objects
