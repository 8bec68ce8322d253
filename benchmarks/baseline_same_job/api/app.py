"""Same-job baseline enqueue API: what a team builds with Powertools to do what converge's enqueue API does.

POST /jobs/{job_type} with an Idempotency-Key header: the caller (API Gateway's IAM authorizer) and
the key name the request; the payload is parsed with Powertools' parser against the job type's
pydantic model (unknown fields refused); Powertools idempotency (keyed on caller and key, the job type
and payload validated on a replay) makes a retry replay the original 202 and refuses the same key with
another request (422) or while the first is in flight (409); the job is written as the entity and its
outbox item in one TransactWriteItems, as the bare baseline's producer writes it. GET
/operations/{operation_id} answers the caller's own operations. Both designs' cold start is measured on
one POST.
"""

import hashlib
import json
import os
import re
import time
from typing import Annotated, Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")
OUTBOX_RETENTION_SECONDS = 7 * 24 * 3600
MAX_BODY_BYTES = 16 * 1024


class NoopPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: Identifier


MODELS: dict[str, type[BaseModel]] = {"bench.noop.v1": NoopPayload}

logger = Logger()
metrics = Metrics()
tracer = Tracer()
app = APIGatewayHttpResolver()
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(
    event_key_jmespath="[caller, key]",
    payload_validation_jmespath="[job_type, payload]",
    raise_on_no_idempotency_key=True,
)
_clients: dict[str, Any] = {}


def dynamodb() -> Any:
    if "dynamodb" not in _clients:
        _clients["dynamodb"] = boto3.client("dynamodb")
    return _clients["dynamodb"]


def error(status: int, code: str, message: str) -> Response:
    return Response(status, "application/json", json.dumps({"error": code, "message": message}))


def caller() -> str | None:
    authorizer = app.current_event.request_context.authorizer
    iam = authorizer.iam if authorizer else None
    return (iam.user_arn or iam.caller_id) if iam is not None else None


@idempotent_function(data_keyword_argument="request", config=config, persistence_store=persistence)
def submit(request: dict[str, Any]) -> dict[str, Any]:
    operation_id = "api-" + hashlib.sha256(f"{request['caller']}\n{request['key']}".encode()).hexdigest()[:40]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    payload = {"M": {key: {"S": str(value)} for key, value in request["payload"].items()}}
    common = {"id": {"S": operation_id}, "job_type": {"S": request["job_type"]}, "payload": payload}
    dynamodb().transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": os.environ["ENTITY_TABLE"],
                    "Item": {
                        **common,
                        "status": {"S": "PENDING"},
                        "submitted_by": {"S": request["caller"]},
                        "created_at": {"S": now},
                        "updated_at": {"S": now},
                    },
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            },
            {
                "Put": {
                    "TableName": os.environ["OUTBOX_TABLE"],
                    "Item": {
                        **common,
                        "created_at": {"S": now},
                        "expires_at": {"N": str(int(time.time()) + OUTBOX_RETENTION_SECONDS)},
                    },
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            },
        ]
    )
    return {"operation_id": operation_id, "job_type": request["job_type"], "state": "ACCEPTED"}


@app.post("/jobs/<job_type>")
def post_job(job_type: str) -> Response:
    event = app.current_event
    principal, key = caller(), event.headers.get("idempotency-key")
    if not principal:
        return error(403, "forbidden", "the request carries no caller identity")
    if len((event.body or "").encode()) > MAX_BODY_BYTES:
        return error(413, "payload_too_large", "the request body is over 16 KiB")
    if not key or not IDEMPOTENCY_KEY.match(key):
        return error(400, "invalid_idempotency_key", "Idempotency-Key must be 1-128 printable ASCII characters")
    if job_type not in MODELS:
        return error(400, "unknown_job_type", f"no job is registered under {job_type}")
    try:
        payload = parse(event=event.decoded_body or "", model=MODELS[job_type])
    except ValidationError as exc:
        return error(400, "invalid_payload", str(exc))
    request = {"caller": principal, "key": key, "job_type": job_type, "payload": payload.model_dump()}
    try:
        result = submit(request=request)
    except IdempotencyValidationError:
        return error(422, "idempotency_key_reused", "this Idempotency-Key was used with a different request")
    except IdempotencyAlreadyInProgressError:
        return error(409, "request_in_progress", "a request with this Idempotency-Key is still in progress")
    metrics.add_metric(name="Accepted", unit=MetricUnit.Count, value=1)
    return Response(
        202, "application/json", json.dumps(result), headers={"Location": f"/operations/{result['operation_id']}"}
    )


@app.get("/operations/<operation_id>")
def get_operation(operation_id: str) -> Response:
    found = dynamodb().get_item(
        TableName=os.environ["ENTITY_TABLE"], Key={"id": {"S": operation_id}}, ConsistentRead=True
    )
    item = found.get("Item")
    if item is None or item.get("submitted_by", {}).get("S") != caller():
        return error(404, "not_found", "no such operation")
    body = {"operation_id": operation_id, "job_type": item["job_type"]["S"], "state": item["status"]["S"]}
    return Response(200, "application/json", json.dumps(body))


@logger.inject_lambda_context(correlation_id_path='headers."x-correlation-id"')
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    config.register_lambda_context(context)
    return app.resolve(event, context)
