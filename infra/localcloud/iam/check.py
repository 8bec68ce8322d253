"""Every AWS API call a function makes is authorised against its role's policies, as IAM would.

The function runtime marks the function that runs (its cold start and each invocation, nested ones
included) with `AccessCheck.acting_as`; a botocore event handler, registered for every client the way
moto registers its own stub (botocore.handlers.BUILTIN_HANDLERS), checks each call made meanwhile before
it is sent: the call's actions and resources (actions.py) against the role's policies (roles.py,
evaluation.py). A denied call raises what AWS answers (a ClientError with the service's access-denied
code, naming the role session, the action and the resource), is recorded in `AccessCheck.denials` and
written to the function's log. Calls made outside any function (tests' own clients, seeders, the CLI,
the emulated event sources) are not checked.

An event handler rather than a patch of BaseClient._make_api_call: the fault injector patches that
method while it is installed, and a handler composes with it in any order (its injected faults come first,
the calls it lets through are checked like any other).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from email.utils import parseaddr
from typing import Any

from botocore.exceptions import ClientError

from ..call_hooks import register_everywhere
from ..clients import ACCOUNT_ID, Clients
from ..clock import EmulatedClock
from . import shard_iterators
from .actions import Need, UnmappedApiCall, needs_of
from .evaluation import Verdict, evaluate
from .roles import Role

LOG = logging.getLogger("localcloud")
DENIALS_KEPT = 1_000
VERDICTS_KEPT = 10_000
LOG_PREFIX = "[local cloud IAM]"


@dataclass(frozen=True)
class Denial:
    """One call a function was refused: a missing grant ("denied") or a call the check cannot map ("unmapped")."""

    function_id: str
    role: str
    service: str
    operation: str
    action: str
    resource: str
    kind: str
    message: str
    at: float


@dataclass(frozen=True)
class _Acting:
    check: AccessCheck
    function_id: str


_ACTING: ContextVar[_Acting | None] = ContextVar("localcloud_iam_acting", default=None)


@contextlib.contextmanager
def outside_functions() -> Iterator[None]:
    """Calls made inside this block are nobody's (the check's own look-ups, made while a function runs)."""
    token = _ACTING.set(None)
    try:
        yield
    finally:
        _ACTING.reset(token)


class AccessCheck:
    """One local cloud's IAM check: each function's role, the denials met, and the look-ups the mapping needs."""

    def __init__(
        self,
        roles: Mapping[str, Role | None],
        function_arns: Mapping[str, str],
        clients: Clients,
        clock: EmulatedClock,
        log: Callable[[str, str], None] | None = None,
    ) -> None:
        self.roles = dict(roles)
        self._function_arns = dict(function_arns)
        self._clients = clients
        self._clock = clock
        self._log = log
        self.region = clients.region
        self.account_id = ACCOUNT_ID
        self.denials: deque[Denial] = deque(maxlen=DENIALS_KEPT)
        self._secret_arns: dict[str, str] = {}
        self._identities: dict[str, str] = {}
        self._partition_keys: dict[str, str] = {}
        self._verdicts: dict[tuple[Any, ...], Verdict] = {}
        self._condition_keys: dict[str, frozenset[str]] = {}
        for function_id, role in self.roles.items():
            if role is None:
                LOG.warning("%s: its role is not declared in the template; its calls are not checked", function_id)

    @contextlib.contextmanager
    def acting_as(self, function_id: str) -> Iterator[None]:
        """API calls made inside this block are `function_id`'s, checked against its role."""
        token = _ACTING.set(_Acting(self, function_id))
        try:
            yield
        finally:
            _ACTING.reset(token)

    def denied(self, function_id: str | None = None) -> list[Denial]:
        return [d for d in self.denials if function_id in (None, d.function_id)]

    # -- the check ---------------------------------------------------------------------------------------------

    def authorize(self, function_id: str, operation_model: Any, params: Mapping[str, Any]) -> None:
        """Raise what AWS would if `function_id`'s role may not make this call; return if it may."""
        role = self.roles.get(function_id)
        if role is None:
            return
        service_model = operation_model.service_model
        service, operation = service_model.service_name, operation_model.name
        try:
            with outside_functions():
                needs = needs_of(service, operation, params, self)
        except UnmappedApiCall as exc:
            message = f"{function_id} ({role.logical_id}): {exc}"
            self._record(Denial(function_id, role.arn, service, operation, "", "", "unmapped", message, self._now()))
            raise UnmappedApiCall(message) from None
        except (KeyError, TypeError, AttributeError, IndexError):
            return  # malformed parameters: the service refuses the call itself
        for need in needs:
            verdict = self._verdict(function_id, role, need)
            if not verdict.allowed:
                session = role.session_arn(self._function_arns.get(function_id, function_id).rsplit(":", 1)[-1])
                message = _denial_message(function_id, session, role, need, verdict)
                denial = Denial(
                    function_id,
                    role.arn,
                    service,
                    operation,
                    need.action,
                    need.resource,
                    "denied",
                    message,
                    self._now(),
                )
                self._record(denial)
                raise _access_denied(service_model, operation, message)

    def _verdict(self, function_id: str, role: Role, need: Need) -> Verdict:
        """The policies never change after the deploy: a verdict is decided once per distinct request, as far as the
        role's conditions can tell requests apart (a key no condition names, such as the partition key a put writes,
        would make every request distinct)."""
        used = self._condition_keys.get(function_id)
        if used is None:
            used = self._condition_keys[function_id] = _condition_keys(role)
        named = {name: value for name, value in need.context.items() if name.lower() in used}
        key = (function_id, need.action, need.resource, _frozen(named))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._decide(function_id, role, need)
            if len(self._verdicts) >= VERDICTS_KEPT:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def _decide(self, function_id: str, role: Role, need: Need) -> Verdict:
        context = {**self._request_context(function_id, role, need.resource), **need.context}
        verdict = evaluate(role.policies, need.action, need.resource, context)
        if verdict.allowed and role.boundary is not None:
            bounded = evaluate([role.boundary], need.action, need.resource, context)
            if not bounded.allowed:
                return Verdict(False, bounded.denied_by, bounded.unevaluated, outside_boundary=role.boundary.source)
        return verdict

    def _request_context(self, function_id: str, role: Role, resource: str) -> dict[str, str]:
        """The global condition keys every call from a Lambda function carries."""
        parts = resource.split(":")
        resource_account = parts[4] if len(parts) > 4 and parts[4] else self.account_id
        return {
            "aws:SecureTransport": "true",
            "aws:RequestedRegion": self.region,
            "aws:PrincipalAccount": self.account_id,
            "aws:PrincipalArn": role.arn,
            "aws:PrincipalType": "AssumedRole",
            "aws:ResourceAccount": resource_account,
            "lambda:SourceFunctionArn": self._function_arns.get(function_id, ""),
        }

    def _record(self, denial: Denial) -> None:
        self.denials.append(denial)
        LOG.warning("%s %s", LOG_PREFIX, denial.message)
        if self._log is not None:
            self._log(denial.function_id, f"{LOG_PREFIX} {denial.message}")

    def _now(self) -> float:
        return self._clock.now()

    # -- look-ups the mapping needs (made as nobody: outside_functions) ---------------------------------------

    def secret_arn(self, secret_id: str) -> str:
        if secret_id not in self._secret_arns:
            try:
                arn = self._clients("secretsmanager").describe_secret(SecretId=secret_id)["ARN"]
            except ClientError:
                return secret_id if secret_id.startswith("arn:") else self._secret_fallback(secret_id)
            self._secret_arns[secret_id] = arn
        return self._secret_arns[secret_id]

    def _secret_fallback(self, name: str) -> str:
        return f"arn:aws:secretsmanager:{self.region}:{self.account_id}:secret:{name}"

    def email_identity(self, address: str) -> str:
        """The verified identity `address` sends as: itself, else its domain or a parent domain; else itself."""
        address = parseaddr(address)[1] or address
        if address not in self._identities:
            domain = address.rpartition("@")[2]
            labels = domain.split(".")
            candidates = [address, *(".".join(labels[i:]) for i in range(len(labels) - 1))]
            for candidate in candidates:
                if self._identity_exists(candidate):
                    self._identities[address] = candidate
                    break
            else:
                return address  # not verified (yet): SES itself refuses the send; nothing to cache
        return self._identities[address]

    def _identity_exists(self, identity: str) -> bool:
        try:
            self._clients("sesv2").get_email_identity(EmailIdentity=identity)
        except ClientError:
            return False
        return True

    def partition_key(self, table: str) -> str | None:
        name = table.rsplit("/", 1)[-1] if table.startswith("arn:") else table
        if name not in self._partition_keys:
            try:
                schema = self._clients("dynamodb").describe_table(TableName=name)["Table"]["KeySchema"]
            except ClientError:
                return None
            self._partition_keys[name] = next(key["AttributeName"] for key in schema if key["KeyType"] == "HASH")
        return self._partition_keys[name]

    def stream_of(self, shard_iterator: str) -> str:
        stream = shard_iterators.stream_of(shard_iterator)
        if stream is None:
            raise UnmappedApiCall(
                "a DynamoDB Streams shard iterator that no GetShardIterator or GetRecords of this process returned "
                "names no stream the IAM check can authorise GetRecords on"
            )
        return stream


