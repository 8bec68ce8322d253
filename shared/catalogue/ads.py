"""Ad images (keyed_effect, staged): watermark an ad's uploaded image into a content-addressed key.

The message and the ad repository; the runner (and Pillow) is in catalogue.ad_images, the binding in catalogue.bindings.

load the ad (gone or already processed: nothing to do) -> fetch -> watermark -> store -> mark the row
processed. The store is keyed by the image's hash, so a re-run overwrites the same object; the
staged runner marks the row failed on the final attempt only, and never when time runs out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from catalogue.clients import LazyClient
from catalogue.records import ad_key, string
from converge import Identifier, JobMessage, error_code, logger
from converge.model.clock import iso

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
