"""What a request's content is, for items converge can read and for those it cannot (the fingerprint
that decides a producer's rewrite is the same request, a no-op, or other content, a conflict), and
when a lease on its state record is live."""

from __future__ import annotations

import pytest

from converge.model.records import StateRecord
from converge.model.request import JobRequest, fingerprint
from converge.model.states import OperationState
from converge.store.codecs import (
    content_fingerprint,
    operation_from_records,
    request_from_image,
    request_item,
    same_content,
)

READABLE = {"operation_id": {"S": "op-1"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"M": {"n": {"N": "1"}}}}
# A numeric job type and a list for a payload: converge cannot read either, but can still compare them
UNREADABLE = {"operation_id": {"S": "op-1"}, "job_type": {"N": "5"}, "payload": {"L": [{"S": "a"}]}}


def test_an_unreadable_item_is_fingerprinted_by_its_content_as_written():
    # Given an item converge cannot read, and the same item written again with only undocumented changes
    again = {**UNREADABLE, "note": {"S": "retried"}}
    # Then both have one fingerprint, kept apart from any readable item's (which are hex digests)
    assert content_fingerprint(UNREADABLE) == content_fingerprint(again)
    assert same_content(UNREADABLE, again)
    assert content_fingerprint(UNREADABLE).startswith("raw-")
    assert content_fingerprint(READABLE) == fingerprint("mail.notice.v1", {"n": 1})


@pytest.mark.parametrize(
    "changed",
    [
        {"job_type": {"N": "6"}},  # another unreadable job type
        {"job_type": {"NS": ["5"]}},  # the same digits, as another type
        {"payload": {"L": [{"S": "b"}]}},  # another unreadable payload
        {"payload": {"S": "a"}},  # the same value, as another type
    ],
    ids=["job type", "job type's type", "payload", "payload's type"],
)
def test_unreadable_items_that_differ_in_job_type_or_payload_are_other_content(changed):
    # Given an unreadable item, and one that differs from it in its job type or its payload
    other = {**UNREADABLE, **changed}
    # Then they are other content (a rewrite between them is a conflict), and neither is a readable item
    assert content_fingerprint(other) != content_fingerprint(UNREADABLE)
    assert not same_content(UNREADABLE, other)
    assert content_fingerprint(other) != content_fingerprint(READABLE)


@pytest.mark.parametrize(
    ("owner", "until", "live"),
    [
        ("m-1:a", 1_000.5, True),  # held, and not over yet
        ("m-1:a", 1_000.0, False),  # held until exactly now: over (a takeover may start)
        ("m-1:a", 999.0, False),  # its holder is gone: over, though never given back
        (None, 2_000.0, False),  # given back (no holder), whatever time is left on it
        ("m-1:a", None, False),  # no end recorded: not a lease anyone can wait for
    ],
    ids=["live", "ends now", "expired", "given back", "no end"],
)
def test_a_lease_is_live_only_while_it_has_a_holder_and_time_left(owner, until, live):
    # Given a state record with this lease / Then it is live at t=1000 exactly when held and not over
    record = StateRecord(operation_id="op-1", state=OperationState.IN_PROGRESS, lease_owner=owner, lease_until=until)
    assert record.lease_live(1_000.0) is live


# -- the producer's item as converge writes it, and the envelope it becomes -----------------------------------


def test_every_documented_attribute_is_written_under_its_name_with_its_type():
    request = JobRequest(
        "op-1",
        "mail.notice.v1",
        {"user_id": "u-1", "count": 3, "ok": True, "note": None},
        correlation_id="corr-1",
        submitted_by="arn:aws:iam::123456789012:user/producer",
        run_at="2031-01-01T00:00:00.000Z",
        expires_at="2031-01-02T00:00:00.000Z",
    )
    assert request_item(request) == {
        "operation_id": {"S": "op-1"},
        "job_type": {"S": "mail.notice.v1"},
        "payload": {"M": {"user_id": {"S": "u-1"}, "count": {"N": "3"}, "ok": {"BOOL": True}, "note": {"NULL": True}}},
        "correlation_id": {"S": "corr-1"},
        "submitted_by": {"S": "arn:aws:iam::123456789012:user/producer"},
        "run_at": {"S": "2031-01-01T00:00:00.000Z"},
        "expires_at": {"S": "2031-01-02T00:00:00.000Z"},
    }
    # And read back, it is the same request
    assert request_from_image(request_item(request)) == request


