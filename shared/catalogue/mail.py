"""Outgoing e-mail: a port and its SES v2 adapter."""

from __future__ import annotations

from typing import Any, Protocol

from botocore.exceptions import ClientError

from catalogue.clients import LazyClient
from converge import PermanentError, error_code

# SES refusals that no retry can fix (unverified sender, bad address, paused account).
_REFUSED = frozenset(
    {"MessageRejected", "MailFromDomainNotVerifiedException", "BadRequestException", "AccountSuspendedException"}
)


class Mailer(Protocol):
    def send(self, to: str, subject: str, text: str) -> str:
        """Send a plain-text e-mail; returns the provider's message id."""
        ...


class SesMailer:
    def __init__(self, sender: str, sesv2_client: Any = None) -> None:
        self.sender = sender
        self._ses = LazyClient("sesv2", sesv2_client)

    def send(self, to: str, subject: str, text: str) -> str:
        try:
            response = self._ses().send_email(
                FromEmailAddress=self.sender,
                Destination={"ToAddresses": [to]},
                Content={
                    "Simple": {
                        "Subject": {"Data": subject, "Charset": "UTF-8"},
                        "Body": {"Text": {"Data": text, "Charset": "UTF-8"}},
                    }
                },
            )
        except ClientError as exc:
            if error_code(exc) in _REFUSED:
                # Say which refusal, never the message (it holds the link).
                raise PermanentError(f"SES refused the e-mail ({error_code(exc)})") from None
            raise
        return str(response["MessageId"])
