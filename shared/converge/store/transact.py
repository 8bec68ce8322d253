"""Items written in the same transaction as an operation's settle (`converge.flow.settlement`, `extras=`).

A feature that must change another item atomically with the write that settles an operation (the next
operation's request for a continuation; a batch's counter) asks the store for a `TransactItem` (built by the
store's own functions, such as `JobsTable.continuation_put`), so nothing above the store builds an expression.
A cancelled transaction is read here (`cancellation_reasons`, `failed_index`); the state table raises what it
met: `Refused` when the settle's own condition failed, `ExtraRefused` when one of the extra items' did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import ClientError


@dataclass(frozen=True)
class TransactItem:
    """One Put, Update or ConditionCheck on one of converge's tables, as TransactWriteItems takes it."""

    kind: Literal["Put", "Update", "ConditionCheck"]
    request: Mapping[str, Any]
    what: str = ""
    """What the item is, for a log line or a receipt ("continuation op-1:next")."""
    unmet: str = "exists already"
    """What its condition failing means, after `what` on a receipt ("exists already" for a Put conditional on a
    new id; a count says its batch has no such shard)."""

    def entry(self) -> dict[str, Any]:
        return {self.kind: dict(self.request)}


def cancellation_reasons(exc: ClientError) -> list[Mapping[str, Any]] | None:
    """The per-item reasons of a cancelled transaction (None when the error is something else)."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return None
    reasons: Any = exc.response.get("CancellationReasons")
    if isinstance(reasons, list):
        return [reason if isinstance(reason, Mapping) else {} for reason in reasons]
    # Some SDKs and emulators give the codes only in the message: "... [ConditionalCheckFailed, None]".
    message = str(exc.response["Error"].get("Message"))
    if "[" in message and message.endswith("]"):
        codes = [code.strip() for code in message[message.rindex("[") + 1 : -1].split(",")]
        return [{"Code": code} for code in codes]
    return []


def failed_index(reasons: list[Mapping[str, Any]]) -> int | None:
    """The first item whose condition failed (None when the transaction was cancelled for another reason)."""
    for index, reason in enumerate(reasons):
        if reason.get("Code") == "ConditionalCheckFailed":
            return index
    return None
