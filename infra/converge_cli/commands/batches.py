"""`converge batches`: a batch's progress, counts, age and callback, and the batches of a deployment."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from converge.model.batches import MAX_CHILDREN, Batch, BatchCallback, BatchChild, BatchState
from converge.model.states import OperationState
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.lookup import require_job_type
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import fields, records, say, stdout, styled
from converge_cli.support.target import Target

batches_app = typer.Typer(help="Batches: many jobs admitted together, and a callback once all are final.")


def batch_json(batch: Batch, now: float, callback_state: str | None = None) -> dict[str, Any]:
    """A batch as `--json` prints it. A batch listed without its counts (complete: `list` reads no shards for it)
    shows the counts its callback was given."""
    counts = batch.counts or (batch.summary if batch.state is BatchState.COMPLETE else None) or {}
    return {
        "batch_id": batch.batch_id,
        "state": batch.state.value,
        "total": batch.total,
        "written": batch.written,
        "final": batch.final if batch.counts else sum(counts.values()),
        "counts": dict(sorted((state, count) for state, count in counts.items() if count)),
        "shards": batch.shards,
        "created_at": batch.created_at,
        "age_seconds": _age(batch.created_at, now),
        "opened_at": batch.opened_at,
        "completed_at": batch.completed_at,
        "callback": {
            "operation_id": batch.callback_id,
            "job_type": batch.callback_job_type,
            "state": callback_state,
            "counts": dict(batch.summary) if batch.summary is not None else None,
        },
        "attention": batch.attention,
        "cancelled": batch.cancelled,
        "changes_after_callback": batch.changes_after_callback,
        "changes": [{"at": c.at, "child": c.child, "before": c.before, "after": c.after} for c in batch.changes],
    }


def _age(created_at: str, now: float) -> int | None:
    try:
        return max(0, int(now - datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp()))
    except ValueError:
        return None


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def progress_bar(final: int, total: int, width: int = 30) -> str:
    done = 0 if total <= 0 else min(width, final * width // total)
    share = 0 if total <= 0 else final * 100 // total
    return f"[{'#' * done}{'.' * (width - done)}] {final}/{total} ({share}%)"


@batches_app.command("show")
@fails_cleanly
@on_deployment
def show(
    batch_id: Annotated[str, typer.Argument(help="The batch id.")],
    failed: Annotated[
        bool, typer.Option("--failed", help="Also list the batch's FAILED children (reads every child's record).")
    ] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="Failed children listed at most.")] = 50,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """A batch's progress (children final of all), counts by final state, age, and its callback's operation."""
    converge = deployment.converge
    batches = converge.require_batches()
    batch = batches.require(batch_id)
    callback_state = batches.callback_state(batch, converge.operations.state)
    view = batch_json(batch, converge.clock.now(), callback_state)
    children: list[tuple[str, str]] = []
    if failed:
        found = batches.children(batch, converge.operations.state, only=OperationState.FAILED)
        for child in found:
            children.append(child)
            if len(children) == limit:
                break
        view["failed_children"] = [{"operation_id": child, "state": state} for child, state in children]
    if as_json:
        print_json(view)
        return
    console = stdout()
    counts = ", ".join(f"{state} {count}" for state, count in view["counts"].items()) or "-"
    callback = view["callback"]
    rows: list[tuple[str, Any]] = [
        ("batch", styled(batch.batch_id, "bold")),
        ("state", batch.state.value),
        ("progress", progress_bar(batch.final, batch.total)),
        ("counts", counts),
        ("age", _duration(view["age_seconds"])),
        ("created", batch.created_at),
    ]
    if batch.state is BatchState.ADMITTING:
        rows.append(("written", f"{batch.written} of {batch.total} children"))
    if batch.cancelled:
        rows.append(("cancelled", batch.cancelled))
    if batch.attention:
        rows.append(("attention", batch.attention))
    rows.append(("callback", f"{callback['operation_id']} ({callback['job_type']}, {callback_state or 'not yet'})"))
    if batch.completed_at:
        rows.append(("completed", batch.completed_at))
        given = ", ".join(f"{state} {count}" for state, count in (batch.summary or {}).items()) or "-"
        rows.append(("callback given", given))
    if batch.changes_after_callback:
        rows.append(("changed since", f"{batch.changes_after_callback} child(ren) changed after the callback"))
    fields(console, rows)
    if batch.changes:
        say(console)
        records(
            console,
            ["at", "child", "before", "after"],
            [(c.at, c.child, c.before, c.after) for c in batch.changes],
            title="changes after the callback (recorded; the callback is not written again)",
        )
    if failed:
        say(console)
        records(console, ["child", "state"], children, title="failed children")
        if len(children) == limit:
            say(console, f"the first {limit}; --limit shows more")


@batches_app.command("list")
@fails_cleanly
@on_deployment
def list_batches(
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Batches per page.")] = 50,
    next_token: Annotated[str | None, typer.Option("--next", help="The `next` of the previous page.")] = None,
    attention: Annotated[
        bool,
        typer.Option(
            "--attention",
            help="Only the batches the reconciler listed as unable to finish by themselves, with the reason.",
        ),
    ] = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """The deployment's batches, with their state, size, progress and what needs attention (a scan of the batches
    table, a page at a time; an open batch's counts are read from its shards). With --attention, those the
    reconciler's last pass listed: an admission stopped halfway, children UNKNOWN, STUCK or PAUSED."""
    if next_token is not None and not next_token.strip():
        raise UsageError("--next is the `next` printed by the previous page")
    converge = deployment.converge
    batches = converge.require_batches()
    page, after = batches.table.batches(limit, next_token, listed_only=attention)
    page = [batches.get(batch.batch_id) or batch if batch.state is BatchState.OPEN else batch for batch in page]
    now = converge.clock.now()
    if as_json:
        print_json({"batches": [batch_json(batch, now) for batch in page], "next": after})
        return
    console = stdout()
    rows = [
        (
            batch.batch_id,
            batch.state.value,
            batch.total,
            "-" if batch.state is BatchState.ADMITTING else batch_json(batch, now)["final"],
            _duration(_age(batch.created_at, now)),
            batch.attention or "",
        )
        for batch in page
    ]
    records(console, ["batch", "state", "children", "final", "age", "attention"], rows, title="batches")
    if after:
        say(console, "more: --next ", after)


