"""Ad images (keyed_effect, staged): watermark an ad's uploaded image into a content-addressed key.

load the ad (gone or already processed: nothing to do) -> fetch -> watermark -> store -> mark the row
processed. The store is keyed by the image's hash, so a re-run overwrites the same object; the
staged runner marks the row failed on the final attempt only, and never when time runs out.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError
from PIL import Image, ImageDraw, ImageFont, UnidentifiedImageError

from catalogue import examples
from catalogue.clients import LazyClient
from catalogue.records import ad_key, string
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectMissing, ObjectStore, S3ObjectStore, content_key
from converge.aws import error_code
from converge.clock import iso
from converge.errors import PermanentError
from converge.identifiers import Identifier
from converge.message import JobMessage
from converge.observability import logger
from converge.registry import JobBinding, Policy, Queue
from converge.runner import JobContext
from converge.staged import StagedRunner

WATERMARK = "converge demo"
MAX_SOURCE_BYTES = 10 * 1024 * 1024


class ProcessAdImage(JobMessage):
    ad_id: Identifier


class ImageStatus:
    PENDING = "pending"
    PROCESSED = "processed"
    FAILED = "failed"


@dataclass(frozen=True)
class Ad:
    ad_id: str
    source_key: str
    image_status: str


class AdRepository(Protocol):
    def get(self, ad_id: str) -> Ad | None: ...

    def mark_processed(self, ad_id: str, image_key: str, at: float) -> None: ...

    def mark_failed(self, ad_id: str, reason: str, at: float) -> None: ...


class DynamoAdRepository:
    """Ads as `ad#<id>` rows in the app table; every mark is conditional, so a late or repeated one is harmless."""

    def __init__(self, table_name: str, dynamodb_client: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def get(self, ad_id: str) -> Ad | None:
        item = self._dynamodb().get_item(TableName=self.table_name, Key={"pk": {"S": ad_key(ad_id)}}).get("Item")
        if item is None or "deleted_at" in item:
            return None
        return Ad(ad_id, string(item, "source_key") or "", string(item, "image_status") or ImageStatus.PENDING)

    def mark_processed(self, ad_id: str, image_key: str, at: float) -> None:
        self._update(
            ad_id,
            "SET image_status = :processed, image_key = :key, processed_at = :at REMOVE image_failure",
            "attribute_exists(pk)",
            {":processed": {"S": ImageStatus.PROCESSED}, ":key": {"S": image_key}, ":at": {"S": iso(at)}},
        )

    def mark_failed(self, ad_id: str, reason: str, at: float) -> None:
        # Never overwrite a success: a concurrent delivery may have finished the work meanwhile.
        self._update(
            ad_id,
            "SET image_status = :failed, image_failure = :reason, failed_at = :at",
            "attribute_exists(pk) AND image_status <> :processed",
            {
                ":failed": {"S": ImageStatus.FAILED},
                ":processed": {"S": ImageStatus.PROCESSED},
                ":reason": {"S": reason[:500]},
                ":at": {"S": iso(at)},
            },
        )

    def _update(self, ad_id: str, expression: str, condition: str, values: dict[str, Any]) -> None:
        try:
            self._dynamodb().update_item(
                TableName=self.table_name,
                Key={"pk": {"S": ad_key(ad_id)}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            logger.info("ad row changed meanwhile; mark skipped", ad_id=ad_id)


def watermark(source: bytes, label: str = WATERMARK) -> bytes:
    """The image with a translucent band and a label along its bottom edge, as PNG (deterministic)."""
    try:
        with Image.open(io.BytesIO(source)) as opened:
            image = opened.convert("RGBA")
    except (UnidentifiedImageError, OSError) as exc:
        raise PermanentError(f"the ad's source is not a readable image ({exc.__class__.__name__})") from exc
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    band = max(12, image.height // 8)
    draw.rectangle((0, image.height - band, image.width, image.height), fill=(0, 0, 0, 110))
    draw.text((6, image.height - band + 2), label, fill=(255, 255, 255, 200), font=ImageFont.load_default())
    out = io.BytesIO()
    Image.alpha_composite(image, overlay).convert("RGB").save(out, format="PNG")
    return out.getvalue()


class AdImageRunner(StagedRunner[ProcessAdImage, Ad]):
    def __init__(self, ads: AdRepository, store: ObjectStore) -> None:
        self.ads = ads
        self.store = store

    def load(self, message: ProcessAdImage, ctx: JobContext) -> Ad | None:
        ad = self.ads.get(message.ad_id)
        if ad is None or ad.image_status == ImageStatus.PROCESSED:
            return None
        return ad

    def work(self, message: ProcessAdImage, ad: Ad, ctx: JobContext) -> None:
        try:
            source = self.store.get(ad.source_key)
        except ObjectMissing as exc:
            raise PermanentError("the ad's source image is missing") from exc
        if len(source) > MAX_SOURCE_BYTES:
            raise PermanentError(f"the ad's source image is {len(source)} bytes; the limit is {MAX_SOURCE_BYTES}")
        ctx.check_time()
        image = watermark(source)
        ctx.check_time()
        key = content_key(f"ads/{ad.ad_id}", image, ".png")
        self.store.put(key, image, "image/png", ctx.operation_id)
        ctx.check_time()
        self.ads.mark_processed(ad.ad_id, key, ctx.clock.now())
        logger.info("ad image processed", ad_id=ad.ad_id, key=key)

    def mark_failed(self, message: ProcessAdImage, ad: Ad, ctx: JobContext, error: str) -> None:
        self.ads.mark_failed(ad.ad_id, error, ctx.clock.now())


def build_runner() -> AdImageRunner:
    settings = CatalogueSettings.from_env()
    return AdImageRunner(
        DynamoAdRepository(settings.require("app_table")), S3ObjectStore(settings.require("documents_bucket"))
    )


AD_IMAGE = JobBinding(
    job_type="ads.image-process.v1",
    message=ProcessAdImage,
    runner=build_runner,
    queue=Queue.BULK,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Watermark an ad's uploaded image into a content-addressed key and mark the ad processed.",
    example_payload={"ad_id": examples.PENDING_AD},
)
