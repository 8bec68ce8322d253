"""The console's actions: each asks for a reason, shows what it will do, and acts only when confirmed.

Every action goes through the framework's operator functions (`converge.operator`), the same code
the CLI and the redrive function call, so the receipt records it the same way whoever acts: the
history entry names the actor (`console:<user>`) and the reason. A POST without `confirmed` only
shows the confirmation (for a redrive: the dry run's report); nothing changes until it is confirmed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from converge.flow.names import find_binding, require_job_type
from converge.flow.registry import Queue
from converge.model.errors import InvalidMessage
from converge.model.states import NOT_STARTED
from converge.model.submission import SignalSubmission
from converge.operate.actions import ActionResult, Operator, Resolution
from converge.screening.signals import check_signal_name
from converge_cli.console.context import actor, deployment
from converge_cli.support.errors import UsageError

blueprint = Blueprint("actions", __name__)
REASON_LIMIT = 500
REDRIVE_ASKED_BY_LIMIT = 200
"""What a redrive request's `actor` holds at most (the actor and the reason)."""
DECISIONS = ("approved", "rejected")
"""What a person's signal says, as its payload's `decision` (docs/signals.md)."""


@dataclass(frozen=True)
class OperationAction:
    """An action on one operation, offered where the operation's state allows it."""

    title: str
    states: frozenset[str]
    choices: tuple[str, ...]  # the values of its `outcome` field, if it has one
    run: Callable[[Operator, str, str, str], ActionResult]  # (operator, id, outcome, reason)


OPERATION_ACTIONS: dict[str, OperationAction] = {
    "resolve": OperationAction(
        "resolve",
        frozenset({"UNKNOWN"}),
        tuple(outcome.value for outcome in Resolution),
        lambda operator, operation_id, outcome, reason: operator.resolve(operation_id, outcome, reason),
    ),
    "retry": OperationAction(
        "retry",
        frozenset({"FAILED"}),
        (),
        lambda operator, operation_id, _outcome, reason: operator.retry(operation_id, reason),
    ),
    "cancel": OperationAction(
        "cancel",
        frozenset(state.value for state in NOT_STARTED),
        (),
        lambda operator, operation_id, _outcome, reason: operator.cancel(operation_id, reason),
    ),
}


def operator() -> Operator:
    """The framework's operator actions on this deployment (its DLQs from the stack's outputs), as the actor."""
    target = deployment()
    return target.converge.operator(actor(), dlq_urls=target.converge.settings.dlq_urls)


def reason_given() -> str:
    reason = " ".join(request.form.get("reason", "").split())
    if not reason:
        raise UsageError("say why: every action records a reason in the receipt")
    if len(reason) > REASON_LIMIT:
        raise UsageError(f"the reason is {len(reason)} characters; at most {REASON_LIMIT}")
    return reason


def confirmed() -> bool:
    return request.form.get("confirmed") == "yes"


@blueprint.post("/operations/<path:operation_id>/<any(resolve, retry, cancel):name>")
def operation_action(operation_id: str, name: str) -> Any:
    action = OPERATION_ACTIONS[name]
    reason = reason_given()
    outcome = request.form.get("outcome", "")
    if action.choices and outcome not in action.choices:
        raise UsageError(f"choose one of {', '.join(action.choices)}")
    current = deployment().converge.operations.require(operation_id)
    if not confirmed():
        return render_template(
            "confirm.html",
            title=f"confirm: {action.title}",
            action_url=url_for("actions.operation_action", operation_id=operation_id, name=name),
            fields={"outcome": outcome, "reason": reason} if action.choices else {"reason": reason},
            what=f"{action.title} {operation_id}" + (f" as {outcome}" if outcome else ""),
            now=current.state.value,
            reason=reason,
            back=url_for("pages.operation", operation_id=operation_id),
        )
    result = action.run(operator(), operation_id, outcome, reason)
    flash(result.message, "applied" if result.applied else "not-applied")
    return redirect(url_for("pages.operation", operation_id=operation_id), code=303)


