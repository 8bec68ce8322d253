"""Evaluate identity-based IAM policies for one request: explicit Deny, then Allow, else an implicit deny.

    verdict = evaluate(documents, "dynamodb:UpdateItem", table_arn, context)
    verdict.allowed, verdict.denied_by, verdict.unevaluated

What AWS's policy evaluation logic does for a role's own policies: Action/NotAction (case-insensitive,
`*` and `?` wildcards), Resource/NotResource (case-sensitive wildcards), Effect, and the condition
operators String*, Arn*, Bool and Null, with the IfExists suffix and the ForAnyValue/ForAllValues set
qualifiers, over the request context the caller supplies.

A condition this module cannot decide (an operator it does not implement, such as Numeric*, Date* or
IpAddress, or a key the context does not carry, such as aws:SourceIp) is taken to
hold, for an Allow and for a Deny alike: a grant that depends on it counts as a grant, and a Deny that
depends on it denies, so such a Deny is never evaluated into an allow. Each one is reported in
`Verdict.unevaluated`. Policy variables (`${aws:username}`) in a Resource are not substituted.

moto's own evaluator (moto.iam.access_control.IAMPolicy) is not used: it takes a Deny with NotResource
for a grant, turns an Allow whose condition does not hold into an explicit deny, matches actions
case-sensitively and treats `.` in an ARN as any character (tests/localcloud/test_moto_gaps.py pins
each, so an upgrade that fixes them is noticed).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Context = Mapping[str, str | Sequence[str]]
"""Request context keys (case-insensitive names) and their value, or values for a multivalued key."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    denied_by: str | None = None
    """The explicit Deny that decided, as "<policy>/<Sid or statement index>"; None for an implicit deny."""
    unevaluated: tuple[str, ...] = field(default=())
    """Conditions of the statements that decided which were taken to hold without being evaluated."""
    outside_boundary: str | None = None
    """The role's policies allow it but its permissions boundary (named) does not (set by the caller)."""


@dataclass(frozen=True)
class NamedDocument:
    """A policy document and where it comes from (shown in a denial), e.g. "CriticalWorkerRole/least-privilege"."""

    source: str
    document: Mapping[str, Any]


def evaluate(documents: Iterable[NamedDocument], action: str, resource: str, context: Context) -> Verdict:
    """Whether these policies, together, allow `action` on `resource` in `context`."""
    context_keys = {key.lower(): value for key, value in context.items()}
    allowed_with: list[str] | None = None
    for named in documents:
        for index, statement in enumerate(_as_list(named.document.get("Statement"))):
            if not (_action_matches(statement, action) and _resource_matches(statement, resource)):
                continue
            holds, unevaluated = _conditions_hold(statement.get("Condition") or {}, context_keys)
            if not holds:
                continue
            if statement.get("Effect") == "Deny":
                label = f"{named.source}/{statement.get('Sid') or index}"
                return Verdict(False, denied_by=label, unevaluated=tuple(unevaluated))
            if statement.get("Effect") == "Allow" and (allowed_with is None or not unevaluated):
                allowed_with = unevaluated  # prefer a grant that needed no assumption
    if allowed_with is None:
        return Verdict(False)
    return Verdict(True, unevaluated=tuple(allowed_with))


# --- matching ---------------------------------------------------------------------------------------------


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@functools.lru_cache(maxsize=4096)
def _wildcard(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters, `?` any one character; everything else literal."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"{body}\\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _any_matches(patterns: Any, value: str, ignore_case: bool) -> bool:
    return any(_wildcard(str(p), ignore_case).match(value) for p in _as_list(patterns))


def _action_matches(statement: Mapping[str, Any], action: str) -> bool:
    if "NotAction" in statement:
        return not _any_matches(statement["NotAction"], action, ignore_case=True)
    return _any_matches(statement.get("Action"), action, ignore_case=True)


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    if "NotResource" in statement:
        return not _any_matches(statement["NotResource"], resource, ignore_case=False)
    return _any_matches(statement.get("Resource"), resource, ignore_case=False)


# --- conditions -------------------------------------------------------------------------------------------


def _string_equals(expected: str, actual: str) -> bool:
    return expected == actual


def _string_equals_ignore_case(expected: str, actual: str) -> bool:
    return expected.lower() == actual.lower()


def _like(expected: str, actual: str) -> bool:
    return _wildcard(expected, False).match(actual) is not None


def _bool(expected: str, actual: str) -> bool:
    return expected.lower() == actual.lower()


_MATCHERS = {
    "StringEquals": _string_equals,
    "StringEqualsIgnoreCase": _string_equals_ignore_case,
    "StringLike": _like,
    "ArnEquals": _string_equals,
    "ArnLike": _like,
    "Bool": _bool,
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _conditions_hold(conditions: Mapping[str, Any], context: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """(whether every condition holds, the ones taken to hold without evaluation). All must hold (AND)."""
    unevaluated: list[str] = []
    for operator, entries in conditions.items():
        for key, expected in (entries or {}).items():
            outcome = _condition(operator, key.lower(), [str(v) for v in _as_list(expected)], context)
            if outcome is None:
                unevaluated.append(f"{operator} {key}")
            elif not outcome:
                return False, []
    return True, unevaluated


def _condition(operator: str, key: str, expected: list[str], context: Mapping[str, Any]) -> bool | None:
    """One operator on one key: True, False, or None when it cannot be decided here."""
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if name == "Null":
        present = key in context
        return any(present != (value.lower() == "true") for value in expected)
    if key not in context:
        # A key the local cloud does not supply may well be present on AWS: not decidable here.
        return True if if_exists else None
    values = [str(v) for v in _as_list(context[key])]
    negated = name in _NEGATED
    matcher = _MATCHERS.get(_NEGATED.get(name, name))
    if matcher is None:
        return None

    def matches(value: str) -> bool:
        hit = any(matcher(pattern, value) for pattern in expected)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(matches(value) for value in values)
    if qualifier == "ForAnyValue":
        return any(matches(value) for value in values)
    if qualifier:
        return None
    return all(matches(value) for value in values) if negated else any(matches(value) for value in values)
