"""What a cancelled transaction says about each of its items, as AWS gives it (botocore's CancellationReasons)
and as emulators give it (the codes only in the message)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from converge.store.transact import cancellation_reasons, failed_index


def cancelled(message: str, **extra: Any) -> ClientError:
    error = {"Error": {"Code": "TransactionCanceledException", "Message": message}, **extra}
    return ClientError(error, "TransactWriteItems")


def test_the_reasons_botocore_parsed_are_taken_as_they_are_each_a_mapping():
    # Given a transaction AWS cancelled: the second item's condition failed (its item returned), a third garbled
    item = {"pk": {"S": "op-1"}}
    exc = cancelled(
        "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]",
        CancellationReasons=[{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": item}, "garbled"],
    )
    # Then each item's reason is read from them, not from the message
    reasons = cancellation_reasons(exc)
    assert reasons == [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": item}, {}]
    assert reasons is not None and failed_index(reasons) == 1


def test_the_codes_in_the_message_are_read_when_no_reasons_were_parsed():
    exc = cancelled(
        "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]"
    )
    reasons = cancellation_reasons(exc)
    assert reasons == [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    assert failed_index(reasons) == 1


def test_a_cancellation_without_reasons_has_none_and_another_error_is_not_a_cancellation():
    assert cancellation_reasons(cancelled("Transaction cancelled")) == []
    assert cancellation_reasons(ClientError({"Error": {"Code": "TransactionCanceledException"}}, "X")) == []
    assert failed_index([{"Code": "TransactionConflict"}]) is None
    other = ClientError({"Error": {"Code": "ValidationException", "Message": "bad [a, b]"}}, "TransactWriteItems")
    assert cancellation_reasons(other) is None


def test_only_the_closing_bracketed_list_of_the_message_holds_the_codes():
    # A message with a bracket earlier in its text: the codes are the last bracketed list, at its very end
    exc = cancelled("Transaction [tx-1] cancelled, reasons [None, ConditionalCheckFailed]")
    assert cancellation_reasons(exc) == [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    # A bracket that does not close the message is no list of codes
    assert cancellation_reasons(cancelled("Transaction [tx-1] cancelled")) == []
    assert cancellation_reasons(cancelled("Transaction cancelled, see the reasons]")) == []
