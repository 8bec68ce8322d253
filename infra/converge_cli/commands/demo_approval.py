"""The demo's approval: jobs that wait for a person's decision (`ctx.wait_for`), decided as an operator decides.

Three of the scenario's approval job are enqueued (its toggle turned on first when it is fail-closed) and each must
wait SCHEDULED, listed, for its signal until its timeout, having made nothing. The first is approved and the second
rejected through `converge signal`, run in this process against the local cloud as an operator runs it (the
approval sent twice: the second is the same signal); the local clock then moves past the third's timeout. Each must
end having made exactly the effects its path names, counted in the emulated services: a missing or doubled effect
fails the demo. A decision sent after the timeout is answered `ended` (exit code 2) and changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from converge.local_hooks import ApprovalStep
from converge.model.states import OperationState
from converge.model.submission import SignalSubmission
from converge_cli.commands.demo_effects import made_by

APPROVED, REJECTED, TIMED_OUT = "demo-approval-approved", "demo-approval-rejected", "demo-approval-timed-out"
PATHS = {APPROVED: "approved", REJECTED: "rejected", TIMED_OUT: "timed_out"}
OPERATOR = "cli:demo-operator"
"""Who the demo's decisions are sent as (CONVERGE_ACTOR): the receipt lists each signal with its sender."""


def run(demo: Any, check: Any) -> int:
    """Run the three paths and append their checks; returns how many e-mails they were meant to send."""
    from localcloud import effects

    step: ApprovalStep | None = demo.scenario.approval
    if step is None:
        return 0
    cloud, converge, report = demo.cloud, demo.converge, demo.report
    binding = converge.registry.get(step.job_type)
    if binding.fail_closed:
        demo.step(f"turning the {binding.toggle_key} toggle on, for {step.note}")
        cloud.client("ssm").put_parameter(
            Name=converge.settings.toggle_parameter(binding.toggle_key), Value="on", Type="String", Overwrite=True
        )
    for operation_id in PATHS:
        converge.enqueue(step.job_type, operation_id, step.payload)
    demo._drain(f"running three {step.job_type} until they wait for {step.signal!r}")
    waited, until = _waiting(demo, step, check)
    report.checks.append(waited)

    demo.step(f"an operator approves {APPROVED} (sent twice) and rejects {REJECTED} with `converge signal`")
    approved = [_send(demo, APPROVED, step.signal, step.approve, "approval-1") for _ in range(2)]
    rejected = _send(demo, REJECTED, step.signal, step.reject, "rejection-1")
    demo._drain("resuming the decided ones")
    days = step.timeout_seconds / 86_400
    cloud.advance(step.timeout_seconds + 60)
    demo._drain(f"moving the local clock {days:g} day(s) on: {TIMED_OUT}'s timeout fires")
    late = _send(demo, TIMED_OUT, step.signal, step.approve, "approval-late")
    report.checks.append(
        check(
            "the decisions are sent as an operator sends them, once each",
            [*approved, rejected] == [("accepted", 0), ("duplicate", 0), ("accepted", 0)],
            f"approval: {', '.join(answer for answer, _ in approved)}; rejection: {rejected[0]}"
            + ("" if {code for _, code in [*approved, rejected]} == {0} else " (a non-zero exit code)"),
        )
    )
    report.checks.append(
        check(
            "a decision sent after the timeout is answered so, and kept nowhere",
            late == ("ended", 2),
            f"{late[0]}, exit code {late[1]}",
        )
    )
    demo._drain("after the late decision")

    counted = effects.count(cloud)
    emails = 0
    for operation_id, path in PATHS.items():
        wanted = step.effects.get(path, {})
        emails += wanted.get("ses", 0)
        report.checks.append(_ended(demo, operation_id, path, made_by(counted, operation_id), wanted, check))
    report.approvals += _lines(step, counted, until)
    return emails


