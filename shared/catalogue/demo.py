"""Demo data for the reference application, and example payloads that are valid against it.

`seed` writes a small, realistic data set into the deployed resources (named by the stack's
outputs, never hard-coded): users in each state, partners with ledger balances, ads with an
uploaded source image, two CV profiles (one its owner has just edited five times), boosts on
both sides of their end time and an uploaded partner document. Seeding twice rewrites the same rows.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError
from fpdf import FPDF
from PIL import Image, ImageDraw

from catalogue import BINDINGS, examples
from catalogue.ledger import DynamoLedger, LedgerMode, account_key
from catalogue.records import (
    ad_key,
    boost_key,
    boost_shard,
    partner_key,
    profile_key,
    upload_key,
    user_key,
)
from catalogue.settings import CatalogueSettings
from converge import error_code
from converge.model.clock import iso
from converge.runtime.clients import Clients

DEFAULT_SENDER = "no-reply@example.com"


@dataclass(frozen=True)
class DemoData:
    """What `seed` wrote, and where."""

    app_table: str
    documents_bucket: str
    ledger_table: str
    sender_email: str
    signing_secret_arn: str | None
    user_emails: dict[str, str] = field(default_factory=dict, repr=False)
    ad_sources: dict[str, str] = field(default_factory=dict)
    upload_keys: dict[str, str] = field(default_factory=dict)
    balances: dict[str, int] = field(default_factory=dict)


def example_payloads() -> dict[str, dict[str, Any]]:
    """Each job type's example payload (valid against the seeded data)."""
    return {binding.job_type: dict(binding.example_payload) for binding in BINDINGS}


ClientSource = Callable[[str], Any]


def _client_source(clients_or_session: Any) -> ClientSource:
    if isinstance(clients_or_session, boto3.session.Session):
        session: Any = clients_or_session
        region = session.region_name or CatalogueSettings.from_env().region
        return lambda service: session.client(service, region_name=region)
    if isinstance(clients_or_session, Clients):
        return clients_or_session.get
    if isinstance(clients_or_session, Mapping):
        return clients_or_session.__getitem__
    if callable(clients_or_session):
        return clients_or_session
    raise TypeError("seed needs a boto3 Session, a converge.aws.Clients, a mapping or a callable of service names")


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int | float) -> dict[str, str]:
    return {"N": str(int(value))}


def seed(clients_or_session: Any, outputs: Mapping[str, str], now: float | None = None) -> DemoData:
    """Write the demo data into the resources named by `outputs` (the stack's outputs)."""
    client = _client_source(clients_or_session)
    at = now if now is not None else time.time()
    data = DemoData(
        app_table=outputs["AppTableName"],
        documents_bucket=outputs["DocumentsBucketName"],
        ledger_table=outputs["LedgerTableName"],
        sender_email=outputs.get("SenderEmail") or DEFAULT_SENDER,
        signing_secret_arn=outputs.get("SigningSecretArn"),
    )
    dynamodb, s3 = client("dynamodb"), client("s3")

    def put(item: dict[str, Any]) -> None:
        dynamodb.put_item(TableName=data.app_table, Item=item)

    _seed_users(put, data, at)
    _seed_partners(put, dynamodb, data, at)
    _seed_ads(put, s3, data, at)
    _seed_profiles(put, at)
    _seed_boosts(put, at)
    _seed_uploads(s3, data)
    DynamoLedger(data.ledger_table, dynamodb).set_mode(LedgerMode.DEDUP)
    _verify_sender(client("sesv2"), data.sender_email)
    return data


def _seed_users(put: Callable[[dict[str, Any]], None], data: DemoData, at: float) -> None:
    users = [
        (examples.UNCONFIRMED_USER, "alice.martin@example.com", "Alice Martin", False),
        (examples.SECOND_UNCONFIRMED_USER, "bruno.keller@example.com", "Bruno Keller", False),
        (examples.CONFIRMED_USER, "chloe.dubois@example.com", "Chloé Dubois", True),
    ]
    for user_id, email, name, confirmed in users:
        put(
            {
                "pk": _s(user_key(user_id)),
                "kind": _s("user"),
                "email": _s(email),
                "display_name": _s(name),
                "email_confirmed": {"BOOL": confirmed},
                "created_at": _s(iso(at - 86_400)),
            }
        )
        data.user_emails[user_id] = email
    # A soft-deleted account: its personal data is gone, only the tombstone remains.
    put({"pk": _s(user_key(examples.DELETED_USER)), "kind": _s("user"), "deleted_at": _s(iso(at - 3_600))})


def _seed_partners(put: Callable[[dict[str, Any]], None], dynamodb: Any, data: DemoData, at: float) -> None:
    for partner_id, name, email, balance, status in (
        (examples.PARTNER, "Atelier Nord", "billing@atelier-nord.example.com", 15_000, "active"),
        (examples.SECOND_PARTNER, "Studio Sud", "hello@studio-sud.example.com", 4_200, "active"),
        (examples.CLOSED_PARTNER, "Maison Est", "contact@maison-est.example.com", 0, "closed"),
    ):
        put(
            {
                "pk": _s(partner_key(partner_id)),
                "kind": _s("partner"),
                "name": _s(name),
                "email": _s(email),
                "status": _s(status),
            }
        )
        dynamodb.put_item(
            TableName=data.ledger_table,
            Item={"pk": _s(account_key(partner_id)), "balance_cents": _n(balance), "updated_at": _s(iso(at))},
        )
        data.balances[partner_id] = balance


