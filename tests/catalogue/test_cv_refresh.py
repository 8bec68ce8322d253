"""A profile's CV re-rendered after a burst of edits (`pdf.cv-refresh.v1`, debounced): once, from the newest edit,
never later than a minute after the first. Through the pipeline over moto, with the reference application's
resources and the converge tables as the template declares them; the renders are counted by the e-mails the
CV's last step sends (one per render) and the profile's recorded CV."""

from __future__ import annotations

import json
from typing import Any

import boto3

from catalogue import examples
from catalogue.records import profile_key
from converge.flow.pipeline import Delivery
from converge.flow.registry import load_catalogue
from converge.model.outcomes import Outcome
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge.runtime.settings import Settings
from tests.catalogue.conftest import App

JOB = "pdf.cv-refresh.v1"


def runtime(app: App, tables: dict[str, str]) -> tuple[Converge, list[tuple[str, dict[str, Any]]]]:
    sqs = boto3.client("sqs")
    queue = sqs.create_queue(QueueName="default")["QueueUrl"]
    settings = Settings(
        CONVERGE_STAGE="test",
        JOBS_TABLE=tables["jobs"],
        MARKERS_TABLE=tables["markers"],
        STATE_TABLE=tables["state"],
        TOGGLE_PREFIX="/converge/test/jobs",
        CONVERGE_CATALOGUE=None,
        CRITICAL_QUEUE_URL=queue,
        DEFAULT_QUEUE_URL=queue,
        BULK_QUEUE_URL=queue,
        QUEUE_NAME="default",
        QUEUE_URL=queue,
        DLQ_URL=sqs.create_queue(QueueName="default-dlq")["QueueUrl"],
        MAX_RECEIVE_COUNT=3,
        CONVERGE_TOGGLE_MAX_AGE=0,
    )
    clients = Clients(dynamodb=app.clients["dynamodb"], sqs=sqs, ssm=boto3.client("ssm"))
    converge = Converge(settings, registry=load_catalogue("catalogue"), clients=clients, clock=app.clock)
    outbox: list[tuple[str, dict[str, Any]]] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, model, **_: outbox.append((model.name, params))
    )
    return converge, outbox


def deliver(converge: Converge, body: str, message_id: str) -> Outcome:
    delivery = Delivery(message_id, 1, 3, lambda: 60_000)
    return converge.pipeline.process(body, delivery).outcome


def sent_back(outbox: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    found = {json.loads(e["MessageBody"])["operation_id"]: e["MessageBody"] for _, p in outbox for e in p["Entries"]}
    outbox.clear()
    return found


def test_a_burst_of_five_edits_renders_the_cv_once_within_a_minute(app: App, tables: dict[str, str]) -> None:
    # Given the seeded profile, edited five times, 8 s apart (never 10 s quiet), each edit enqueueing its re-render
    converge, outbox = runtime(app, tables)
    first = app.clock.now()
    pending: dict[str, str] = {}
    outcomes: dict[str, Outcome] = {}
    for version in range(1, 6):
        operation_id = f"cv-edit-{version}"
        converge.enqueue(JOB, operation_id, {"profile_id": examples.PROFILE, "version": version})
        envelope = converge.dispatcher.envelope_for(converge.operations.require(operation_id))
        outcomes[operation_id] = deliver(converge, envelope.to_body(), f"m-{version}")
        pending.update(sent_back(outbox))
        app.clock.advance(8)
    # Then none rendered yet: each waits for the burst (an e-mail per render: none sent)
    assert set(outcomes.values()) == {Outcome.HELD} and app.sent_emails() == []
    # When each message comes back at its time (the last edit's 10 s quiet comes 42 s after the first edit)
    app.clock.advance(first + 42 - app.clock.now())
    for operation_id, body in sorted(pending.items()):
        outcomes[operation_id] = deliver(converge, body, f"back-{operation_id}")
    # Then the CV rendered once, from the newest edit, within the minute; the other four NOOP, naming it
    assert outcomes == {f"cv-edit-{v}": Outcome.NOOP for v in range(1, 5)} | {"cv-edit-5": Outcome.SUCCEEDED}
    assert len(app.sent_emails()) == 1 and app.clock.now() - first <= 60
    row = app.row(profile_key(examples.PROFILE))
    assert row is not None and row["cv_status"]["S"] == "rendered"
    receipt = converge.operations.require("cv-edit-1").state_record
    assert receipt.history[-1].reason == "debounced into cv-edit-5"
