"""Identifiers of the seeded demo data (catalogue.demo writes them; bindings' example payloads use them)."""

from __future__ import annotations

UNCONFIRMED_USER = "u-1001"
SECOND_UNCONFIRMED_USER = "u-1002"
CONFIRMED_USER = "u-1003"
DELETED_USER = "u-1099"
SIGNED_UP_USER = "u-1004"
"""A user the demo signs up through the application's own sign-up function (not seeded)."""

PARTNER = "p-2001"
SECOND_PARTNER = "p-2002"
CLOSED_PARTNER = "p-2003"
"""A partner whose account is closed: no statement, no notice (a no-op)."""
PARTNERS = (PARTNER, SECOND_PARTNER, CLOSED_PARTNER)
"""Every seeded partner: the month's statements batch has a child for each."""
STATEMENT_MONTH = "2026-11"

PENDING_AD = "ad-3001"
SECOND_PENDING_AD = "ad-3002"
PROCESSED_AD = "ad-3003"

PROFILE = "cv-4001"
EDITED_PROFILE = "cv-4002"
"""A profile its owner edits five times in a few seconds: the demo's burst of CV re-renders (one runs)."""

EXPIRED_BOOSTS = ("b-5001", "b-5002")
ACTIVE_BOOST = "b-5003"

UPLOAD = "up-6001"
"""A partner document uploaded by PARTNER, waiting under uploads/partner-docs/."""
