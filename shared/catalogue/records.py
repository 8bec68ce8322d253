"""Keys of the reference application's rows in the app table (one table, `pk` = "<kind>#<id>")."""

from __future__ import annotations

import hashlib
from typing import Any

BOOST_EXPIRY_INDEX = "boost-expiry-index"
"""Sparse GSI (expiry_shard, ends_at): only active boosts carry `expiry_shard`."""

BOOST_SHARDS = 4
"""Active boosts are spread over this many index partitions so no one partition runs hot."""


def user_key(user_id: str) -> str:
    return f"user#{user_id}"


def partner_key(partner_id: str) -> str:
    return f"partner#{partner_id}"


def ad_key(ad_id: str) -> str:
    return f"ad#{ad_id}"


def profile_key(profile_id: str) -> str:
    return f"profile#{profile_id}"


def boost_key(boost_id: str) -> str:
    return f"boost#{boost_id}"


def boost_shard(boost_id: str) -> str:
    digest = hashlib.sha256(boost_id.encode()).digest()
    return f"active#{digest[0] % BOOST_SHARDS}"


def upload_key(partner_id: str, upload_id: str) -> str:
    """Where a partner's browser upload lands in the documents bucket (before the job copies it)."""
    return f"uploads/partner-docs/{partner_id}/{upload_id}"


def string(item: dict[str, Any], name: str) -> str | None:
    """A string attribute of a low-level DynamoDB item, or None."""
    value = item.get(name)
    return value["S"] if value and "S" in value else None


def number(item: dict[str, Any], name: str) -> int | None:
    value = item.get(name)
    return int(value["N"]) if value and "N" in value else None


def flag(item: dict[str, Any], name: str) -> bool:
    value = item.get(name)
    return bool(value and value.get("BOOL"))
