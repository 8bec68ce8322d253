"""Resolve CloudFormation intrinsic functions against a deployed stack.

The local cloud needs the values CloudFormation would have computed for properties it emulates itself
(function environments, event source mappings, schedules, alarms). `Resolver` evaluates Ref, GetAtt,
Sub, Join, Select, Split, FindInMap, If and the condition functions over: template parameters,
pseudo parameters, mappings, and an `AttributeSource` that knows the deployed resources.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")
_NO_VALUE = object()
"""What `Ref AWS::NoValue` resolves to, directly or through an If: the property or list item is left out."""


class AttributeSource(Protocol):
    """What the resolver needs to know about deployed resources."""

    def ref(self, logical_id: str) -> Any: ...

    def get_att(self, logical_id: str, attribute: str) -> Any: ...


class UnresolvableError(ValueError):
    """An intrinsic refers to something the local cloud cannot resolve."""


class Resolver:
    """Evaluates intrinsic functions; a value with no intrinsic is returned unchanged."""

    def __init__(
        self,
        *,
        parameters: dict[str, str],
        mappings: dict[str, Any],
        conditions: dict[str, Any],
        pseudo: dict[str, str],
        resources: AttributeSource,
    ) -> None:
        self._parameters = parameters
        self._mappings = mappings
        self._conditions = conditions
        self._pseudo = pseudo
        self._resources = resources
        self._condition_cache: dict[str, bool] = {}

    def resolve(self, value: Any) -> Any:
        """The value with every intrinsic evaluated; a value that is AWS::NoValue itself resolves to None."""
        resolved = self._resolve(value)
        return None if resolved is _NO_VALUE else resolved

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [item for item in map(self._resolve, value) if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            handler = self._FUNCTIONS.get(key)
            # {"Condition": "Name"} is a condition reference; a dict-valued "Condition" is IAM's.
            if handler is not None and not (key == "Condition" and not isinstance(arg, str)):
                return handler(self, arg)
        resolved = ((k, self._resolve(v)) for k, v in value.items())
        return {k: v for k, v in resolved if v is not _NO_VALUE}

    def condition(self, name: str) -> bool:
        """Evaluate a named template condition (cached, as CloudFormation evaluates it once)."""
        if name not in self._condition_cache:
            if name not in self._conditions:
                raise UnresolvableError(f"unknown condition {name!r}")
            self._condition_cache[name] = bool(self.resolve(self._conditions[name]))
        return self._condition_cache[name]

    # --- functions ---
    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self._pseudo:
            return self._pseudo[name]
        if name in self._parameters:
            return self._parameters[name]
        return self._resources.ref(name)

    def _get_att(self, arg: Any) -> Any:
        if isinstance(arg, str):
            logical_id, attribute = arg.split(".", 1)
        else:
            logical_id, attribute = self.resolve(arg[0]), self.resolve(arg[1])
        return self._resources.get_att(logical_id, attribute)

    def _sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, local_values = arg[0], {k: self.resolve(v) for k, v in arg[1].items()}
        else:
            text, local_values = arg, {}

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name in local_values:
                return str(local_values[name])
            if "." in name and name.split(".", 1)[0] not in self._pseudo:
                logical_id, attribute = name.split(".", 1)
                return str(self._resources.get_att(logical_id, attribute))
            return str(self._ref(name))

        # "${!Literal}" is CloudFormation's escape for a literal "${Literal}".
        return _SUB_VARIABLE.sub(substitute, text).replace("${!", "${")

    def _join(self, arg: Any) -> str:
        delimiter, items = arg
        return str(delimiter).join(str(item) for item in self.resolve(items))

    def _select(self, arg: Any) -> Any:
        index, items = arg
        return self.resolve(items)[int(self.resolve(index))]

    def _split(self, arg: Any) -> list[str]:
        delimiter, text = arg
        return str(self.resolve(text)).split(delimiter)

    def _find_in_map(self, arg: Any) -> Any:
        name, top, second = (self.resolve(part) for part in arg[:3])
        return self._mappings[name][top][second]

    def _if(self, arg: Any) -> Any:
        name, when_true, when_false = arg
        return self._resolve(when_true if self.condition(name) else when_false)

    def _equals(self, arg: Any) -> bool:
        left, right = (self.resolve(part) for part in arg)
        return str(left) == str(right)

    def _not(self, arg: Any) -> bool:
        return not self._truth(arg[0])

    def _and(self, arg: Any) -> bool:
        return all(self._truth(item) for item in arg)

    def _or(self, arg: Any) -> bool:
        return any(self._truth(item) for item in arg)

    def _truth(self, item: Any) -> bool:
        if isinstance(item, dict) and set(item) == {"Condition"}:
            return self.condition(item["Condition"])
        return bool(self.resolve(item))

    def _condition_ref(self, name: str) -> bool:
        return self.condition(name)

    def _get_azs(self, _arg: Any) -> list[str]:
        region = self._pseudo["AWS::Region"]
        return [f"{region}a", f"{region}b", f"{region}c"]

    _FUNCTIONS = {
        "Ref": _ref,
        "Fn::GetAtt": _get_att,
        "Fn::Sub": _sub,
        "Fn::Join": _join,
        "Fn::Select": _select,
        "Fn::Split": _split,
        "Fn::FindInMap": _find_in_map,
        "Fn::If": _if,
        "Fn::Equals": _equals,
        "Fn::Not": _not,
        "Fn::And": _and,
        "Fn::Or": _or,
        "Condition": _condition_ref,
        "Fn::GetAZs": _get_azs,
    }


def is_deployed(resource: dict[str, Any], resolver: Resolver) -> bool:
    """Whether a template resource exists in this deployment: it has no Condition, or its condition holds."""
    condition = resource.get("Condition")
    return condition is None or resolver.condition(condition)
