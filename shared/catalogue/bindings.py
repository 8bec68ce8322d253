"""The reference application's bindings, by name: every job's message model and runner factory is named
(`"package.module:attribute"`), so importing the catalogue loads none of its jobs' modules.

A function imports a job's module when it first needs it: a worker with the first record of that job, the enqueue
API with the first request for it; the relay and the resumer never (docs/lean-lambdas.md). Each job's module holds
its message model, its runner over small ports and the adapters of those ports.
"""

from __future__ import annotations

from catalogue import examples
from converge import Concurrency, Debounce, JobBinding, Limiter, Policy, Queue, Then

AD_IMAGE_PARTNER = Limiter(
    "ad-image-partner",
    limit=50,
    period=60,
    burst=10,
    description="The image partner's API takes 50 calls a minute: eleven at once after a quiet spell, then one "
    "every 1.2 s; an ad image over it waits SCHEDULED for its slot (docs/flow-control.md).",
)

ONE_STATEMENT_PER_PARTNER = Concurrency(
    "partner-statement",
    limit=1,
    key="partner_id",
    recheck=30,
    description="A partner's statements are built from one ledger: one at a time per partner; another waits "
    "SCHEDULED and tries again within 30 s.",
)

PARTNER_VERIFICATION = JobBinding(
    job_type="email.partner-verification.v1",
    message="catalogue.emails:PartnerVerificationEmail",
    runner="catalogue.emails:build_verification_runner",
    queue=Queue.CRITICAL,
    policy=Policy.EFFECT_THEN_CLAIM,
    default_enabled=True,
    description="E-mail a partner a link to confirm their address (the link's token is minted at send time).",
    example_payload={"user_id": examples.UNCONFIRMED_USER},
)

PASSWORD_RESET_EMAIL = JobBinding(
    job_type="email.password-reset.v1",
    message="catalogue.emails:PasswordResetEmail",
    runner="catalogue.emails:build_password_reset_runner",
    queue=Queue.CRITICAL,
    policy=Policy.EFFECT_THEN_CLAIM,
    default_enabled=True,
    description="E-mail a user a password-reset link (the link's token is minted at send time).",
    example_payload={"user_id": examples.CONFIRMED_USER},
)