def _send(demo: Any, operation_id: str, name: str, payload: dict[str, Any], signal_id: str) -> tuple[str, int]:
    """`converge signal` as an operator runs it: (its answer, its exit code). Without the command (a demo built
    apart from it), the same call the command makes, its exit code as the command's would be."""
    from typer.testing import CliRunner

    demo.report.events["signals_sent"] += 1
    if demo.cli is None:
        receipt = demo.converge.signals.send(SignalSubmission(operation_id, name, payload, signal_id, sent_by=OPERATOR))
        return receipt.answer.value, 0 if receipt.kept else 2

    args = ["signal", operation_id, name, "--payload", json.dumps(payload), "--signal-id", signal_id, "--json"]
    result = CliRunner().invoke(demo.cli, args, env={"CONVERGE_ACTOR": OPERATOR})
    text = result.stdout.strip() or result.output.strip()  # a refusal is printed as an error (on stderr)
    try:
        shown = json.loads(text)
        answer = str(shown.get("answer") or shown.get("error"))
    except (ValueError, AttributeError):
        answer = f"unreadable: {result.output.strip()[:200]}"
    return answer, result.exit_code


def _waiting(demo: Any, step: ApprovalStep, check: Any) -> tuple[Any, str]:
    """Each waits SCHEDULED for the signal until its timeout, listed, having made nothing; and until when."""
    from localcloud import effects

    counted = effects.count(demo.cloud)
    listed = {row["operation_id"] for row in demo.converge.operations.listings.iter_attention("SCHEDULED")}
    wrong: list[str] = []
    runs_at: dict[str, str] = {}
    for operation_id in PATHS:
        shown = demo.converge.operations.require(operation_id).to_json()
        runs_at[operation_id] = str(shown["run_at"])
        ahead = _seconds_ahead(demo, shown.get("run_at"))
        on_time = ahead is not None and abs(ahead - step.timeout_seconds) < 600
        if not (
            shown["state"] == OperationState.SCHEDULED.value
            and (shown["waiting"], shown["waiting_for"]) == (step.signal, "signal")
            and on_time
            and operation_id in listed
            and not made_by(counted, operation_id)
        ):
            wrong.append(f"{operation_id}: {shown['state']}, waiting {shown['waiting']!r} until {shown['run_at']}")
    until = runs_at[APPROVED]  # each wait's time, as read above
    return check(
        f"three {step.job_type} wait SCHEDULED for {step.signal!r}, listed until their timeout, making nothing",
        not wrong,
        "; ".join(wrong) or f"until {until}",
    ), until


def _seconds_ahead(demo: Any, run_at: str | None) -> float | None:
    from converge.model.timing import parse_instant

    return parse_instant("run_at", run_at) - demo.cloud.clock.now() if run_at else None


def _ended(demo: Any, operation_id: str, path: str, made: dict[str, int], wanted: dict[str, int], check: Any) -> Any:
    operation = demo.converge.operations.require(operation_id, steps=True)
    wait = next((s for s in operation.steps or () if s.name == demo.scenario.approval.signal), None)
    note = wait.note if wait else "no wait recorded"
    by_signal = note.startswith("resumed by signal") if path != "timed_out" else note == "timed out"
    shown = ", ".join(f"{service} {number}" for service, number in sorted(wanted.items())) or "nothing"
    return check(
        f"{operation_id}: {path.replace('_', ' ')}, made {shown}, exactly once",
        operation.state is OperationState.SUCCEEDED and made == wanted and by_signal,
        f"{operation.state.value}, {note}, made {made or 'nothing'}",
    )


def _lines(step: ApprovalStep, counted: Any, until: str) -> list[str]:
    """What became of each, a line each (the report prints them)."""
    words = {"ledger": "ledger row", "ses": "e-mail", "s3": "object"}

    def made(operation_id: str) -> str:
        found = made_by(counted, operation_id)
        return ", ".join(f"{n} {words.get(s, s)}" for s, n in sorted(found.items())) or "nothing"

    return [
        f"{len(PATHS)} x {step.job_type} waited SCHEDULED for the signal {step.signal!r} until {until}, listed",
        f"{APPROVED}: approved with `converge signal` (sent twice, kept once): {made(APPROVED)}",
        f"{REJECTED}: rejected with `converge signal`: {made(REJECTED)}",
        f"{TIMED_OUT}: no decision in {step.timeout_seconds / 86_400:g} day(s), the local clock moved: "
        f"{made(TIMED_OUT)}",
    ]
