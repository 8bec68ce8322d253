"""HTTP APIs (ApiGatewayV2, skipped by moto's CloudFormation) served from the template's OpenAPI body."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from localcloud import LocalCloud
from localcloud.server import running

from .conftest import FIXTURE_TEMPLATE
from .support import Recorder

SIGNED = {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDCALLER/20240101/us-east-1/execute-api/aws4_request, x"}


def test_the_api_exists_and_its_id_resolves_in_outputs(probe_cloud: LocalCloud) -> None:
    [api] = probe_cloud.http_apis
    assert probe_cloud.outputs["ProbeApiUrl"] == f"https://{api.api_id}.execute-api.us-east-1.amazonaws.com"
    assert {r.route_key for r in api.routes} == {"PUT /items/{item_id}", "GET /health"}


def test_a_signed_request_reaches_the_function_as_a_payload_v2_event(probe_cloud: LocalCloud) -> None:
    # Given the integrated function answering with an explicit status
    function = Recorder({"statusCode": 201, "headers": {"Location": "/items/42"}, "body": '{"ok": true}'})
    probe_cloud.override_handler("ApiFunction", function)

    # When a signed PUT arrives
    response = probe_cloud.http("PUT", "/items/42", headers=SIGNED, body='{"name": "x"}', query="dry=1")

    # Then the function got the HTTP API event, with the IAM caller, and its response was mapped back
    assert (response.status, response.headers["location"]) == (201, "/items/42")
    assert json.loads(response.body) == {"ok": True}
    [event] = function.events
    assert event["version"] == "2.0" and event["routeKey"] == "PUT /items/{item_id}"
    assert event["pathParameters"] == {"item_id": "42"}
    assert event["queryStringParameters"] == {"dry": "1"}
    assert json.loads(event["body"]) == {"name": "x"}
    assert event["requestContext"]["http"]["method"] == "PUT"
    assert event["requestContext"]["authorizer"]["iam"]["accessKey"] == "AKIDCALLER"


def test_an_unsigned_request_to_an_iam_route_is_forbidden(probe_cloud: LocalCloud) -> None:
    function = Recorder({"statusCode": 200})
    probe_cloud.override_handler("ApiFunction", function)
    assert probe_cloud.http("PUT", "/items/42").status == 403
    assert function.events == []


def test_open_routes_unknown_paths_and_plain_results(probe_cloud: LocalCloud) -> None:
    probe_cloud.override_handler("ApiFunction", Recorder({"healthy": True}))
    health = probe_cloud.http("GET", "/health")
    assert (health.status, json.loads(health.body)) == (200, {"healthy": True})  # a plain result is a JSON 200
    assert probe_cloud.http("GET", "/nothing-here").status == 404


def test_server_mode_serves_the_api_on_a_loopback_port() -> None:
    with running(template_path=FIXTURE_TEMPLATE) as cloud:
        cloud.override_handler("ApiFunction", Recorder({"statusCode": 200, "body": "pong"}))
        url = cloud.http_api_urls["ProbeApi"]
        with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
            assert (response.status, response.read()) == (200, b"pong")
        try:
            urllib.request.urlopen(urllib.request.Request(f"{url}/items/1", method="PUT", data=b"{}"), timeout=10)
        except urllib.error.HTTPError as error:
            assert error.code == 403
        else:
            raise AssertionError("an unsigned PUT must be refused")


def iam_user(cloud: LocalCloud, name: str, *statements: dict) -> str:
    """An IAM user in the local account with an inline policy of `statements`; returns its access key id."""
    iam = cloud.client("iam")
    iam.create_user(UserName=name)
    if statements:
        document = {"Version": "2012-10-17", "Statement": list(statements)}
        iam.put_user_policy(UserName=name, PolicyName="api", PolicyDocument=json.dumps(document))
    return iam.create_access_key(UserName=name)["AccessKey"]["AccessKeyId"]


def signed(access_key: str) -> dict[str, str]:
    return {"Authorization": f"AWS4-HMAC-SHA256 Credential={access_key}/20240101/us-east-1/execute-api/aws4_request"}


def test_an_iam_users_policies_decide_which_routes_it_may_invoke(probe_cloud: LocalCloud) -> None:
    # Given three IAM users: one granted PUT on items, one granted everything but denied PUT, one granted nothing
    function = Recorder({"statusCode": 200})
    probe_cloud.override_handler("ApiFunction", function)
    put_items = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": "arn:aws:execute-api:*:*:*/*/PUT/items/*",
    }
    everything = {"Effect": "Allow", "Action": "execute-api:*", "Resource": "*"}
    no_put = {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*/*/PUT/*"}
    writer = iam_user(probe_cloud, "writer", put_items)
    denied = iam_user(probe_cloud, "denied", everything, no_put)
    nobody = iam_user(probe_cloud, "nobody")

    # When each signs a PUT / Then only the granted one reaches the function, as itself
    statuses = [probe_cloud.http("PUT", "/items/1", headers=signed(key)).status for key in (writer, denied, nobody)]
    assert statuses == [200, 403, 403]
    [event] = function.events
    assert event["requestContext"]["authorizer"]["iam"]["userArn"] == "arn:aws:iam::123456789012:user/writer"
    # And a key the local account does not know stays a caller of its own, allowed (curl with made-up keys)
    assert probe_cloud.http("PUT", "/items/1", headers=SIGNED).status == 200