PARTNER_DOCUMENT = JobBinding(
    job_type="partner-docs.upload.v1",
    message="catalogue.documents:PartnerDocumentUpload",
    runner="catalogue.documents:build_runner",
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Copy a partner's uploaded document to its content-addressed key.",
    example_payload={"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD},
    tenant_field="partner_id",  # one partner's bulk upload must not hold up the others'
)

AD_IMAGE = JobBinding(
    job_type="ads.image-process.v1",
    message="catalogue.ads:ProcessAdImage",
    runner="catalogue.ad_images:build_runner",  # Pillow: imported by the first ad image a worker runs
    queue=Queue.BULK,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Watermark an ad's uploaded image into a content-addressed key and mark the ad processed.",
    example_payload={"ad_id": examples.PENDING_AD},
    limits=(AD_IMAGE_PARTNER,),  # the partner's pace, shared by every ad image
)

CV_PDF = JobBinding(
    job_type="pdf.cv.v1",
    message="catalogue.cv:RenderCv",
    runner="catalogue.cv_pdf:build_runner",  # fpdf2 (and fontTools): imported by the first CV a worker runs
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,  # the job's own; each step carries its own (store, record, email)
    default_enabled=True,
    description="Render a profile's CV as a PDF (content-addressed), record it, e-mail the link: three steps.",
    example_payload={"profile_id": examples.PROFILE},
)

CV_REFRESH = JobBinding(
    job_type="pdf.cv-refresh.v1",
    message="catalogue.cv:ProfileEdited",
    runner="catalogue.cv_pdf:build_runner",  # the CV's own runner: store, record, e-mail
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Render a profile's CV again after a burst of edits: once, from the newest, within a minute.",
    example_payload={"profile_id": examples.PROFILE, "version": 2},
    debounce=Debounce(key="profile_id", newest_by="version", period=10, max_wait=60),
)

PARTNER_CREDIT_NOTICE = JobBinding(
    job_type="email.partner-credited.v1",
    message="catalogue.benefits:PartnerCreditNotice",
    runner="catalogue.benefits:build_notice_runner",
    queue=Queue.CRITICAL,
    policy=Policy.EFFECT_THEN_CLAIM,
    default_enabled=True,
    description="E-mail a partner that a credit reached their balance (the credit's continuation).",
    example_payload={"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral-bonus"},
)

PARTNER_BENEFITS = JobBinding(
    job_type="ledger.partner-benefits.v1",
    message="catalogue.benefits:PartnerBenefitCredit",
    runner="catalogue.benefits:build_runner",  # called once per process, on first use
    queue=Queue.CRITICAL,
    policy=Policy.CLAIM_THEN_EFFECT,
    default_enabled=False,  # moves money: a missing or unreadable toggle must never start it
    description="Credit a partner's balance through the ledger, keyed by the operation id; then notify them.",
    example_payload={"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral-bonus"},
    # what follows a credit that SUCCEEDED, written in the same transaction: the partner's notice
    on_success=Then(PARTNER_CREDIT_NOTICE.job_type, "catalogue.benefits:notice_of"),
)

APPROVED_CREDIT = JobBinding(
    job_type="ledger.approved-credit.v1",
    message="catalogue.approvals:LargePartnerCredit",
    runner="catalogue.approvals:build_runner",
    queue=Queue.CRITICAL,
    policy=Policy.EFFECT_THEN_CLAIM,  # a job of steps: the credit claims first, each e-mail after its send
    default_enabled=False,  # moves money: a missing or unreadable toggle must never start it
    description="Credit a partner above the approval threshold once an operator approves (signal 'approval', "
    "three days at most); tell the partner either way (docs/signals.md).",
    example_payload={"partner_id": examples.PARTNER, "amount_cents": 2_500_00, "benefit": "partner-of-the-year"},
)

BOOST_EXPIRY = JobBinding(
    job_type="sweep.boost-expiry.v1",
    message="catalogue.boosts:BoostExpirySweepTick",
    runner="catalogue.boosts:build_runner",
    queue=None,
    policy=Policy.RECURRING,
    default_enabled=False,  # a bulk sweep: only an explicit "on" starts it
    description="Expire boosts whose end time has passed (paged, conditional, safe to re-run).",
    example_payload={},
)

STATEMENT = JobBinding(
    job_type="billing.partner-statement.v1",
    message="catalogue.statements:PartnerStatement",
    runner="catalogue.statements:build_statement_runner",
    queue=Queue.BULK,
    policy=Policy.EFFECT_THEN_CLAIM,
    default_enabled=True,
    description="E-mail a partner their month's statement (a child of the month's statements batch).",
    example_payload={"partner_id": examples.PARTNER, "month": examples.STATEMENT_MONTH},
    concurrency=ONE_STATEMENT_PER_PARTNER,  # never two of a partner's statements at once (docs/flow-control.md)
)

STATEMENTS_SENT = JobBinding(
    job_type="billing.statements-sent.v1",
    message="catalogue.statements:StatementsSent",
    runner="catalogue.statements:build_summary_runner",
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Write the month's statement mailing counts to statements/<batch>/summary.json (its callback).",
    example_payload={
        "month": examples.STATEMENT_MONTH,
        "batch_id": f"statements-{examples.STATEMENT_MONTH}",
        "batch_total": 2,
        "batch_succeeded": 2,
    },
)

LIMITERS: tuple[Limiter, ...] = (AD_IMAGE_PARTNER,)
"""The reference application's rate limits (its bindings declare them too: a registry built from BINDINGS alone
knows them)."""

BINDINGS: tuple[JobBinding, ...] = (
    PARTNER_VERIFICATION,
    PASSWORD_RESET_EMAIL,
    PARTNER_DOCUMENT,
    AD_IMAGE,
    CV_PDF,
    CV_REFRESH,
    PARTNER_BENEFITS,
    PARTNER_CREDIT_NOTICE,
    APPROVED_CREDIT,
    BOOST_EXPIRY,
    STATEMENT,
    STATEMENTS_SENT,
)
