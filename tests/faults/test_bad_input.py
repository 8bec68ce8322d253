"""Bad input: every case ends with a visible outcome, and the good job in the same batch still succeeds.

Raw items are written to the jobs table as a producer's own PutItem would (unchecked); raw messages
are sent straight to the critical queue, next to the good job's message; toggles are SSM values.

| #  | input                                             | visible outcome                                   |
|----|---------------------------------------------------|---------------------------------------------------|
| 1  | raw item, unknown job type                        | REJECTED "unknown job type"                       |
| 2  | raw item, recurring job type sent to a queue      | REJECTED "recurring job"                          |
| 3  | raw item, no job_type attribute                   | REJECTED "job_type is missing"                    |
| 4  | raw item, required field missing                  | REJECTED "user_id: Field required"                |
| 5  | raw item, no payload attribute at all             | REJECTED "user_id: Field required"                |
| 6  | raw item, field of the wrong type (number)        | REJECTED "user_id: Input should be a valid string"|
| 7  | raw item, boolean where an integer is expected    | REJECTED "amount_cents"                           |
| 8  | raw item, extra field                             | REJECTED "Extra inputs are not permitted"         |
| 9  | raw item, nested object value                     | REJECTED "nested objects"                         |
| 10 | raw item, list value                              | REJECTED "nested objects and lists"               |
| 11 | raw item, floating-point amount                   | REJECTED "floating-point"                         |
| 12 | raw item, negative amount                         | REJECTED "greater than 0"                         |
| 13 | raw item, payload is a string, not a map          | REJECTED "payload must be a map"                  |
| 14 | raw item, e-mail address as a value               | REJECTED "e-mail address"                         |
| 15 | raw item, JWT as a value                          | REJECTED "JWT"                                    |
| 16 | raw item, AWS access key as a value               | REJECTED "cloud provider's key"                  |
| 17 | raw item, phone number as a value                 | REJECTED "phone number"                           |
| 18 | raw item, token-looking value                     | REJECTED "high-entropy secret"                    |
| 19 | raw item, field named like a secret ("password")  | REJECTED "Extra inputs"                           |
| 20 | raw item, oversized payload (5 kB)                | REJECTED "the limit is 4096 bytes"                |
| 21 | raw item, control characters in a value           | REJECTED "control characters"                     |
| 22 | raw item, operation id with control characters    | REJECTED "operation_id"                           |
| 23 | raw item, operation id of 300 characters          | REJECTED "operation_id"                           |
| 24 | raw item, unicode operation id                    | REJECTED "operation_id"                           |
| 25 | raw item, correlation id with spaces              | REJECTED "correlation_id"                         |
| 26 | raw item, unicode user id (not an Identifier)     | REJECTED "user_id: String should match pattern"   |
| 27 | message body not JSON                             | DLQ error_reason "not JSON"                       |
| 28 | message body empty                                | DLQ error_reason "not JSON"                       |
| 29 | message body a JSON array                         | DLQ error_reason "not a JSON object"              |
| 30 | message of version 2                              | DLQ error_reason "version 2 is not supported"     |
| 31 | message without a version                         | DLQ error_reason "version None"                   |
| 32 | message of an unknown job type                    | DLQ error_reason "unknown job type"               |
| 33 | message for an operation never admitted (1)       | runs once (NOOP here); receipt: no request stored |
| 34 | message whose payload differs from its operation  | not run; CONFLICT on the operation, listed        |
| 35 | message with an extra top-level field             | DLQ error_reason "Extra inputs"                   |
| 36 | message with a control character in its id        | DLQ error_reason "operation_id"                   |
| 37 | message with a 1,000-character job type           | DLQ error_reason "job_type"                       |
| 38 | message with an oversized body (200 kB)           | DLQ error_reason "the limit is 16384 bytes"       |
| 39 | toggle of a fail-closed job is "maybe"            | default (off): PAUSED                             |
| 40 | toggle of a fail-closed job is "2"                | default (off): PAUSED                             |
| 41 | toggle of a fail-closed job is fullwidth "on"    | default (off): PAUSED                             |
| 42 | toggle of a fail-open job is "yes please"         | default (on): SUCCEEDED                           |
| 43 | raw item, binary payload value                    | REJECTED "binary values"                          |
| 44 | raw item, numeric job type                        | REJECTED "job_type must be a string"              |
| 45 | raw item, `state` SUCCEEDED (converge's attribute)| ignored: the job runs, SUCCEEDED                  |
| 46 | raw item, `state` not a state at all              | ignored: the job runs, SUCCEEDED                  |
| 47 | raw item, `attempts` a string, `history` a number | ignored: the job runs, SUCCEEDED                  |
| 48 | raw item, a live `lease_owner`/`lease_until`      | ignored: the job runs, SUCCEEDED                  |

(1) The queues are converge's own (only its functions may send to them) and a worker reads no
request, so a message no admission produced runs as it stands; its receipt says no request is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from catalogue import examples
from converge.flow.registry import toggle_key
from converge.model.envelope import Envelope
from converge.model.states import OperationState

from .conftest import Chaos

GOOD = "email.password-reset.v1"
EMAIL = "email.partner-verification.v1"
LEDGER = "ledger.partner-benefits.v1"
BAD = "op-bad"


def raw(job_type: str | None, payload: Any, operation_id: str = BAD, **extra: Any) -> Callable[[Chaos], None]:
    """A producer's unchecked PutItem (payload given in DynamoDB's low-level form, or None)."""

    def put(chaos: Chaos) -> None:
        item: dict[str, Any] = {"operation_id": {"S": operation_id}, **extra}
        if job_type is not None:
            item["job_type"] = {"S": job_type}
        if payload is not None:
            item["payload"] = payload
        chaos.workload.enqueue_raw(item)

    return put


def item_of(**attributes: Any) -> Callable[[Chaos], None]:
    """A producer's unchecked PutItem of exactly these low-level attributes (and the bad operation id)."""

    def put(chaos: Chaos) -> None:
        chaos.workload.enqueue_raw({"operation_id": {"S": BAD}, **attributes})

    return put


