"""An operator's writes on a concurrency cap's key (`converge limits pause|release`): a pause, its release, and a
slot freed whose holder is gone. Each is one conditional UpdateItem on the key's item (`converge.store.concurrency`);
a pause is recorded on it (`paused_by`, `paused_at`, and no time to live while paused), a release too
(`released_by`)."""

from __future__ import annotations

import math
from typing import Any

from botocore.exceptions import ClientError

from converge.store.codecs import number_value, string_value
from converge.store.conditions import condition_failed

KEPT_SECONDS = 24 * 3600
"""A key's item lives this long past its last slot taken (or its release)."""


class OperatorWrites:
    """The operator's writes, for the table that holds the keys (its `_update`: one conditional UpdateItem)."""

    def _update(
        self, cap: str, key: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        raise NotImplementedError

    def _applied(
        self, cap: str, key: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        """`_update`, answered: False, nothing written, when its condition failed."""
        try:
            self._update(cap, key, expression, condition, names, values)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def release_slot(self, cap: str, key: str, operation_id: str) -> bool:
        """An operator frees a slot left behind (its holder gone): False when the operation holds none there."""
        return self._applied(
            cap, key, "REMOVE #h.#o", "attribute_exists(#h.#o)", {"#h": "holders", "#o": operation_id}, {}
        )

    def pause(self, cap: str, key: str, operator: str, now: float) -> bool:
        """An operator pauses the key: no take passes until it is released (running ones run on), and the item does
        not expire meanwhile. False when it was paused already (the first pause's operator is kept)."""
        return self._applied(
            cap,
            key,
            "SET #p = :who, #a = :at, #h = if_not_exists(#h, :none) REMOVE #e",
            "attribute_not_exists(#p)",
            {"#p": "paused_by", "#a": "paused_at", "#h": "holders", "#e": "expires_at"},
            {":who": string_value(operator), ":at": number_value(math.floor(now * 1000)), ":none": {"M": {}}},
        )

    def resume(self, cap: str, key: str, operator: str, now: float) -> bool:
        """An operator releases a paused key (the next take passes): False when it was not paused."""
        return self._applied(
            cap,
            key,
            "SET #r = :who, #e = :kept REMOVE #p, #a",
            "attribute_exists(#p)",
            {"#p": "paused_by", "#a": "paused_at", "#r": "released_by", "#e": "expires_at"},
            {":who": string_value(operator), ":kept": number_value(math.floor(now) + KEPT_SECONDS)},
        )
