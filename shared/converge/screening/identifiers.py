"""The identifier types a job message's fields are declared with, and the rules a declaration must follow.

A message carries identifiers, never data. Each identifier type is a bounded alphabet and length,
checked by pydantic-core's regex engine (Rust, linear in the input), so free text that could carry
PII has nowhere to go: no spaces, no `@`, no prose. A field is one of

| type | for | alphabet, length |
|---|---|---|
| `Identifier` | the system's own ids (`u-1001`, `ORD-2024-000123`, `1700000000`) | letters, digits, `_.:-`; 128 |
| `Code` | machine codes and slugs (`referral-bonus`) | lower-case letters, digits, single `-_.`; 64 |
| `ObjectKey` | S3 object keys (`uploads/Partner-Docs/P2001.pdf`) | S3's safe characters, `/`-separated; 1024 |
| `ExternalId` | another system's ids (`cus_NffrFeUfNV2Hib`, `gid://shop/Order/1`) | letters, digits, `_.:/#+=-`; 255 |
| `Ulid` | ULIDs | Crockford base32; 26 |
| `Digest` | content hashes (MD5, SHA-1, SHA-256, SHA-512 hex) | lower-case hex; 32-128 |
| `uuid.UUID` | UUIDs | |
| `int`, `bool`, `Literal[...]`, an `Enum` | amounts, counts, epoch seconds, flags, fixed choices | |

optionally `| None`. Anything else (a bare `str`, `float`, a list, a nested model) is refused when
the class is defined, naming the field. A team can define its own identifier type with
`identifier(...)`; its pattern is the team's promise that the alphabet holds no free text.

`Allow(kind, reason)` in a field's `Annotated` metadata lets that one field hold a value one named
heuristic would refuse (or, with kind "field_name", keep a name the field-name rule would refuse);
`converge jobs list` shows the field, the kind and the reason.
"""

from __future__ import annotations

import enum
import types
import typing
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import StringConstraints
from pydantic.fields import FieldInfo

from converge.screening.field_names import sensitive_name
from converge.screening.heuristics import Kind

FIELD_NAME = "field_name"
"""The `Allow` kind that keeps a field name the field-name rule would refuse."""


@dataclass(frozen=True)
class IdentifierType:
    """Marks a `str` field as an identifier; `exempt` names heuristics its own format makes moot."""

    name: str
    pattern: str
    max_length: int
    exempt: frozenset[Kind] = frozenset()


@dataclass(frozen=True)
class Allow:
    """One field may hold what the heuristic `kind` would refuse, for a stated reason (shown in `jobs list`)."""

    kind: str
    reason: str

    def __post_init__(self) -> None:
        if self.kind != FIELD_NAME and self.kind not in Kind.__members__.values():
            choices = ", ".join([FIELD_NAME, *Kind])
            raise TypeError(f"Allow: unknown kind {self.kind!r}; choose one of {choices}")
        if not self.reason.strip():
            raise TypeError("Allow: give the reason this field may hold such values")


def identifier(name: str, pattern: str, max_length: int, exempt: frozenset[Kind] = frozenset()) -> Any:
    """A new identifier type: `str` constrained to `pattern` (anchored) and `max_length`."""
    marker = IdentifierType(name, pattern, max_length, exempt)
    return Annotated[str, StringConstraints(min_length=1, max_length=max_length, pattern=pattern), marker]


