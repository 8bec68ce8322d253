"""Each function's execution role and the policies attached to it, as the deployed template declares them.

A role's permissions come from its inline `Policies`, its `ManagedPolicyArns` (the template's own
AWS::IAM::ManagedPolicy resources, or AWS managed policies, whose documents moto ships), the
AWS::IAM::Policy and AWS::IAM::ManagedPolicy resources that name it in `Roles`, and AWS::IAM::RolePolicy
resources, declared in the function's own template or in another part of the deployment (a nested
application's role may hold its parent's policies); a `PermissionsBoundary` caps them. Every document is
resolved with the local cloud's intrinsic resolver against the deployed stack that declares it, so ARNs are
those of the deployed resources. SAM's generated roles (a function without `Role:`) are AWS::IAM::Role
resources of the transformed template like any other.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..intrinsics import Resolver, UnresolvableError, is_deployed
from ..nested import references
from .evaluation import NamedDocument

if TYPE_CHECKING:
    from ..deployment import Deployment

AWS_MANAGED_POLICY_PREFIX = "arn:aws:iam::aws:policy/"


class PolicyNotFound(LookupError):
    """A role names a managed policy that is neither in the template nor an AWS managed policy moto knows."""


@dataclass(frozen=True)
class Grants:
    """Where a grant of this role belongs, in the terms of the template that declares it."""

    template: str
    """The root template's file name (the team's `template.yaml`)."""
    application: str | None = None
    """The stack name of the nested application that declares the role (converge's), None for the root's own."""
    policies: tuple[str, ...] = ()
    """The root template's managed policies the role holds (a team's runner policy passed to converge's worker)."""
    parameters: tuple[str, ...] = ()
    """The application's parameters the role takes managed policies from (`DefaultRunnerPolicyArns`)."""

    def where(self, role: str, resource: str) -> str:
        """Where to grant an action on `resource` to `role`: the team's own policy for the team's resources, else
        the policies of whichever template declares the role."""
        if self.application is None:
            return f"in {role}'s policies in {self.template}"
        if self.application in resource:  # the application's own resources carry its stack's name
            return f"in {role}'s policies in converge's application (its own resource)"
        passed = f" ({role} takes it as {', '.join(self.parameters)})" if self.parameters else ""
        if self.policies:
            return f"in {', '.join(self.policies)} of {self.template}{passed}"
        if self.parameters:
            return f"in a managed policy of {self.template} passed to converge's application as {self.parameters[0]}"
        return f"in {role}'s policies in converge's application"


@dataclass(frozen=True)
class Role:
    logical_id: str
    name: str
    arn: str
    policies: tuple[NamedDocument, ...]
    boundary: NamedDocument | None = None
    grants: Grants | None = None

    def session_arn(self, session_name: str) -> str:
        """The caller AWS names in an AccessDenied: the assumed role's session (Lambda's is the function name)."""
        account = self.arn.split(":")[4]
        return f"arn:aws:sts::{account}:assumed-role/{self.name}/{session_name}"


def function_roles(deployment: Deployment, function_ids: list[str]) -> dict[str, Role | None]:
    """Function logical id -> its role (None: a role the template does not declare, which cannot be checked).

    A function of a nested application may hold policies its parent declares (a managed policy passed in as a
    parameter, a policy that names the application's role): every part of the deployment is searched."""
    parts = list(deployment.parts())
    managed = {arn: document for part in parts for arn, document in _template_managed_policies(part).items()}
    team = set(_template_managed_policies(parts[0]))  # the root template's own: the team's
    built: dict[tuple[str, str], Role] = {}
    answer: dict[str, Role | None] = {}
    for function_id in function_ids:
        part = deployment.locate(function_id)
        role_arn = part.resolver.resolve(part.resources[function_id].get("Properties", {}).get("Role"))
        role_id = _roles_by_arn(part).get(role_arn)
        if role_id is None:
            answer[function_id] = None
            continue
        key = (part.stack_name, role_id)
        if key not in built:
            built[key] = _role(role_id, part, parts, managed, team)
        answer[function_id] = built[key]
    return answer


def _roles_by_arn(part: Deployment) -> dict[str, str]:
    return {
        part.stack.get_att(logical_id, "Arn"): logical_id
        for logical_id, resource in part.resources.items()
        if resource.get("Type") == "AWS::IAM::Role" and is_deployed(resource, part.resolver)
    }


def _role(
    logical_id: str, part: Deployment, parts: list[Deployment], managed: Mapping[str, NamedDocument], team: set[str]
) -> Role:
    name = part.stack.ref(logical_id)
    raw = part.resources[logical_id].get("Properties", {})
    props = _resolved(part.resolver, logical_id, raw)
    policies = [
        NamedDocument(f"{logical_id}/{policy.get('PolicyName', index)}", policy["PolicyDocument"])
        for index, policy in enumerate(props.get("Policies") or [])
    ]
    policies += [_managed(arn, managed) for arn in props.get("ManagedPolicyArns") or []]
    policies += [document for other in parts for document in _attached(name, other.resources, other.resolver)]
    boundary = props.get("PermissionsBoundary")
    nested = part is not parts[0]
    declared = set(part.template.get("Parameters") or {})
    grants = Grants(
        template=parts[0].template_path.name,
        application=part.stack_name if nested else None,
        policies=tuple(managed[arn].source for arn in props.get("ManagedPolicyArns") or [] if arn in team),
        parameters=tuple(sorted(references(raw.get("ManagedPolicyArns")) & declared)) if nested else (),
    )
    return Role(
        logical_id=logical_id,
        name=name,
        arn=part.stack.get_att(logical_id, "Arn"),
        policies=tuple(policies),
        boundary=_managed(boundary, managed) if boundary else None,
        grants=grants,
    )


def _resolved(resolver: Resolver, logical_id: str, value: Any) -> Any:
    try:
        return resolver.resolve(value)
    except UnresolvableError as exc:
        raise UnresolvableError(f"{logical_id}: its IAM policy cannot be resolved for the IAM check: {exc}") from exc


def _template_managed_policies(part: Deployment) -> dict[str, NamedDocument]:
    """ARN -> document of each AWS::IAM::ManagedPolicy the template deploys."""
    found: dict[str, NamedDocument] = {}
    for logical_id, resource in part.resources.items():
        if resource.get("Type") == "AWS::IAM::ManagedPolicy" and is_deployed(resource, part.resolver):
            props = _resolved(part.resolver, logical_id, resource.get("Properties", {}))
            found[part.stack.ref(logical_id)] = NamedDocument(logical_id, props["PolicyDocument"])
    return found


def _managed(arn: str, template_policies: Mapping[str, NamedDocument]) -> NamedDocument:
    if arn in template_policies:
        return template_policies[arn]
    if arn.startswith(AWS_MANAGED_POLICY_PREFIX):
        document = _aws_managed_policies().get(arn.rsplit("/", 1)[-1])
        if document is not None:
            return NamedDocument(arn.rsplit("/", 1)[-1], document)
    raise PolicyNotFound(f"managed policy {arn} is neither in the template nor an AWS managed policy moto ships")


@functools.cache
def _aws_managed_policies() -> dict[str, Any]:
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    return {name: entry["Document"] for name, entry in json.loads(aws_managed_policies_data).items()}


def _attached(role_name: str, resources: dict[str, dict[str, Any]], resolver: Resolver) -> Iterator[NamedDocument]:
    """Policy resources that attach themselves to the role (AWS::IAM::Policy, ManagedPolicy, RolePolicy)."""
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        if kind not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
            continue
        if not is_deployed(resource, resolver):
            continue
        props = _resolved(resolver, logical_id, resource.get("Properties", {}))
        names = [props.get("RoleName")] if kind == "AWS::IAM::RolePolicy" else props.get("Roles") or []
        if role_name in names:
            label = f"{logical_id}/{props['PolicyName']}" if props.get("PolicyName") else logical_id
            yield NamedDocument(label, props["PolicyDocument"])
