"""Which stream each DynamoDB Streams shard iterator reads: GetRecords names its stream only through one.

Every GetShardIterator and GetRecords made in this process (by a function or not) is noted: the stream
its parameters name, then the iterator its response returns, so a function's later GetRecords can be
authorised on that stream's ARN.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

ITERATORS_KEPT = 50_000
_STREAM_KEY = "localcloud_iam_stream"
_lock = threading.Lock()
_streams: OrderedDict[str, str] = OrderedDict()  # shard iterator -> stream ARN, the newest last


def stream_of(shard_iterator: str) -> str | None:
    with _lock:
        return _streams.get(shard_iterator)


def _remember(shard_iterator: str, stream: str) -> None:
    with _lock:
        _streams[shard_iterator] = stream
        _streams.move_to_end(shard_iterator)
        while len(_streams) > ITERATORS_KEPT:
            _streams.popitem(last=False)


def note_stream(params: Mapping[str, Any], model: Any, context: dict[str, Any]) -> None:
    """Before a DynamoDB Streams call: keep the stream it reads in the call's context, for after_call."""
    if model.service_model.service_name != "dynamodbstreams":
        return
    stream = params.get("StreamArn") or stream_of(str(params.get("ShardIterator")))
    if stream:
        context[_STREAM_KEY] = stream


def after_call(parsed: Mapping[str, Any], context: Mapping[str, Any], **_: Any) -> None:
    """After it (a botocore after-call handler): the iterator it returned reads the same stream."""
    stream = context.get(_STREAM_KEY)
    if not stream or not isinstance(parsed, Mapping):
        return
    for key in ("ShardIterator", "NextShardIterator"):
        if parsed.get(key):
            _remember(str(parsed[key]), str(stream))
