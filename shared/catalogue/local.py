"""The reference application's local hooks (see localcloud.hooks): demo data, effects, workload, demo storyline.

Named by `LOCAL_HOOKS` in the package, so only the local cloud and the CLI ever import this module;
its values (EffectSources, Scenario and its steps) are converge.local_hooks', so it imports nothing of the local cloud.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from catalogue import examples
from catalogue.ledger import ENTRY_PREFIX, MODE_KEY, LedgerMode
from catalogue.statements import SUMMARY_PREFIX, statement_batch
from converge import OperationState
from converge.flow.registry import toggle_key
from converge.local_hooks import (
    ApprovalStep,
    BatchStep,
    DebounceStep,
    EffectSources,
    Planned,
    ProducerCall,
    RecurringStep,
    Scenario,
)

LEDGER = "ledger.partner-benefits.v1"
SWEEP = "sweep.boost-expiry.v1"
CV_EFFECTS = {"s3": 1, "ses": 1}
"""The CV job's effects: its PDF (the `store` step) and its link e-mailed (the `email` step)."""

MIX: tuple[tuple[str, dict[str, Any], int], ...] = (
    # (job type, payload, weight)
    ("email.partner-verification.v1", {"user_id": examples.UNCONFIRMED_USER}, 8),
    ("email.partner-verification.v1", {"user_id": examples.SECOND_UNCONFIRMED_USER}, 6),
    ("email.partner-verification.v1", {"user_id": examples.CONFIRMED_USER}, 2),  # already confirmed: NOOP
    ("email.password-reset.v1", {"user_id": examples.CONFIRMED_USER}, 14),
    ("email.password-reset.v1", {"user_id": examples.DELETED_USER}, 2),  # user gone: NOOP
    ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}, 14),
    ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": "up-missing"}, 2),  # NOOP
    ("ads.image-process.v1", {"ad_id": examples.PENDING_AD}, 2),
    ("ads.image-process.v1", {"ad_id": examples.SECOND_PENDING_AD}, 2),
    ("ads.image-process.v1", {"ad_id": examples.PROCESSED_AD}, 1),
    ("pdf.cv.v1", {"profile_id": examples.PROFILE}, 8),
    (LEDGER, {"partner_id": examples.PARTNER, "amount_cents": 2500, "benefit": "referral"}, 20),
    (LEDGER, {"partner_id": examples.SECOND_PARTNER, "amount_cents": 700, "benefit": "promo"}, 18),
)


def example_payloads() -> dict[str, dict[str, Any]]:
    from catalogue import BINDINGS

    return {binding.job_type: dict(binding.example_payload) for binding in BINDINGS}