def demo_image(width: int = 320, height: int = 200, hue: int = 0) -> bytes:
    """A small generated PNG (a gradient and a few shapes): the ads' uploaded source images."""
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        draw.line([(0, y), (width, y)], fill=((40 + hue + y) % 256, (90 + y // 2) % 256, (160 - y // 3) % 256))
    draw.ellipse((20, 20, 120, 120), fill=(250, 200, 60))
    draw.rectangle((150, 60, 290, 150), outline=(255, 255, 255), width=4)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _seed_ads(put: Callable[[dict[str, Any]], None], s3: Any, data: DemoData, at: float) -> None:
    for index, (ad_id, status) in enumerate(
        (
            (examples.PENDING_AD, "pending"),
            (examples.SECOND_PENDING_AD, "pending"),
            (examples.PROCESSED_AD, "processed"),
        )
    ):
        source = f"uploads/ads/{ad_id}/original.png"
        s3.put_object(
            Bucket=data.documents_bucket, Key=source, Body=demo_image(hue=index * 70), ContentType="image/png"
        )
        item = {
            "pk": _s(ad_key(ad_id)),
            "kind": _s("ad"),
            "partner_id": _s(examples.PARTNER),
            "title": _s(f"Spring collection #{index + 1}"),
            "source_key": _s(source),
            "image_status": _s(status),
            "created_at": _s(iso(at - 7_200)),
        }
        if status == "processed":
            item["image_key"] = _s(f"ads/{ad_id}/already-processed.png")
        put(item)
        data.ad_sources[ad_id] = source


def _seed_profiles(put: Callable[[dict[str, Any]], None], at: float) -> None:
    put(
        {
            "pk": _s(profile_key(examples.PROFILE)),
            "kind": _s("profile"),
            "full_name": _s("Alice Martin"),
            "email": _s("alice.martin@example.com"),
            "headline": _s("Senior textile designer"),
            "summary": _s(
                "Twelve years designing knitwear and printed fabrics for independent labels; "
                "leads small teams from first sketch to production samples."
            ),
            "skills": {"L": [_s(skill) for skill in ("Knitwear", "Print design", "CLO 3D", "Sourcing")]},
            "experience": {
                "L": [
                    {"M": {"role": _s("Lead designer"), "company": _s("Atelier Nord"), "period": _s("2019-2025")}},
                    {"M": {"role": _s("Designer"), "company": _s("Maison Lune"), "period": _s("2013-2019")}},
                ]
            },
            "updated_at": _s(iso(at - 600)),
        }
    )
    put(
        {
            "pk": _s(profile_key(examples.EDITED_PROFILE)),
            "kind": _s("profile"),
            "full_name": _s("Tomas Berg"),
            "email": _s("tomas.berg@example.com"),
            "headline": _s("Pattern cutter"),
            "summary": _s("Cuts patterns for outerwear; just rewrote this profile in five quick edits."),
            "skills": {"L": [_s(skill) for skill in ("Pattern cutting", "Grading", "Gerber AccuMark")]},
            "experience": {
                "L": [{"M": {"role": _s("Pattern cutter"), "company": _s("Fjell Outdoor"), "period": _s("2016-2025")}}]
            },
            "updated_at": _s(iso(at - 60)),
        }
    )


def _seed_boosts(put: Callable[[dict[str, Any]], None], at: float) -> None:
    ends = {
        examples.EXPIRED_BOOSTS[0]: at - 3_600,
        examples.EXPIRED_BOOSTS[1]: at - 60,
        examples.ACTIVE_BOOST: at + 7 * 86_400,
    }
    for boost_id, ends_at in ends.items():
        put(
            {
                "pk": _s(boost_key(boost_id)),
                "kind": _s("boost"),
                "ad_id": _s(examples.PENDING_AD),
                "partner_id": _s(examples.PARTNER),
                "status": _s("active"),
                "ends_at": _n(ends_at),
                "expiry_shard": _s(boost_shard(boost_id)),
            }
        )


def demo_document(title: str = "Certificate of insurance") -> bytes:
    pdf = FPDF()
    # A fixed creation date keeps the bytes (and so the content-addressed copy) the same on every seed.
    pdf.set_creation_date(datetime(2026, 1, 1, tzinfo=UTC))
    pdf.add_page()
    pdf.set_font("helvetica", size=14)
    pdf.cell(text=title)
    return bytes(pdf.output())


def _seed_uploads(s3: Any, data: DemoData) -> None:
    key = upload_key(examples.PARTNER, examples.UPLOAD)
    s3.put_object(Bucket=data.documents_bucket, Key=key, Body=demo_document(), ContentType="application/pdf")
    data.upload_keys[examples.UPLOAD] = key


def _verify_sender(sesv2: Any, sender: str) -> None:
    """SES sends only from a verified identity (the emulator checks it too)."""
    try:
        sesv2.create_email_identity(EmailIdentity=sender)
    except ClientError as exc:
        if error_code(exc) != "AlreadyExistsException":
            raise
