"""Partner documents: copied to the content-addressed key; a re-run overwrites that one object."""

from __future__ import annotations

import hashlib

from catalogue import examples
from catalogue.demo import demo_document
from catalogue.documents import PartnerDocumentUpload, build_runner
from tests.catalogue.conftest import App

JOB = "partner-docs.upload.v1"


def test_a_missing_upload_is_a_noop(app: App) -> None:
    # Given an upload id that never reached the bucket
    runner = build_runner()
    # When the job loads it
    loaded = runner.load(PartnerDocumentUpload(partner_id=examples.PARTNER, upload_id="up-missing"), app.ctx(JOB))
    # Then there is nothing to copy and nothing was written
    assert loaded is None
    assert app.objects("partner-docs/") == {}


def test_the_upload_is_copied_to_its_sha256_key_and_a_rerun_overwrites_the_same_object(app: App) -> None:
    # Given the seeded upload
    runner = build_runner()
    message = PartnerDocumentUpload(partner_id=examples.PARTNER, upload_id=examples.UPLOAD)
    ctx = app.ctx(JOB)
    upload = runner.load(message, ctx)
    assert upload is not None
    # When the job runs twice
    runner.run(message, upload, ctx)
    runner.run(message, runner.load(message, ctx), ctx)
    # Then the bucket holds exactly one copy, under partner-docs/<partner>/<sha256 of the content>
    expected = demo_document()
    key = f"partner-docs/{examples.PARTNER}/{hashlib.sha256(expected).hexdigest()}"
    assert app.objects("partner-docs/") == {key: expected}
    head = app.clients["s3"].head_object(Bucket=app.data.documents_bucket, Key=key)
    assert head["ContentType"] == "application/pdf"
