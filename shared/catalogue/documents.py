"""Partner documents (keyed_effect): copy an upload to `partner-docs/<partner_id>/<sha256>`.

The destination key is the content's hash, so a re-run writes the same bytes to the same key.
The upload itself is left in place (the bucket's lifecycle rule expires uploads).
"""

from __future__ import annotations

from catalogue.records import upload_key
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectInfo, ObjectStore, S3ObjectStore, content_key
from converge import Identifier, JobContext, JobMessage, logger

DOCUMENTS_PREFIX = "partner-docs"


class PartnerDocumentUpload(JobMessage):
    partner_id: Identifier
    upload_id: Identifier


def document_prefix(partner_id: str) -> str:
    return f"{DOCUMENTS_PREFIX}/{partner_id}"


class PartnerDocumentRunner:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def load(self, message: PartnerDocumentUpload, ctx: JobContext) -> ObjectInfo | None:
        # No upload (never finished, or already expired by the lifecycle rule): nothing to copy.
        return self.store.head(upload_key(message.partner_id, message.upload_id))

    def run(self, message: PartnerDocumentUpload, upload: ObjectInfo, ctx: JobContext) -> None:
        data = self.store.get(upload.key)
        key = content_key(document_prefix(message.partner_id), data)
        self.store.put(key, data, upload.content_type, ctx.operation_id)
        logger.info("partner document stored", partner_id=message.partner_id, key=key, size=len(data))


def build_runner() -> PartnerDocumentRunner:
    settings = CatalogueSettings.from_env()
    return PartnerDocumentRunner(S3ObjectStore(settings.require("documents_bucket")))
