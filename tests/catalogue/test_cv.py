"""CV PDFs (staged runner, three steps): rendered deterministically into one content-addressed object, recorded
on the profile, the link e-mailed; a retry runs none of the steps already recorded."""

from __future__ import annotations

import pytest

from catalogue import examples
from catalogue.cv import DynamoProfileRepository, RenderCv
from catalogue.cv_pdf import CvRunner, build_runner, render_cv
from catalogue.mail import SesMailer
from catalogue.records import profile_key
from catalogue.storage import S3ObjectStore
from converge.model.errors import OutOfTime
from converge.model.records import StepState
from converge.store.markers import MarkerStore
from tests.catalogue.conftest import App

JOB = "pdf.cv.v1"


def test_a_missing_profile_is_a_noop(app: App) -> None:
    # Given no such profile / When loaded / Then nothing to do
    assert build_runner().load(RenderCv(profile_id="cv-missing"), app.ctx(JOB)) is None


def test_the_cv_is_stored_recorded_and_its_link_emailed_as_three_steps(app: App) -> None:
    # Given the seeded profile (with its owner's address)
    runner = build_runner()
    message = RenderCv(profile_id=examples.PROFILE)
    ctx = app.ctx(JOB)
    # When the job runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then one PDF is stored under cv/<profile>/<sha256>.pdf and the profile points at it
    [(key, document)] = app.objects(f"cv/{examples.PROFILE}/").items()
    assert document.startswith(b"%PDF")
    assert key.endswith(".pdf")
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None and row["cv_key"]["S"] == key and row["cv_status"]["S"] == "rendered"
    # And one e-mail carries the link to that object and names the operation
    [sent] = app.sent_emails()
    assert sent.destinations["ToAddresses"] == ["alice.martin@example.com"]
    assert key in sent.body and f"Reference: {ctx.operation_id}" in sent.body
    # And the three steps are recorded, in order
    assert recorded_steps(app, ctx.operation_id) == [
        ("store", "keyed_effect"),
        ("record", "keyed_effect"),
        ("email", "effect_then_claim"),
    ]


def test_a_retry_runs_none_of_the_recorded_steps_again(app: App) -> None:
    # Given the job ran once, all three steps recorded
    runner = build_runner()
    message = RenderCv(profile_id=examples.PROFILE)
    runner.run(message, runner.load(message, app.ctx(JOB)), app.ctx(JOB))
    versions = object_versions(app)
    # When the same operation is delivered again (a redelivery after a crash before its terminal write)
    again = app.ctx(JOB, attempt=2, operation_id=app.ctx(JOB).operation_id)
    runner.run(message, runner.load(message, again), again)
    # Then nothing is stored or sent again
    assert object_versions(app) == versions == 1
    assert len(app.sent_emails()) == 1


class CrashingProfiles(DynamoProfileRepository):
    def record_cv(self, profile_id: str, cv_key: str, at: float) -> None:
        raise SimulatedCrashBetweenSteps("the worker died after the PDF was stored")


class SimulatedCrashBetweenSteps(Exception):
    pass


def test_a_crash_after_the_pdf_was_stored_stores_it_once_and_sends_one_link(app: App) -> None:
    # Given a first delivery that stores the PDF, then dies before recording it
    store = S3ObjectStore(app.data.documents_bucket, app.clients["s3"])
    crashing = CvRunner(CrashingProfiles(app.data.app_table, app.clients["dynamodb"]), store, mailer(app))
    message = RenderCv(profile_id=examples.PROFILE)
    first = app.ctx(JOB)
    with pytest.raises(SimulatedCrashBetweenSteps):
        crashing.run(message, crashing.load(message, first), first)
    assert object_versions(app) == 1 and app.sent_emails() == []
    # When the operation is delivered again
    runner = build_runner()
    retry = app.ctx(JOB, attempt=2, operation_id=first.operation_id)
    runner.run(message, runner.load(message, retry), retry)
    # Then the PDF is not stored again (its recorded key is used), the profile records it, one link is sent
    assert object_versions(app) == 1
    [key] = app.objects(f"cv/{examples.PROFILE}/")
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None and row["cv_key"]["S"] == key
    [sent] = app.sent_emails()
    assert key in sent.body


def test_a_profile_without_an_address_gets_its_pdf_and_no_email(app: App) -> None:
    # Given the profile has no address
    app.clients["dynamodb"].update_item(
        TableName=app.data.app_table, Key={"pk": {"S": profile_key(examples.PROFILE)}}, UpdateExpression="REMOVE email"
    )
    runner = build_runner()
    message = RenderCv(profile_id=examples.PROFILE)
    ctx = app.ctx(JOB)
    # When the job runs / Then the PDF is stored and recorded, and nothing is sent
    runner.run(message, runner.load(message, ctx), ctx)
    assert len(app.objects(f"cv/{examples.PROFILE}/")) == 1
    assert app.sent_emails() == []
    assert [name for name, _ in recorded_steps(app, ctx.operation_id)] == ["store", "record"]


def mailer(app: App) -> SesMailer:
    return SesMailer(app.outputs["SenderEmail"], app.clients["sesv2"])


def recorded_steps(app: App, operation_id: str) -> list[tuple[str, str]]:
    """The operation's steps as its markers record them (name and policy), in the runner's order, all done."""
    steps = MarkerStore(app.outputs["MarkersTableName"], app.clients["dynamodb"]).steps(operation_id).values()
    assert all(step.state is StepState.DONE for step in steps)
    return [(step.name, step.policy) for step in sorted(steps, key=lambda step: step.position)]


def object_versions(app: App) -> int:
    """How many times a CV object was written (each write a version: the bucket is versioned below)."""
    listed = app.clients["s3"].list_object_versions(Bucket=app.data.documents_bucket, Prefix="cv/")
    return len(listed.get("Versions", []))


@pytest.fixture(autouse=True)
def versioned(app: App) -> None:
    """Given the documents bucket keeps every version, as the local cloud's effects ledger has it."""
    app.clients["s3"].put_bucket_versioning(
        Bucket=app.data.documents_bucket, VersioningConfiguration={"Status": "Enabled"}
    )


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
        mailer(app),
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