def _condition_keys(role: Role) -> frozenset[str]:
    """The condition keys a role's policies and boundary name, as written (context keys match them case-insensitively:
    both sides are compared lowercased)."""
    documents = [*role.policies, *([role.boundary] if role.boundary is not None else [])]
    statements = [
        statement
        for named in documents
        for statement in (named.document.get("Statement") or [])
        if isinstance(statement, dict)
    ]
    return frozenset(
        key.lower()
        for statement in statements
        for entries in (statement.get("Condition") or {}).values()
        for key in (entries or {})
    )


def _frozen(context: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((key, tuple(v) if isinstance(v, list) else v) for key, v in context.items()))


def _denial_message(function_id: str, session: str, role: Role, need: Need, verdict: Verdict) -> str:
    """AWS's wording, then what the local cloud knows: which role, and what to change in the template."""
    head = f"User: {session} is not authorized to perform: {need.action} on resource: {need.resource}"
    if verdict.denied_by:
        head += f" with an explicit deny in an identity-based policy ({verdict.denied_by})"
        why = f"{verdict.denied_by} denies it"
    elif verdict.outside_boundary:
        head += f" because no permissions boundary allows the {need.action} action"
        why = f"its permissions boundary {verdict.outside_boundary} does not allow it"
    else:
        head += f" because no identity-based policy allows the {need.action} action"
        where = role.grants.where(role.logical_id, need.resource) if role.grants else f"in {role.logical_id}'s policies"
        why = f"grant it {where}"
    assumed = f"; conditions taken to hold: {', '.join(verdict.unevaluated)}" if verdict.unevaluated else ""
    # The fix first, so a receipt's bounded reason keeps it; then who ran as whom.
    return f"{head} [local cloud: {why}; {function_id} runs as {role.logical_id}{assumed}]"


def _access_denied(service_model: Any, operation: str, message: str) -> ClientError:
    """The error AWS returns for a refused call: AccessDenied for query-style services and S3, else
    AccessDeniedException (SNS says AuthorizationError); HTTP 400 from DynamoDB, 403 elsewhere."""
    name = service_model.service_name
    if name == "sns":
        code = "AuthorizationError"
    elif service_model.protocol in ("query", "rest-xml", "ec2") or service_model.metadata.get("awsQueryCompatible"):
        code = "AccessDenied"
    else:
        code = "AccessDeniedException"
    status = 400 if name in ("dynamodb", "dynamodbstreams") else 403
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": str(uuid.uuid4())},
    }
    return ClientError(response, operation)  # type: ignore[arg-type]


# -- botocore event handlers ------------------------------------------------------------------------------------


def _before_parameter_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    shard_iterators.note_stream(params, model, context)
    acting = _ACTING.get()
    if acting is not None:
        acting.check.authorize(acting.function_id, model, params)


_HANDLERS = (("before-parameter-build", _before_parameter_build), ("after-call", shard_iterators.after_call))


register_everywhere(_HANDLERS, "localcloud-iam")
