"""SQS fair queues, approximately: on a standard queue, messages of a quiet message group are received
before a flooded group's backlog.

AWS documents fair queues as best effort: when one message group (a tenant) builds a backlog on a
standard queue, SQS prioritises the messages of the other groups, so their dwell time stays low.
moto receives a standard queue's messages in the order they were sent. Before each receive the local
cloud reorders the queue's messages by their place within their own group (each group's first
message, then each group's second, ...), keeping the send order inside a group and among equal
places: a group of 5 arriving behind a group of 500 is served within the first batches, not after
the 500. Messages without a group count as one group. FIFO queues are left alone (their group
semantics are ordering, not fairness).
"""

from __future__ import annotations

from moto.sqs.models import sqs_backends

from .clients import ACCOUNT_ID


def serve_fairly(region: str, queue_name: str) -> bool:
    """Reorder a standard queue's messages so that groups take turns; False when there was nothing to do."""
    queue = sqs_backends[ACCOUNT_ID][region].queues.get(queue_name)
    if queue is None or queue.fifo_queue:
        return False
    with queue._messages_lock:
        messages = queue._messages
        if len({message.group_id for message in messages}) < 2:
            return False
        seen: dict[str | None, int] = {}
        places = []
        for index, message in enumerate(messages):
            place = seen.get(message.group_id, 0)
            seen[message.group_id] = place + 1
            places.append((place, index))
        messages[:] = [messages[index] for _, index in sorted(places)]
    return True
