"""The CV runner: render a profile as a one-page PDF with fpdf2, store it under its content's key.

Its own module so that only a function that renders CVs imports fpdf2 (the binding names it lazily).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fpdf import FPDF

from catalogue.cv import DynamoProfileRepository, Profile, ProfileRepository, RenderCv
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectStore, S3ObjectStore, content_key
from converge import JobContext, StagedRunner, logger

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


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
