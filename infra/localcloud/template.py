"""Read template.yaml and turn it into plain CloudFormation with the SAM translator.

The translator needs S3 locations for code, as after `sam package`; `packaging.package_code` uploads
the local CodeUri/ContentUri directories to the local cloud's S3 first and rewrites them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, NamedTuple

import boto3
import yaml


class _CloudFormationLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form intrinsics read as their long form (`!Ref X` -> {"Ref": "X"},
    `!GetAtt A.B` -> {"Fn::GetAtt": ["A", "B"]}), as the SAM translator and the AWS CLI read them. PyYAML alone: the
    command line reads templates without the local cloud's extra installed."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    tag = node.tag[1:]
    name = tag if tag in ("Ref", "Condition") else f"Fn::{tag}"
    value: Any
    if tag == "GetAtt" and isinstance(node.value, str):
        value = node.value.split(".", 1)
    elif isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node)
    else:
        value = loader.construct_mapping(node)  # type: ignore[arg-type]
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)


def yaml_parse(text: str) -> Any:
    """A template's YAML (or JSON) text as CloudFormation reads it."""
    return yaml.load(text, Loader=_CloudFormationLoader)  # a SafeLoader, with the intrinsics added


def default_template() -> Path:
    """The project's template: `CONVERGE_TEMPLATE`, else `template.yaml` from the current directory upward."""
    from localcloud.project import load_project

    return load_project().template


# Managed policies the translator may look up by name; the template itself uses explicit roles, so the
# loader only has to answer for SAM's own additions (never reached with explicit roles).
_AWS_MANAGED_POLICIES = {
    name: f"arn:aws:iam::aws:policy/{path}"
    for name, path in {
        "AWSLambdaBasicExecutionRole": "service-role/AWSLambdaBasicExecutionRole",
        "AWSXrayWriteOnlyAccess": "AWSXrayWriteOnlyAccess",
        "AWSLambdaSQSQueueExecutionRole": "service-role/AWSLambdaSQSQueueExecutionRole",
        "AWSLambdaDynamoDBExecutionRole": "service-role/AWSLambdaDynamoDBExecutionRole",
    }.items()
}


class _OfflinePolicyLoader:
    """Stands in for samtranslator's IAM-backed loader so the transform needs no AWS account."""

    def load(self) -> dict[str, str]:
        return dict(_AWS_MANAGED_POLICIES)


_PARSED: dict[str, dict[str, Any]] = {}


def load_sam_template(path: Path | str | None = None) -> dict[str, Any]:
    """Parse a SAM template (short-form intrinsics such as !Ref included) into a dict.

    Parsing takes ~0.4 s with the pure-Python YAML loader, so results are cached by content.
    """
    text = Path(path or default_template()).read_text()
    if text not in _PARSED:
        if len(_PARSED) >= 8:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[text] = yaml_parse(text)
    return copy.deepcopy(_PARSED[text])


class ApplicationTemplate(NamedTuple):
    """A template as written, and the parameters its parent passes it (as written; {} for the root)."""

    path: Path
    sam: dict[str, Any]
    given: dict[str, Any]


def application_templates(
    path: Path | str | None = None, given: dict[str, Any] | None = None
) -> list[ApplicationTemplate]:
    """The template and every nested application's it includes from disk (depth first), each parsed.

    A nested application is an `AWS::Serverless::Application` whose `Location` is a path, relative to the
    template that names it (a directory means its template.yaml); one from the Serverless Application
    Repository or a URL is not on disk and is left out."""
    root = Path(path or default_template()).resolve()
    sam = load_sam_template(root)
    found = [ApplicationTemplate(root, sam, dict(given or {}))]
    for resource in (sam.get("Resources") or {}).values():
        properties = resource.get("Properties") or {}
        location = properties.get("Location")
        if resource.get("Type") != "AWS::Serverless::Application" or not isinstance(location, str):
            continue
        if location.startswith(("https://", "http://", "s3://")):
            continue
        child = (root.parent / location).resolve()
        found += application_templates(
            child / "template.yaml" if child.is_dir() else child, properties.get("Parameters")
        )
    return found


def template_declaring(logical_id: str, path: Path | str | None = None) -> dict[str, Any]:
    """The parsed template (the root or a nested application's) that declares resource `logical_id`."""
    for found in application_templates(path):
        if logical_id in (found.sam.get("Resources") or {}):
            return found.sam
    raise KeyError(f"{logical_id} is declared neither in {path or default_template()} nor in its applications")


def parameter_values(sam: dict[str, Any], overrides: dict[str, str] | None = None) -> dict[str, str]:
    """Template parameter defaults merged with overrides (what `--parameter-overrides` does)."""
    values = {name: str(spec["Default"]) for name, spec in (sam.get("Parameters") or {}).items() if "Default" in spec}
    values.update(overrides or {})
    return values


def transform_sam(sam: dict[str, Any], parameters: dict[str, str], region: str = "us-east-1") -> dict[str, Any]:
    """Run the SAM translator (offline) and return the CloudFormation template."""
    # imported here: reading a template (the command line's queue caps and outputs) needs none of the translator
    from samtranslator.metrics.metrics import DummyMetricsPublisher, Metrics
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    session = boto3.Session(region_name=region, aws_access_key_id="offline", aws_secret_access_key="offline")
    # The translator times its own steps into a metrics cache and warns ("There are unpublished metrics") when the
    # cache is dropped unpublished; offline, its dummy publisher is where they go, so they are published there.
    metrics = Metrics("ServerlessTransform", DummyMetricsPublisher())
    translator = Translator(None, Parser(), boto_session=session, metrics=metrics)
    try:
        return translator.translate(
            copy.deepcopy(sam), parameter_values=dict(parameters), get_managed_policy_map=_OfflinePolicyLoader().load
        )
    finally:
        metrics.publish()