def scenario() -> Scenario:
    """`converge demo` for the reference application: every job type, its no-op paths, and every promise."""
    payloads = example_payloads()
    planned = [
        Planned(
            "demo-verify-1",
            "email.partner-verification.v1",
            payloads["email.partner-verification.v1"],
            OperationState.SUCCEEDED,
            "verification e-mail to an unconfirmed partner",
        ),
        Planned(
            "demo-verify-deleted",
            "email.partner-verification.v1",
            {"user_id": examples.DELETED_USER},
            OperationState.NOOP,
            "user deleted since enqueue: successful no-op",
        ),
        Planned(
            "demo-verify-confirmed",
            "email.partner-verification.v1",
            {"user_id": examples.CONFIRMED_USER},
            OperationState.NOOP,
            "already confirmed: successful no-op",
        ),
        Planned(
            "demo-reset-1",
            "email.password-reset.v1",
            payloads["email.password-reset.v1"],
            OperationState.SUCCEEDED,
            "password reset, token regenerated at send time",
        ),
        Planned(
            "demo-doc-1",
            "partner-docs.upload.v1",
            payloads["partner-docs.upload.v1"],
            OperationState.SUCCEEDED,
            "document copied to a content-addressed key",
        ),
        Planned(
            "demo-ad-1",
            "ads.image-process.v1",
            payloads["ads.image-process.v1"],
            OperationState.SUCCEEDED,
            "ad image watermarked",
        ),
        Planned(
            "demo-ad-processed",
            "ads.image-process.v1",
            {"ad_id": examples.PROCESSED_AD},
            OperationState.NOOP,
            "ad already processed: no-op",
        ),
        Planned(
            "demo-cv-1",
            "pdf.cv.v1",
            payloads["pdf.cv.v1"],
            OperationState.SUCCEEDED,
            "three steps: CV rendered and stored, recorded on the profile, its link e-mailed",
            effects=CV_EFFECTS,
        ),
        Planned(
            "demo-cv-crash",
            "pdf.cv.v1",
            payloads["pdf.cv.v1"],
            OperationState.SUCCEEDED,
            "three steps, the first delivery dies after storing the PDF: the retry stores nothing again",
            effects=CV_EFFECTS,
        ),
        Planned(
            "demo-benefit-1",
            LEDGER,
            payloads[LEDGER],
            OperationState.SUCCEEDED,
            "money job: fail-closed, paused until its toggle is turned on, then resumed; its continuation "
            "e-mails the partner",
        ),
    ]
    return Scenario(
        planned=planned,
        duplicates=3,
        identity_reuse=("demo-reset-1", {"user_id": examples.UNCONFIRMED_USER}),
        hostile_raw_items=[
            ("demo-raw-unknown", {"job_type": {"S": "email.no-such-job.v1"}, "payload": {"M": {}}}, "unknown job type"),
            (
                "demo-raw-pii",
                {"job_type": {"S": "email.password-reset.v1"}, "payload": {"M": {"user_id": {"S": "ana@example.com"}}}},
                "e-mail",
            ),
            (
                "demo-raw-nested",
                {"job_type": {"S": "pdf.cv.v1"}, "payload": {"M": {"profile_id": {"M": {"id": {"S": "cv-4001"}}}}}},
                "nested",
            ),
        ],
        owned_raw_item=(
            "demo-raw-owned",
            "partner-docs.upload.v1",
            payloads["partner-docs.upload.v1"],
            {"state": {"S": "SUCCEEDED"}, "attempts": {"S": "many"}, "history": {"S": "not a list"}},
        ),
        producer_retry="demo-reset-1",
        producer_conflict=("demo-verify-1", {"user_id": examples.SECOND_UNCONFIRMED_USER}),
        replayed=("demo-verify-1", "CriticalQueueUrl"),
        paused="demo-benefit-1",
        recurring=RecurringStep(SWEEP, "RecurringFunction", result_key="expired", event="boosts_expired"),
        crash_between_steps=("demo-cv-crash", "store"),
        batch=statements(),
        producers=producers(),
        approval=approval(),
        debounce=cv_refresh_burst(),
    )


def approval() -> ApprovalStep:
    """A credit above the threshold waits for an operator's decision: approved, it is credited and the partner told;
    rejected or timed out, the partner is told and nothing is credited."""
    from catalogue.approvals import APPROVAL, APPROVAL_TIMEOUT
    from catalogue.bindings import APPROVED_CREDIT

    return ApprovalStep(
        job_type=APPROVED_CREDIT.job_type,
        payload=dict(APPROVED_CREDIT.example_payload),
        signal=APPROVAL,
        timeout_seconds=APPROVAL_TIMEOUT.total_seconds(),
        approve={"decision": "approved", "operator_id": "op-demo"},
        reject={"decision": "rejected", "operator_id": "op-demo"},
        effects={"approved": {"ledger": 1, "ses": 1}, "rejected": {"ses": 1}, "timed_out": {"ses": 1}},
        note="a credit above the approval threshold waits for an operator's decision",
    )


def cv_refresh_burst() -> DebounceStep:
    """A profile edited five times in a few seconds, its re-render requests reaching converge out of order: the CV is
    rendered once, from the newest edit (version 5), its PDF stored and its link e-mailed; the other four end NOOP."""
    from catalogue.bindings import CV_REFRESH

    return DebounceStep(
        job_type=CV_REFRESH.job_type,
        payloads=[{"profile_id": examples.EDITED_PROFILE, "version": version} for version in (3, 1, 5, 2, 4)],
        effects=CV_EFFECTS,
        note="a profile edited five times in a few seconds: its CV rendered once, from the newest edit",
    )


