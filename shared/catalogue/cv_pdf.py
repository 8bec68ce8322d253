"""The CV runner: render a profile as a one-page PDF with fpdf2, store it under its content's key, record it on
the profile, e-mail the link: three steps (catalogue.cv says why each has its policy).

Its own module so that only a function that renders CVs imports fpdf2 (the binding names it lazily).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fpdf import FPDF

from catalogue.cv import DynamoProfileRepository, Profile, ProfileRepository, RenderCv
from catalogue.mail import Mailer, SesMailer
from catalogue.settings import CatalogueSettings
from catalogue.storage import ObjectStore, S3ObjectStore, content_key
from converge import JobContext, StagedRunner, logger

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
LINK_BASE = "https://app.example.com/documents"
SUBJECT = "Your CV is ready"
TEXT = "Hello {name},\n\nyour CV is ready as a PDF:\n{link}\n"


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
    """Three steps: `store` the PDF, `record` its key on the profile, `email` the link to the profile's owner."""

    def __init__(
        self, profiles: ProfileRepository, store: ObjectStore, mailer: Mailer, link_base: str = LINK_BASE
    ) -> None:
        self.profiles = profiles
        self.store = store
        self.mailer = mailer
        self.link_base = link_base.rstrip("/")

    def load(self, message: RenderCv, ctx: JobContext) -> Profile | None:
        return self.profiles.get(message.profile_id)

    def work(self, message: RenderCv, profile: Profile, ctx: JobContext) -> None:
        ctx.check_time()
        # keyed_effect: the same profile renders to the same bytes, so the same key; its result is the key
        stored = ctx.step("store", lambda _key: {"object": self._store(profile, ctx)}, policy="keyed_effect")
        key = str(stored["object"])
        ctx.check_time()
        # keyed_effect: the profile row is set to the same key again on a re-run
        ctx.step(
            "record",
            lambda _key: self.profiles.record_cv(profile.profile_id, key, ctx.clock.now()),
            policy="keyed_effect",
        )
        if profile.email:
            ctx.check_time()
            # effect_then_claim: a crash between the send and its marker sends the link again (this step only)
            ctx.step("email", lambda _key: self._send_link(profile, key, ctx), policy="effect_then_claim")
        logger.info("cv published", profile_id=profile.profile_id, key=key, emailed=bool(profile.email))

    def _store(self, profile: Profile, ctx: JobContext) -> str:
        document = render_cv(profile)
        key = content_key(f"cv/{profile.profile_id}", document, ".pdf")
        self.store.put(key, document, "application/pdf", ctx.operation_id)
        logger.info("cv rendered", profile_id=profile.profile_id, key=key, size=len(document))
        return key

    def _send_link(self, profile: Profile, key: str, ctx: JobContext) -> None:
        text = TEXT.format(name=profile.full_name or "there", link=f"{self.link_base}/{key}")
        # The operation id lets support (and the effects ledger) trace a message to its operation.
        text += f"\nReference: {ctx.operation_id}\n"
        self.mailer.send(profile.email, SUBJECT, text)  # its message id is no identifier: not recorded

    def mark_failed(self, message: RenderCv, profile: Profile, ctx: JobContext, error: str) -> None:
        self.profiles.mark_cv_failed(profile.profile_id, error, ctx.clock.now())


def build_runner() -> CvRunner:
    settings = CatalogueSettings.from_env()
    return CvRunner(
        DynamoProfileRepository(settings.require("app_table")),
        S3ObjectStore(settings.require("documents_bucket")),
        SesMailer(settings.require("sender_email")),
    )
