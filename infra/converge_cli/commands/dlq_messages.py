"""`converge dlq show|delete|purge`: one dead-lettered message in full, and removing messages on purpose.

Every command here looks at a DLQ by receiving its messages (hidden for a short while, so each is
seen once) and makes every message it did not delete visible again before it returns. Deleting is
the only thing that loses a message for good, so it asks first (or takes `--yes`) and `--dry-run`
shows what it would delete. `purge` removes only the unreadable messages (a body that is not a
converge message), which no redrive can ever move.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

import typer

from converge.flow.registry import Queue
from converge.model.envelope import Envelope
from converge.model.errors import InvalidMessage
from converge.operate.redrive import Redrive
from converge.operate.redrive_decision import error_class
from converge.screening.message import read_envelope
from converge_cli.support.errors import ExitCode, UsageError, fails_cleanly
from converge_cli.support.operators import redrive_for
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import fields, records, say, stderr, stdout, styled
from converge_cli.support.target import Target

HIDE_SECONDS = 60
SCAN_AT_MOST = 10_000


class QueueName(StrEnum):
    CRITICAL = "critical"
    DEFAULT = "default"
    BULK = "bulk"
    ALL = "all"


QueueArg = Annotated[QueueName, typer.Option("--queue", case_sensitive=False, help="critical, default, bulk or all.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")]


@dataclass
class DeadLetter:
    """One message found on a DLQ, with the receipt handle of its latest receive."""

    queue: Queue
    queue_url: str
    message: dict[str, Any]
    receipt: str

    @property
    def message_id(self) -> str:
        return str(self.message["MessageId"])

    @property
    def envelope(self) -> Envelope | None:
        try:
            return read_envelope(self.message.get("Body", ""))
        except InvalidMessage:
            return None

    def describe(self) -> dict[str, Any]:
        envelope = self.envelope
        attributes = {
            name: value.get("StringValue", value.get("BinaryValue"))
            for name, value in self.message.get("MessageAttributes", {}).items()
        }
        system = self.message.get("Attributes", {})
        return {
            "message_id": self.message_id,
            "queue": self.queue.value,
            "readable": envelope is not None,
            "operation_id": envelope.operation_id if envelope else attributes.get("operation_id"),
            "job_type": envelope.job_type if envelope else attributes.get("job_type"),
            "error_class": error_class(self.message),
            "error_reason": attributes.get("error_reason"),
            "failed_at": attributes.get("failed_at"),
            "receive_count": int(system.get("ApproximateReceiveCount", 0)) or None,
            "sent_timestamp": system.get("SentTimestamp"),
            "attributes": attributes,
            "body": self.message.get("Body", ""),
        }


@dataclass
class Scan:
    """The messages of one or more DLQs; those not deleted through it are released when it ends."""

    redrive: Redrive
    sqs: Any
    found: list[DeadLetter] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)

    def delete(self, letter: DeadLetter) -> None:
        self.sqs.delete_message(QueueUrl=letter.queue_url, ReceiptHandle=letter.receipt)
        self.deleted.add(letter.message_id)


@contextmanager
def scanned(deployment: Target, queue: QueueName, limit: int = SCAN_AT_MOST) -> Iterator[Scan]:
    redrive = redrive_for(deployment)
    scan = Scan(redrive, deployment.client("sqs"))
    handles: list[tuple[str, str, str]] = []  # (queue url, message id, receipt handle)
    try:
        for name in list(Queue) if queue is QueueName.ALL else [Queue(queue.value)]:
            url = redrive.route(name).dlq_url
            by_id: dict[str, DeadLetter] = {}
            while len(by_id) < limit:
                messages = redrive.receive(url, min(10, limit - len(by_id)), HIDE_SECONDS)
                handles += [(url, m["MessageId"], m["ReceiptHandle"]) for m in messages]
                fresh = [m for m in messages if m["MessageId"] not in by_id]
                for message in messages:  # a message seen again: only its latest receipt handle deletes it
                    if message["MessageId"] in by_id:
                        by_id[message["MessageId"]].receipt = message["ReceiptHandle"]
                if not fresh:
                    break
                for message in fresh:
                    by_id[message["MessageId"]] = DeadLetter(name, url, message, message["ReceiptHandle"])
            scan.found += by_id.values()
        yield scan
    finally:
        redrive.release([(url, handle) for url, message_id, handle in handles if message_id not in scan.deleted])


def matching(scan: Scan, wanted: str) -> list[DeadLetter]:
    """Messages whose message id, or else whose operation id, is `wanted`."""
    by_message = [letter for letter in scan.found if letter.message_id == wanted]
    if by_message:
        return by_message
    return [letter for letter in scan.found if letter.describe()["operation_id"] == wanted]


def attempts_of(deployment: Target, letter: DeadLetter) -> int | None:
    """The attempts its operation's record counts, as `converge ops show` says them; None without a record.

    SQS's ApproximateReceiveCount on a dead letter counts receives from the DLQ (every `dlq show` or `list` is
    one), not the worker's attempts, so it is shown apart under its own name."""
    operation_id = letter.describe()["operation_id"]
    if not operation_id:
        return None
    operation = deployment.converge.operations.get(operation_id)
    return operation.attempts if operation else None