def fields(**values: Any) -> dict[str, Any]:
    """A payload map of low-level attribute values."""
    return {"M": values}


def s(value: str) -> dict[str, str]:
    return {"S": value}


def message(body: str) -> Callable[[Chaos], None]:
    """A message sent straight to the critical queue (where the good job's message goes too)."""

    def send(chaos: Chaos) -> None:
        chaos.cloud.client("sqs").send_message(QueueUrl=chaos.cloud.outputs["CriticalQueueUrl"], MessageBody=body)

    return send


def envelope(**overrides: Any) -> str:
    body = {"v": 1, "operation_id": BAD, "job_type": EMAIL, "payload": {"user_id": examples.UNCONFIRMED_USER}}
    body.update(overrides)
    return json.dumps({k: v for k, v in body.items() if v is not ...})


def stored_then_message(body: str) -> Callable[[Chaos], None]:
    """The operation was admitted properly and ran, then a message with other content arrives."""

    def both(chaos: Chaos) -> None:
        chaos.enqueue(EMAIL, BAD, {"user_id": examples.UNCONFIRMED_USER})
        chaos.workload.drain()
        message(body)(chaos)

    return both


def toggle(job_type: str, value: str, payload: dict[str, Any]) -> Callable[[Chaos], None]:
    def flip(chaos: Chaos) -> None:
        chaos.set_toggle(job_type, value)
        chaos.enqueue(job_type, BAD, payload)

    return flip


@dataclass(frozen=True)
class Case:
    name: str
    given: Callable[[Chaos], None]
    state: OperationState | None = None  # the bad operation's state, when there is one
    reason: str = ""  # in the operation's last error, or in the DLQ message's error_reason
    dlq: bool = False  # the outcome is a DLQ message (no operation to mark)
    operation_id: str = BAD
    listed: str | None = None  # an attention key the operation must be listed under


