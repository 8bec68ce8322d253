"""The reference application's resources, built from template.yaml in moto, seeded with the demo data."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from catalogue.demo import DemoData, seed
from converge.flow.registry import load_catalogue
from converge.flow.runner import JobContext, TickContext
from converge.flow.steps import Steps
from converge.model.clock import FakeClock
from converge.observability import logger
from converge.store.markers import MarkerStore
from tests.conftest import REGION, create_table_from_template

SERVICES = ("dynamodb", "s3", "secretsmanager", "sesv2")


@dataclass
class App:
    clients: dict[str, Any]
    outputs: dict[str, str]
    data: DemoData
    clock: FakeClock

    def ctx(
        self,
        job_type: str,
        attempt: int = 1,
        max_attempts: int = 3,
        remaining_ms: int = 60_000,
        operation_id: str | None = None,
    ) -> JobContext:
        """A delivery's context; its steps recorded in the markers table as the template declares it (as the
        pipeline gives them: a first attempt reads no marker, a later one reads the operation's markers once)."""
        operation_id = operation_id or f"op-{job_type.split('.')[1]}-{attempt}"
        policy = load_catalogue("catalogue").get(job_type).policy
        markers = MarkerStore(self.outputs["MarkersTableName"], self.clients["dynamodb"], self.clock)
        return JobContext(
            operation_id=operation_id,
            job_type=job_type,
            correlation_id=None,
            attempt=attempt,
            max_attempts=max_attempts,
            clock=self.clock,
            remaining_ms=lambda: remaining_ms,
            steps=Steps(markers, operation_id, f"worker-{attempt}", attempt == 1, policy, self.clock),
        )

    def tick_ctx(self, job_type: str, remaining_ms: Any = None) -> TickContext:
        return TickContext(job_type=job_type, clock=self.clock, remaining_ms=remaining_ms or (lambda: 60_000))

    def objects(self, prefix: str) -> dict[str, bytes]:
        """Every object under `prefix` in the documents bucket, by key."""
        s3, bucket = self.clients["s3"], self.data.documents_bucket
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return {obj["Key"]: s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read() for obj in listed}

    def row(self, pk: str) -> dict[str, Any] | None:
        return self.clients["dynamodb"].get_item(TableName=self.data.app_table, Key={"pk": {"S": pk}}).get("Item")

    def sent_emails(self) -> list[Any]:
        return list(ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages)


def create_bucket_from_template(s3: Any, template: dict[str, Any], logical_id: str, name: str) -> str:
    properties = template["Resources"][logical_id]["Properties"]
    s3.create_bucket(Bucket=name)
    if "BucketEncryption" in properties:
        s3.put_bucket_encryption(
            Bucket=name,
            ServerSideEncryptionConfiguration={
                # CloudFormation's ServerSideEncryptionByDefault is the API's ApplyServerSideEncryptionByDefault.
                "Rules": [
                    {"ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"]}
                    for rule in properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
                ]
            },
        )
    if "PublicAccessBlockConfiguration" in properties:
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=properties["PublicAccessBlockConfiguration"]
        )
    return name


def create_secret_from_template(secrets: Any, template: dict[str, Any], logical_id: str, name: str) -> str:
    properties = template["Resources"][logical_id]["Properties"]
    value = secrets.get_random_password(**properties["GenerateSecretString"])["RandomPassword"]
    return str(secrets.create_secret(Name=name, SecretString=value)["ARN"])


@pytest.fixture
def app(aws: None, template: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> App:
    """Given the reference application's resources, as the template declares them, seeded with the demo data."""
    clients = {service: boto3.client(service, region_name=REGION) for service in SERVICES}
    outputs = {
        "AppTableName": create_table_from_template(clients["dynamodb"], template, "AppTable", "app"),
        "LedgerTableName": create_table_from_template(clients["dynamodb"], template, "LedgerTable", "ledger"),
        "MarkersTableName": create_table_from_template(clients["dynamodb"], template, "MarkersTable", "markers"),
        "DocumentsBucketName": create_bucket_from_template(clients["s3"], template, "DocumentsBucket", "documents"),
        "SigningSecretArn": create_secret_from_template(
            clients["secretsmanager"], template, "SigningSecret", "signing"
        ),
        "SenderEmail": template["Parameters"]["SenderEmail"]["Default"],
    }
    clock = FakeClock()
    data = seed(clients, outputs, now=clock.now())
    for name, value in {
        "APP_TABLE": outputs["AppTableName"],
        "LEDGER_TABLE": outputs["LedgerTableName"],
        "DOCUMENTS_BUCKET": outputs["DocumentsBucketName"],
        "SIGNING_SECRET_ARN": outputs["SigningSecretArn"],
        "SENDER_EMAIL": outputs["SenderEmail"],
    }.items():
        monkeypatch.setenv(name, value)
    return App(clients, outputs, data, clock)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    """Every line the converge logger writes during the test, formatted exactly as Lambda would see it."""
    handler = _Collect()
    handler.setFormatter(logger.registered_formatter)
    logging.getLogger(logger.name).addHandler(handler)
    try:
        yield handler.lines
    finally:
        logging.getLogger(logger.name).removeHandler(handler)
