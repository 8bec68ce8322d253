"""CV PDFs (keyed_effect, staged): render a profile with fpdf2 into a content-addressed key.

The PDF's creation date is the profile's own `updated_at`, so the same profile renders to the same
bytes and therefore the same key: a re-run overwrites one object instead of adding another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError
from fpdf import FPDF

from catalogue import examples
from catalogue.clients import LazyClient
from catalogue.records import profile_key, string
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectStore, S3ObjectStore, content_key
from converge.aws import error_code
from converge.clock import iso
from converge.identifiers import Identifier
from converge.message import JobMessage
from converge.observability import logger
from converge.registry import JobBinding, Policy, Queue
from converge.runner import JobContext
from converge.staged import StagedRunner

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


class RenderCv(JobMessage):
    profile_id: Identifier


@dataclass(frozen=True)
class Experience:
    role: str
    company: str
    period: str


@dataclass(frozen=True)
class Profile:
    profile_id: str
    full_name: str = field(repr=False)
    headline: str
    summary: str
    skills: tuple[str, ...]
    experience: tuple[Experience, ...]
    updated_at: str


class ProfileRepository(Protocol):
    def get(self, profile_id: str) -> Profile | None: ...

    def record_cv(self, profile_id: str, cv_key: str, at: float) -> None: ...

    def mark_cv_failed(self, profile_id: str, reason: str, at: float) -> None: ...


class DynamoProfileRepository:
    def __init__(self, table_name: str, dynamodb_client: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def get(self, profile_id: str) -> Profile | None:
        key = {"pk": {"S": profile_key(profile_id)}}
        item = self._dynamodb().get_item(TableName=self.table_name, Key=key).get("Item")
        if item is None or "deleted_at" in item:
            return None
        experience = tuple(
            Experience(string(m, "role") or "", string(m, "company") or "", string(m, "period") or "")
            for m in (entry["M"] for entry in item.get("experience", {}).get("L", []))
        )
        return Profile(
            profile_id=profile_id,
            full_name=string(item, "full_name") or "",
            headline=string(item, "headline") or "",
            summary=string(item, "summary") or "",
            skills=tuple(entry["S"] for entry in item.get("skills", {}).get("L", [])),
            experience=experience,
            updated_at=string(item, "updated_at") or "",
        )

    def record_cv(self, profile_id: str, cv_key: str, at: float) -> None:
        self._update(
            profile_id,
            "SET cv_status = :rendered, cv_key = :key, cv_rendered_at = :at REMOVE cv_failure",
            {":rendered": {"S": "rendered"}, ":key": {"S": cv_key}, ":at": {"S": iso(at)}},
        )

    def mark_cv_failed(self, profile_id: str, reason: str, at: float) -> None:
        self._update(
            profile_id,
            "SET cv_status = :failed, cv_failure = :reason, cv_failed_at = :at",
            {":failed": {"S": "failed"}, ":reason": {"S": reason[:500]}, ":at": {"S": iso(at)}},
        )

    def _update(self, profile_id: str, expression: str, values: dict[str, Any]) -> None:
        try:
            self._dynamodb().update_item(
                TableName=self.table_name,
                Key={"pk": {"S": profile_key(profile_id)}},
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            logger.info("profile deleted meanwhile; nothing recorded", profile_id=profile_id)


def _latin1(text: str) -> str:
    # The built-in PDF fonts cover Latin-1; anything else is replaced rather than failing the job.
    return text.encode("latin-1", "replace").decode("latin-1")


def _created(updated_at: str) -> datetime:
    try:
        return datetime.fromisoformat(updated_at.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return _EPOCH


def render_cv(profile: Profile) -> bytes:
    """The profile as a one-page PDF; the same profile always renders to the same bytes."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(_created(profile.updated_at))
    pdf.set_title(_latin1(f"CV - {profile.full_name}"))
    pdf.add_page()
    pdf.set_font("helvetica", style="B", size=20)
    pdf.cell(text=_latin1(profile.full_name), new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("helvetica", size=12)
    pdf.cell(text=_latin1(profile.headline), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.multi_cell(0, 6, _latin1(profile.summary), new_x="LMARGIN", new_y="NEXT")
    if profile.experience:
        pdf.ln(4)
        pdf.set_font("helvetica", style="B", size=14)
        pdf.cell(text="Experience", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        for job in profile.experience:
            pdf.cell(text=_latin1(f"{job.role}, {job.company} ({job.period})"), new_x="LMARGIN", new_y="NEXT")
    if profile.skills:
        pdf.ln(4)
        pdf.set_font("helvetica", style="B", size=14)
        pdf.cell(text="Skills", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=11)
        pdf.multi_cell(0, 6, _latin1(", ".join(profile.skills)), new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


class CvRunner(StagedRunner[RenderCv, Profile]):
    def __init__(self, profiles: ProfileRepository, store: ObjectStore) -> None:
        self.profiles = profiles
        self.store = store

    def load(self, message: RenderCv, ctx: JobContext) -> Profile | None:
        return self.profiles.get(message.profile_id)

    def work(self, message: RenderCv, profile: Profile, ctx: JobContext) -> None:
        document = render_cv(profile)
        ctx.check_time()
        key = content_key(f"cv/{profile.profile_id}", document, ".pdf")
        self.store.put(key, document, "application/pdf", ctx.operation_id)
        ctx.check_time()
        self.profiles.record_cv(profile.profile_id, key, ctx.clock.now())
        logger.info("cv rendered", profile_id=profile.profile_id, key=key, size=len(document))

    def mark_failed(self, message: RenderCv, profile: Profile, ctx: JobContext, error: str) -> None:
        self.profiles.mark_cv_failed(profile.profile_id, error, ctx.clock.now())


def build_runner() -> CvRunner:
    settings = CatalogueSettings.from_env()
    return CvRunner(
        DynamoProfileRepository(settings.require("app_table")), S3ObjectStore(settings.require("documents_bucket"))
    )


CV_PDF = JobBinding(
    job_type="pdf.cv.v1",
    message=RenderCv,
    runner=build_runner,
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Render a profile's CV as a PDF into a content-addressed key.",
    example_payload={"profile_id": examples.PROFILE},
)
