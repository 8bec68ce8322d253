"""The settlement: every write that settles an operation, with what its extensions write in the same transaction.

The worker's outcome (and its refusal or expiry of a message), the relay's refusal of a request, an
operator's resolve and a cancel all settle here. One settle:

1. asks each extension for its items (`Extension.extras_for`: the next operation's request); one that
   cannot build its items is left out, and the reason says so;
2. writes the settle and those items in one transaction (the caller's `write`: the store's write for that
   move; without items, one UpdateItem). An item whose own condition fails (`ExtraRefused`: a continuation
   an earlier settle wrote) is dropped, the reason says so, and the settle is written again without it; the
   operation's own condition failing (`Refused`) is the caller's answer;
3. tells each extension that it is recorded (`Extension.after_settle`); a failure there never changes the
   outcome.

A batch's child settles as any operation does: the batch counter counts it from the state table's stream
(`converge.flow.batch_counter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from converge.flow.extensions import Extensions
from converge.model.outcomes import describe
from converge.model.records import ExtraRefused
from converge.model.settling import Settling
from converge.observability import count, logger
from converge.store.transact import TransactItem

SettleWrite = Callable[[str, Sequence[TransactItem]], None]
"""The store's write of one settle, given the reason as it stands and the extra items: raises Refused when the
operation's own condition failed, ExtraRefused when an item's did (nothing written either way)."""


class Settlement:
    """Every settle of an operation, with its extensions' items in its transaction, and what follows it."""

    def __init__(self, extensions: Extensions) -> None:
        self.extensions = extensions

    def settle(self, settling: Settling, reason: str, write: SettleWrite, *, follow: bool = True) -> str:
        """Write the settle with the extensions' items (see the module); the reason as recorded. Raises Refused
        when the operation's own condition failed. `follow=False` leaves telling the extensions to the caller (a
        batch's cancel looks for completion once, after every child)."""
        items, reason = self._items(settling, reason)
        while True:
            try:
                write(reason, items)
            except ExtraRefused as refused:
                # Dropping the item ends the loop: without items the settle is one UpdateItem, which no item refuses.
                logger.info("not written with the outcome", item=refused.what, why=refused.unmet)
                reason = f"{reason}; {refused.said}"
                items = [item for index, item in enumerate(items) if index != refused.index]
                continue
            break
        if follow:
            self.follow(settling)
        return reason

    def follow(self, settling: Settling) -> None:
        """Tell the extensions that the settle is recorded; a failure is logged and never changes the outcome."""
        for extension in self.extensions.followers:
            try:
                extension.after_settle(settling)
            except Exception as exc:
                logger.error("could not follow the settle; a copy or the reconciler does", reason=describe(exc))

    def _items(self, settling: Settling, reason: str) -> tuple[list[TransactItem], str]:
        items: list[TransactItem] = []
        for extension in self.extensions.providers:
            try:
                items.extend(extension.extras_for(settling))
            except Exception as exc:  # what cannot be built never keeps the outcome unrecorded
                logger.error("nothing written with the outcome", reason=describe(exc))
                count("continuation_not_built", settling.job_type)
                reason = f"{reason}; not written with it: {describe(exc)}"
        return items, reason
