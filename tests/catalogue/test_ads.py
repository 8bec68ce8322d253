"""Ad images (staged runner): no-ops, one content-addressed object, failures marked only on the last attempt."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import pytest
from PIL import Image

from catalogue import examples
from catalogue.ad_images import AdImageRunner, build_runner, watermark
from catalogue.ads import DynamoAdRepository, ProcessAdImage
from catalogue.records import ad_key
from catalogue.storage import S3ObjectStore
from converge.model.errors import OutOfTime, PermanentError
from tests.catalogue.conftest import App

JOB = "ads.image-process.v1"


def status(app: App, ad_id: str) -> str:
    row = app.row(ad_key(ad_id))
    assert row is not None
    return str(row["image_status"]["S"])


@pytest.mark.parametrize("ad_id", ["ad-missing", examples.PROCESSED_AD])
def test_a_missing_or_already_processed_ad_is_a_noop(app: App, ad_id: str) -> None:
    # Given the runner, and an ad that does not exist or was already processed
    runner = build_runner()
    # When it loads the ad
    # Then there is nothing to do
    assert runner.load(ProcessAdImage(ad_id=ad_id), app.ctx(JOB)) is None


def test_the_image_is_watermarked_into_one_content_addressed_object_and_the_row_is_marked(app: App) -> None:
    # Given a pending ad with an uploaded source image
    runner = build_runner()
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    ctx = app.ctx(JOB)
    # When the job runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one watermarked PNG is stored under ads/<ad>/<sha256>.png and the row points at it
    [(key, image)] = app.objects(f"ads/{examples.PENDING_AD}/").items()
    source = app.clients["s3"].get_object(Bucket=app.data.documents_bucket, Key=app.data.ad_sources[message.ad_id])
    assert image == watermark(source["Body"].read())
    assert Image.open(io.BytesIO(image)).format == "PNG"
    row = app.row(ad_key(examples.PENDING_AD))
    assert row is not None and row["image_status"]["S"] == "processed" and row["image_key"]["S"] == key
    # And a later delivery finds it processed: a no-op
    assert runner.load(message, ctx) is None


def test_a_rerun_after_a_crash_before_the_mark_overwrites_the_same_object(app: App) -> None:
    # Given a run that stored the image and then ran out of time before marking the row
    runner = build_runner()
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    left = [60_000, 60_000, 1_000]  # plenty after fetching and watermarking, too little after storing
    short = replace(app.ctx(JOB), remaining_ms=lambda: left.pop(0) if len(left) > 1 else left[0])
    with pytest.raises(OutOfTime):
        runner.run(message, runner.load(message, short), short)
    assert status(app, examples.PENDING_AD) == "pending"
    first = app.objects(f"ads/{examples.PENDING_AD}/")
    # When the requeued message runs again
    ctx = app.ctx(JOB, attempt=2)
    runner.run(message, runner.load(message, ctx), ctx)
    # Then the same single object was overwritten, and the row is processed
    assert app.objects(f"ads/{examples.PENDING_AD}/") == first
    assert len(first) == 1
    assert status(app, examples.PENDING_AD) == "processed"


class FailingStore(S3ObjectStore):
    def put(self, key: str, data: bytes, content_type: str, operation_id: str | None = None) -> None:
        raise ConnectionError("storage unavailable")


def failing_runner(app: App) -> AdImageRunner:
    return AdImageRunner(
        DynamoAdRepository(app.data.app_table, app.clients["dynamodb"]),
        FailingStore(app.data.documents_bucket, app.clients["s3"]),
    )


def test_a_failure_before_the_final_attempt_leaves_the_row_untouched(app: App) -> None:
    # Given storage that fails, on attempt 1 of 3
    runner = failing_runner(app)
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    ctx = app.ctx(JOB, attempt=1, max_attempts=3)
    # When the job runs
    with pytest.raises(ConnectionError):
        runner.run(message, runner.load(message, ctx), ctx)
    # Then the row is still pending: the retry may yet succeed
    assert status(app, examples.PENDING_AD) == "pending"


def test_the_final_attempt_marks_the_row_failed_before_the_message_goes_to_the_dlq(app: App) -> None:
    # Given storage that fails, on the final attempt
    runner = failing_runner(app)
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    ctx = app.ctx(JOB, attempt=3, max_attempts=3)
    # When the job runs
    with pytest.raises(ConnectionError):
        runner.run(message, runner.load(message, ctx), ctx)
    # Then the row says failed, and why, before the error reaches the pipeline
    row = app.row(ad_key(examples.PENDING_AD))
    assert row is not None and row["image_status"]["S"] == "failed"
    assert "storage unavailable" in row["image_failure"]["S"]
    assert app.objects(f"ads/{examples.PENDING_AD}/") == {}


def test_running_out_of_time_on_the_final_attempt_marks_nothing(app: App) -> None:
    # Given the final attempt, with too little time left after the first stage
    runner = build_runner()
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    ctx = app.ctx(JOB, attempt=3, max_attempts=3, remaining_ms=100)
    # When the job runs
    with pytest.raises(OutOfTime):
        runner.run(message, runner.load(message, ctx), ctx)
    # Then it is a requeue, not a failure: the row is untouched and nothing was written
    assert status(app, examples.PENDING_AD) == "pending"
    assert app.objects(f"ads/{examples.PENDING_AD}/") == {}


def test_a_missing_source_image_fails_for_good_and_is_marked_at_once(app: App) -> None:
    # Given a pending ad whose source image has disappeared
    app.clients["s3"].delete_object(Bucket=app.data.documents_bucket, Key=app.data.ad_sources[examples.PENDING_AD])
    runner = build_runner()
    message = ProcessAdImage(ad_id=examples.PENDING_AD)
    ctx = app.ctx(JOB, attempt=1, max_attempts=3)
    # When the job runs
    with pytest.raises(PermanentError):
        runner.run(message, runner.load(message, ctx), ctx)
    # Then a permanent failure marks the row on the first attempt (no retry can help)
    assert status(app, examples.PENDING_AD) == "failed"


def test_a_late_failure_mark_never_overwrites_a_success(app: App) -> None:
    # Given an ad another delivery already processed
    ads = DynamoAdRepository(app.data.app_table, app.clients["dynamodb"])
    ads.mark_processed(examples.PENDING_AD, "ads/x.png", app.clock.now())
    # When a losing delivery marks it failed
    ads.mark_failed(examples.PENDING_AD, "late", app.clock.now())
    # Then it stays processed
    assert status(app, examples.PENDING_AD) == "processed"


def test_watermarking_is_deterministic(app: Any) -> None:
    from catalogue.demo import demo_image

    # Given the same source twice / When watermarked / Then the same bytes (hence the same key)
    assert watermark(demo_image()) == watermark(demo_image())
