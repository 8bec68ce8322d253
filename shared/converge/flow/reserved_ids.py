"""The batches' reserved ids: whether a request under a child's or a callback's id is one its batch wrote.

A child's id ("<batch>::<shard>:<key>") makes its terminal write count on its batch, and a callback's
("<batch>::callback") runs as the batch's callback: a request under either that its batch did not write would
count a child that is not in the batch (completing it early) or run a callback before every child is final (and
take the id the real one needs). ProducerPolicy denies a producer's plain put under "::" ids and any write of a
callback; the relay asks here before it dispatches what gets there anyway, and the counter before it counts a
child (`place`: where on its shard):

* a child's request is its batch's when the batch's admission recorded its key at a position counted on its shard
  (the keys are written before the children's requests, and never change once written);
* a callback's request is its batch's when the batch is complete (the callback is written in the same
  transaction as the batch's completion).

Other ids with "::" (a child's continuation, "<child>:next") are no batch's business: they count nowhere.
The keys of a batch are read once per process (one strongly consistent read of each chunk of 100 keys, the first
time one of its children is seen) and kept: a warm relay reads nothing more for the batch's other children.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from converge.model.batches import CALLBACK_SUFFIX, CHUNK, BatchState, ChildOf, parse_child, place_in_shard
from converge.store.batches import BatchesTable

BATCHES_KEPT = 64
"""The batches whose keys a process keeps (the least recently asked about are forgotten first)."""


@dataclass
class _Known:
    shards: int
    positions: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    """Chunks of keys read so far (a later chunk may still be written while the admission runs)."""


class ReservedIds:
    """Answers, for the relay, whether an id of the batches' form was written by its batch."""

    def __init__(self, table: BatchesTable) -> None:
        self._table = table
        self._known: OrderedDict[str, _Known] = OrderedDict()

    def refusal(self, operation_id: str) -> str | None:
        """Why a request under this id is not its batch's (None: it is, or the id is of no batch's form)."""
        child = parse_child(operation_id)
        if child is not None:
            known = self._keys(child.batch_id, child.key)
            if known is None:
                return f"no batch {child.batch_id!r} admitted it (ids with '::' are the batches' own)"
            if self._position(known, child) is None:
                return f"batch {child.batch_id!r} admitted no child {child.key!r} on shard {child.shard}"
            return None
        batch_id = operation_id.removesuffix(CALLBACK_SUFFIX)
        if batch_id != operation_id and "::" not in batch_id:
            batch = self._table.record(batch_id)
            if batch is None or batch.state is not BatchState.COMPLETE:
                return f"batch {batch_id!r} is not complete: its callback is written by its completion alone"
        return None

    def place(self, child: ChildOf) -> int | None:
        """The child's place on its counting shard (`place_in_shard`); None when its batch did not write it."""
        known = self._keys(child.batch_id, child.key)
        position = self._position(known, child) if known is not None else None
        return place_in_shard(position, known.shards) if known is not None and position is not None else None

    @staticmethod
    def _position(known: _Known, child: ChildOf) -> int | None:
        position = known.positions.get(child.key)
        return position if position is not None and position % known.shards == child.shard else None

    def _keys(self, batch_id: str, key: str) -> _Known | None:
        """The batch's keys, read up to the chunk that holds `key` (None: no such batch)."""
        known = self._known.get(batch_id)
        if known is not None:
            self._known.move_to_end(batch_id)
            if key in known.positions:
                return known
        else:
            batch = self._table.record(batch_id)
            if batch is None:
                return None
            known = _Known(batch.shards)
            self._known[batch_id] = known
            if len(self._known) > BATCHES_KEPT:
                self._known.popitem(last=False)
        while key not in known.positions:
            keys = self._table.keys(batch_id, known.chunks, consistent=True)
            if keys is None:
                break  # past the last chunk written: the key is not the batch's (or not yet: it never comes later)
            first = known.chunks * CHUNK
            known.positions.update({name: first + offset for offset, name in enumerate(keys)})
            known.chunks += 1
        return known
