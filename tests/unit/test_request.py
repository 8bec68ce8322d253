"""The request: the documented attributes only, read without trusting anything else a producer wrote."""

from __future__ import annotations

import pytest

from converge.model.errors import UnusableRequest
from converge.model.request import DOCUMENTED
from converge.store.codecs import content_fingerprint, request_from_image, request_item, same_content

ITEM = {
    "operation_id": {"S": "op-1"},
    "job_type": {"S": "mail.notice.v1"},
    "payload": {"M": {"user_id": {"S": "u-1"}, "count": {"N": "3"}, "urgent": {"BOOL": True}}},
    "correlation_id": {"S": "req-1"},
}


def test_the_documented_attributes_are_read_and_written_back_as_they_were():
    request = request_from_image(ITEM)
    assert (request.operation_id, request.job_type, request.correlation_id) == ("op-1", "mail.notice.v1", "req-1")
    assert request.payload == {"user_id": "u-1", "count": 3, "urgent": True}
    assert request_item(request) == ITEM
    assert set(request_item(request)) <= set(DOCUMENTED)


def test_attributes_converge_owns_are_ignored_and_named_never_read():
    # Given a producer's item carrying attributes converge owns, with types and values it never writes
    item = {
        **ITEM,
        "state": {"S": "SUCCEEDED"},
        "attempts": {"S": "many"},
        "history": {"N": "3"},
        "lease_owner": {"B": b"x"},
    }
    # When it is read / Then the request is the documented content alone, and the rest is listed as ignored
    request = request_from_image(item)
    assert request == request_from_image(ITEM)
    assert request.ignored == ("attempts", "history", "lease_owner", "state")
    # And writing them again is the same content (a no-op for the relay)
    assert same_content(ITEM, item)


def test_the_correlation_id_is_not_part_of_what_a_request_is():
    assert same_content(ITEM, {**ITEM, "correlation_id": {"S": "req-2"}})
    assert not same_content(ITEM, {**ITEM, "payload": {"M": {"user_id": {"S": "u-2"}}}})
    assert not same_content(ITEM, {**ITEM, "job_type": {"S": "files.copy.v1"}})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"job_type": {"N": "1"}}, "job_type must be a string"),
        ({"job_type": {"NULL": True}}, "job_type must be a string"),
        ({"payload": {"L": []}}, "payload must be a map"),
        ({"payload": {"S": "{}"}}, "payload must be a map"),
        ({"payload": {"M": {"blob": {"B": b"\x00\x01"}}}}, "payload.blob: binary values"),
        ({"payload": {"M": {"blob": {"B": "AAE="}}}}, "payload.blob: binary values"),  # as a stream event holds it
        ({"payload": {"M": {"tags": {"SS": ["a"]}}}}, "payload.tags: string set values"),
        ({"payload": {"M": {"nested": {"M": {}}}}}, "payload.nested: nested objects"),
        ({"payload": {"M": {"ratio": {"N": "0.5"}}}}, "payload.ratio: floating-point numbers"),
        ({"payload": {"M": {"huge": {"N": "1" * 50}}}}, "payload.huge: numbers"),
        ({"correlation_id": {"N": "7"}}, "correlation_id must be a string"),
        ({"payload": {"M": {"odd": "not a typed value"}}}, "payload.odd"),
    ],
)
def test_an_item_converge_cannot_use_is_refused_naming_the_attribute(change, named):
    with pytest.raises(UnusableRequest, match=named):
        request_from_image({**ITEM, **change})
    # And it still has a content fingerprint, so writing it again is recognised as the same content
    assert content_fingerprint({**ITEM, **change}) == content_fingerprint({**ITEM, **change})


def test_a_missing_job_type_is_refused_and_a_missing_payload_is_empty():
    with pytest.raises(UnusableRequest, match="job_type is missing"):
        request_from_image({"operation_id": {"S": "op-1"}})
    assert request_from_image({"operation_id": {"S": "op-1"}, "job_type": {"S": "a.b.v1"}}).payload == {}
