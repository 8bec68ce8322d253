"""CV PDFs (staged, three steps): render a profile with fpdf2 into a content-addressed key, record it on the
profile, e-mail its owner the link.

Three effects, so three steps, each with its own policy (docs/steps-and-continuations.md): `store` is a
`keyed_effect` (the PDF's creation date is the profile's own `updated_at`, so the same profile renders to the
same bytes and therefore the same key: a re-run overwrites one object instead of adding another), `record`
a `keyed_effect` too (the profile row is set to the same key again), and `email` an `effect_then_claim`
(duplicates over loss, for the e-mail only). A retry skips every step already recorded: a crash after the
PDF was stored never stores it again, and the e-mail goes once the PDF and the record are in place.
The message and the profile repository live here; the renderer and the runner in catalogue.cv_pdf, the binding in
catalogue.bindings. A profile's edits re-render its CV through a second binding of the same runner, debounced: a
burst of edits renders it once, from the newest (`ProfileEdited`, docs/flow-control.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import ClientError

from catalogue.clients import LazyClient
from catalogue.records import profile_key, string
from converge import Identifier, JobMessage, error_code, logger
from converge.model.clock import iso


class RenderCv(JobMessage):
    profile_id: Identifier


class ProfileEdited(RenderCv):
    """A profile was edited: its CV is rendered again once the burst of edits is over, from the newest (`version`,
    the profile's version after the edit, which the editing code sets), never later than a minute after the first."""

    version: int


@dataclass(frozen=True)
class Experience:
    role: str
    company: str
    period: str


@dataclass(frozen=True)
class Profile:
    profile_id: str
    full_name: str = field(repr=False)
    headline: str
    summary: str
    skills: tuple[str, ...]
    experience: tuple[Experience, ...]
    updated_at: str
    email: str = field(default="", repr=False)
    """Where the CV's link goes; a profile without one gets its PDF stored and recorded, and no e-mail."""


class ProfileRepository(Protocol):
    def get(self, profile_id: str) -> Profile | None: ...

    def record_cv(self, profile_id: str, cv_key: str, at: float) -> None: ...

    def mark_cv_failed(self, profile_id: str, reason: str, at: float) -> None: ...


class DynamoProfileRepository:
    def __init__(self, table_name: str, dynamodb_client: Any = None) -> None:
        self.table_name = table_name
        self._dynamodb = LazyClient("dynamodb", dynamodb_client)

    def get(self, profile_id: str) -> Profile | None:
        key = {"pk": {"S": profile_key(profile_id)}}
        item = self._dynamodb().get_item(TableName=self.table_name, Key=key).get("Item")
        if item is None or "deleted_at" in item:
            return None
        experience = tuple(
            Experience(string(m, "role") or "", string(m, "company") or "", string(m, "period") or "")
            for m in (entry["M"] for entry in item.get("experience", {}).get("L", []))
        )
        return Profile(
            profile_id=profile_id,
            full_name=string(item, "full_name") or "",
            headline=string(item, "headline") or "",
            summary=string(item, "summary") or "",
            skills=tuple(entry["S"] for entry in item.get("skills", {}).get("L", [])),
            experience=experience,
            updated_at=string(item, "updated_at") or "",
            email=string(item, "email") or "",
        )

    def record_cv(self, profile_id: str, cv_key: str, at: float) -> None:
        self._update(
            profile_id,
            "SET cv_status = :rendered, cv_key = :key, cv_rendered_at = :at REMOVE cv_failure",
            {":rendered": {"S": "rendered"}, ":key": {"S": cv_key}, ":at": {"S": iso(at)}},
        )

    def mark_cv_failed(self, profile_id: str, reason: str, at: float) -> None:
        self._update(
            profile_id,
            "SET cv_status = :failed, cv_failure = :reason, cv_failed_at = :at",
            {":failed": {"S": "failed"}, ":reason": {"S": reason[:500]}, ":at": {"S": iso(at)}},
        )

    def _update(self, profile_id: str, expression: str, values: dict[str, Any]) -> None:
        try:
            self._dynamodb().update_item(
                TableName=self.table_name,
                Key={"pk": {"S": profile_key(profile_id)}},
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            logger.info("profile deleted meanwhile; nothing recorded", profile_id=profile_id)
