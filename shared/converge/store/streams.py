"""The jobs table's stream, read again: the records of a batch the relay gave up on, by shard and sequence range.

The relay reads the stream through its event source mapping; only the reconciler reads it itself, to replay
a batch named by the relay's on-failure destination. Records older than the stream's 24 hours are gone.
"""

from __future__ import annotations

from typing import Any

from converge.model.errors import StreamRecordsGone


class JobsStream:
    """Reads of the jobs table's stream (DynamoDB Streams)."""

    def __init__(self, streams_client: Any) -> None:
        self._streams = streams_client

    def records(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """The records of one stream batch, by its shard and sequence range (`DDBStreamBatchInfo`, as the relay's
        on-failure destination names it); StreamRecordsGone when the stream no longer holds them."""
        first, last = int(info["startSequenceNumber"]), int(info["endSequenceNumber"])
        try:
            iterator = self._streams.get_shard_iterator(
                StreamArn=info["streamArn"],
                ShardId=info["shardId"],
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=info["startSequenceNumber"],
            )["ShardIterator"]
        except Exception as exc:  # TrimmedDataAccessException, ResourceNotFoundException
            raise StreamRecordsGone(f"shard {info['shardId']} from {first}: {exc}") from exc
        records: list[dict[str, Any]] = []
        empty = 0
        while iterator and empty < 3:
            response = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            page = response.get("Records", [])
            empty = 0 if page else empty + 1
            for record in page:
                if int(record["dynamodb"]["SequenceNumber"]) > last:
                    return records
                records.append(record)
            if records and int(records[-1]["dynamodb"]["SequenceNumber"]) == last:
                return records
            iterator = response.get("NextShardIterator")
        if not records:
            raise StreamRecordsGone(f"shard {info['shardId']} holds nothing from {first}")
        return records
