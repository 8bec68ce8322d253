"""`converge demo`, the main job: it runs end to end and its report checks itself."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from converge_cli.main import app


def test_the_demo_holds_its_invariants_and_reports_as_json():
    # When the demo runs with --json
    result = CliRunner().invoke(app, ["demo", "--json"])
    # Then it exits 0 and prints the documented object
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["invariants_hold"] is True
    assert all(check["ok"] for check in report["checks"])
    # And every registered one-off job type appears with the states it must reach
    job_types = report["job_types"]
    # (a verification, two no-ops; and the one the application's sign-up function enqueued with its user's row)
    assert job_types["email.partner-verification.v1"] == {"accepted": 4, "succeeded": 2, "noop": 2}
    # (the plan's credit, and the one the partner-credit function enqueued with its request's row: both fail-closed,
    # paused until the toggle was turned on)
    assert job_types["ledger.partner-benefits.v1"] == {"accepted": 2, "succeeded": 2, "resumed": 2}
    assert job_types["ads.image-process.v1"]["succeeded"] == 1
    # (CVs, three steps each: the plan's, and one whose worker dies after its first step; a hostile raw item)
    assert job_types["pdf.cv.v1"] == {"accepted": 3, "succeeded": 2, "rejected": 1}
    # (the money job's continuation: the partner's notice, written with each credit's SUCCEEDED)
    assert job_types["email.partner-credited.v1"] == {"accepted": 2, "succeeded": 2}
    # (password resets: the plan's (one a hostile raw item, rejected), a delayed one, a cancelled one, an expired one)
    assert job_types["email.password-reset.v1"] == {
        "accepted": 5,
        "succeeded": 2,
        "cancelled": 1,
        "expired": 1,
        "rejected": 1,
    }
    # (the second document is a producer's raw item carrying attributes converge owns: ignored, it ran)
    assert job_types["partner-docs.upload.v1"] == {"accepted": 2, "succeeded": 2}
    # (the month's statements batch: one child per partner, the closed one a no-op; its callback once)
    assert job_types["billing.partner-statement.v1"] == {"accepted": 3, "succeeded": 2, "noop": 1}
    assert job_types["billing.statements-sent.v1"] == {"accepted": 1, "succeeded": 1}
    # (three credits above the approval threshold: one approved, one rejected, one left until its timeout)
    assert job_types["ledger.approved-credit.v1"] == {"accepted": 3, "succeeded": 3}
    # (a burst of five re-renders of one profile's CV: one ran, the newest; four debounced into it)
    assert job_types["pdf.cv-refresh.v1"] == {"accepted": 5, "succeeded": 1, "noop": 4}
    # And the effects were counted in the emulated services: fourteen e-mails despite a replayed dispatch and a
    # producer's rewrites (two verifications, two resets, the delayed one among them, the two CVs' links, two
    # partners' notices, two statements, the three large credits' partners told, and the edited profile's CV link),
    # none for the cancelled or expired one; five objects (document, ad, CV, the statements' summary, the edited
    # profile's CV; the second document and the second CV have the same keys), three ledger rows (the two plain
    # credits and the approved one)
    assert report["effects"] == {"ses": 14, "s3": 5, "ledger": 3}
    # And the worker that died between two steps cost no step twice, and the continuation ran once
    assert report["events"]["crashes_between_steps"] == 1
    assert report["events"]["continuations_run"] == 1
    checks = {check["name"]: check for check in report["checks"]}
    assert checks["demo-cv-crash: a crash after its 'store' step repeats no step"]["detail"] == (
        "1 crash(es), 1 object write(s), 1 e-mail(s)"
    )
    # And the batch was admitted once (its retry absorbed), complete, its callback given the counts, run once
    assert report["events"]["batches_admitted"] == 1
    assert report["events"]["batch_readmissions_absorbed"] == 1
    assert report["events"]["batch_emails"] == 2
    assert checks["statements-2026-11 complete, each child counted once"]["ok"]
    assert checks["statements-2026-11: its callback written once, after every child, with the counts, ran once"][
        "detail"
    ] == ("SUCCEEDED, given {'SUCCEEDED': 2, 'NOOP': 1}, {'s3': 1}")
    assert report["events"]["cancelled"] == 1
    # And the application's own functions, each called twice (a caller's retry), wrote their row and their job once
    assert report["events"]["producer_calls"] == 4
    for function in ("SignUpFunction", "PartnerCreditFunction"):
        produced = next(c for c in report["checks"] if c["name"].startswith(f"{function}: "))
        assert produced["ok"] and produced["detail"].startswith("row written (1 write(s))"), produced
    assert report["events"]["producer_rewrites"] == 2
    # And the large credits: each waited SCHEDULED for its approval, listed, until its timeout; the approval (sent
    # twice through `converge signal`) credited once, the rejection and the timeout nothing, each partner told once
    approvals = [c for c in report["checks"] if c["name"].startswith(("three ledger.approved", "demo-approval-"))]
    assert len(approvals) == 4 and all(c["ok"] for c in approvals), approvals
    assert checks["the decisions are sent as an operator sends them, once each"]["detail"] == (
        "approval: accepted, duplicate; rejection: accepted"
    )
    assert checks["a decision sent after the timeout is answered so, and kept nowhere"]["detail"] == (
        "ended, exit code 2"
    )
    assert report["events"]["approval_emails"] == 3 and report["events"]["signals_sent"] == 4
    assert [line.split(":")[0] for line in report["approvals"][1:]] == [
        "demo-approval-approved",
        "demo-approval-rejected",
        "demo-approval-timed-out",
    ]
    assert report["approvals"][1].endswith("1 ledger row, 1 e-mail")
    assert report["approvals"][2].endswith(": 1 e-mail") and report["approvals"][3].endswith(": 1 e-mail")
    assert report["events"]["boosts_expired"] >= 1
    # And the burst: versions 3, 1, 5, 2, 4 of one profile's edits ran once, as version 5, within a minute
    burst = report["burst"]
    assert (burst["run"], burst["run_payload"]["version"]) == ("demo-burst-3", 5)
    assert [request["state"] for request in burst["requests"]] == ["NOOP", "NOOP", "SUCCEEDED", "NOOP", "NOOP"]
    assert 0 < burst["started_after_seconds"] <= 60 and report["events"]["burst_emails"] == 1
