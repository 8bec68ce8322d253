"""A small builder for DynamoDB UpdateItem requests: SET, ADD, REMOVE and a condition, with placeholders.

The state table writes every change as one conditional UpdateItem; building the expression
here keeps each write readable as what it sets, removes and requires.
"""

from __future__ import annotations

from typing import Any


class Update:
    """One UpdateItem (or, `conditions` alone, a conditional PutItem or DeleteItem), its placeholders numbered."""

    def __init__(self) -> None:
        self._sets: list[str] = []
        self._adds: list[str] = []
        self._removes: list[str] = []
        self._conditions: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._scalars: dict[tuple[str, str], str] = {}

    def name(self, attribute: str) -> str:
        placeholder = f"#{attribute}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, low_level: dict[str, Any]) -> str:
        """A placeholder for a low-level attribute value ({"S": ...}, {"N": ...}, ...); equal scalars share one."""
        ((kind, inner),) = low_level.items()
        scalar = (kind, inner) if isinstance(inner, str) else None
        if scalar is not None and scalar in self._scalars:
            return self._scalars[scalar]
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = low_level
        if scalar is not None:
            self._scalars[scalar] = placeholder
        return placeholder

    def set(self, attribute: str, low_level: dict[str, Any]) -> Update:
        self._sets.append(f"{self.name(attribute)} = {self.value(low_level)}")
        return self

    def set_element(self, attribute: str, index: int, low_level: dict[str, Any]) -> Update:
        """Set one element of a list attribute (the element must exist: see `require` with size())."""
        self._sets.append(f"{self.name(attribute)}[{int(index)}] = {self.value(low_level)}")
        return self

    def set_if_absent(self, attribute: str, low_level: dict[str, Any]) -> Update:
        name = self.name(attribute)
        self._sets.append(f"{name} = if_not_exists({name}, {self.value(low_level)})")
        return self

    def append(self, attribute: str, entries: list[dict[str, Any]], start: list[dict[str, Any]]) -> Update:
        """Append `entries` to a list attribute, starting it as `start` when it does not exist yet."""
        name = self.name(attribute)
        self._sets.append(
            f"{name} = list_append(if_not_exists({name}, {self.value({'L': start})}), {self.value({'L': entries})})"
        )
        return self

    def add_from(self, attribute: str, start: dict[str, Any], amount: int) -> Update:
        """Add `amount` to a number attribute, counting from `start` when it does not exist yet (ADD would count from
        0)."""
        name = self.name(attribute)
        self._sets.append(f"{name} = if_not_exists({name}, {self.value(start)}) + {self.value({'N': str(amount)})}")
        return self

    def add(self, attribute: str, amount: int = 1) -> Update:
        self._adds.append(f"{self.name(attribute)} {self.value({'N': str(amount)})}")
        return self

    def remove(self, *attributes: str) -> Update:
        self._removes.extend(self.name(attribute) for attribute in attributes)
        return self

    def require(self, condition: str) -> Update:
        """AND a condition (written with placeholders from `name` and `value`)."""
        self._conditions.append(f"({condition})")
        return self

    def conditions(self) -> dict[str, Any]:
        """The condition alone, with its placeholders, for a PutItem or a DeleteItem (which set nothing)."""
        request: dict[str, Any] = {"ConditionExpression": " AND ".join(self._conditions)}
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request

    def request(self, table: str, key: dict[str, Any], **extra: Any) -> dict[str, Any]:
        clauses = []
        if self._sets:
            clauses.append("SET " + ", ".join(self._sets))
        if self._adds:
            clauses.append("ADD " + ", ".join(self._adds))
        if self._removes:
            clauses.append("REMOVE " + ", ".join(dict.fromkeys(self._removes)))
        request: dict[str, Any] = {"TableName": table, "Key": key, "UpdateExpression": " ".join(clauses), **extra}
        if self._conditions:
            request["ConditionExpression"] = " AND ".join(self._conditions)
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request
