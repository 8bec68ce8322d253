"""The batch counter: the state table's stream, read to count each batch child once it is final.

A child's settle is the same single write as any operation's (a worker's outcome, the relay's refusal, an
operator's resolve, a cancel, an expiry); its state record's change reaches the counter through the stream (its
mapping sends only the changes whose new state is final). For each stream batch the counter:

1. reads each child's change to a final state (`converge.store.state_stream`), and keeps a child's last;
2. finds each child's place on its counting shard (`ReservedIds.place`: a request under a child's id that its
   batch did not write counts nowhere);
3. sets the places of each shard's children in one write (`BatchesTable.place`): one write a shard a stream
   batch, however many of its children the stream batch holds. A child holds one place, so a stream batch given
   again (the function failed, Lambda retries it) sets the same letters and counts nothing twice;
4. records on the batch each child whose place changed from one final state to another after its callback
   (an operator reopened it, and it settled again);
5. looks for completion (`Batches.observe`) when a shard it wrote has every child final and none UNKNOWN.

A failure raises: Lambda gives the counter the same stream batch again (the mapping retries until the records
expire, in order, never bisected, so no older change is written after a newer one of the same child).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from converge.flow.batches import Batches
from converge.flow.reserved_ids import ReservedIds
from converge.model.batches import (
    COUNT_CODES,
    NOT_FINAL,
    STATE_OF_CODE,
    BatchChange,
    CountMove,
)
from converge.model.clock import Clock, SystemClock, iso
from converge.model.states import OperationState
from converge.observability import count, logger
from converge.store.state_stream import count_moves


class BatchCounter:
    """Counts batch children from the state table's stream; see the module."""

    def __init__(self, batches: Batches, reserved: ReservedIds, clock: Clock | None = None) -> None:
        self._batches = batches
        self._reserved = reserved
        self._clock = clock or SystemClock()

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        """One stream batch (see the module): how many children were placed on how many shards."""
        shards = self._placed(count_moves(event.get("Records") or []))
        placed = 0
        for (batch_id, shard), moves in shards.items():
            placed += len(moves)
            self._write(batch_id, shard, moves)
        count("batch_children_counted", value=placed)
        return {"placed": placed, "shards": len(shards)}

    def _placed(self, moves: Iterable[CountMove]) -> dict[tuple[str, int], dict[int, CountMove]]:
        """Each shard's children, by place, with their last change in this stream batch."""
        shards: dict[tuple[str, int], dict[int, CountMove]] = {}
        for move in moves:
            place = self._reserved.place(move.child)
            if place is None:
                logger.info("counted on no batch: its batch did not write it", operation_id=move.operation_id)
                continue
            shards.setdefault((move.child.batch_id, move.child.shard), {})[place] = move
        return shards

    def _write(self, batch_id: str, shard: int, moves: dict[int, CountMove]) -> None:
        places = {place: move.now for place, move in moves.items()}
        written = self._batches.table.place(batch_id, shard, places)
        if written is None:
            logger.warning("no counting shard for these children", batch_id=batch_id, shard=shard)
            return
        before, after = written
        at = iso(self._clock.now())
        changes = [
            BatchChange(at, moves[place].operation_id, was.value, now.value)
            for place, now in sorted(places.items())
            if (was := STATE_OF_CODE.get(before[place])) not in (None, now)
        ]
        if changes:
            self._batches.changed_after_callback(batch_id, changes)
        if NOT_FINAL not in after and COUNT_CODES[OperationState.UNKNOWN] not in after:
            self._look(batch_id)

    def _look(self, batch_id: str) -> None:
        """The look for completion after a shard is full of final children (raises: the stream batch comes again)."""
        self._batches.observe(batch_id)
