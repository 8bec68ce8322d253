"""The ad image runner: watermark the source with Pillow, store it under its content's key, mark the ad.

Its own module so that only a function that runs ad images imports Pillow (the binding names it lazily).
"""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont, UnidentifiedImageError

from catalogue.ads import MAX_SOURCE_BYTES, WATERMARK, Ad, AdRepository, DynamoAdRepository, ImageStatus, ProcessAdImage
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectMissing, ObjectStore, S3ObjectStore, content_key
from converge import JobContext, PermanentError, StagedRunner, logger


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