@blueprint.post("/operations/<path:operation_id>/signal")
def signal(operation_id: str) -> Any:
    """A person's decision for a step waiting for a signal: approved or rejected, sent as the signal `name` with the
    payload `{"decision": ...}` once confirmed. Its sender is the actor and the reason, as a redrive's is; the same
    decision twice is one signal (its id derived from its content), another one for a wait that has its outcome is
    refused and listed on the operation."""
    try:
        name = check_signal_name(request.form.get("name", ""))
    except InvalidMessage as exc:
        raise UsageError(str(exc)) from exc
    decision = request.form.get("decision", "")
    if decision not in DECISIONS:
        raise UsageError(f"choose one of {', '.join(DECISIONS)}")
    reason = reason_given()
    sent_by = f"{actor()}: {reason}"
    if len(sent_by) > REDRIVE_ASKED_BY_LIMIT:
        raise UsageError(f"a decision's reason is at most {REDRIVE_ASKED_BY_LIMIT - len(actor()) - 2} characters")
    converge = deployment().converge
    current = converge.operations.require(operation_id)
    if not confirmed():
        return render_template(
            "confirm.html",
            title=f"confirm: {decision}",
            action_url=url_for("actions.signal", operation_id=operation_id),
            fields={"name": name, "decision": decision, "reason": reason},
            what=f"send {operation_id} the signal {name!r}: {decision}",
            now=current.state.value,
            reason=reason,
            back=url_for("pages.operation", operation_id=operation_id),
        )
    receipt = converge.signals.send(SignalSubmission(operation_id, name, {"decision": decision}, sent_by=sent_by))
    flash(f"{name}: {receipt.answer.value}; {receipt.detail}", "applied" if receipt.kept else "not-applied")
    return redirect(url_for("pages.operation", operation_id=operation_id), code=303)


@blueprint.post("/dlqs/<queue>/redrive")
def redrive(queue: str) -> Any:
    if queue not in {member.value for member in Queue}:
        abort(404)
    reason = reason_given()
    job_type = request.form.get("job_type") or None
    registry = deployment().registry  # each message's job must be known: no catalogue is refused, not "left"
    if job_type:
        require_job_type(registry, job_type)
    fields = {"reason": reason, **({"job_type": job_type} if job_type else {})}
    # A redrive records who asked in each reopened operation's history; here that names the reason too
    # ("redriven from the DLQ by console:alice: provider fixed"), as the other actions' entries do.
    asked_by = f"{actor()}: {reason}"
    if len(asked_by) > REDRIVE_ASKED_BY_LIMIT:
        raise UsageError(f"a redrive's reason is at most {REDRIVE_ASKED_BY_LIMIT - len(actor()) - 2} characters")
    # The dry run first, always: the confirmation shows what would move, stay or be deleted.
    report = operator().redrive(queue, job_type=job_type, dry_run=not confirmed(), actor=asked_by)
    return render_template(
        "redrive.html",
        title=f"redrive the {queue} DLQ" + (" (dry run)" if report.dry_run else ""),
        queue=queue,
        job_type=job_type,
        report=report.to_json(),
        fields=fields,
        reason=reason,
        action_url=url_for("actions.redrive", queue=queue),
    )


@blueprint.post("/toggles/<name>")
def toggle(name: str) -> Any:
    binding = find_binding(deployment().registry, name)
    wanted = request.form.get("value")
    if wanted not in ("on", "off"):
        raise UsageError("turn it on or off")
    reason = reason_given()
    if not confirmed():
        return render_template(
            "confirm.html",
            title=f"confirm: turn {binding.toggle_key} {wanted}",
            action_url=url_for("actions.toggle", name=name),
            fields={"value": wanted, "reason": reason},
            what=f"turn {binding.toggle_key} {wanted}"
            + (" (PAUSED operations of it resume)" if wanted == "on" else " (new work of it pauses)"),
            now=None,
            reason=reason,
            back=url_for("pages.toggles"),
        )
    change = operator().set_toggle(binding.toggle_key, wanted == "on", reason)
    resumes = f"; {change.paused_to_resume} PAUSED operation(s) resume" if change.paused_to_resume else ""
    flash(f"{change.toggle}: {change.message}{resumes}", "applied" if change.changed else "not-applied")
    return redirect(url_for("pages.toggles"), code=303)