CREDIT = {"partner_id": examples.PARTNER, "amount_cents": 100, "benefit": "promo"}
UNCONFIRMED = {"M": {"user_id": {"S": examples.UNCONFIRMED_USER}}}
R = OperationState.REJECTED
CASES = [
    Case("unknown job type", raw("email.newsletter.v1", fields(user_id=s("u-1"))), R, "unknown job type"),
    Case("recurring job to a queue", raw("sweep.boost-expiry.v1", fields()), R, "recurring job"),
    Case("no job type", raw(None, fields(user_id=s("u-1"))), R, "job_type is missing"),
    Case("field missing", raw(EMAIL, fields(account=s("u-1"))), R, "user_id: Field required"),
    Case("no payload", raw(EMAIL, None), R, "user_id: Field required"),
    Case("wrong type", raw(EMAIL, fields(user_id={"N": "1001"})), R, "valid string"),
    Case(
        "bool for int",
        raw(LEDGER, fields(partner_id=s("p-2001"), amount_cents={"BOOL": True}, benefit=s("promo"))),
        R,
        "amount_cents",
    ),
    Case("extra field", raw(EMAIL, fields(user_id=s("u-1"), note=s("x"))), R, "Extra inputs are not permitted"),
    Case("nested object", raw(EMAIL, fields(user_id={"M": {"id": s("u-1")}})), R, "nested objects"),
    Case("list value", raw(EMAIL, fields(user_id={"L": [s("u-1")]})), R, "nested objects and lists"),
    Case(
        "float amount",
        raw(LEDGER, fields(partner_id=s("p-2001"), amount_cents={"N": "25.5"}, benefit=s("promo"))),
        R,
        "floating-point",
    ),
    Case(
        "negative amount",
        raw(LEDGER, fields(partner_id=s("p-2001"), amount_cents={"N": "-100"}, benefit=s("promo"))),
        R,
        "greater than 0",
    ),
    Case("payload not a map", raw(EMAIL, s("u-1001")), R, "payload must be a map"),
    Case("e-mail value", raw(EMAIL, fields(user_id=s("alice@example.com"))), R, "e-mail address"),
    Case("JWT value", raw(EMAIL, fields(user_id=s("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"))), R, "JWT"),
    Case("AWS key value", raw(EMAIL, fields(user_id=s("AKIAIOSFODNN7EXAMPLE"))), R, "cloud provider's key"),
    Case("phone value", raw(EMAIL, fields(user_id=s("+41 79 555 12 34"))), R, "phone number"),
    Case("token value", raw(EMAIL, fields(user_id=s("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9"))), R, "high-entropy secret"),
    Case("secret-named field", raw(EMAIL, fields(user_id=s("u-1"), password=s("x"))), R, "Extra inputs"),
    Case("oversized payload", raw(EMAIL, fields(user_id=s("u" * 5000))), R, "the limit is 4096 bytes"),
    Case("control characters", raw(EMAIL, fields(user_id=s("u-1\x00\x1b[31m"))), R, "control characters"),
    Case(
        "control chars in id",
        raw(EMAIL, fields(user_id=s("u-1")), operation_id="op-\x07bell"),
        R,
        "operation_id",
        operation_id="op-\x07bell",
    ),
    Case(
        "300-char id",
        raw(EMAIL, fields(user_id=s("u-1")), operation_id="o" * 300),
        R,
        "operation_id",
        operation_id="o" * 300,
    ),
    Case(
        "unicode id",
        raw(EMAIL, fields(user_id=s("u-1")), operation_id="opé-ünï"),
        R,
        "operation_id",
        operation_id="opé-ünï",
    ),
    Case(
        "bad correlation id",
        raw(EMAIL, fields(user_id=s("u-1")), correlation_id=s("has spaces in it")),
        R,
        "correlation_id",
    ),
    Case("unicode user id", raw(EMAIL, fields(user_id=s("ü-1001-ß"))), R, "user_id: String should match pattern"),
    Case("body not JSON", message("{not json"), reason="not JSON", dlq=True),
    Case("empty body", message(" "), reason="not JSON", dlq=True),
    Case("JSON array", message("[1, 2]"), reason="not a JSON object", dlq=True),
    Case("version 2", message(envelope(v=2)), reason="version 2 is not supported", dlq=True),
    Case("no version", message(envelope(v=...)), reason="version None", dlq=True),
    Case("unknown type message", message(envelope(job_type="sms.send.v1")), reason="unknown job type", dlq=True),
    Case("never admitted", message(envelope(payload={"user_id": "u-404"})), OperationState.NOOP),
    Case(
        "content differs",
        stored_then_message(envelope(payload={"user_id": examples.SECOND_UNCONFIRMED_USER})),
        OperationState.SUCCEEDED,  # the stored operation ran from its own message, untouched
        listed="CONFLICT",
    ),
    Case("extra envelope field", message(envelope(priority="high")), reason="Extra inputs", dlq=True),
    Case("control char in message id", message(envelope(operation_id="op\x01")), reason="operation_id", dlq=True),
    Case("1,000-char job type", message(envelope(job_type="j" * 1000)), reason="job_type", dlq=True),
    Case(
        "oversized message",
        message(envelope(payload={f"f{n}": "x" * 400 for n in range(500)})),
        reason="the limit is 16384 bytes",
        dlq=True,
    ),
    Case("fail-closed toggle 'maybe'", toggle(LEDGER, "maybe", CREDIT), OperationState.PAUSED),
    Case("fail-closed toggle '2'", toggle(LEDGER, "2", CREDIT), OperationState.PAUSED),
    Case("fail-closed toggle fullwidth", toggle(LEDGER, "\uff4f\uff4e", CREDIT), OperationState.PAUSED),
    Case(
        "fail-open toggle 'yes please'",
        toggle(EMAIL, "yes please", {"user_id": examples.UNCONFIRMED_USER}),
        OperationState.SUCCEEDED,
    ),
    Case("binary value", raw(EMAIL, fields(user_id={"B": b"\x00\x01"})), R, "binary values"),
    Case("numeric job type", item_of(job_type={"N": "7"}, payload=fields(user_id=s("u-1"))), R, "must be a string"),
    Case("owned state", raw(EMAIL, UNCONFIRMED, state=s("SUCCEEDED")), OperationState.SUCCEEDED),
    Case("owned bogus state", raw(EMAIL, UNCONFIRMED, state=s("BOGUS")), OperationState.SUCCEEDED),
    Case(
        "owned wrong types",
        raw(EMAIL, UNCONFIRMED, attempts=s("many"), history={"N": "3"}),
        OperationState.SUCCEEDED,
    ),
    Case(
        "owned live lease",
        raw(EMAIL, UNCONFIRMED, lease_owner=s("someone"), lease_until={"N": "99999999999"}),
        OperationState.SUCCEEDED,
    ),
]


