"""Account e-mails: partner e-mail verification and password reset (effect_then_claim: duplicates over loss).

The link token is minted when the e-mail is sent, from the user id and a signing key read at
execution; it is never in the payload, the operation record or the logs.
"""

from __future__ import annotations

from dataclasses import dataclass

from catalogue.mail import Mailer, SesMailer
from catalogue.settings import CatalogueSettings
from catalogue.tokens import SecretsManagerSigningKey, TokenSigner
from catalogue.users import DynamoUserDirectory, User, UserDirectory
from converge import Identifier, JobContext, JobMessage, logger

LINK_BASE = "https://app.example.com"


class PartnerVerificationEmail(JobMessage):
    user_id: Identifier


class PasswordResetEmail(JobMessage):
    user_id: Identifier


@dataclass(frozen=True)
class EmailTemplate:
    purpose: str
    subject: str
    path: str
    text: str
    skip_confirmed: bool
    """True when a user whose address is already confirmed needs no e-mail (verification)."""


VERIFICATION = EmailTemplate(
    purpose="email-verification",
    subject="Confirm your e-mail address",
    path="/confirm-email",
    text="Hello {name},\n\nplease confirm your e-mail address by opening this link:\n{link}\n\n"
    "The link is valid for 24 hours and works once.",
    skip_confirmed=True,
)
PASSWORD_RESET = EmailTemplate(
    purpose="password-reset",
    subject="Reset your password",
    path="/reset-password",
    text="Hello {name},\n\nsomeone asked to reset your password. To choose a new one, open this link:\n"
    "{link}\n\nIf it was not you, ignore this e-mail. The link is valid for 24 hours and works once.",
    skip_confirmed=False,
)


class AccountEmailRunner:
    """Load the user (gone or already confirmed: nothing to do), mint a fresh link token, send."""

    def __init__(
        self,
        template: EmailTemplate,
        users: UserDirectory,
        signer: TokenSigner,
        mailer: Mailer,
        link_base: str = LINK_BASE,
    ) -> None:
        self.template = template
        self.users = users
        self.signer = signer
        self.mailer = mailer
        self.link_base = link_base.rstrip("/")

    def load(self, message: PartnerVerificationEmail | PasswordResetEmail, ctx: JobContext) -> User | None:
        user = self.users.get(message.user_id)
        if user is None or user.deleted or not user.email:
            return None
        if self.template.skip_confirmed and user.email_confirmed:
            return None
        return user

    def run(self, message: PartnerVerificationEmail | PasswordResetEmail, user: User, ctx: JobContext) -> None:
        token = self.signer.issue(user.user_id, self.template.purpose, ctx.clock.now())
        link = f"{self.link_base}{self.template.path}?token={token}"
        text = self.template.text.format(name=user.display_name or "there", link=link)
        # The operation id lets support (and the effects ledger) trace a message to its operation.
        text += f"\n\nReference: {ctx.operation_id}\n"
        message_id = self.mailer.send(user.email, self.template.subject, text)
        logger.info("account e-mail sent", purpose=self.template.purpose, user_id=user.user_id, ses_id=message_id)


def build_verification_runner() -> AccountEmailRunner:
    return build_runner(VERIFICATION)


def build_password_reset_runner() -> AccountEmailRunner:
    return build_runner(PASSWORD_RESET)


def build_runner(template: EmailTemplate) -> AccountEmailRunner:
    settings = CatalogueSettings.from_env()
    return AccountEmailRunner(
        template=template,
        users=DynamoUserDirectory(settings.require("app_table")),
        signer=TokenSigner(SecretsManagerSigningKey(settings.require("signing_secret_arn"))),
        mailer=SesMailer(settings.require("sender_email")),
    )
