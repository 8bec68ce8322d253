"""`converge dlq`: what is dead-lettered (by job type and error class), and moving it back."""

from __future__ import annotations

import json
from collections import defaultdict
from enum import StrEnum
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from converge.flow.registry import Queue
from converge.model.errors import InvalidMessage
from converge.operate.redrive import Redrive
from converge.operate.redrive_decision import RedriveRequest, error_class
from converge.screening.message import describe_validation_error, read_envelope
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.lookup import require_job_type
from converge_cli.support.operators import actor, operator_at, redrive_for
from converge_cli.support.options import Json, on_deployment, parse_duration, print_json
from converge_cli.support.output import Column, records, say, stdout, styled
from converge_cli.support.target import Target, TargetError

dlq_app = typer.Typer(help="Dead-letter queues: inspect them and redrive messages to their queue.")

SURVEY_HIDE_SECONDS = 60


class QueueChoice(StrEnum):
    CRITICAL = "critical"
    DEFAULT = "default"
    BULK = "bulk"
    ALL = "all"


# The redrive function's own defaults, so the command and a bare test event of the Lambda mean the same.
_DEFAULTS = {name: info.default for name, info in RedriveRequest.model_fields.items()}

DEFAULT_QUEUE = QueueChoice(_DEFAULTS["queue"])

QueueOption = Annotated[
    QueueChoice, typer.Option("--queue", case_sensitive=False, help="critical, default, bulk or all.")
]


