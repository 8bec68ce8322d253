"""The value and field-name heuristics measured on their corpus (tests/unit/heuristics_corpus.py).

The precision and recall found here are printed at the end of every test run (tests/conftest.py,
`pytest_terminal_summary`), and docs/messages.md quotes them. The bar: no false case refused, no true
case passed or refused as another kind.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Callable

import pytest
from pydantic import TypeAdapter

from converge import ExternalId
from converge.screening.field_names import sensitive_name
from converge.screening.heuristics import Kind, screen

from .heuristics_corpus import (
    ABBREVIATED_NAMES,
    EXTERNAL_ID_VALUES,
    FALSE_NAMES,
    FALSE_VALUES,
    TRUE_NAMES,
    TRUE_VALUES,
)

Record = Callable[[str, object], None]


def measure(true_hits: int, true_total: int, false_hits: int) -> tuple[float, float]:
    precision = true_hits / (true_hits + false_hits) if true_hits + false_hits else 1.0
    return precision, true_hits / true_total


def test_the_corpus_is_large_enough_and_covers_every_kind() -> None:
    assert sum(len(values) for values in TRUE_VALUES.values()) >= 150
    assert len(FALSE_VALUES) >= 150
    assert set(TRUE_VALUES) == {kind.value for kind in Kind} - {Kind.CONTROL.value}
    assert len(set(FALSE_VALUES)) == len(FALSE_VALUES)
    assert len(TRUE_NAMES) >= 50 and len(FALSE_NAMES) >= 50


def test_values_true_cases_are_refused_as_their_kind_and_false_cases_pass(record_property: Record) -> None:
    # Given every true case with the kind it is, and every false case
    # When each is screened
    found = {(kind, value): screen(value) for kind, values in TRUE_VALUES.items() for value in values}
    alarms = {value: screen(value) for value in FALSE_VALUES}

    # Then (recorded first, so the figures print whatever the outcome)
    missed = [(kind, value) for (kind, value), got in found.items() if got is None]
    mislabelled = [(kind, value, got) for (kind, value), got in found.items() if got is not None and got != kind]
    refused = {value: got for value, got in alarms.items() if got is not None}
    precision, recall = measure(len(found) - len(missed), len(found), len(refused))
    per_kind = ", ".join(
        f"{kind} {sum(found[kind, value] is not None for value in values)}/{len(values)}"
        for kind, values in TRUE_VALUES.items()
    )
    record_property(
        "heuristics",
        f"values: {len(found)} true and {len(alarms)} false cases: precision {precision:.3f}, recall {recall:.3f} "
        f"({len(refused)} false cases refused, {len(missed)} true cases passed, {len(mislabelled)} mislabelled)",
    )
    record_property("heuristics", f"values, recall per kind: {per_kind}")
    # no true case passes, none is named as another kind, and no false case is refused
    assert missed == []
    assert mislabelled == []
    assert refused == {}


def test_field_names_true_cases_are_refused_and_false_cases_pass(record_property: Record) -> None:
    # Given the field-name corpus / When each name is checked
    refused_true = {name: sensitive_name(name) for name in TRUE_NAMES}
    refused_false = {name: found for name in FALSE_NAMES if (found := sensitive_name(name)) is not None}
    hits = sum(found is not None for found in refused_true.values())
    precision, recall = measure(hits, len(TRUE_NAMES), len(refused_false))
    record_property(
        "heuristics",
        f"field names: {len(TRUE_NAMES)} true and {len(FALSE_NAMES)} false cases: "
        f"precision {precision:.3f}, recall {recall:.3f}",
    )
    # Then every sensitive name is refused, naming the word that made it so, and no ordinary name is
    assert [name for name, found in refused_true.items() if found is None] == []
    assert refused_false == {}
    assert sensitive_name("user_password") is not None and sensitive_name("user_password").term == "password"


def test_the_probe_sets_are_refused_each_as_its_kind(record_property: Record) -> None:
    # Given secrets an ExternalId field admits (behind a scheme-like prefix, in a webhook URL, in a URL's path or
    # fragment), each a well-formed ExternalId, and abbreviated names of secret and contact fields
    admits = TypeAdapter(ExternalId)
    probes = [(kind, value) for kind, values in EXTERNAL_ID_VALUES.items() for value in values]
    assert [value for _, value in probes if admits.validate_python(value) != value] == []
    # When each is screened
    found = {(kind, value): screen(value) for kind, value in probes}
    names = {name: sensitive_name(name) for name in ABBREVIATED_NAMES}
    refused, named = sum(got is not None for got in found.values()), sum(found[key] == key[0] for key in found)
    record_property(
        "heuristics",
        f"probe sets: {refused}/{len(found)} secrets an ExternalId admits refused ({named} as their kind), "
        f"{sum(got is not None for got in names.values())}/{len(names)} abbreviated field names refused",
    )
    # Then every one is refused, each value as its kind
    assert [key for key, got in found.items() if got != key[0]] == []
    assert [name for name, got in names.items() if got is None] == []


def generated_secrets(count: int, length: int, rng: random.Random) -> list[str]:
    alphabet = string.ascii_letters + string.digits
    return ["".join(rng.choice(alphabet) for _ in range(length)) for _ in range(count)]


def generated_ids(count: int, rng: random.Random) -> list[str]:
    """Ordinary generated ids: UUIDs, order numbers, epoch seconds, snowflakes, 10-digit ids, S3 keys."""
    ids: list[str] = []
    for _ in range(count):
        milliseconds = rng.randint(1_500_000_000_000, 1_900_000_000_000) - 1_288_834_974_657  # snowflake epoch
        ids += [
            str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            f"ORD-{rng.randint(2000, 2099)}-{rng.randint(0, 999999):06d}",
            str(rng.randint(1_400_000_000, 2_000_000_000)),
            str(milliseconds << 22 | rng.getrandbits(22)),
            str(rng.randint(10**9, 10**10 - 1)),
            f"uploads/p-{rng.randint(1, 9999)}/Report_{rng.randint(2000, 2099)}_Q{rng.randint(1, 4)}.pdf",
        ]
    return ids


def test_random_keys_are_refused_and_generated_ids_are_not(record_property: Record) -> None:
    # Given 1,000 random 32-character base62 keys and 6,000 generated ordinary ids (seeded)
    rng = random.Random(13)
    keys = generated_secrets(1000, 32, rng)
    ids = generated_ids(1000, rng)
    # When each is screened
    refused_keys = sum(screen(key) is not None for key in keys)
    refused_ids = [value for value in ids if screen(value) is not None]
    record_property(
        "heuristics",
        f"generated: {refused_keys}/1000 random 32-character keys refused, "
        f"{len(refused_ids)}/{len(ids)} ordinary ids refused",
    )
    # Then nearly every key is refused (a random string reads as words or parts now and then) and no id is
    assert refused_keys >= 990
    assert refused_ids == []


@pytest.mark.parametrize("value", ["alice@example.com", "4111 1111 1111 1111", "password=hunter2"])
def test_screening_skips_only_the_kinds_it_is_told_to(value: str) -> None:
    kind = screen(value)
    assert kind is not None
    assert screen(value, skip=frozenset({kind})) is None
    assert screen(value, skip=frozenset(Kind) - {kind}) is kind