def producers() -> list[ProducerCall]:
    """The application's own functions: a sign-up (its verification e-mail) and a partner credit (the money job,
    fail-closed: paused with the demo's other credit until its toggle is turned on, then run)."""
    from catalogue.producers import credit_request_key, verification_id
    from catalogue.records import user_key

    return [
        ProducerCall(
            "SignUpFunction",
            {"user_id": examples.SIGNED_UP_USER, "email": "new.partner@example.com", "display_name": "New Partner"},
            verification_id(examples.SIGNED_UP_USER),
            ("AppTableName", {"pk": {"S": user_key(examples.SIGNED_UP_USER)}}),
            OperationState.SUCCEEDED,
            "a new user's row and their verification e-mail, in one transaction",
        ),
        ProducerCall(
            "PartnerCreditFunction",
            {
                "request_id": "demo-credit-request-1",
                "partner_id": examples.SECOND_PARTNER,
                "amount_cents": 1200,
                "benefit": "launch",
            },
            "demo-credit-request-1",
            ("AppTableName", {"pk": {"S": credit_request_key("demo-credit-request-1")}}),
            OperationState.SUCCEEDED,
            "a credit's request row and the credit itself, in one transaction",
        ),
    ]


def statements() -> BatchStep:
    """The month's statements: one e-mail per partner (the closed one gets none), then the summary, once."""
    batch_id, children, callback = statement_batch(examples.STATEMENT_MONTH, examples.PARTNERS)
    expect = {partner: OperationState.SUCCEEDED for partner in examples.PARTNERS}
    expect[examples.CLOSED_PARTNER] = OperationState.NOOP
    return BatchStep(batch_id, children, callback, expect, "a statement per partner, then the month's summary")


class ReferenceHooks:
    """The hooks of localcloud.hooks, for the reference application."""

    effects = EffectSources(
        bucket_output="DocumentsBucketName",
        object_prefixes=("partner-docs/", "ads/", "cv/", SUMMARY_PREFIX),  # uploads/ holds the inputs the demo seeded
        ledger_output="LedgerTableName",
        ledger_entry_prefix=ENTRY_PREFIX,
        app_table_outputs=("AppTableName",),
    )

    def seed(self, clients: Any, outputs: Mapping[str, str], now: float | None = None) -> None:
        from catalogue.demo import seed  # Pillow and fpdf2 draw the seeded inputs

        seed(clients, outputs, now=now)

    def workload(self) -> Sequence[tuple[str, dict[str, Any], int]]:
        return MIX

    def prepare_workload(self, cloud: Any) -> None:
        """The money job is deployed off (fail-closed); a mixed run needs it on."""
        cloud.client("ssm").put_parameter(
            Name=f"{cloud.outputs['TogglePrefix']}/{toggle_key(LEDGER)}", Value="on", Type="String", Overwrite=True
        )

    def provider_faults(self, cloud: Any, on: bool) -> None:
        """The ledger in "none" mode can neither deduplicate nor be asked: ambiguous credits become UNKNOWN."""
        mode = LedgerMode.NONE if on else LedgerMode.DEDUP
        cloud.client("dynamodb").put_item(
            TableName=cloud.outputs["LedgerTableName"], Item={"pk": {"S": MODE_KEY}, "mode": {"S": mode.value}}
        )

    def demo_scenario(self) -> Scenario:
        return scenario()

    def timed_jobs(self) -> Sequence[tuple[str, dict[str, Any]]]:
        """The delayed, cancelled and expiring jobs: an e-mail first (its effect is counted in SES)."""
        return (
            ("email.password-reset.v1", {"user_id": examples.CONFIRMED_USER}),
            ("partner-docs.upload.v1", {"partner_id": examples.PARTNER, "upload_id": examples.UPLOAD}),
        )


hooks = ReferenceHooks()
