"""The reference application's job catalogue: its bindings, which each converge runtime loads (BINDINGS).

Each module holds one job (or one area): its message model, its runner over small ports, the
AWS adapters of those ports, and its binding.
"""

from __future__ import annotations

from catalogue.ads import AD_IMAGE
from catalogue.benefits import PARTNER_BENEFITS, PARTNER_CREDIT_NOTICE
from catalogue.boosts import BOOST_EXPIRY
from catalogue.cv import CV_PDF
from catalogue.documents import PARTNER_DOCUMENT
from catalogue.emails import PARTNER_VERIFICATION, PASSWORD_RESET_EMAIL
from catalogue.statements import STATEMENT, STATEMENTS_SENT
from converge import JobBinding

BINDINGS: tuple[JobBinding, ...] = (
    PARTNER_VERIFICATION,
    PASSWORD_RESET_EMAIL,
    PARTNER_DOCUMENT,
    AD_IMAGE,
    CV_PDF,
    PARTNER_BENEFITS,
    PARTNER_CREDIT_NOTICE,
    BOOST_EXPIRY,
    STATEMENT,
    STATEMENTS_SENT,
)

LOCAL_HOOKS = "catalogue.local:hooks"
"""What the local cloud and `converge demo` use from this catalogue; a string, so no Lambda imports it."""

__all__ = ["BINDINGS", "LOCAL_HOOKS"]
