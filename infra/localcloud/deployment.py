"""template.yaml -> package -> SAM transform -> gaps provisioned -> moto CloudFormation stack.

`deploy(clients, ...)` returns a `Deployment`: the transformed template (what the local cloud emulates
from), the stack outputs, Ref/GetAtt for the stack's resources, and a resolver for intrinsics.
Event source mappings are emulated rather than deployed: moto would try to run the functions itself
(in Docker) on every send and put, and would drop stream records it believes it delivered.
A nested application (`AWS::Serverless::Application` with a local `Location`) is deployed as a stack of
its own, from its own template, in CloudFormation's order (nested.py); its `Deployment` hangs off its
parent's, and `Deployment.locate` finds a resource wherever it lives.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import logging
import sys
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import gaps
from .clients import ACCOUNT_ID, Clients
from .intrinsics import Resolver, UnresolvableError
from .nested import NESTED_STACK, dependents, nested_stacks, parameter_value, references
from .packaging import code_locations, package_code
from .stack import DeployedResource, StackDeployError, StackResources, deploy_stack, stack_outputs, update_stack
from .template import default_template, load_sam_template, parameter_values, transform_sam

ARTIFACT_BUCKET = f"converge-local-artifacts-{ACCOUNT_ID}"
NOT_DEPLOYED_TYPES = {"AWS::Lambda::EventSourceMapping"}
_TRANSFORM_CACHE: dict[str, dict[str, Any]] = {}

# moto logs and warns about every resource type its CloudFormation skips; gaps.py handles the ones the
# system needs and tests/localcloud/test_moto_gaps.py pins them, so the noise carries no information.
logging.getLogger("moto").addFilter(lambda record: not str(record.msg).startswith("No Moto CloudFormation support for"))


@dataclass
class Deployment:
    stack_name: str
    template_path: Path
    template: dict[str, Any]  # transformed (plain CloudFormation), as written
    parameters: dict[str, str]
    own_outputs: dict[str, str]  # this stack's outputs
    stack: StackResources
    resolver: Resolver
    code_dirs: dict[str, Path]
    nested: dict[str, Deployment] = field(default_factory=dict)  # application logical id -> its deployment
    # This stack's outputs, then each nested application's that the parent does not itself declare: what a
    # caller looks names up in, wherever the resource lives.
    outputs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        merged = dict(self.own_outputs)
        for application in self.nested.values():
            for key, value in application.outputs.items():
                merged.setdefault(key, value)
        self.outputs = merged

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        """This stack's own resources (transformed); `locate` also searches the nested applications."""
        return self.template.get("Resources", {})

    def parts(self) -> Iterator[Deployment]:
        """This deployment, then every nested application's (depth first), each with its own resolver and stack."""
        yield self
        for application in self.nested.values():
            yield from application.parts()

    def locate(self, logical_id: str) -> Deployment:
        """The deployment (this one or a nested application's) whose template declares `logical_id`."""
        holders = [part for part in self.parts() if logical_id in part.resources]
        if not holders:
            raise UnresolvableError(f"{logical_id} is declared neither in {self.template_path} nor in its applications")
        return holders[0]

    def resource(self, logical_id: str) -> dict[str, Any]:
        """A resource of the transformed template, wherever it is declared."""
        return self.locate(logical_id).resources[logical_id]

    def ref(self, logical_id: str) -> Any:
        """Ref of a deployed resource, wherever it is declared (a table's name, a queue's URL...)."""
        return self.locate(logical_id).stack.ref(logical_id)

    def get_att(self, logical_id: str, attribute: str) -> Any:
        return self.locate(logical_id).stack.get_att(logical_id, attribute)


class _NoResourcesYet:
    """Resolution before the stack exists: only parameters, mappings and pseudo parameters."""

    def ref(self, logical_id: str) -> Any:
        raise UnresolvableError(f"{logical_id} is not deployed yet")

    def get_att(self, logical_id: str, attribute: str) -> Any:
        raise UnresolvableError(f"{logical_id}.{attribute} is not deployed yet")


def _resolver(template: dict[str, Any], parameters: dict[str, str], pseudo: dict[str, str], source: Any) -> Resolver:
    return Resolver(
        parameters=_typed(template, parameters),
        mappings=template.get("Mappings") or {},
        conditions=template.get("Conditions") or {},
        pseudo=pseudo,
        resources=source,
    )