def test_the_table_lists_every_case() -> None:
    assert len(CASES) >= 30
    assert len({case.name for case in CASES}) == len(CASES)
    assert f"| {len(CASES)} " in (__doc__ or "")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_has_a_visible_outcome_and_spares_its_batch(chaos: Chaos, case: Case) -> None:
    try:
        # Given a good job and a bad input, dispatched in the same batch
        chaos.enqueue(GOOD, "op-good", {"user_id": examples.CONFIRMED_USER})
        case.given(chaos)
        # When the cloud drains
        chaos.workload.drain()
        # Then the bad input has its visible outcome
        if case.state is not None:
            operation = chaos.operation(case.operation_id)
            assert operation.state is case.state, operation.history
            if case.state is OperationState.REJECTED:
                assert case.reason in (operation.last_error or ""), operation.last_error
        if case.state is OperationState.NOOP and case.name == "never admitted":
            assert chaos.operation(case.operation_id).request_problem == "the request is not in the jobs table"
        if case.listed is not None:
            from .conftest import cli_listed

            assert case.operation_id in cli_listed(case.listed)
        if case.dlq:
            reasons = [
                m["MessageAttributes"]["error_reason"]["StringValue"]
                for m in chaos.dlq_messages()
                if "error_reason" in m.get("MessageAttributes", {})
            ]
            assert any(case.reason in reason for reason in reasons), reasons
        # And the good job in the same batch succeeded, once
        assert chaos.operation("op-good").state is OperationState.SUCCEEDED
        assert chaos.effects().emails["op-good"] == 1
    finally:
        chaos.restore_toggles()


def test_a_rejected_operation_is_in_the_operators_listing(chaos: Chaos) -> None:
    raw("email.newsletter.v1", fields(user_id=s("u-1")))(chaos)
    chaos.workload.drain()
    from .conftest import cli_listed

    assert BAD in cli_listed(OperationState.REJECTED)


def test_messages_in_the_dlq_keep_their_body(chaos: Chaos) -> None:
    body = Envelope(operation_id="op-unknown", job_type="sms.send.v1", payload={"user_id": "u-1"}).to_body()
    message(body)(chaos)
    chaos.workload.drain()
    assert [m["Body"] for m in chaos.dlq_messages()] == [body]
    assert toggle_key(EMAIL) == "email.partner-verification"
