"""POST /batches/{name}: a batch admitted over HTTP, under a job's IAM auth, screening and caller scoping.

The workers are recorders (tests/api/conftest.py): a child admitted is counted where it lands, its queue; the batch's
record, its children's requests and what each caller may read are checked in the stored items and through the API.
"""

from __future__ import annotations

import json
from typing import Any

from catalogue import examples
from converge.api.batches import MAX_BATCH_BODY_BYTES, batch_id_for
from converge.model.batches import MAX_CHILDREN, callback_id

from .conftest import ApiCloud, Producer, signed_by
from .test_read_scoping import ACCOUNT, iam_user

STATEMENT, SUMMARY = "billing.partner-statement.v1", "billing.statements-sent.v1"


def statements(month: str = "2026-11", partners: tuple[str, ...] = examples.PARTNERS) -> dict[str, Any]:
    return {
        "children": [
            {"key": partner, "job_type": STATEMENT, "payload": {"partner_id": partner, "month": month}}
            for partner in partners
        ],
        "callback": {"job_type": SUMMARY, "payload": {"month": month}},
    }


def post(api_cloud: ApiCloud, access_key: str, name: str, document: Any = None, raw: str | None = None) -> Any:
    body = raw if raw is not None else json.dumps(document)
    return api_cloud.cloud.http("POST", f"/batches/{name}", headers=signed_by(access_key), body=body)


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


def caller_arn(producer: Producer) -> str:
    return f"arn:aws:iam::{ACCOUNT}:user/{producer.access_key}"


def batch_items(api_cloud: ApiCloud) -> list[dict[str, Any]]:
    table = api_cloud.cloud.outputs["BatchesTableName"]
    return api_cloud.cloud.client("dynamodb").scan(TableName=table)["Items"]


def test_a_caller_admits_a_batch_its_children_dispatched_once_and_its_own_to_read(
    api_cloud: ApiCloud, producer: Producer
) -> None:
    # When a caller posts the month's statements, one child per partner and the summary callback
    response = post(api_cloud, producer.access_key, "statements-2026-11", statements())
    # Then it is admitted under an id derived from the caller and the name, open, with its three children
    assert response.status == 202, response.body
    admitted = body(response)
    batch_id = batch_id_for(caller_arn(producer), "statements-2026-11")
    assert admitted == {
        "batch_id": batch_id,
        "name": "statements-2026-11",
        "state": "open",
        "total": 3,
        "written": 3,
        "counts": {},
        "callback_id": callback_id(batch_id),
        "created": True,
    }
    # And each child reached its queue exactly once, its request naming its caller
    children = [f"{batch_id}::0:{partner}" for partner in examples.PARTNERS]
    assert [api_cloud.dispatches(child) for child in children] == [1, 1, 1]
    dynamodb = api_cloud.cloud.client("dynamodb")
    for child in children:
        item = dynamodb.get_item(TableName=api_cloud.jobs_table, Key={"operation_id": {"S": child}})["Item"]
        assert item["submitted_by"] == {"S": caller_arn(producer)}
    # And the caller reads a child through the API; another caller gets the 404 of an id that does not exist
    assert producer.status(children[0]).status == 200
    assert api_cloud.producer("AKIDBATCHPEER0001").status(children[0]).status == 404


def test_the_same_request_again_writes_nothing_and_answers_with_the_batch_as_it_stands(
    api_cloud: ApiCloud, producer: Producer
) -> None:
    # Given a batch admitted, and its children dispatched
    first = post(api_cloud, producer.access_key, "retried", statements(partners=(examples.PARTNER,)))
    batch_id = body(first)["batch_id"]
    child = f"{batch_id}::0:{examples.PARTNER}"
    assert api_cloud.dispatches(child) == 1
    operations = len(api_cloud.operation_ids())
    # When the caller sends it again (its response was lost)
    again = post(api_cloud, producer.access_key, "retried", statements(partners=(examples.PARTNER,)))
    # Then the answer is the same batch, marked a replay, and nothing was written or dispatched twice
    assert again.status == 202
    assert {**body(again), "created": True} == body(first) and body(again)["created"] is False
    assert again.headers.get("idempotent-replayed") == "true"
    assert len(api_cloud.operation_ids()) == operations
    assert api_cloud.dispatches(child) == 1