Identifier = identifier("Identifier", r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$", 128)
"""The system's own ids (`u-1001`, `ORD-2024-000123`, `1700000000`): letters, digits, `_.:-`; at most 128."""
Code = identifier("Code", r"^[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*$", 64)
"""Machine codes and slugs (`referral-bonus`): lower-case letters and digits, single `-_.`; at most 64."""
ObjectKey = identifier("ObjectKey", r"^[A-Za-z0-9!_.*'()-]+(?:/[A-Za-z0-9!_.*'()-]+)*$", 1024)
"""S3 object keys (`uploads/Partner-Docs/P2001.pdf`): S3's safe characters, `/`-separated; at most 1,024."""
ExternalId = identifier("ExternalId", r"^[A-Za-z0-9][A-Za-z0-9_.:/#+=-]{0,254}$", 255)
"""Another system's ids (`cus_NffrFeUfNV2Hib`, `gid://shop/Order/1`): letters, digits, `_.:/#+=-`; at most 255."""
Ulid = identifier("Ulid", r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$", 26, frozenset({Kind.SECRET}))
"""ULIDs: 26 characters of Crockford base32 (the secret heuristic does not apply)."""
Digest = identifier(
    "Digest", r"^(?:[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{64}|[0-9a-f]{128})$", 128, frozenset({Kind.SECRET})
)
"""Content hashes (MD5, SHA-1, SHA-256, SHA-512) in lower-case hex (the secret heuristic does not apply)."""
Uuid = uuid.UUID


@dataclass(frozen=True)
class FieldRules:
    """What the value heuristics do with one field: the kinds they skip, the allowances behind them, and
    the constants (Literal and Enum values) the model itself fixed, which need no screening."""

    skip: frozenset[Kind] = frozenset()
    allowed: tuple[Allow, ...] = ()
    constants: frozenset[str | int] = frozenset()


def field_rules(owner: str, name: str, field: FieldInfo) -> FieldRules:
    """Check one field's declaration (name and type); raise TypeError naming the field if it is refused."""
    markers = [*field.metadata, *_nested_metadata(field.annotation)]
    allowed = tuple(marker for marker in markers if isinstance(marker, Allow))
    if not any(allow.kind == FIELD_NAME for allow in allowed):
        sensitive = sensitive_name(name)
        if sensitive is not None:
            raise TypeError(
                f"{owner}.{name}: the field name {sensitive.describe()}; a job message carries identifiers, "
                "never PII or secrets: carry an id and fetch or regenerate the value when the job runs"
            )
    types_found = _declared_types(field.annotation, markers)
    if isinstance(types_found, str):
        raise TypeError(f"{owner}.{name}: {types_found}")
    exempt = frozenset().union(*(t.exempt for t in types_found if isinstance(t, IdentifierType)))
    if uuid.UUID in types_found:
        exempt |= {Kind.SECRET}  # a UUID may arrive as 32 hex digits
    skip = exempt | {Kind(a.kind) for a in allowed if a.kind != FIELD_NAME}
    constants = frozenset(value for t in types_found if isinstance(t, _Constants) for value in t.values)
    return FieldRules(frozenset(skip), allowed, constants)


@dataclass(frozen=True)
class _Constants:
    values: tuple[str | int, ...]


_ACCEPTED = (
    "declare it as Identifier, Code, ObjectKey, ExternalId, Ulid, Digest, uuid.UUID, an Enum or Literal, "
    "int or bool (each importable from converge)"
)


def _declared_types(annotation: Any, markers: list[Any]) -> list[Any] | str:
    """The field's accepted types (an IdentifierType standing for its str), or why it is refused."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        return _declared_types(base, [*markers, *meta])
    if origin in (Union, types.UnionType):
        found: list[Any] = []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                continue
            inner = _declared_types(arg, markers if typing.get_origin(arg) is not typing.Annotated else [])
            if isinstance(inner, str):
                return inner
            found += inner
        return found
    if origin is Literal:
        if all(isinstance(arg, (str, int, bool)) for arg in typing.get_args(annotation)):
            return [_Constants(typing.get_args(annotation))]
        return "Literal values must be strings, integers or booleans"
    if annotation is str:
        marker = next((m for m in markers if isinstance(m, IdentifierType)), None)
        if marker is None:
            return f"a bare str could carry free text (and so PII); {_ACCEPTED}"
        return [marker]
    if annotation in (int, bool, uuid.UUID):
        return [annotation]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if all(isinstance(member.value, (str, int)) for member in annotation):
            return [_Constants(tuple(member.value for member in annotation))]
        return "Enum values must be strings or integers"
    return f"{getattr(annotation, '__name__', annotation)!s} is not a message field type; {_ACCEPTED}"


def _nested_metadata(annotation: Any) -> list[Any]:
    """Metadata inside an Optional (`Annotated[str, ...] | None` keeps it on the union's argument)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _nested_metadata(arg)]
    if typing.get_origin(annotation) is typing.Annotated:
        return list(typing.get_args(annotation)[1:])
    return []