@dlq_app.command("list")
@fails_cleanly
@on_deployment
def list_dead_letters(
    queue: QueueOption = QueueChoice.ALL,
    limit: Annotated[int, typer.Option("--max", min=1, help="Messages to examine per queue at most.")] = 1000,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Counts and a sample per job type and error class; every message is made visible again."""
    redrive = redrive_for(deployment)
    queues = list(Queue) if queue is QueueChoice.ALL else [Queue(queue.value)]
    report = [survey(redrive, name, limit) for name in queues]
    if as_json:
        print_json({"queues": report})
        return
    rows: list[list[Any]] = []
    for entry in report:
        if not entry["groups"]:
            rows.append([entry["queue"], "-", "-", "0", "", "", ""])
        for group in entry["groups"]:
            sample = group["sample"]
            rows.append(
                [
                    entry["queue"],
                    group["job_type"],
                    group["error_class"],
                    str(group["count"]),
                    sample.get("message_id") or "",
                    sample.get("operation_id") or "",
                    sample.get("error_reason") or "",
                ]
            )
    records(
        stdout(), ["queue", "job type", "error class", "count", "sample message", "sample operation", "reason"], rows
    )


def survey(redrive: Redrive, queue: Queue, limit: int) -> dict[str, Any]:
    """Receive up to `limit` messages of a queue's DLQ, group them, and put every one back."""
    dlq_url = redrive.route(queue).dlq_url
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"count": 0, "sample": {}})
    seen: set[str] = set()
    received: list[tuple[str, str]] = []
    try:
        while len(seen) < limit:
            messages = redrive.receive(dlq_url, min(10, limit - len(seen)), SURVEY_HIDE_SECONDS)
            received += [(dlq_url, message["ReceiptHandle"]) for message in messages]
            fresh = [message for message in messages if message["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen.add(message["MessageId"])
                key, sample = _describe(message)
                group = groups[key]
                group["count"] += 1
                group["sample"] = group["sample"] or sample
    finally:
        redrive.release(received)
    return {
        "queue": queue.value,
        "dlq_url": dlq_url,
        "examined": len(seen),
        **redrive.counts(queue),
        "groups": [
            {"job_type": job_type, "error_class": error, **group} for (job_type, error), group in sorted(groups.items())
        ],
    }


def _describe(message: dict[str, Any]) -> tuple[tuple[str, str], dict[str, Any]]:
    attributes = message.get("MessageAttributes", {})
    try:
        envelope = read_envelope(message.get("Body", ""))
        job_type, operation_id = envelope.job_type, envelope.operation_id
    except InvalidMessage:
        job_type, operation_id = "(malformed)", None
    sample = {
        "message_id": message["MessageId"],
        "operation_id": operation_id,
        "error_reason": attributes.get("error_reason", {}).get("StringValue"),
        "failed_at": attributes.get("failed_at", {}).get("StringValue"),
    }
    return (job_type, error_class(message)), sample


@dlq_app.command("redrive")
@fails_cleanly
@on_deployment
def redrive_command(
    queue: QueueOption = DEFAULT_QUEUE,
    job_types: Annotated[list[str] | None, typer.Option("--job-type", help="Only these job types (repeat).")] = None,
    error_classes: Annotated[
        list[str] | None,
        typer.Option("--error-class", help="Only these error classes (repeat); MaxReceiveCountExceeded: moved by SQS."),
    ] = None,
    older_than: Annotated[str | None, typer.Option("--older-than", help="Only messages older than this (1h).")] = None,
    newer_than: Annotated[str | None, typer.Option("--newer-than", help="Only messages newer than this (10m).")] = None,
    operation_ids: Annotated[list[str] | None, typer.Option("--operation-id", help="Only these (repeat).")] = None,
    max_messages: Annotated[int, typer.Option("--max", help="Matching messages to handle at most.")] = _DEFAULTS[
        "max_messages"
    ],
    rate: Annotated[float, typer.Option("--rate", help="Messages sent per second at most.")] = _DEFAULTS[
        "rate_per_second"
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would happen; change nothing.")] = False,
    remote: Annotated[bool, typer.Option("--remote", help="Run it in the deployed redrive Lambda.")] = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Move dead-lettered messages back to their queue (FAILED operations are reopened; see the details).

    Settled operations' messages are deleted; disabled jobs, UNKNOWN and REJECTED operations stay.
    Runs in this process against the target; --remote runs the deployed redrive Lambda instead."""
    fields = {
        "queue": queue.value,
        "job_types": job_types or None,
        "error_classes": error_classes or None,
        "older_than_seconds": parse_duration(older_than, "--older-than"),
        "newer_than_seconds": parse_duration(newer_than, "--newer-than"),
        "operation_ids": operation_ids or None,
        "max_messages": max_messages,
        "rate_per_second": rate,
        "dry_run": dry_run,
    }
    try:
        request = RedriveRequest.model_validate(fields)
    except ValidationError as exc:
        raise UsageError(f"invalid redrive request: {describe_validation_error(exc)}") from None
    # In this process each message's job must be known: no catalogue is refused (not a redrive that leaves every
    # message as of an unknown job). The deployed function (--remote) has its own; names are checked when one is here.
    if not remote or deployment.catalogue_module:
        registry = deployment.registry
        for job_type in request.job_types or []:
            require_job_type(registry, job_type)
    summary = _remote(deployment, request) if remote else _in_process(deployment, request, quiet=as_json)
    if as_json:
        print_json(summary)
        return
    _print_summary(summary)


def _in_process(deployment: Target, request: RedriveRequest, quiet: bool) -> dict[str, Any]:
    operator = operator_at(deployment)
    redrive = operator.redriver()
    total = min(request.max_messages, sum(redrive.counts(queue)["visible"] for queue in request.queues))
    with Progress(
        TextColumn("redrive"), BarColumn(), MofNCompleteColumn(), console=stdout(), transient=True, disable=quiet
    ) as bar:
        task = bar.add_task("redrive", total=total or None)
        summary = operator.run_redrive(request, progress=lambda _detail: bar.advance(task))
    return summary.to_json()


def _remote(deployment: Target, request: RedriveRequest) -> dict[str, Any]:
    name = deployment.outputs.get("RedriveFunctionName")
    if not name:
        raise TargetError(f"stack {deployment.stack!r} has no RedriveFunctionName output")
    named = request if request.actor else request.model_copy(update={"actor": actor()})
    response = deployment.client("lambda").invoke(FunctionName=name, Payload=named.model_dump_json().encode())
    payload = json.loads(response["Payload"].read() or b"{}")
    if response.get("FunctionError"):
        raise UsageError(f"the redrive function failed: {payload.get('errorType')}: {payload.get('errorMessage')}")
    if "error" in payload:
        raise UsageError(str(payload["error"]))
    return dict(payload)


def _print_summary(summary: dict[str, Any]) -> None:
    console = stdout()
    title = "redrive (dry run: nothing changed)" if summary.get("dry_run") else "redrive"
    keys = ("moved", "skipped_converged", "superseded", "skipped_disabled", "left", "errors", "not_matched")
    labels = [
        "moved",
        "converged (deleted)",
        "superseded (deleted)",
        "disabled (left)",
        "left",
        "errors",
        "not matched",
    ]
    # One row per outcome, its label first: on a narrow terminal each row becomes a block headed by its label (one
    # row of counts would be headed by its first count alone, an unlabelled "- 1").
    counts = [[label, str(summary.get(key, 0))] for label, key in zip(labels, keys, strict=True)]
    records(console, ["outcome", Column("messages", justify="right")], counts, title=title)
    if summary.get("incomplete"):
        say(console, styled("stopped before the end (time limit); run it again for the rest", "yellow"))
    details = summary.get("details") or []
    if details:
        records(
            console,
            ["operation", "queue", "job type", "state", "action", "reason"],
            [
                [str(detail.get(key) or "") for key in ("operation_id", "queue", "job_type", "state", "action")]
                + [str(detail.get("reason", ""))]
                for detail in details
            ],
        )
