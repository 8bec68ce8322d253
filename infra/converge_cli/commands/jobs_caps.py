"""Each queue's concurrency cap, as the template (or converge's application it includes) declares it on its
worker's SQS event source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localcloud.template import application_templates


def _value(node: Any, sam: dict[str, Any], given: dict[str, Any]) -> Any:
    """A literal, a `!FindInMap` into the template's own Mappings, or a `!Ref` to one of its parameters: the value
    the including template gives it (when a literal), else the parameter's default."""
    if isinstance(node, dict) and "Fn::FindInMap" in node:
        name, key, field = node["Fn::FindInMap"]
        return sam["Mappings"][name][key][field]
    if isinstance(node, dict) and "Ref" in node:
        name = node["Ref"]
        if isinstance(given.get(name), str | int | float):
            return given[name]
        return ((sam.get("Parameters") or {}).get(name) or {}).get("Default")
    return node


def queue_caps(template_path: Path | str | None = None) -> dict[str, int | None]:
    """queue name (the worker's QUEUE_NAME) -> the MaximumConcurrency of its SQS event source (None: no cap).

    The template is the project's (`--template`, or template.yaml found upward from the current directory)."""
    if template_path is None:
        from localcloud.project import current

        template_path = current().template
    caps: dict[str, int | None] = {}
    for part in application_templates(Path(template_path)):
        caps.update(_caps(part.sam, part.given))
    return caps


def _caps(sam: dict[str, Any], given: dict[str, Any]) -> dict[str, int | None]:
    caps: dict[str, int | None] = {}
    for resource in (sam.get("Resources") or {}).values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties") or {}
        queue = ((props.get("Environment") or {}).get("Variables") or {}).get("QUEUE_NAME")
        for event in (props.get("Events") or {}).values():
            if event.get("Type") == "SQS" and isinstance(queue, str):
                cap = _value(
                    (event.get("Properties", {}).get("ScalingConfig") or {}).get("MaximumConcurrency"), sam, given
                )
                caps[queue] = int(cap) if cap is not None else None
    return caps
