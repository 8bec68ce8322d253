"""DynamoDB item sizes and capacity units, by AWS's published rules (on-demand, standard table class).

Item size (developer guide, "Item sizes and formats"): the sum of each attribute's name length plus
its value size. Strings and binaries count their UTF-8/raw bytes; a number counts about one byte per
two significant digits plus one (leading and trailing zeros trimmed, one more byte when negative);
booleans and nulls one byte; a list or map 3 bytes plus, per element, 1 byte plus the element (and,
in a map, the key's length); a set the sum of its elements.

Units ("Read/write capacity mode"): a write is 1 WRU per started 1 KB of the larger of the item
before and after (PutItem, UpdateItem, DeleteItem; a failed condition still consumes, sized by the
item as it stands, at least 1); transactional writes cost twice. A strongly consistent read is 1 RRU
per started 4 KB, an eventually consistent one half of that, a transactional one twice; Query and
Scan round the summed size of every item read, once per request, to 4 KB.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

WRITE_BLOCK = 1024
READ_BLOCK = 4096


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: ceil(significant digits / 2) + 1, plus 1 when negative."""
    value = Decimal(text)
    if value == 0:
        return 1 + 1
    digits = value.normalize().as_tuple().digits  # normalize() trims trailing zeros
    significant = len(digits)
    return math.ceil(significant / 2) + 1 + (1 if value < 0 else 0)


def _binary_size(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return len(base64.b64decode(value))  # the wire form is base64 text


def value_size(attribute: Mapping[str, Any]) -> int:
    """Size of one low-level attribute value such as {"S": "abc"} or {"M": {...}}."""
    ((kind, value),) = attribute.items()
    if kind == "S":
        return len(value.encode("utf-8"))
    if kind == "N":
        return number_size(value)
    if kind == "B":
        return _binary_size(value)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(item.encode("utf-8")) for item in value)
    if kind == "NS":
        return sum(number_size(item) for item in value)
    if kind == "BS":
        return sum(_binary_size(item) for item in value)
    if kind == "L":
        return 3 + sum(1 + value_size(item) for item in value)
    if kind == "M":
        return 3 + sum(1 + len(key.encode("utf-8")) + value_size(item) for key, item in value.items())
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_size(item: Mapping[str, Any] | None) -> int:
    """Size in bytes of a low-level item (attribute names plus values); 0 for no item."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(before: int, after: int, transactional: bool = False) -> int:
    """WRU of one item write: started KB of the larger image, at least 1; doubled in a transaction."""
    units = max(1, math.ceil(max(before, after) / WRITE_BLOCK))
    return units * 2 if transactional else units


def read_units(size: int, consistent: bool = True, transactional: bool = False) -> float:
    """RRU of a read of `size` bytes (one item, or a Query/Scan's whole result): started 4 KB, at least one."""
    blocks = max(1, math.ceil(size / READ_BLOCK))
    if transactional:
        return blocks * 2.0
    return float(blocks) if consistent else blocks / 2


def query_read_units(sizes: Iterable[int], consistent: bool = False) -> float:
    """A Query or Scan reads the sum of its items' sizes, rounded up once per request."""
    return read_units(sum(sizes), consistent)


def projected(
    item: Mapping[str, Any], table_keys: Iterable[str], index_keys: Iterable[str], projection: Mapping[str, Any]
) -> dict[str, Any]:
    """The part of an item a global secondary index stores: its keys, and what the projection names."""
    kind = projection.get("ProjectionType", "ALL")
    if kind == "ALL":
        return dict(item)
    names = {*table_keys, *index_keys}
    if kind == "INCLUDE":
        names.update(projection.get("NonKeyAttributes", []))
    return {name: value for name, value in item.items() if name in names}


def index_write_units(
    indexes: Iterable[tuple[list[str], Mapping[str, Any]]],
    table_keys: list[str],
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> int:
    """WRU a table write costs in its global secondary indexes (AWS: "Provisioned throughput considerations
    for Global Secondary Indexes"): an item entering an index is a put, leaving it a delete, changing its index
    key a delete and a put, changing a projected attribute an update, each 1 WRU per started KB of the
    projected item; an item in neither image of an index (a sparse index's absent keys) costs it nothing."""
    total = 0
    for index_keys, projection in indexes:
        old = projected(before, table_keys, index_keys, projection) if _in_index(before, index_keys) else None
        new = projected(after, table_keys, index_keys, projection) if _in_index(after, index_keys) else None
        if old is None and new is None:
            continue
        if old is not None and new is not None:
            if any(old[key] != new[key] for key in index_keys):
                total += write_units(item_size(old), 0) + write_units(item_size(new), 0)
            elif old != new:
                total += write_units(item_size(old), item_size(new))
            continue
        total += write_units(item_size(old if old is not None else new), 0)
    return total


def _in_index(item: Mapping[str, Any] | None, index_keys: Iterable[str]) -> bool:
    return item is not None and all(key in item for key in index_keys)
