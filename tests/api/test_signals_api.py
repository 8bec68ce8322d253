"""POST /operations/{id}/signals/{name} over the local cloud: a signal to a waiting step of the caller's own
operation (another caller's, or one enqueued by other means, is the 404 of a missing one), and the admin route that
signals any operation, for the principals IAM grants it alone. The workers run for real, with the explorer's
catalogue (its approval job waits for `approval`, then records what resumed it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from converge.model.states import OperationState
from converge.runtime import Converge
from localcloud import LocalCloud
from localcloud.bound import runtime_for
from tests.explore.catalogue import APPROVAL_JOB, APPROVALS
from tests.readme.blocks import ROOT, blocks

from .conftest import signed_by
from .test_read_scoping import ACCOUNT, iam_user

CALLER = "AKIDSIGNALCALLER01"
OTHER = "AKIDSIGNALOTHER001"


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud.start(catalogue="tests.explore.catalogue") as local:
        yield local


@pytest.fixture
def app(cloud: LocalCloud) -> Converge:
    APPROVALS.reset()
    return runtime_for(cloud)


def body(response: Any) -> dict[str, Any]:
    return json.loads(response.body)


def post_approval(cloud: LocalCloud, caller: str = CALLER) -> str:
    """An approval job enqueued through the API by `caller` (its operation is the caller's own)."""
    headers = {**signed_by(caller), "Idempotency-Key": uuid.uuid4().hex}
    accepted = cloud.http("POST", f"/jobs/{APPROVAL_JOB}", headers=headers, body=json.dumps({"account_id": "a-1"}))
    assert accepted.status == 202, accepted.body
    return str(body(accepted)["operation_id"])


def documented_answer() -> dict[str, Any]:
    """The signal route's answer as docs/http-api.md shows it."""
    [shown] = [b for b in blocks(ROOT / "docs" / "http-api.md") if "signals" in b.heading and b.language == "http"]
    return dict(json.loads(shown.text.split("\n\n", 1)[1].replace("…", "")))


def signal(
    cloud: LocalCloud, operation_id: str, document: Any, caller: str = CALLER, admin: bool = False, raw: Any = None
) -> Any:
    path = f"/{'admin/' if admin else ''}operations/{operation_id}/signals/approval"
    return cloud.http("POST", path, headers=signed_by(caller), body=raw if raw is not None else json.dumps(document))


def test_the_callers_signal_wakes_its_waiting_operation_once_and_another_caller_gets_a_404(
    cloud: LocalCloud, app: Converge
) -> None:
    # Given an approval its caller enqueued over HTTP, waiting for its signal
    operation_id = post_approval(cloud)
    cloud.drain(max_fast_forward=0)
    assert app.operations.get(operation_id).state is OperationState.SCHEDULED
    # When another caller signals it / Then it gets the 404 of a missing operation, and nothing is kept
    foreign = signal(cloud, operation_id, {"payload": {"decision": "approved"}, "signal_id": "ap-x"}, caller=OTHER)
    assert (foreign.status, body(foreign)) == (404, {"error": "not_found", "message": f"no operation {operation_id!r}"})
    assert app.operations.signals.get(operation_id, "approval") is None
    # When its caller signals it, then again with the same id (a retried request)
    document = {"payload": {"decision": "approved", "operator_id": "op-7"}, "signal_id": "ap-1"}
    first, again = signal(cloud, operation_id, document), signal(cloud, operation_id, document)
    # Then the first is accepted and wakes it now, the second is the same signal (200, replayed)
    assert (first.status, body(first)["answer"], body(first)["woke"]) == (202, "accepted", True)
    assert set(body(first)) == set(documented_answer())  # the fields docs/http-api.md shows
    assert (again.status, body(again)["answer"], again.headers.get("idempotent-replayed")) == (200, "duplicate", "true")
    # And the same id with another payload is the same signal too: 200 duplicate, the first payload kept
    other = signal(cloud, operation_id, {"payload": {"decision": "rejected"}, "signal_id": "ap-1"})
    assert (other.status, body(other)["answer"]) == (200, "duplicate")
    # And the operation resumes with it once, the signal recorded as the caller's
    cloud.drain(max_fast_forward=0)
    assert app.operations.get(operation_id).state is OperationState.SUCCEEDED
    assert APPROVALS.decided == [(operation_id, "signal:ap-1")]
    kept = app.operations.signals.get(operation_id, "approval")
    assert (kept.signal_id, kept.sent_by, dict(kept.payload)) == (
        "ap-1",
        f"api:arn:aws:iam::{ACCOUNT}:user/{CALLER}",
        {"decision": "approved", "operator_id": "op-7"},
    )
    # When a signal comes after it ended / Then 409 ended, and nothing is kept
    late = signal(cloud, operation_id, {"payload": {"decision": "rejected"}, "signal_id": "ap-2"})
    assert (late.status, body(late)["error"], body(late)["answer"]) == (409, "ended", "ended")
    assert app.operations.signals.get(operation_id, "approval").refused == ()


def test_a_signal_before_the_wait_is_kept_and_another_for_the_same_wait_is_refused_and_listed(
    cloud: LocalCloud, app: Converge
) -> None:
    # Given an approval not started yet, signalled by its caller
    operation_id = post_approval(cloud)
    kept = signal(cloud, operation_id, {"payload": {"decision": "rejected"}, "signal_id": "rj-1"})
    assert (kept.status, body(kept)["answer"], body(kept)["woke"]) == (202, "accepted", False)
    # When another signal comes for the same wait
    other = signal(cloud, operation_id, {"payload": {"decision": "approved"}, "signal_id": "ap-9"})
    # Then it is refused (409), saying why, and listed on the wait with its sender
    assert (other.status, body(other)["error"]) == (409, "refused")
    assert "has signal 'rj-1' already" in body(other)["message"]
    item = app.operations.signals.get(operation_id, "approval")
    assert [(r.signal_id, r.sent_by) for r in item.refused] == [("ap-9", f"api:arn:aws:iam::{ACCOUNT}:user/{CALLER}")]
    # And the operation, when it runs, passes its wait at once with the first signal
    cloud.drain(max_fast_forward=0)
    assert APPROVALS.decided == [(operation_id, "signal:rj-1")]


def test_signalling_any_operation_needs_the_admin_route_granted_apart(cloud: LocalCloud, app: Converge) -> None:
    # Given an approval enqueued by other means (no caller recorded), waiting, and an API caller and an operator
    operation_id = f"approval-{uuid.uuid4().hex[:8]}"
    app.enqueue(APPROVAL_JOB, operation_id, {"account_id": "a-2"})
    cloud.drain(max_fast_forward=0)
    service = iam_user(cloud, "signalling-service", "POST/operations/*")
    operator = iam_user(cloud, "signalling-operator", "POST/admin/operations/*")
    document = {"payload": {"decision": "approved"}, "signal_id": "ap-op"}
    # When the service signals it on either route / Then the caller's route is a 404, the admin route API Gateway's 403
    assert signal(cloud, operation_id, document, caller=service).status == 404
    assert signal(cloud, operation_id, document, caller=service, admin=True).status == 403
    # When the operator signals it on the admin route / Then it is accepted, woken and resumed, the operator named
    answered = signal(cloud, operation_id, document, caller=operator, admin=True)
    assert (answered.status, body(answered)["answer"], body(answered)["woke"]) == (202, "accepted", True)
    cloud.drain(max_fast_forward=0)
    assert APPROVALS.decided == [(operation_id, "signal:ap-op")]
    sent_by = app.operations.signals.get(operation_id, "approval").sent_by
    assert sent_by == f"api-admin:arn:aws:iam::{ACCOUNT}:user/signalling-operator"
    # And a missing operation is answered so on the admin route too
    missing = signal(cloud, "approval-nowhere", document, caller=operator, admin=True)
    assert (missing.status, body(missing)["error"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ("{not json", 400, "malformed_json"),
        ('["approved"]', 400, "invalid_body"),
        ('{"payload": {"decision": "approved"}, "note": "x"}', 400, "invalid_body"),
        ('{"payload": "approved"}', 400, "invalid_body"),
        ('{"signal_id": 7}', 400, "invalid_body"),
        ('{"payload": {"contact": "jane.doe@example.com"}}', 400, "invalid_signal"),
        ('{"payload": {"decision": "approved"}, "signal_id": "not an id"}', 400, "invalid_signal"),
        ('{"payload": {"note": "' + "x" * 20_000 + '"}}', 413, "payload_too_large"),
    ],
)
def test_a_bad_signal_request_is_refused_with_the_reason_and_nothing_is_kept(
    cloud: LocalCloud, app: Converge, raw: str, status: int, code: str
) -> None:
    # Given an approval of the caller's, not started yet
    operation_id = post_approval(cloud)
    # When a signal request out of form comes / Then it is refused, saying what, and nothing is kept
    response = signal(cloud, operation_id, None, raw=raw)
    assert (response.status, body(response)["error"]) == (status, code)
    assert body(response)["message"]
    assert app.operations.signals.get(operation_id, "approval") is None


def test_a_signal_name_out_of_form_is_refused_and_an_empty_body_is_a_signal_without_payload(
    cloud: LocalCloud, app: Converge
) -> None:
    operation_id = post_approval(cloud)
    named = cloud.http("POST", f"/operations/{operation_id}/signals/Approval", headers=signed_by(CALLER), body="{}")
    assert (named.status, body(named)["error"]) == (400, "invalid_signal_name")
    empty = cloud.http("POST", f"/operations/{operation_id}/signals/approval", headers=signed_by(CALLER))
    assert (empty.status, body(empty)["answer"]) == (202, "accepted")
    assert app.operations.signals.get(operation_id, "approval").payload == {}