def test_the_envelope_carries_the_requests_times_and_caller():
    request = JobRequest(
        "op-1",
        "mail.notice.v1",
        {"user_id": "u-1"},
        correlation_id="corr-1",
        run_at="2031-01-01T00:00:00.000Z",
        expires_at="2031-01-02T00:00:00.000Z",
        submitted_by="arn:aws:iam::123456789012:user/producer",
    )
    envelope = request.envelope()
    assert (envelope.run_at, envelope.expires_at) == ("2031-01-01T00:00:00.000Z", "2031-01-02T00:00:00.000Z")
    # and every other field of the request, the caller included
    assert envelope.model_dump() == {
        "v": 1,
        "operation_id": "op-1",
        "job_type": "mail.notice.v1",
        "payload": {"user_id": "u-1"},
        "correlation_id": "corr-1",
        "run_at": "2031-01-01T00:00:00.000Z",
        "expires_at": "2031-01-02T00:00:00.000Z",
        "submitted_by": "arn:aws:iam::123456789012:user/producer",
        # a rate limit's slot, carried only by a held job's message sent again (docs/flow-control.md)
        "held_until": None,
        "held_by": None,
    }


@pytest.mark.parametrize("option", ["run_at", "expires_at", "submitted_by"])
def test_an_unreadable_items_fingerprint_holds_its_options_as_written(option):
    # Given items converge cannot read (the payload is a string), alike but for one option
    base = {"operation_id": {"S": "op-1"}, "job_type": {"S": "mail.notice.v1"}, "payload": {"S": "user 1"}}
    one = {**base, option: {"S": "2030-01-01T00:00:00Z"}}
    other = {**base, option: {"S": "2030-01-02T00:00:00Z"}}
    # Then each option as written is part of the raw content: a rewrite that changes it is other content
    assert content_fingerprint(one).startswith("raw-")
    assert content_fingerprint(one) != content_fingerprint(other)
    assert content_fingerprint(one) != content_fingerprint(base)
    assert content_fingerprint(one) == content_fingerprint(dict(one))
    assert not same_content(one, other)


def test_a_messages_fingerprints_are_its_requests_with_every_option_in_its_place():
    from converge.model.envelope import Envelope
    from converge.model.request import accepted_fingerprints, envelope_fingerprints

    # Given a message carrying all three options, each with a value of its own
    options = {
        "run_at": "2030-01-01T00:00:00Z",
        "expires_at": "2030-01-02T00:00:00Z",
        "submitted_by": "arn:aws:iam::123456789012:role/producer",
    }
    payload = {"user_id": "00000000-0000-4000-8000-000000000001"}
    envelope = Envelope(operation_id="op-1", job_type="mail.notice.v1", payload=payload, **options)
    # Then it may be recorded as its request's full fingerprint (first) or the one of job type and payload alone
    assert envelope_fingerprints(envelope) == accepted_fingerprints("mail.notice.v1", payload, **options)
    assert envelope_fingerprints(envelope) == (
        fingerprint("mail.notice.v1", payload, options["run_at"], options["expires_at"], options["submitted_by"]),
        fingerprint("mail.notice.v1", payload),
    )
    # And a request without options has the one fingerprint, not the same one twice
    assert accepted_fingerprints("mail.notice.v1", payload) == (fingerprint("mail.notice.v1", payload),)
    # And each option counts on its own: a message without it, or with it swapped for another, is other content
    for name in options:
        without = Envelope(
            operation_id="op-1",
            job_type="mail.notice.v1",
            payload=payload,
            **{key: value for key, value in options.items() if key != name},
        )
        assert envelope_fingerprints(without)[0] != envelope_fingerprints(envelope)[0]
    swapped = Envelope(
        operation_id="op-1",
        job_type="mail.notice.v1",
        payload=payload,
        run_at=options["expires_at"],
        expires_at=options["run_at"],
        submitted_by=options["submitted_by"],
    )
    assert envelope_fingerprints(swapped)[0] != envelope_fingerprints(envelope)[0]


def test_a_fingerprint_is_the_same_digest_in_every_release():
    # Given a fingerprint is stored with each state record and compared with every later write of the same id, a
    # change of what it is made of would turn an upgrade's first retry of each stored request into a conflict
    # Then the digests of a request without options and of one with options are the ones converge has always made
    assert fingerprint("mail.notice.v1", {"n": 1}) == "6e79eff5127386fa85994dd877b64b24"
    options = {"run_at": "2030-01-01T00:00:00.000Z", "submitted_by": "caller-1"}
    assert fingerprint("mail.notice.v1", {"n": 1}, **options) == "e65dab75059d7803acae83806dde79a3"


@pytest.mark.parametrize(
    "parent",
    [{"S": 5}, "op-parent", {"N": "5"}, None],
    ids=["a number as text", "no attribute value", "another type", "null"],
)
def test_a_parent_id_that_is_not_text_is_shown_as_no_parent(parent):
    # Given a request whose parent_id attribute is not a string attribute value (converge never writes one)
    item = {**READABLE, "parent_id": parent}
    # When an operator's view joins it / Then it names no parent, and the rest of the request is read
    operation = operation_from_records("op-1", item, None)
    assert operation.parent_id is None
    assert operation.request is not None and operation.request.payload == {"n": 1}
    # And a string attribute value is the parent shown
    assert operation_from_records("op-1", {**READABLE, "parent_id": {"S": "op-0"}}, None).parent_id == "op-0"