def register(dlq_app: typer.Typer) -> None:
    dlq_app.command("show")(show)
    dlq_app.command("delete")(delete)
    dlq_app.command("purge")(purge)


@fails_cleanly
@on_deployment
def show(
    message_id: Annotated[str, typer.Argument(help="A message id (as `dlq list` shows), or an operation id.")],
    queue: QueueArg = QueueName.ALL,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """One dead-lettered message in full: body, attributes, error, its operation's attempts (it stays in the DLQ)."""
    with scanned(deployment, queue) as scan:
        found = matching(scan, message_id)
    if not found:
        raise UsageError(f"no message {message_id!r} in the {queue.value} DLQ(s) (`converge dlq list` shows them)")
    described = [{**letter.describe(), "attempts": attempts_of(deployment, letter)} for letter in found]
    if as_json:
        print_json(described[0] if len(described) == 1 else described)
        return
    console = stdout()
    for number, detail in enumerate(described):
        if number:
            say(console)
        fields(
            console,
            [
                ("message", styled(detail["message_id"], "bold")),
                ("queue", detail["queue"]),
                ("operation", detail["operation_id"] or "-"),
                ("job type", detail["job_type"] or "-"),
                ("readable", "yes" if detail["readable"] else styled("no: not a converge message", "red")),
                ("error class", detail["error_class"]),
                ("reason", detail["error_reason"] or "-"),
                ("failed at", detail["failed_at"] or "-"),
                ("attempts", "-" if detail["attempts"] is None else detail["attempts"]),
                ("DLQ receives", detail["receive_count"] or "-"),
                ("attributes", json.dumps(detail["attributes"], sort_keys=True, ensure_ascii=False)),
                ("body", detail["body"]),
            ],
        )


@fails_cleanly
@on_deployment
def delete(
    message_id: Annotated[str, typer.Argument(help="The message id to delete (`dlq list` / `dlq show`).")],
    queue: QueueArg = QueueName.ALL,
    yes: Yes = False,
    dry_run: DryRun = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Delete one dead-lettered message for good (asks first; its operation's record is not touched)."""
    with scanned(deployment, queue) as scan:
        found = [letter for letter in scan.found if letter.message_id == message_id]
        if not found:
            raise UsageError(f"no message {message_id!r} in the {queue.value} DLQ(s) (`converge dlq list` shows them)")
        _delete(scan, found, "delete", yes, dry_run, as_json)


@fails_cleanly
@on_deployment
def purge(
    queue: QueueArg = QueueName.ALL,
    yes: Yes = False,
    dry_run: DryRun = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Delete the unreadable messages of the DLQ(s): bodies that are not converge messages (asks first).

    Readable messages stay, whatever their operation's state: redrive or `dlq delete` them one by one."""
    with scanned(deployment, queue) as scan:
        unreadable = [letter for letter in scan.found if letter.envelope is None]
        _delete(scan, unreadable, "purge", yes, dry_run, as_json)


def _delete(scan: Scan, letters: list[DeadLetter], verb: str, yes: bool, dry_run: bool, as_json: bool) -> None:
    """Show what goes, ask (unless --yes or --dry-run), delete, and say what was deleted."""
    described = [letter.describe() for letter in letters]
    rows = [[d["message_id"], d["queue"], d["operation_id"] or "-", d["error_class"], d["body"]] for d in described]
    columns = ["message", "queue", "operation", "error class", "body"]
    if not as_json and letters:
        records(stdout(), columns, rows, title="would delete" if dry_run else "to delete")
    if dry_run or not letters:
        _done(described, deleted=False, dry_run=dry_run, as_json=as_json)
        return
    if not yes and not typer.confirm(f"{verb}: delete {len(letters)} message(s) for good?", err=True):
        say(stderr(), "nothing deleted")
        raise typer.Exit(ExitCode.FAILED)
    for letter in letters:
        scan.delete(letter)
    _done(described, deleted=True, dry_run=False, as_json=as_json)


def _done(described: list[dict[str, Any]], deleted: bool, dry_run: bool, as_json: bool) -> None:
    ids = [d["message_id"] for d in described]
    if as_json:
        print_json({"dry_run": dry_run, "deleted": ids if deleted else [], "would_delete": ids if dry_run else []})
    elif dry_run:
        say(stdout(), f"dry run: {len(ids)} message(s) would be deleted; nothing changed")
    elif not ids:
        say(stdout(), "nothing to delete")
    else:
        say(stdout(), f"deleted {len(ids)} message(s)")