def _typed(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """Parameter values as Ref gives them: a list parameter (CommaDelimitedList, List<...>) as a list."""
    declared = template.get("Parameters") or {}
    typed: dict[str, Any] = dict(parameters)
    for name, value in parameters.items():
        kind = str((declared.get(name) or {}).get("Type", "String"))
        if kind == "CommaDelimitedList" or kind.startswith("List<"):
            typed[name] = [item.strip() for item in value.split(",")]
    return typed


def transform_cached(sam: dict[str, Any], parameters: dict[str, str], region: str) -> dict[str, Any]:
    """The translator takes ~0.5 s; tests deploy the same template many times."""
    key = hashlib.sha256(json.dumps([sam, parameters, region], sort_keys=True, default=str).encode()).hexdigest()
    if key not in _TRANSFORM_CACHE:
        _TRANSFORM_CACHE[key] = transform_sam(sam, parameters, region)
    return copy.deepcopy(_TRANSFORM_CACHE[key])


def deploy(
    clients: Clients,
    *,
    template_path: Path | str | None = None,
    stack_name: str = "converge",
    parameter_overrides: dict[str, str] | None = None,
) -> Deployment:
    with warnings.catch_warnings():
        # moto re-parses the stack on later calls too, warning again about the types it skips.
        warnings.filterwarnings("ignore", message="Tried to parse AWS::", category=UserWarning)
        return _deploy(clients, template_path, stack_name, parameter_overrides)


def _layers_on_path(directories: Iterable[Path]) -> None:
    """A layer's code is on every function's path (/opt/python on Lambda); here, on this process's path."""
    for directory in directories:
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
    importlib.invalidate_caches()


def _deploy(
    clients: Clients,
    template_path: Path | str | None,
    stack_name: str,
    parameter_overrides: dict[str, str] | None,
) -> Deployment:
    path = Path(template_path or default_template()).resolve()
    sam = load_sam_template(path)
    s3 = clients("s3")
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    layers = [logical_id for logical_id, (prop, _) in code_locations(sam).items() if prop == "ContentUri"]
    code_dirs = package_code(sam, path.parent, s3, ARTIFACT_BUCKET)
    _layers_on_path(code_dirs[logical_id] for logical_id in layers)
    parameters = parameter_values(sam, parameter_overrides)
    template = transform_cached(sam, parameters, clients.region)

    pseudo = {
        "AWS::Region": clients.region,
        "AWS::AccountId": ACCOUNT_ID,
        "AWS::StackName": stack_name,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
    }
    early = _resolver(template, parameters, pseudo, _NoResourcesYet())
    to_deploy = copy.deepcopy(template)
    for logical_id in [lid for lid, r in to_deploy["Resources"].items() if r["Type"] in NOT_DEPLOYED_TYPES]:
        del to_deploy["Resources"][logical_id]
    aliases = _aliases_apart(to_deploy)

    provisioned: list[DeployedResource] = []
    for logical_id, resource in template["Resources"].items():
        provision = gaps.BEFORE_DEPLOY.get(resource["Type"])
        if provision and _condition_holds(resource, early):
            created = provision(clients, stack_name, logical_id, resource.get("Properties", {}), early)
            gaps.inline_resource(to_deploy, created)
            provisioned.append(created)

    on_disk = nested_stacks(to_deploy, path.parent)
    # What needs no application is deployed first (an application's parameters may name it), then the
    # applications, then what uses their outputs: CloudFormation's order, in moto that has no nested stacks.
    held = dependents(to_deploy["Resources"], on_disk)
    first = _without(to_deploy, held)
    deploy_stack(clients, stack_name, first, parameters)
    stack = StackResources(clients, stack_name)
    for resource in provisioned:
        stack.add(resource)

    applications = {lid: child for lid, child in on_disk.items() if _condition_holds(template["Resources"][lid], early)}
    deployed = _deploy_applications(clients, stack_name, template, applications, held, (parameters, pseudo), stack)
    for logical_id in on_disk:
        if logical_id in deployed:
            gaps.inline_resource(to_deploy, stack.get(logical_id))
        else:
            del to_deploy["Resources"][logical_id]  # its condition does not hold
    # What waited for the applications: resources, or only outputs (a team's template that passes converge's
    # outputs on, `!GetAtt Converge.Outputs.JobsTableName`, and declares nothing that uses them)
    waited = set(to_deploy["Resources"]) - set(first["Resources"])
    waited |= set(to_deploy.get("Outputs") or {}) - set(first.get("Outputs") or {})
    if waited:
        unchanged = frozenset(
            lid for lid, resource in first["Resources"].items() if to_deploy["Resources"].get(lid) == resource
        )
        update_stack(clients, stack_name, to_deploy, parameters, unchanged)
        stack = StackResources(clients, stack_name)
        for resource in provisioned:
            stack.add(resource)
        for logical_id, application in deployed.items():
            stack.add(_application_resource(logical_id, application))

    _create_aliases(clients, stack, aliases, _resolver(template, parameters, pseudo, stack))
    pseudo["AWS::StackId"] = clients("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]["StackId"]
    resolver = _resolver(template, parameters, pseudo, stack)
    for logical_id, resource in template["Resources"].items():
        apply = gaps.AFTER_DEPLOY.get(resource["Type"])
        if apply and _condition_holds(resource, resolver):
            apply(clients, stack_name, logical_id, resource.get("Properties", {}), resolver, stack)

    return Deployment(
        stack_name=stack_name,
        template_path=path,
        template=template,
        parameters=parameters,
        own_outputs=stack_outputs(clients, stack_name),
        stack=stack,
        resolver=resolver,
        code_dirs=code_dirs,
        nested=deployed,
    )


def _without(template: dict[str, Any], held: set[str]) -> dict[str, Any]:
    """The template less the held resources and the outputs that name one of them."""
    kept = {key: value for key, value in template.items() if key not in ("Resources", "Outputs")}
    kept["Resources"] = {lid: r for lid, r in template["Resources"].items() if lid not in held}
    outputs = {name: o for name, o in (template.get("Outputs") or {}).items() if not references(o) & held}
    if outputs or "Outputs" in template:
        kept["Outputs"] = outputs
    return kept


def _deploy_applications(
    clients: Clients,
    stack_name: str,
    template: dict[str, Any],
    applications: dict[str, Path],
    held: set[str],
    known: tuple[dict[str, str], dict[str, str]],
    stack: StackResources,
) -> dict[str, Deployment]:
    """Deploy each nested application once what its parameters name exists (other applications included).

    `known` is the parent's parameters and pseudo parameters; `stack` its deployed resources so far, to which
    each application is added as it is deployed."""
    deployed: dict[str, Deployment] = {}
    waiting = dict(applications)
    while waiting:
        missing = {
            logical_id: references(template["Resources"][logical_id].get("Properties", {})) & (held - set(deployed))
            for logical_id in waiting
        }
        ready = [logical_id for logical_id, names in missing.items() if not names]
        if not ready:
            raise StackDeployError(f"nested applications name resources that need an application themselves: {missing}")
        for logical_id in ready:
            resolver = _resolver(template, known[0], dict(known[1]), stack)
            given = resolver.resolve(template["Resources"][logical_id].get("Properties", {}).get("Parameters") or {})
            application = _deploy(
                clients,
                waiting.pop(logical_id),
                gaps.physical_name(stack_name, logical_id),
                {name: parameter_value(value) for name, value in given.items()},
            )
            deployed[logical_id] = application
            stack.add(_application_resource(logical_id, application))
    return deployed


def _application_resource(logical_id: str, application: Deployment) -> DeployedResource:
    """A nested stack as its parent sees it: Ref is its stack id; GetAtt Outputs.<Name> its outputs."""
    return DeployedResource(
        logical_id,
        NESTED_STACK,
        application.resolver.resolve({"Ref": "AWS::StackId"}),
        {f"Outputs.{key}": value for key, value in application.own_outputs.items()},
    )


def _aliases_apart(to_deploy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Take the Lambda aliases (SAM's AutoPublishAlias) out of what moto deploys: its CloudFormation has no alias.

    Within the stack moto builds, a reference to an alias stands for its function (a Lambda permission on the
    alias is one on the function here); the aliases themselves are created through the Lambda API once their
    versions exist (`_create_aliases`), and the local cloud's wiring resolves a mapping or an API integration
    that names one to the function it belongs to."""
    resources = to_deploy["Resources"]
    aliases = {lid: resources.pop(lid) for lid, r in list(resources.items()) if r["Type"] == "AWS::Lambda::Alias"}
    standing_for = {lid: alias["Properties"]["FunctionName"] for lid, alias in aliases.items()}

    def substitute(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Ref"} and node["Ref"] in standing_for:
                return copy.deepcopy(standing_for[node["Ref"]])
            if set(node) == {"Fn::Sub"}:
                return {"Fn::Sub": _sub_standing_for(node["Fn::Sub"], standing_for)}
            return {key: substitute(value) for key, value in node.items()}
        if isinstance(node, list):
            return [substitute(value) for value in node]
        return node

    to_deploy["Resources"] = substitute(resources)
    return aliases


def _sub_standing_for(argument: Any, standing_for: dict[str, Any]) -> Any:
    text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], dict(argument[1]))
    for logical_id, function in standing_for.items():
        if "${" + logical_id + "}" in text and set(function) == {"Ref"}:
            text = text.replace("${" + logical_id + "}", "${" + function["Ref"] + "}")
    return text if not variables else [text, variables]


def _create_aliases(
    clients: Clients, stack: StackResources, aliases: dict[str, dict[str, Any]], resolver: Resolver
) -> None:
    """Each alias on its published version, through the Lambda API; Ref to it is its ARN, as on AWS."""
    for logical_id, alias in aliases.items():
        if not _condition_holds(alias, resolver):
            continue
        # The version is the one moto published for the stack's AWS::Lambda::Version (its latest; moto answers no
        # GetAtt on a version).
        function = resolver.resolve(alias["Properties"]["FunctionName"])
        name = resolver.resolve(alias["Properties"]["Name"])
        lambda_ = clients("lambda")
        versions = [v["Version"] for v in lambda_.list_versions_by_function(FunctionName=function)["Versions"]]
        published = max((int(version) for version in versions if version.isdigit()), default=None)
        if published is None:
            raise StackDeployError(f"{logical_id}: {function} has no published version for alias {name}")
        created = lambda_.create_alias(FunctionName=function, Name=name, FunctionVersion=str(published))
        stack.add(DeployedResource(logical_id, "AWS::Lambda::Alias", created["AliasArn"], {}))


def _condition_holds(resource: dict[str, Any], resolver: Resolver) -> bool:
    condition = resource.get("Condition")
    return condition is None or resolver.condition(condition)
