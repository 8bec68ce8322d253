"""CV PDFs (staged runner): rendered deterministically into one content-addressed object."""

from __future__ import annotations

import pytest

from catalogue import examples
from catalogue.cv import DynamoProfileRepository, RenderCv
from catalogue.cv_pdf import CvRunner, build_runner, render_cv
from catalogue.records import profile_key
from catalogue.storage import S3ObjectStore
from converge.model.errors import OutOfTime
from tests.catalogue.conftest import App

JOB = "pdf.cv.v1"


def test_a_missing_profile_is_a_noop(app: App) -> None:
    # Given no such profile / When loaded / Then nothing to do
    assert build_runner().load(RenderCv(profile_id="cv-missing"), app.ctx(JOB)) is None


def test_the_cv_is_rendered_to_one_object_and_a_rerun_overwrites_it(app: App) -> None:
    # Given the seeded profile
    runner = build_runner()
    message = RenderCv(profile_id=examples.PROFILE)
    ctx = app.ctx(JOB)
    # When the job runs twice
    runner.run(message, runner.load(message, ctx), ctx)
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one PDF is stored under cv/<profile>/<sha256>.pdf and the profile points at it
    [(key, document)] = app.objects(f"cv/{examples.PROFILE}/").items()
    assert document.startswith(b"%PDF")
    assert key.endswith(".pdf")
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None and row["cv_key"]["S"] == key and row["cv_status"]["S"] == "rendered"


def test_rendering_is_deterministic_for_the_same_profile(app: App) -> None:
    # Given the seeded profile / When rendered twice / Then the same bytes
    profile = DynamoProfileRepository(app.data.app_table, app.clients["dynamodb"]).get(examples.PROFILE)
    assert profile is not None
    assert render_cv(profile) == render_cv(profile)


class FailingStore(S3ObjectStore):
    def put(self, key: str, data: bytes, content_type: str, operation_id: str | None = None) -> None:
        raise ConnectionError("storage unavailable")


@pytest.mark.parametrize(("attempt", "expected"), [(1, None), (3, "failed")])
def test_a_failure_is_marked_only_on_the_final_attempt(app: App, attempt: int, expected: str | None) -> None:
    # Given storage that fails
    runner = CvRunner(
        DynamoProfileRepository(app.data.app_table, app.clients["dynamodb"]),
        FailingStore(app.data.documents_bucket, app.clients["s3"]),
    )
    message = RenderCv(profile_id=examples.PROFILE)
    ctx = app.ctx(JOB, attempt=attempt, max_attempts=3)
    # When the job runs
    with pytest.raises(ConnectionError):
        runner.run(message, runner.load(message, ctx), ctx)
    # Then the profile is marked failed on the final attempt only
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None
    assert (row.get("cv_status", {}).get("S")) == expected


def test_out_of_time_on_the_final_attempt_is_a_requeue_not_a_failure(app: App) -> None:
    # Given the final attempt with too little time
    runner = build_runner()
    message = RenderCv(profile_id=examples.PROFILE)
    ctx = app.ctx(JOB, attempt=3, max_attempts=3, remaining_ms=10)
    # When the job runs / Then OutOfTime propagates and nothing is marked or stored
    with pytest.raises(OutOfTime):
        runner.run(message, runner.load(message, ctx), ctx)
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None and "cv_status" not in row
    assert app.objects("cv/") == {}
