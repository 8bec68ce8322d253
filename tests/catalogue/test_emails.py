"""Account e-mails: no-ops for gone or confirmed users, one SES message per run, and a token nobody stores."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest

from catalogue import examples
from catalogue.emails import PASSWORD_RESET, VERIFICATION, PartnerVerificationEmail, PasswordResetEmail, build_runner
from catalogue.tokens import SecretsManagerSigningKey, TokenSigner
from tests.catalogue.conftest import App

VERIFY = "email.partner-verification.v1"
RESET = "email.password-reset.v1"


def token_in(body: str) -> str:
    link = re.search(r"https://\S+", body)
    assert link, body
    return parse_qs(urlparse(link.group(0)).query)["token"][0]


@pytest.mark.parametrize("user_id", [examples.DELETED_USER, "u-never-existed", examples.CONFIRMED_USER])
def test_verification_is_a_noop_for_deleted_missing_or_confirmed_users(app: App, user_id: str) -> None:
    # Given the verification runner built from the environment
    runner = build_runner(VERIFICATION)
    # When it loads a user who is deleted, never existed, or already confirmed
    loaded = runner.load(PartnerVerificationEmail(user_id=user_id), app.ctx(VERIFY))
    # Then there is nothing to do, and nothing was sent
    assert loaded is None
    assert app.sent_emails() == []


def test_password_reset_is_a_noop_for_a_deleted_user_but_not_for_a_confirmed_one(app: App) -> None:
    # Given the password-reset runner
    runner = build_runner(PASSWORD_RESET)
    # When it loads a deleted user and a confirmed user
    # Then only the deleted user is a no-op: a confirmed address is exactly who may reset a password
    assert runner.load(PasswordResetEmail(user_id=examples.DELETED_USER), app.ctx(RESET)) is None
    assert runner.load(PasswordResetEmail(user_id=examples.CONFIRMED_USER), app.ctx(RESET)) is not None


def test_verification_sends_one_email_from_the_sender_to_the_users_address(app: App) -> None:
    # Given an unconfirmed user
    runner = build_runner(VERIFICATION)
    message = PartnerVerificationEmail(user_id=examples.UNCONFIRMED_USER)
    ctx = app.ctx(VERIFY)
    # When the job runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then SES holds exactly one message, from the sender identity to the user's stored address
    [sent] = app.sent_emails()
    assert sent.source == app.data.sender_email
    assert sent.destinations["ToAddresses"] == [app.data.user_emails[examples.UNCONFIRMED_USER]]
    assert sent.subject == VERIFICATION.subject
    assert "/confirm-email?token=" in sent.body


def test_a_rerun_sends_again_with_a_fresh_token_each_valid_only_for_its_purpose(app: App) -> None:
    # Given an unconfirmed user and the runner (effect_then_claim: a re-run may send a duplicate)
    runner = build_runner(VERIFICATION)
    message = PartnerVerificationEmail(user_id=examples.UNCONFIRMED_USER)
    ctx = app.ctx(VERIFY)
    user = runner.load(message, ctx)
    # When the effect runs twice (a crash between the effect and the claim)
    runner.run(message, user, ctx)
    runner.run(message, user, ctx)
    # Then two e-mails went out, with two different tokens, each signed for this user and this purpose only
    first, second = (token_in(sent.body) for sent in app.sent_emails())
    assert first != second
    signer = TokenSigner(SecretsManagerSigningKey(app.outputs["SigningSecretArn"], app.clients["secretsmanager"]))
    now = app.clock.now()
    for token in (first, second):
        claims = signer.verify(token, VERIFICATION.purpose, now)
        assert claims is not None and claims.user_id == examples.UNCONFIRMED_USER
        assert signer.verify(token, PASSWORD_RESET.purpose, now) is None


def test_the_token_is_never_in_the_payload_or_the_logs(app: App, log_lines: list[str]) -> None:
    # Given a password-reset job and a capture of every log line
    runner = build_runner(PASSWORD_RESET)
    message = PasswordResetEmail(user_id=examples.UNCONFIRMED_USER)
    ctx = app.ctx(RESET)
    # When it runs
    runner.run(message, runner.load(message, ctx), ctx)
    # Then the token is in the e-mail only: not in the payload, not in any log line (nor the address)
    [sent] = app.sent_emails()
    token = token_in(sent.body)
    assert token not in json.dumps(message.model_dump())
    assert log_lines, "the runner logs the send"
    assert all(token not in line for line in log_lines)
    assert all(app.data.user_emails[examples.UNCONFIRMED_USER] not in line for line in log_lines)
    # And the signing key is nowhere in the logs either
    secret = app.clients["secretsmanager"].get_secret_value(SecretId=app.outputs["SigningSecretArn"])["SecretString"]
    assert all(secret not in line for line in log_lines)


def test_an_unverified_sender_is_a_permanent_failure_without_the_message_text(app: App) -> None:
    # Given the sender identity was never verified
    app.clients["sesv2"].delete_email_identity(EmailIdentity=app.data.sender_email)
    runner = build_runner(VERIFICATION)
    message = PartnerVerificationEmail(user_id=examples.UNCONFIRMED_USER)
    ctx = app.ctx(VERIFY)
    # When the job runs
    from converge.model.errors import PermanentError

    with pytest.raises(PermanentError) as raised:
        runner.run(message, runner.load(message, ctx), ctx)
    # Then it fails for good, naming SES's refusal but never the link
    assert "MessageRejected" in str(raised.value)
    assert "token" not in str(raised.value)
