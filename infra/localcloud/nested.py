"""Nested applications: an `AWS::Serverless::Application` whose `Location` is a template on disk.

The SAM translator turns each into an `AWS::CloudFormation::Stack` whose `TemplateURL` is that path (as
written; `sam build` and `sam package` later upload it). CloudFormation creates a nested stack after the
parent resources its `Parameters` name, and before the parent resources that use its outputs
(`!GetAtt App.Outputs.Name`). The local cloud does the same in moto, which has no nested stacks of its
own: the parent's resources that need no application first, then each application as a stack of its
own (deployed from its template exactly as a root is), then the rest of the parent with the
applications' outputs in place. This module holds the part of that which reads templates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

NESTED_STACK = "AWS::CloudFormation::Stack"
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")
_REMOTE = ("https://", "http://", "s3://")


def local_template(properties: dict[str, Any], base_dir: Path) -> Path | None:
    """The child template of a nested stack, when its TemplateURL is a local path (else None: nothing to deploy)."""
    url = properties.get("TemplateURL")
    if not isinstance(url, str) or not url or url.startswith(_REMOTE):
        return None
    path = (base_dir / url).resolve()
    if path.is_dir():
        path = path / "template.yaml"
    if not path.is_file():
        hint = ""
        if ".converge/application" in url:  # a project made by `converge init` reaches converge's through a link
            hint = "; converge's application is linked there by `converge init`: run `converge link` in the project"
        raise FileNotFoundError(f"nested application template {url!r} not found (looked for {path}){hint}")
    return path


def nested_stacks(template: dict[str, Any], base_dir: Path) -> dict[str, Path]:
    """Logical id -> child template path, for every nested stack of a transformed template that is on disk."""
    found: dict[str, Path] = {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") == NESTED_STACK:
            path = local_template(resource.get("Properties") or {}, base_dir)
            if path is not None:
                found[logical_id] = path
    return found


def references(node: Any) -> set[str]:
    """The logical ids (and parameters) a template fragment names: Ref, GetAtt, Sub variables, DependsOn."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= references(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                target = value.split(".", 1)[0] if isinstance(value, str) else value[0]
                if isinstance(target, str):
                    found.add(target)
            elif key == "Fn::Sub":
                text = value if isinstance(value, str) else value[0]
                found |= {name.split(".", 1)[0].strip() for name in _SUB_VARIABLE.findall(text)}
                if isinstance(value, list):
                    found |= references(value[1])
            elif key == "DependsOn":
                found |= {value} if isinstance(value, str) else set(value)
            else:
                found |= references(value)
    return found


def dependents(resources: dict[str, dict[str, Any]], roots: Iterable[str]) -> set[str]:
    """`roots` and every resource that needs one of them, directly or through others."""
    needs = {logical_id: references(resource) for logical_id, resource in resources.items()}
    held = set(roots)
    while True:
        more = {logical_id for logical_id, named in needs.items() if logical_id not in held and named & held}
        if not more:
            return held
        held |= more


def parameter_value(value: Any) -> str:
    """A nested stack's parameter as CloudFormation passes it: text (a list joined by commas)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(parameter_value(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)
