"""EventBridge-style event patterns, as used by EventBridge rules and Lambda FilterCriteria.

Supported: nested objects, exact values (strings, numbers, booleans, null), arrays in the event
(a leaf matches if any element matches), and the operators prefix, suffix, equals-ignore-case,
anything-but (values, {"prefix"}, {"suffix"}), numeric (=, <, <=, >, >= and ranges), exists and
wildcard. `$or` and cidr are not supported and raise, rather than silently never matching.
"""

from __future__ import annotations

import fnmatch
import json
import operator
from typing import Any

_MISSING = object()
_NUMERIC_OPS = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class PatternError(ValueError):
    """The pattern uses syntax the local cloud does not implement (or is malformed)."""


def parse_pattern(pattern: str | dict[str, Any]) -> dict[str, Any]:
    parsed = json.loads(pattern) if isinstance(pattern, str) else pattern
    if not isinstance(parsed, dict):
        raise PatternError(f"a pattern must be a JSON object: {pattern!r}")
    return parsed


def matches(pattern: dict[str, Any], event: Any) -> bool:
    """True when `event` satisfies every field of `pattern`."""
    for key, rule in pattern.items():
        if key.startswith("$"):
            raise PatternError(f"pattern operator {key} is not supported by the local cloud")
        value = event.get(key, _MISSING) if isinstance(event, dict) else _MISSING
        if isinstance(rule, dict):
            if isinstance(value, dict):
                if not matches(rule, value):
                    return False
            elif not _matches_absent(rule):
                return False
        elif isinstance(rule, list):
            if not _matches_leaf(rule, value):
                return False
        else:
            raise PatternError(f"pattern values must be objects or arrays, got {key}: {rule!r}")
    return True


def matches_any(patterns: list[dict[str, Any]], event: Any) -> bool:
    """Lambda FilterCriteria semantics: the filters are OR-ed."""
    return any(matches(p, event) for p in patterns)


def _matches_absent(rule: dict[str, Any]) -> bool:
    """A nested pattern applied to a missing object matches only if it requires absence throughout."""
    for nested in rule.values():
        if isinstance(nested, dict):
            if not _matches_absent(nested):
                return False
        elif not _matches_leaf(nested, _MISSING):
            return False
    return True


def _matches_leaf(alternatives: list[Any], value: Any) -> bool:
    if isinstance(value, list):
        # exists applies to the field, not to its elements.
        if any(isinstance(a, dict) and "exists" in a for a in alternatives):
            return any(_matches_one(a, value) for a in alternatives)
        return any(_matches_one(a, element) for a in alternatives for element in value)
    return any(_matches_one(a, value) for a in alternatives)


def _matches_one(alternative: Any, value: Any) -> bool:
    if not isinstance(alternative, dict):
        return value is not _MISSING and _equal(alternative, value)
    if len(alternative) != 1:
        raise PatternError(f"an operator object has exactly one key: {alternative!r}")
    ((op, arg),) = alternative.items()
    if op == "exists":
        return (value is not _MISSING) == bool(arg)
    if value is _MISSING:
        return False
    if op == "prefix":
        return _string_test(arg, value, str.startswith)
    if op == "suffix":
        return _string_test(arg, value, str.endswith)
    if op == "equals-ignore-case":
        return isinstance(value, str) and value.casefold() == str(arg).casefold()
    if op == "wildcard":
        return isinstance(value, str) and fnmatch.fnmatchcase(value, arg)
    if op == "anything-but":
        return not _anything_but_excludes(arg, value)
    if op == "numeric":
        return _numeric(arg, value)
    raise PatternError(f"pattern operator {op!r} is not supported by the local cloud")


def _string_test(arg: Any, value: Any, test: Any) -> bool:
    if isinstance(arg, dict) and "equals-ignore-case" in arg:
        return isinstance(value, str) and test(value.casefold(), arg["equals-ignore-case"].casefold())
    return isinstance(value, str) and test(value, arg)


def _anything_but_excludes(arg: Any, value: Any) -> bool:
    if isinstance(arg, dict):
        if "prefix" in arg:
            return isinstance(value, str) and value.startswith(arg["prefix"])
        if "suffix" in arg:
            return isinstance(value, str) and value.endswith(arg["suffix"])
        if "equals-ignore-case" in arg:
            options = arg["equals-ignore-case"]
            options = options if isinstance(options, list) else [options]
            return isinstance(value, str) and value.casefold() in {o.casefold() for o in options}
        raise PatternError(f"unsupported anything-but form: {arg!r}")
    excluded = arg if isinstance(arg, list) else [arg]
    return any(_equal(e, value) for e in excluded)


def _numeric(arg: list[Any], value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if len(arg) % 2:
        raise PatternError(f"numeric takes operator/value pairs: {arg!r}")
    return all(_NUMERIC_OPS[arg[i]](value, arg[i + 1]) for i in range(0, len(arg), 2))


def _equal(expected: Any, value: Any) -> bool:
    if expected is None or value is None:
        return expected is None and value is None
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, int | float) and isinstance(value, int | float):
        return float(expected) == float(value)
    return type(expected) is type(value) and expected == value
