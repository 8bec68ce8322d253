"""The ledger provider: credits keyed by an idempotency key, and lookups by that key.

The DynamoDB adapter emulates a payment/ledger provider. Its mode lives in the ledger table
itself (pk "__mode__") so tests, the demo and fault injection can flip it at run time:

* "dedup" (the default): a credit is a conditional put keyed by the idempotency key, in one
  transaction with the balance update. Repeating a key returns the original entry and writes
  nothing; `lookup` finds an entry by its key.
* "none": the provider neither deduplicates nor can be queried. Every credit writes a fresh row,
  and `can_lookup` is False, so a claim_then_effect runner must report UNKNOWABLE.

Every entry is one row ("entry#..."): count the rows to count the effects.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from catalogue.clients import LazyClient
from catalogue.records import number, string
from converge import PermanentError, TransientError, error_code
from converge.model.clock import Clock, SystemClock, iso

MODE_KEY = "__mode__"
ENTRY_PREFIX = "entry#"
ACCOUNT_PREFIX = "account#"

# Refusals DynamoDB gives *before* applying anything: safe to try again.
_REFUSED_BEFORE_ACTION = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "LimitExceededException"}
)
_REFUSED_FOR_GOOD = frozenset({"ValidationException", "ResourceNotFoundException", "AccessDeniedException"})
_CANCELLED_RETRYABLE = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


class LedgerMode(StrEnum):
    DEDUP = "dedup"
    NONE = "none"


class LedgerOutcomeAmbiguous(Exception):
    """The provider may or may not have applied the credit (timeout, dropped connection, lost response).

    Deliberately neither transient nor permanent: claim_then_effect must ask the provider before
    anything is resubmitted.
    """


class IdempotencyKeyReused(PermanentError):
    """The idempotency key already names a different credit."""


@dataclass(frozen=True)
class LedgerEntry:
    entry_id: str
    idempotency_key: str
    partner_id: str
    amount_cents: int
    created_at: str


class LedgerProvider(Protocol):
    def credit(self, idempotency_key: str, partner_id: str, amount_cents: int) -> LedgerEntry: ...

    def lookup(self, idempotency_key: str) -> LedgerEntry | None: ...

    @property
    def can_lookup(self) -> bool: ...


def entry_key(idempotency_key: str) -> str:
    return f"{ENTRY_PREFIX}{idempotency_key}"


def account_key(partner_id: str) -> str:
    return f"{ACCOUNT_PREFIX}{partner_id}"


class DynamoLedger:
    """LedgerProvider over the ledger table (see the module docstring for its two modes)."""

    def __init__(self, table_name: str, dynamodb_client: Any = None, clock: Clock | None = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)
        self._clock = clock or SystemClock()

    # -- the mode switch --------------------------------------------------------------------------------------

    def mode(self) -> LedgerMode:
        item = (
            self._dynamodb()
            .get_item(TableName=self.table_name, Key={"pk": {"S": MODE_KEY}}, ConsistentRead=True)
            .get("Item")
        )
        value = string(item or {}, "mode")
        return LedgerMode(value) if value in {m.value for m in LedgerMode} else LedgerMode.DEDUP

    def set_mode(self, mode: LedgerMode | str) -> None:
        self._dynamodb().put_item(
            TableName=self.table_name, Item={"pk": {"S": MODE_KEY}, "mode": {"S": LedgerMode(mode).value}}
        )

    # -- the provider -----------------------------------------------------------------------------------------

    @property
    def can_lookup(self) -> bool:
        return self.mode() is LedgerMode.DEDUP

    def credit(self, idempotency_key: str, partner_id: str, amount_cents: int) -> LedgerEntry:
        deduplicate = self.mode() is LedgerMode.DEDUP
        entry = LedgerEntry(
            entry_id=idempotency_key if deduplicate else uuid.uuid4().hex,
            idempotency_key=idempotency_key,
            partner_id=partner_id,
            amount_cents=amount_cents,
            created_at=iso(self._clock.now()),
        )
        put: dict[str, Any] = {"TableName": self.table_name, "Item": _entry_item(entry)}
        if deduplicate:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        try:
            self._dynamodb().transact_write_items(
                TransactItems=[
                    {"Put": put},
                    {
                        "Update": {
                            "TableName": self.table_name,
                            "Key": {"pk": {"S": account_key(partner_id)}},
                            "UpdateExpression": "ADD balance_cents :amount SET updated_at = :at",
                            "ExpressionAttributeValues": {
                                ":amount": {"N": str(amount_cents)},
                                ":at": {"S": entry.created_at},
                            },
                        }
                    },
                ]
            )
        except ClientError as exc:
            return self._refused(exc, entry)
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            raise TransientError(f"the ledger could not be reached ({exc.__class__.__name__})") from exc
        except (ReadTimeoutError, ConnectionClosedError) as exc:
            raise LedgerOutcomeAmbiguous(f"the ledger's answer was lost ({exc.__class__.__name__})") from exc
        return entry

    def lookup(self, idempotency_key: str) -> LedgerEntry | None:
        if not self.can_lookup:
            raise LookupError("the ledger is in 'none' mode and cannot be queried by idempotency key")
        item = (
            self._dynamodb()
            .get_item(TableName=self.table_name, Key={"pk": {"S": entry_key(idempotency_key)}}, ConsistentRead=True)
            .get("Item")
        )
        return _entry(item) if item else None

    # -- reading it back (tests, demo, operators) -------------------------------------------------------------

    def balance(self, partner_id: str) -> int:
        item = (
            self._dynamodb()
            .get_item(TableName=self.table_name, Key={"pk": {"S": account_key(partner_id)}}, ConsistentRead=True)
            .get("Item")
        )
        return number(item or {}, "balance_cents") or 0

    def entries(self, partner_id: str | None = None) -> list[LedgerEntry]:
        """Every entry row (a scan: for tests and the demo, not for the hot path)."""
        found: list[LedgerEntry] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "FilterExpression": "begins_with(pk, :entry)",
            "ExpressionAttributeValues": {":entry": {"S": ENTRY_PREFIX}},
            "ConsistentRead": True,
        }
        while True:
            page = self._dynamodb().scan(**kwargs)
            found.extend(_entry(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [entry for entry in found if partner_id is None or entry.partner_id == partner_id]

    def _refused(self, exc: ClientError, entry: LedgerEntry) -> LedgerEntry:
        code = error_code(exc)
        if code == "TransactionCanceledException":
            reasons = [reason.get("Code") for reason in exc.response.get("CancellationReasons", [])]
            if reasons and reasons[0] == "ConditionalCheckFailed":
                return self._original(entry)
            # A cancelled transaction applied nothing: retry what may pass later, refuse the rest.
            shown = ", ".join(map(str, reasons)) or "no reason given"
            if set(reasons) - {"None", None} <= _CANCELLED_RETRYABLE:
                raise TransientError(f"the ledger cancelled the credit ({shown})") from exc
            raise PermanentError(f"the ledger refused the credit ({shown})") from exc
        if code in _REFUSED_BEFORE_ACTION:
            raise TransientError(f"the ledger refused the credit for now ({code})") from exc
        if code in _REFUSED_FOR_GOOD:
            raise PermanentError(f"the ledger refused the credit ({code})") from exc
        # Anything else (an internal error mid-transaction) may or may not have applied.
        raise LedgerOutcomeAmbiguous(f"the ledger answered {code}") from exc

    def _original(self, attempted: LedgerEntry) -> LedgerEntry:
        original = self.lookup(attempted.idempotency_key)
        if original is None:
            raise LedgerOutcomeAmbiguous("the idempotency key is taken but its entry cannot be read")
        if (original.partner_id, original.amount_cents) != (attempted.partner_id, attempted.amount_cents):
            raise IdempotencyKeyReused(f"idempotency key {attempted.idempotency_key!r} names a different credit")
        return original


def _entry_item(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "pk": {"S": entry_key(entry.entry_id)},
        "kind": {"S": "entry"},
        "entry_id": {"S": entry.entry_id},
        "idempotency_key": {"S": entry.idempotency_key},
        "partner_id": {"S": entry.partner_id},
        "amount_cents": {"N": str(entry.amount_cents)},
        "created_at": {"S": entry.created_at},
    }


def _entry(item: dict[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        entry_id=string(item, "entry_id") or "",
        idempotency_key=string(item, "idempotency_key") or "",
        partner_id=string(item, "partner_id") or "",
        amount_cents=number(item, "amount_cents") or 0,
        created_at=string(item, "created_at") or "",
    )
