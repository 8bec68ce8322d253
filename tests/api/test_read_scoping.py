"""Reads scoped to their caller: GET /operations/{id} answers only the caller that enqueued the operation;
GET /admin/operations/{id} reads any operation, for the principals IAM grants that route alone."""

from __future__ import annotations

import json
from typing import Any

from localcloud import LocalCloud

from .conftest import RESET, ApiCloud, Producer, signed_by

ACCOUNT = "123456789012"


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


def iam_user(cloud: LocalCloud, name: str, *routes: str) -> str:
    """An IAM user allowed to invoke exactly `routes` ("GET/operations/*", ...); returns its access key id."""
    iam = cloud.client("iam")
    iam.create_user(UserName=name)
    if routes:
        resources = [f"arn:aws:execute-api:*:{ACCOUNT}:*/*/{route}" for route in routes]
        statement = {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resources}
        policy = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
        iam.put_user_policy(UserName=name, PolicyName="enqueue-api", PolicyDocument=policy)
    return iam.create_access_key(UserName=name)["AccessKey"]["AccessKeyId"]


def test_a_caller_reads_its_own_operations_and_no_one_elses(
    api_cloud: ApiCloud, producer: Producer, payloads: dict[str, Any]
) -> None:
    # Given an operation enqueued by one caller, and another caller of the same API
    accepted = producer.post(RESET, payloads[RESET], key="own-read")
    operation_id = body(accepted)["operation_id"]
    other = api_cloud.producer("AKIDOTHERCALLER01")

    # When each reads it, and the other also reads an id that does not exist
    own, foreign, missing = producer.status(operation_id), other.status(operation_id), other.status("api-missing")

    # Then its caller gets its state; the other gets the very 404 a missing operation gets (no existence leak)
    assert (own.status, body(own)["operation_id"]) == (200, operation_id)
    assert foreign.status == missing.status == 404
    assert body(foreign) == {"error": "not_found", "message": f"no operation {operation_id!r}"}
    assert body(missing) == {"error": "not_found", "message": "no operation 'api-missing'"}
    # And the stored request records its caller, the documented `submitted_by` attribute
    item = api_cloud.cloud.client("dynamodb").get_item(
        TableName=api_cloud.jobs_table, Key={"operation_id": {"S": operation_id}}
    )["Item"]
    assert item["submitted_by"] == {"S": f"arn:aws:iam::{ACCOUNT}:user/{producer.access_key}"}


def test_an_operation_enqueued_by_other_means_is_not_readable_through_the_caller_route(
    api_cloud: ApiCloud, producer: Producer
) -> None:
    # Given an operation with a guessable business id, written to the jobs table by a producer's own code
    cloud = api_cloud.cloud
    cloud.client("dynamodb").put_item(
        TableName=api_cloud.jobs_table,
        Item={
            "operation_id": {"S": "reset-u-1003-2025-01-01"},
            "job_type": {"S": RESET},
            "payload": {"M": {"user_id": {"S": "u-1003"}}},
        },
    )

    # When a caller of the API asks for it / Then it does not exist for that caller
    response = producer.status("reset-u-1003-2025-01-01")
    assert (response.status, body(response)["error"]) == (404, "not_found")


def test_reading_any_operation_needs_the_admin_route_granted_apart(
    api_cloud: ApiCloud, payloads: dict[str, Any]
) -> None:
    # Given a service granted the producer routes, a second one like it, and an operator granted the admin route
    cloud = api_cloud.cloud
    billing = iam_user(cloud, "billing", "POST/jobs/*", "GET/operations/*")
    shipping = iam_user(cloud, "shipping", "POST/jobs/*", "GET/operations/*")
    operator = iam_user(cloud, "operator", "GET/admin/operations/*")
    accepted = api_cloud.producer(billing).post(RESET, payloads[RESET], key="admin-read")
    assert accepted.status == 202
    operation_id = body(accepted)["operation_id"]

    def get(key: str, path: str) -> Any:
        return cloud.http("GET", path, headers=signed_by(key))

    # When each reads the operation through each route
    own = get(billing, f"/operations/{operation_id}")
    peer = get(shipping, f"/operations/{operation_id}")
    peer_admin = get(shipping, f"/admin/operations/{operation_id}")
    operator_own_route = get(operator, f"/operations/{operation_id}")
    operator_admin = get(operator, f"/admin/operations/{operation_id}")

    # Then the enqueuing service reads it, its peer gets 404 (and 403 on the admin route, not granted),
    # and only the operator, through the admin route it was granted, reads it with who submitted it
    assert own.status == 200
    assert peer.status == 404
    assert (peer_admin.status, operator_own_route.status) == (403, 403)
    assert operator_admin.status == 200
    assert body(operator_admin)["operation_id"] == operation_id
    assert body(operator_admin)["submitted_by"] == f"arn:aws:iam::{ACCOUNT}:user/billing"
    missing = get(operator, "/admin/operations/api-missing")
    assert (missing.status, body(missing)["error"]) == (404, "not_found")
