"""The console's pages (GET only: reading never changes anything, apart from DLQ receives put back)."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, abort, render_template, request

from converge.flow.names import require_job_type
from converge.flow.registry import Queue
from converge.model.batches import CALLBACK_SUFFIX, CHUNK, parse_child
from converge.model.states import ATTENTION_KEYS
from converge_cli.console import charts, dead_letters, figures
from converge_cli.console.actions import DECISIONS, OPERATION_ACTIONS
from converge_cli.console.context import deployment, job_types
from converge_cli.support.paging import decode_token, encode_token
from localcloud.project import NoCatalogue

blueprint = Blueprint("pages", __name__)
PAGE_SIZE = 25
RESOLUTIONS = ("succeeded", "failed", "retry")


@blueprint.get("/")
def overview() -> str:
    hours = request.args.get("hours", "")
    shown = figures.overview(deployment(), hours=int(hours) if hours.isdigit() and 1 <= int(hours) <= 48 else 6)
    return render_template(
        "overview.html",
        title="overview",
        overview=shown,
        outcome_charts=charts.outcome_charts(shown.outcomes),
        depth_chart=charts.depth_chart(shown.queues),
        outcomes=figures.OUTCOMES,
    )


@blueprint.get("/attention/<key>")
def attention(key: str) -> str:
    if key not in ATTENTION_KEYS:
        abort(404)
    converge = deployment().converge
    job_type = request.args.get("job_type") or None
    if job_type:
        require_job_type(deployment().registry, job_type)
    page = converge.operations.listings.list_attention(key, job_type, PAGE_SIZE, decode_token(request.args.get("next")))
    return render_template(
        "attention.html",
        title=f"{key} operations",
        key=key,
        keys=sorted(ATTENTION_KEYS, key=figures.ATTENTION_ORDER.index),
        job_type=job_type,
        job_types=job_types(),
        rows=page.operations,
        next_token=encode_token(page.next_token),
        reason_of=_reason,
    )


def _reason(row: dict[str, Any]) -> str:
    from converge_cli.support.present import row_reason

    return row_reason(row)


@blueprint.get("/operations/<path:operation_id>")
def operation(operation_id: str) -> str:
    target = deployment()
    found = target.converge.operations.require(operation_id, steps=True)
    view = found.to_json()
    return render_template(
        "operation.html",
        title=f"operation {operation_id}",
        operation=found,
        view=view,
        payload=json.dumps(view["payload"], indent=2, sort_keys=True, ensure_ascii=False),
        copies=dead_letters.copies_of(target, operation_id),
        lease_live=found.state_record.lease_live(target.converge.clock.now()),
        resolutions=RESOLUTIONS,
        decisions=DECISIONS,
        cancellable=sorted(OPERATION_ACTIONS["cancel"].states),
        batch_of=_batch_of(operation_id),
    )


def _batch_of(operation_id: str) -> tuple[str, str] | None:
    """The batch an operation belongs to, by its id: ("child", batch) or ("callback", batch), else None."""
    child = parse_child(operation_id)
    if child is not None:
        return "child", child.batch_id
    if operation_id.endswith(CALLBACK_SUFFIX) and parse_child(operation_id) is None:
        return "callback", operation_id[: -len(CALLBACK_SUFFIX)]
    return None


@blueprint.get("/batches/<batch_id>")
def batch(batch_id: str) -> str:
    """A batch: its progress, counts and callback, and its children a chunk (100) at a time, each with its state."""
    converge = deployment().converge
    batches = converge.require_batches()
    found = batches.require(batch_id)
    chunk_arg = request.args.get("chunk", "0")
    chunk = int(chunk_arg) if chunk_arg.isdigit() else 0
    keys = batches.table.keys(batch_id, chunk) or []
    state = converge.operations.state
    children = []
    for offset, key in enumerate(keys):
        child = found.child_id(chunk * CHUNK + offset, key)
        children.append((child, state.record(child).state.value))
    chunks = (found.written + CHUNK - 1) // CHUNK
    return render_template(
        "batch.html",
        title=f"batch {batch_id}",
        batch=found,
        share=0 if not found.total else found.final * 100 // found.total,
        counts=sorted((name, count) for name, count in found.counts.items() if count),
        callback_state=batches.callback_state(found, state),
        children=children,
        chunk=chunk,
        chunks=chunks,
    )


@blueprint.get("/toggles")
def toggles() -> str:
    try:
        shown, missing = figures.toggles(deployment()), None
    except NoCatalogue as exc:  # said on the page, rather than an empty table
        shown, missing = [], str(exc)
    return render_template("toggles.html", title="toggles", toggles=shown, catalogue_problem=missing)


@blueprint.get("/dlqs")
def dlqs() -> str:
    target = deployment()
    letters = {queue.value: dead_letters.peek(target, queue) for queue in Queue}
    depths = {figure.queue: figure.dlq for figure in figures.queue_figures(target)}
    return render_template(
        "dlqs.html",
        title="dead-letter queues",
        letters=letters,
        depths=depths,
        job_types=job_types(),
    )
