"""The effects ledger: what the jobs did, counted from the emulated services themselves.

Never from converge's own bookkeeping. Two shapes:

* by resource (a team's catalogue, whose local hooks name no `EffectSources`): every write the template's own
  resources accepted from a function, with the operation that made it (localcloud.effect_log): items in each
  DynamoDB table, objects in each bucket, publishes to each topic, sends to each queue, by logical id, and
  e-mails ("ses"). `for_operation` and `totals` answer by resource; converge_testing reads the same log.
* the reference shape (`EffectSources` named in the hooks, as the reference application's are): SES messages
  as moto's SES holds them (each names its operation in a "Reference:" line), S3 object versions in the
  catalogue's output bucket (each carries its writer's operation id as metadata; versioning is switched on
  locally so an overwrite stays countable), and entry rows in a ledger provider's table (each keyed or tagged by
  the idempotency key, which is the operation id): `for_operation` and `totals` answer `ses`, `s3`, `ledger`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.s3.models import s3_backends
from moto.ses.models import ses_backends

from .clients import ACCOUNT_ID
from .effect_log import Tally
from .hooks import EffectSources

_REFERENCE = re.compile(r"Reference: (\S+)")


@dataclass
class Effects:
    emails: Counter[str] = field(default_factory=Counter)  # operation id -> messages sent
    object_keys: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # op -> distinct keys
    object_writes: Counter[str] = field(default_factory=Counter)  # op -> versions written
    ledger_rows: Counter[str] = field(default_factory=Counter)  # op -> entry rows
    ledger_amounts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # op -> credited cents
    counts_any: bool = True
    """False when nothing tells where a job's effects land (no local cloud's effect log, no `EffectSources`)."""
    resources: Tally = field(default_factory=Tally)
    """Every effect on the template's own resources, by operation and resource (localcloud.effect_log)."""
    by_resource: bool = False
    """True for a catalogue whose hooks name no `EffectSources`: `totals` and `for_operation` answer by resource."""

    def totals(self) -> dict[str, int]:
        if self.by_resource:
            return self.resources.totals()
        return {
            "ses": sum(self.emails.values()),
            "s3": len({key for keys in self.object_keys.values() for key in keys}),
            "ledger": sum(self.ledger_rows.values()),
        }

    def for_operation(self, operation_id: str) -> dict[str, int]:
        if self.by_resource:
            return self.resources.of(operation_id)
        return {
            "ses": self.emails.get(operation_id, 0),
            "s3": len(self.object_keys.get(operation_id, ())),
            "ledger": self.ledger_rows.get(operation_id, 0),
        }


def instrument(cloud: Any) -> None:
    """Turn on what counting needs, whatever the template says: versioning on the catalogue's output bucket
    (moto's CloudFormation ignores a bucket's VersioningConfiguration)."""
    bucket = _bucket(cloud)
    if bucket:
        cloud.client("s3").put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def _sources(cloud: Any) -> EffectSources:
    return cloud.hooks.effects  # type: ignore[no-any-return]


def _bucket(cloud: Any) -> str | None:
    sources = _sources(cloud)
    return cloud.outputs.get(sources.bucket_output) if sources.bucket_output else None


def count(cloud: Any) -> Effects:
    log = getattr(cloud, "effect_log", None)
    declared = _sources(cloud) != EffectSources()
    effects = Effects(
        counts_any=declared or log is not None,
        resources=log.tally() if log is not None else Tally(),
        by_resource=not declared and log is not None,
    )
    _count_emails(cloud, effects)
    _count_objects(cloud, effects)
    _count_ledger(cloud, effects)
    return effects


def _count_emails(cloud: Any, effects: Effects) -> None:
    backend = ses_backends[ACCOUNT_ID][cloud.clients.region]
    for message in backend.sent_messages:
        body = str(getattr(message, "body", "") or getattr(message, "raw_data", ""))
        match = _REFERENCE.search(body)
        effects.emails[match.group(1) if match else "(no reference)"] += 1


def _count_objects(cloud: Any, effects: Effects) -> None:
    bucket, prefixes = _bucket(cloud), _sources(cloud).object_prefixes
    if not bucket or not prefixes:
        return
    # Straight from moto's S3 backend (this process): one HeadObject per version is far too slow at load.
    store = s3_backends[ACCOUNT_ID]["aws"].buckets[bucket].keys
    for key, versions in store.iterlists():
        if not key.startswith(prefixes):
            continue
        for version in versions:
            metadata = getattr(version, "metadata", None)
            if metadata is None:  # a delete marker
                continue
            operation_id = metadata.get("x-amz-meta-operation-id", "(no operation)")
            effects.object_keys[operation_id].add(key)
            effects.object_writes[operation_id] += 1


def _count_ledger(cloud: Any, effects: Effects) -> None:
    sources = _sources(cloud)
    table = cloud.outputs.get(sources.ledger_output) if sources.ledger_output else None
    if not table:
        return
    # Straight from moto's DynamoDB backend (this process), as the objects are: a scan per count is slow.
    for stored in dynamodb_backends[ACCOUNT_ID][cloud.clients.region].tables[table].all_items():
        item = stored.to_json()["Attributes"]
        if not item["pk"]["S"].startswith(sources.ledger_entry_prefix):
            continue
        key = item.get("idempotency_key", {}).get("S", "(no key)")
        effects.ledger_rows[key] += 1
        effects.ledger_amounts[key].append(int(item.get("amount_cents", {}).get("N", "0")))
