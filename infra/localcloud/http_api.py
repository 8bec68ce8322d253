"""API Gateway HTTP APIs (AWS::ApiGatewayV2::Api, e.g. SAM's HttpApi) emulated in-process.

moto's CloudFormation skips ApiGatewayV2, so gaps.py creates the API in moto's apigatewayv2 before the
deploy (Refs and outputs resolve to its id) and this module routes requests from the API's OpenAPI
body (paths, methods, x-amazon-apigateway-integration) to the integrated functions, with Lambda's
payload format 2.0 event and response mapping.

`HttpApi.handle(method, path, ...)` serves one request (`LocalCloud.http(...)` in tests); server mode
also listens on a loopback port (server.py). Routes secured with AWS_IAM need an Authorization header;
the signature is not verified. When the access key id is an IAM user's in the local account, that
user is the caller and its identity policies decide, as API Gateway's IAM authorizer does, whether it
may `execute-api:Invoke` the route (an explicit Deny wins; no Allow is a 403). Any other key id is a
caller of its own (`arn:aws:iam::<account>:user/<key id>`) allowed on every route, so a quick curl
with made-up keys still works.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from moto.iam.access_control import IAMPolicy, IAMUserAccessKey, PermissionResult
from moto.iam.models import iam_backends

from .clients import ACCOUNT_ID
from .functions import FunctionRuntime, FunctionSpec
from .intrinsics import Resolver
from .stack import StackResources

_METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "x-amazon-apigateway-any-method"}
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")


@dataclass(frozen=True)
class Route:
    method: str  # upper case, or ANY
    path: str  # OpenAPI template, e.g. /jobs/{job_type}
    function_id: str
    iam_auth: bool
    pattern: re.Pattern[str] = field(compare=False)

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def _path_pattern(template: str) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(\{[^}]+\})", template):
        if piece.startswith("{") and piece.endswith("+}"):
            parts.append(f"(?P<{piece[1:-2]}>.+)")
        elif piece.startswith("{"):
            parts.append(f"(?P<{piece[1:-1]}>[^/]+)")
        else:
            parts.append(re.escape(piece))
    return re.compile("^" + "".join(parts) + "$")


class HttpApi:
    def __init__(self, logical_id: str, api_id: str, routes: list[Route], runtime: FunctionRuntime, region: str):
        self.logical_id = logical_id
        self.api_id = api_id
        self.routes = routes
        self._runtime = runtime
        self._region = region

    def handle(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | str | None = None,
        query: str = "",
        source_ip: str = "127.0.0.1",
    ) -> HttpResponse:
        headers = {k.lower(): v for k, v in (headers or {}).items()}
        route, parameters = self._match(method.upper(), path)
        if route is None:
            return _json_response(404, {"message": "Not Found"})
        identity = self._iam_identity(headers.get("authorization", ""))
        if route.iam_auth and (identity is None or not self._may_invoke(identity, method.upper(), path)):
            return _json_response(403, {"message": "Forbidden"})
        event = self._event(route, method.upper(), path, parameters, headers, body, query, source_ip, identity)
        try:
            result = self._runtime.invoke(route.function_id, event)
        except Exception:
            return _json_response(500, {"message": "Internal Server Error"})
        return _lambda_response(result)

    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self.routes:
            match = route.pattern.match(path)
            if match and route.method in (method, "ANY"):
                return route, match.groupdict()
        return None, {}

    @staticmethod
    def _iam_identity(authorization: str) -> dict[str, Any] | None:
        match = _CREDENTIAL.search(authorization)
        if not match:
            return None
        access_key = match.group(1)
        user = iam_backends[ACCOUNT_ID]["aws"].get_user_from_access_key_id(access_key)
        return {
            "accessKey": access_key,
            "accountId": ACCOUNT_ID,
            "callerId": user.id if user else access_key,
            "cognitoIdentity": None,
            "principalOrgId": None,
            "userArn": user.arn if user else f"arn:aws:iam::{ACCOUNT_ID}:user/{access_key}",
            "userId": user.id if user else access_key,
        }

    def _may_invoke(self, identity: dict[str, Any], method: str, path: str) -> bool:
        """`execute-api:Invoke` on this route's ARN, by the policies of the IAM user that signed, if any."""
        if iam_backends[ACCOUNT_ID]["aws"].get_user_from_access_key_id(identity["accessKey"]) is None:
            return True
        arn = f"arn:aws:execute-api:{self._region}:{ACCOUNT_ID}:{self.api_id}/$default/{method}{path}"
        key = IAMUserAccessKey(ACCOUNT_ID, "aws", identity["accessKey"], headers={})
        results = [
            IAMPolicy(policy).is_action_permitted("execute-api:Invoke", arn) for policy in key.collect_policies()
        ]
        return PermissionResult.DENIED not in results and PermissionResult.PERMITTED in results

    def _event(
        self,
        route: Route,
        method: str,
        path: str,
        parameters: dict[str, str],
        headers: dict[str, str],
        body: bytes | str | None,
        query: str,
        source_ip: str,
        identity: dict[str, Any] | None,
    ) -> dict[str, Any]:
        now = datetime.now(tz=UTC)
        raw = body.encode() if isinstance(body, str) else body
        try:
            text, is_base64 = (raw.decode() if raw is not None else None), False
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(raw or b"").decode(), True
        query_parameters: dict[str, str] = {}
        for key, value in parse_qsl(query, keep_blank_values=True):
            query_parameters[key] = f"{query_parameters[key]},{value}" if key in query_parameters else value
        domain = f"{self.api_id}.execute-api.{self._region}.amazonaws.com"
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.route_key,
            "rawPath": path,
            "rawQueryString": query,
            "headers": headers,
            "requestContext": {
                "accountId": ACCOUNT_ID,
                "apiId": self.api_id,
                "domainName": domain,
                "domainPrefix": self.api_id,
                "http": {
                    "method": method,
                    "path": path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": source_ip,
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": route.route_key,
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": is_base64,
        }
        if identity is not None:
            event["requestContext"]["authorizer"] = {"iam": identity}
        if "cookie" in headers:
            event["cookies"] = [c.strip() for c in headers["cookie"].split(";")]
        if query_parameters:
            event["queryStringParameters"] = query_parameters
        if parameters:
            event["pathParameters"] = parameters
        if text is not None:
            event["body"] = text
        return event


def _json_response(status: int, document: Any) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json"}, json.dumps(document).encode())


def _lambda_response(result: Any) -> HttpResponse:
    """Payload format 2.0: a dict with statusCode is used as is; anything else is a 200 JSON body."""
    if not (isinstance(result, dict) and "statusCode" in result):
        return _json_response(200, result)
    headers = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ",".join(values)
    body = result.get("body") or ""
    payload = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    return HttpResponse(int(result["statusCode"]), headers, payload)


def http_apis(
    resources: dict[str, dict[str, Any]],
    resolver: Resolver,
    stack: StackResources,
    specs: dict[str, FunctionSpec],
    runtime: FunctionRuntime,
    region: str,
) -> list[HttpApi]:
    apis = []
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::ApiGatewayV2::Api" or logical_id not in stack:
            continue
        body = resolver.resolve((resource.get("Properties") or {}).get("Body") or {})
        iam_schemes = {
            name
            for name, scheme in (body.get("components", {}).get("securitySchemes") or {}).items()
            if scheme.get("x-amazon-apigateway-authtype") == "awsSigv4"
        }
        routes = []
        for path, operations in (body.get("paths") or {}).items():
            for method, operation in operations.items():
                integration = operation.get("x-amazon-apigateway-integration") if method in _METHODS else None
                function_id = _integrated_function(integration, specs)
                if function_id is None:
                    continue
                security = {name for requirement in operation.get("security", []) for name in requirement}
                verb = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
                routes.append(Route(verb, path, function_id, bool(security & iam_schemes), _path_pattern(path)))
        # Specific paths before greedy ones, as API Gateway prefers the most specific route.
        routes.sort(key=lambda r: ("+}" in r.path, -r.path.count("/"), r.method == "ANY"))
        apis.append(HttpApi(logical_id, stack.ref(logical_id), routes, runtime, region))
    return apis


def _integrated_function(integration: dict[str, Any] | None, specs: dict[str, FunctionSpec]) -> str | None:
    """The function an integration invokes: by its ARN, or an alias's or version's (`<arn>:<qualifier>`)."""
    uri = str((integration or {}).get("uri", ""))
    for spec in specs.values():
        if f"/functions/{spec.arn}/" in uri or f"/functions/{spec.arn}:" in uri or uri == spec.arn:
            return spec.logical_id
        if uri.startswith(spec.arn + ":"):
            return spec.logical_id
    return None