@batches_app.command("complete")
@fails_cleanly
@on_deployment
def complete(
    batch_id: Annotated[str, typer.Argument(help="The batch id.")],
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Look whether every child is final and, if so, write the callback (once: a batch complete already, or one
    with a child not final, is left as it is). What a worker does after each child; for a look that was lost."""
    converge = deployment.converge
    batches = converge.require_batches()
    batches.require(batch_id)
    written = batches.observe(batch_id)
    batch = batches.require(batch_id)
    if as_json:
        print_json({"batch_id": batch_id, "callback_written": written, "state": batch.state.value})
        return
    console = stdout()
    if written:
        say(console, "callback written: ", batch.callback_id)
    elif batch.state is BatchState.COMPLETE:
        say(console, "complete already: its callback was written at ", batch.completed_at or "-")
    else:
        say(
            console,
            f"not complete: {batch.final} of {batch.total} children final",
            f"; {batch.attention}" if batch.attention else "",
        )


@batches_app.command("cancel")
@fails_cleanly
@on_deployment
def cancel(
    batch_id: Annotated[str, typer.Argument(help="The batch id.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded on the batch and on each child).")],
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Cancel a batch: its children not started are CANCELLED (and counted); those running or final carry on.
    The callback still runs once every child is final, with the counts (reads every child's record)."""
    from converge_cli.support.operators import actor

    converge = deployment.converge
    done = converge.cancel_batch(batch_id, reason, actor())
    if as_json:
        print_json(done.to_json())
        return
    console = stdout()
    say(console, f"cancelled {done.cancelled} child(ren); {done.too_late} started or final already")
    if done.callback_written:
        say(console, "every child is final: callback written")


ENQUEUE_HELP = (
    "Admit a batch: its children from a JSON-lines file (one object a line: key, job_type, payload; '-' for "
    "standard input) and its callback, enqueued once every child is final with the batch's summary in its payload "
    "(its message subclasses converge.BatchSummary). The same batch again writes nothing twice, and finishes an "
    "admission that stopped halfway; other content under the same id is refused."
)


@batches_app.command("enqueue", help=ENQUEUE_HELP)
@fails_cleanly
@on_deployment
def enqueue(
    batch_id: Annotated[str, typer.Argument(help="The batch id (letters, digits, . _ -).")],
    children_file: Annotated[str, typer.Option("--children", help="JSON lines: key, job_type, payload; '-': stdin.")],
    callback: Annotated[str, typer.Option("--callback", help="The callback's job type.")],
    callback_payload: Annotated[str, typer.Option("--callback-payload", help="Its payload (JSON object).")] = "{}",
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    children = _children(children_file)
    try:
        payload = json.loads(callback_payload)
    except ValueError as exc:
        raise UsageError(f"--callback-payload is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise UsageError("--callback-payload must be a JSON object")
    for job_type in {callback, *(child.job_type for child in children)}:
        require_job_type(deployment.registry, job_type)
    converge = deployment.converge
    admitted = converge.enqueue_batch(batch_id, children, BatchCallback(callback, payload))
    batch = admitted.batch
    if as_json:
        print_json(
            {"batch_id": batch_id, "created": admitted.created, "state": batch.state.value, "total": batch.total}
        )
    elif admitted.created:
        say(stdout(), "accepted batch ", styled(batch_id, "bold"), f" ({batch.total} children, callback {callback})")
    else:
        say(stdout(), styled(batch_id, "bold"), f" already exists with the same content: {batch.state.value}")


def _children(source: str) -> list[BatchChild]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--children {source!r} cannot be read: {exc.strerror or exc}") from None
    children = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(children) == MAX_CHILDREN:
            raise UsageError(f"--children holds more than {MAX_CHILDREN} children (a batch's most)")
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"--children line {number} is not valid JSON: {exc}") from None
        if (
            not isinstance(row, dict)
            or set(row) != {"key", "job_type", "payload"}
            or not isinstance(row["payload"], dict)
        ):
            raise UsageError(f"--children line {number}: an object with key, job_type and payload (an object) only")
        if not isinstance(row["key"], str) or not isinstance(row["job_type"], str):
            raise UsageError(f"--children line {number}: key and job_type are strings")
        children.append(BatchChild(row["key"], row["job_type"], row["payload"]))
    if not children:
        raise UsageError("--children holds no child")
    return children