def test_other_content_under_the_same_name_is_a_409_and_another_caller_has_its_own_batch(
    api_cloud: ApiCloud, producer: Producer
) -> None:
    # Given a batch admitted under a name
    first = post(api_cloud, producer.access_key, "monthly", statements())
    operations = len(api_cloud.operation_ids())
    # When the same caller posts other children under that name
    other = post(api_cloud, producer.access_key, "monthly", statements(month="2026-12"))
    # Then it is an identity conflict, and nothing was written
    assert other.status == 409
    assert body(other) == {
        "error": "identity_conflict",
        "message": "the batch 'monthly' was admitted with other children or callback",
    }
    assert len(api_cloud.operation_ids()) == operations
    # And another caller's batch of that name is its own, never the first caller's
    peer = post(api_cloud, "AKIDBATCHPEER0002", "monthly", statements(month="2026-12"))
    assert peer.status == 202 and body(peer)["created"] is True
    assert body(peer)["batch_id"] != body(first)["batch_id"]


def test_bad_input_is_a_400_with_its_reason_and_writes_nothing(api_cloud: ApiCloud, producer: Producer) -> None:
    # Given requests each wrong in one way
    good = statements()
    with_pii = json.loads(json.dumps(good))
    with_pii["children"][1]["payload"]["partner_id"] = "ana@example.com"
    twice = json.loads(json.dumps(good))
    twice["children"][1]["key"] = examples.PARTNER
    not_a_summary = {**good, "callback": {"job_type": STATEMENT, "payload": {"partner_id": "p-1", "month": "m"}}}
    cases = {
        "not-json": (None, "{", "malformed_json", "not valid JSON"),
        "no-callback": ({"children": good["children"]}, None, "invalid_batch", '"callback"'),
        "extra-field": ({**good, "priority": "high"}, None, "invalid_batch", "nothing else"),
        "no-children": ({**good, "children": []}, None, "invalid_batch", f"1-{MAX_CHILDREN}"),
        "child-shape": ({**good, "children": [{"key": "a"}]}, None, "invalid_batch", "child 0"),
        "pii": (with_pii, None, "invalid_batch", f"child {examples.SECOND_PARTNER!r}"),
        "key-twice": (twice, None, "invalid_batch", "appears twice"),
        "unknown-job": (
            {**good, "children": [{"key": "a", "job_type": "billing.nope.v1", "payload": {}}]},
            None,
            "unknown_job_type",
            "billing.nope.v1",
        ),
        "not-a-summary": (not_a_summary, None, "invalid_batch", "BatchSummary"),
    }
    before = len(api_cloud.operation_ids()), len(batch_items(api_cloud))
    for name, (document, raw, code, reason) in cases.items():
        # When each is posted
        response = post(api_cloud, producer.access_key, name, document, raw=raw)
        # Then it is refused with the code and a reason that says what is wrong, and where
        assert (response.status, body(response)["error"]) == (400, code), (name, response.body)
        assert reason in body(response)["message"], (name, body(response)["message"])
    # And none of them wrote anything
    assert (len(api_cloud.operation_ids()), len(batch_items(api_cloud))) == before
    # And a name that is no batch name is refused too
    bad_name = post(api_cloud, producer.access_key, "a:b", good)
    assert (bad_name.status, body(bad_name)["error"]) == (400, "invalid_batch_name")


def test_a_body_over_its_bound_is_refused_on_its_size_before_it_is_parsed(
    api_cloud: ApiCloud, producer: Producer
) -> None:
    # Given a body one byte over the bound (and not even JSON: it is never parsed)
    oversize = "[" * (MAX_BATCH_BODY_BYTES + 1)
    # When it is posted / Then 413 naming the limit, nothing written
    before = len(batch_items(api_cloud))
    response = post(api_cloud, producer.access_key, "huge", raw=oversize)
    assert (response.status, body(response)["error"]) == (413, "payload_too_large")
    assert str(MAX_BATCH_BODY_BYTES) in body(response)["message"]
    # And one child more than a batch holds is a 400 before any child is checked
    many = {**statements(), "children": [{"key": "k", "job_type": STATEMENT, "payload": {}}] * (MAX_CHILDREN + 1)}
    response = post(api_cloud, producer.access_key, "too-many", many)
    assert (response.status, body(response)["error"]) == (400, "invalid_batch")
    assert len(batch_items(api_cloud)) == before


def test_iam_grants_the_batch_route_apart(api_cloud: ApiCloud) -> None:
    # Given a service allowed to post jobs only, and one allowed to post batches
    cloud = api_cloud.cloud
    jobs_only = iam_user(cloud, "jobs-only", "POST/jobs/*")
    fan_out = iam_user(cloud, "fan-out", "POST/batches/*")
    # When each posts a batch
    refused = post(api_cloud, jobs_only, "by-jobs-only", statements())
    admitted = post(api_cloud, fan_out, "by-fan-out", statements())
    # Then the first is refused by IAM (no batch written under its name), the second admitted
    assert refused.status == 403
    assert admitted.status == 202
    written = {item["pk"]["S"] for item in batch_items(api_cloud)}
    assert batch_id_for(f"arn:aws:iam::{ACCOUNT}:user/jobs-only", "by-jobs-only") not in written
