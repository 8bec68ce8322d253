"""Which IAM actions, on which resources, one AWS API call needs: the Service Authorization Reference as data.

    needs = needs_of("sesv2", "SendEmail", params, account)   # [Need("ses:SendEmail", identity ARN, context)]

Each entry maps (botocore service name, operation) to a function of the call's parameters that returns
every (action, resource ARN, request context) the call is authorised against. Most operations need the
action of the same name on the resource their parameters name; the entries below spell out the others
(a batch authorised as its single action, a transaction as one action per item, a Query on an index as
the index ARN, CreateSchedule's iam:PassRole of the target role, SES v2's ses:SendEmail on the sender's
identity). A call with no entry is refused loudly (`UnmappedApiCall`): add an entry here, or from a
catalogue's local hooks with `register()`, reading what the operation needs from the Service
Authorization Reference (https://docs.aws.amazon.com/service-authorization/latest/reference/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from email.utils import getaddresses, parseaddr
from typing import Any, Protocol
from urllib.parse import urlparse

from .evaluation import Context


@dataclass(frozen=True)
class Need:
    """One action on one resource that a call must be allowed, with the request context it is evaluated in."""

    action: str
    resource: str
    context: Context = field(default_factory=dict)


class Account(Protocol):
    """What a mapping may ask about the account the call is made in."""

    region: str
    account_id: str

    def secret_arn(self, secret_id: str) -> str:
        """The full ARN of a secret named by name, ARN or partial ARN."""
        ...

    def email_identity(self, address: str) -> str:
        """The SES identity a From address sends as: the address, else its domain (or a parent domain)."""
        ...

    def stream_of(self, shard_iterator: str) -> str:
        """The stream ARN a DynamoDB Streams shard iterator reads."""
        ...

    def partition_key(self, table: str) -> str | None:
        """The name of a table's partition key (its name or ARN), for `dynamodb:LeadingKeys`; None if unknown."""
        ...


CallMapping = Callable[[Mapping[str, Any], Account], list[Need]]


class UnmappedApiCall(RuntimeError):
    """A function made an API call the local cloud's IAM check cannot map to actions and resources."""


ACTIONS: dict[tuple[str, str], CallMapping] = {}


def register(service: str, operation: str, mapping: CallMapping) -> None:
    """Teach the check what (service, operation) needs, e.g. for a call a team's runner makes."""
    ACTIONS[(service, operation)] = mapping


def needs_of(service: str, operation: str, params: Mapping[str, Any], account: Account) -> list[Need]:
    mapping = ACTIONS.get((service, operation))
    if mapping is None:
        raise UnmappedApiCall(
            f"the local cloud's IAM check does not know which IAM actions and resources {service}.{operation} "
            f"needs. Add it to localcloud.iam.actions (register({service!r}, {operation!r}, ...), from what the "
            f"Service Authorization Reference lists for {operation}), or start the cloud with check_iam=False"
        )
    return mapping(params, account)


# --- ARNs -------------------------------------------------------------------------------------------------


def _arn(service: str, account: Account, resource: str) -> str:
    return f"arn:aws:{service}:{account.region}:{account.account_id}:{resource}"


def table_arn(account: Account, table: str) -> str:
    return table if table.startswith("arn:") else _arn("dynamodb", account, f"table/{table}")


def queue_arn(account: Account, queue_url: str) -> str:
    if queue_url.startswith("arn:"):
        return queue_url
    parts = [part for part in urlparse(queue_url).path.split("/") if part]
    owner, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (account.account_id, parts[-1] if parts else queue_url)
    return f"arn:aws:sqs:{account.region}:{owner}:{name}"


def parameter_arn(account: Account, name: str) -> str:
    if name.startswith("arn:"):
        return name
    return _arn("ssm", account, "parameter/" + name.split(":", 1)[0].lstrip("/"))


def object_arn(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def bucket_arn(bucket: str) -> str:
    return f"arn:aws:s3:::{bucket}"


def function_arn(account: Account, function: str, qualifier: str | None = None) -> str:
    parts = function.split(":")
    if function.startswith("arn:"):
        name, embedded = parts[6], parts[7] if len(parts) > 7 else None
    elif len(parts) >= 3 and parts[1] == "function":  # "<account>:function:<name>[:<qualifier>]"
        name, embedded = parts[2], parts[3] if len(parts) > 3 else None
    else:
        name, embedded = parts[0], parts[1] if len(parts) > 1 else None
    arn = _arn("lambda", account, f"function:{name}")
    version = qualifier or embedded
    return f"{arn}:{version}" if version else arn


# --- the mappings -----------------------------------------------------------------------------------------


def _on(action: str, resource: Callable[[Mapping[str, Any], Account], str]) -> CallMapping:
    """The one action on the one resource the parameters name."""
    return lambda params, account: [Need(action, resource(params, account))]


def _anywhere(action: str) -> CallMapping:
    """An action with no resource-level permissions: authorised on "*"."""
    return lambda params, account: [Need(action, "*")]


def _table(params: Mapping[str, Any], account: Account) -> str:
    return table_arn(account, params["TableName"])


def _table_or_index(params: Mapping[str, Any], account: Account) -> str:
    table = table_arn(account, params["TableName"])
    return f"{table}/index/{params['IndexName']}" if params.get("IndexName") else table


def _per_table(action: str) -> CallMapping:
    """BatchGetItem: the batch's action on every table it names."""
    return lambda params, account: [Need(action, table_arn(account, t)) for t in params.get("RequestItems", {})]


def _batch_write(params: Mapping[str, Any], account: Account) -> list[Need]:
    """BatchWriteItem: its action on every table it names, with the attributes its puts write there
    (`dynamodb:Attributes`) and the partition keys it names (each put's item, each delete's key:
    `dynamodb:LeadingKeys`)."""
    needs = []
    for table, requests in (params.get("RequestItems") or {}).items():
        puts = [request["PutRequest"].get("Item") or {} for request in requests if "PutRequest" in request]
        deletes = [request["DeleteRequest"].get("Key") or {} for request in requests if "DeleteRequest" in request]
        context: dict[str, Any] = {"dynamodb:Attributes": sorted({name for item in puts for name in item})}
        context.update(_leading_keys(account, table, [*puts, *deletes]))
        needs.append(Need("dynamodb:BatchWriteItem", table_arn(account, table), context))
    return needs


def _leading_keys(account: Account, table: str, items: Sequence[Mapping[str, Any]]) -> Context:
    """The `dynamodb:LeadingKeys` condition key: the partition key values a request names (none when the table's key
    is unknown: a condition on it then cannot be evaluated, and is reported so)."""
    name = account.partition_key(table)
    if name is None:
        return {}
    values = [next(iter(item[name].values())) for item in items if isinstance(item.get(name), dict) and item[name]]
    return {"dynamodb:LeadingKeys": [str(value) for value in values]}


_TRANSACT_ACTIONS = {
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "Get": "dynamodb:GetItem",
}


def _written_attributes(item: Mapping[str, Any]) -> Context:
    """The `dynamodb:Attributes` condition key of a put: the names of the attributes the item carries."""
    return {"dynamodb:Attributes": sorted(item)}


def _put(params: Mapping[str, Any], account: Account) -> list[Need]:
    item = params.get("Item") or {}
    context = {**_written_attributes(item), **_leading_keys(account, params["TableName"], [item])}
    return [Need("dynamodb:PutItem", _table(params, account), context)]


def _transaction(params: Mapping[str, Any], account: Account) -> list[Need]:
    """TransactWriteItems / TransactGetItems: each item's own action on its own table (a put with the attributes it
    writes; each with the partition key it names)."""
    needs = []
    for item in params.get("TransactItems", []):
        for kind, request in item.items():
            named = request.get("Item") or request.get("Key") or {}
            context = {**(_written_attributes(named) if kind == "Put" else {})}
            context.update(_leading_keys(account, request["TableName"], [named]))
            needs.append(Need(_TRANSACT_ACTIONS[kind], table_arn(account, request["TableName"]), context))
    return needs


def _stream(params: Mapping[str, Any], account: Account) -> str:
    return str(params["StreamArn"])


def _records(params: Mapping[str, Any], account: Account) -> list[Need]:
    return [Need("dynamodb:GetRecords", account.stream_of(params["ShardIterator"]))]


def _queue(params: Mapping[str, Any], account: Account) -> str:
    return queue_arn(account, params["QueueUrl"])


def _queue_by_name(params: Mapping[str, Any], account: Account) -> str:
    owner = params.get("QueueOwnerAWSAccountId") or account.account_id
    return f"arn:aws:sqs:{account.region}:{owner}:{params['QueueName']}"


def _parameter(params: Mapping[str, Any], account: Account) -> str:
    return parameter_arn(account, params["Name"])


def _parameters(params: Mapping[str, Any], account: Account) -> list[Need]:
    return [Need("ssm:GetParameters", parameter_arn(account, name)) for name in params.get("Names", [])]


def _parameter_path(params: Mapping[str, Any], account: Account) -> str:
    return parameter_arn(account, params["Path"].rstrip("/") or "/")


def _object(params: Mapping[str, Any], account: Account) -> str:
    return object_arn(params["Bucket"], params["Key"])


def _bucket(params: Mapping[str, Any], account: Account) -> str:
    return bucket_arn(params["Bucket"])


def _put_object(params: Mapping[str, Any], account: Account) -> list[Need]:
    target = object_arn(params["Bucket"], params["Key"])
    needs = [Need("s3:PutObject", target)]
    if params.get("Tagging"):
        needs.append(Need("s3:PutObjectTagging", target))
    if params.get("ACL") or any(
        params.get(k) for k in ("GrantRead", "GrantReadACP", "GrantWriteACP", "GrantFullControl")
    ):
        needs.append(Need("s3:PutObjectAcl", target))
    return needs


def _copy_object(params: Mapping[str, Any], account: Account) -> list[Need]:
    source = params["CopySource"]
    if isinstance(source, Mapping):
        source_arn = object_arn(source["Bucket"], source["Key"])
    else:
        source_arn = "arn:aws:s3:::" + str(source).lstrip("/").split("?versionId=")[0]
    return [*_put_object(params, account), Need("s3:GetObject", source_arn)]


def _delete_objects(params: Mapping[str, Any], account: Account) -> list[Need]:
    objects = params.get("Delete", {}).get("Objects", [])
    return [Need("s3:DeleteObject", object_arn(params["Bucket"], entry["Key"])) for entry in objects]


def _list_bucket(params: Mapping[str, Any], account: Account) -> list[Need]:
    context = {"s3:prefix": params["Prefix"]} if params.get("Prefix") is not None else {}
    return [Need("s3:ListBucket", bucket_arn(params["Bucket"]), context)]


def _identity_arn(account: Account, identity: str) -> str:
    return identity if identity.startswith("arn:") else _arn("ses", account, f"identity/{identity}")


def _raw_headers(params: Mapping[str, Any]) -> Any:
    raw = params.get("Content", {}).get("Raw", {}).get("Data") or params.get("RawMessage", {}).get("Data") or b""
    return BytesHeaderParser().parsebytes(raw if isinstance(raw, bytes) else str(raw).encode())


def _sesv2_send(params: Mapping[str, Any], account: Account) -> list[Need]:
    """SES v2 SendEmail: ses:SendEmail on the sending identity, and on the configuration set and template named."""
    sender = params.get("FromEmailAddress") or _raw_headers(params).get("From", "")
    display_name, address = parseaddr(sender)
    destination = params.get("Destination", {})
    recipients = [a for key in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(key, [])]
    context: Context = {
        "ses:FromAddress": address,
        "ses:FromDisplayName": display_name,
        "ses:Recipients": [parseaddr(r)[1] for r in recipients],
        "ses:ApiVersion": "2",
    }
    identity = params.get("FromEmailAddressIdentityArn") or account.email_identity(address)
    needs = [Need("ses:SendEmail", _identity_arn(account, identity), context)]
    if params.get("ConfigurationSetName"):
        needs.append(
            Need("ses:SendEmail", _arn("ses", account, f"configuration-set/{params['ConfigurationSetName']}"), context)
        )
    template = params.get("Content", {}).get("Template", {}).get("TemplateName")
    if template:
        needs.append(Need("ses:SendEmail", _arn("ses", account, f"template/{template}"), context))
    return needs


def _ses_send(action: str) -> CallMapping:
    """SES v1 SendEmail / SendRawEmail: the action on the Source's identity."""

    def needs(params: Mapping[str, Any], account: Account) -> list[Need]:
        sender = params.get("Source") or _raw_headers(params).get("From", "")
        address = parseaddr(sender)[1]
        recipients = [a for _, a in getaddresses(params.get("Destinations", []))]
        for key in ("ToAddresses", "CcAddresses", "BccAddresses"):
            recipients += params.get("Destination", {}).get(key, [])
        context: Context = {"ses:FromAddress": address, "ses:Recipients": recipients, "ses:ApiVersion": "1"}
        identity = params.get("SourceArn") or account.email_identity(address)
        return [Need(action, _identity_arn(account, identity), context)]

    return needs


def _email_identity(params: Mapping[str, Any], account: Account) -> str:
    return _identity_arn(account, params["EmailIdentity"])


def _schedule(params: Mapping[str, Any], account: Account) -> str:
    return _arn("scheduler", account, f"schedule/{params.get('GroupName') or 'default'}/{params['Name']}")


def _schedule_with_role(action: str) -> CallMapping:
    """CreateSchedule / UpdateSchedule: the action on the schedule, and iam:PassRole of its target's role."""

    def needs(params: Mapping[str, Any], account: Account) -> list[Need]:
        passed = {"iam:PassedToService": "scheduler.amazonaws.com"}
        return [Need(action, _schedule(params, account)), Need("iam:PassRole", params["Target"]["RoleArn"], passed)]

    return needs


def _secret(params: Mapping[str, Any], account: Account) -> str:
    return account.secret_arn(params["SecretId"])


def _function(params: Mapping[str, Any], account: Account) -> str:
    return function_arn(account, params["FunctionName"], params.get("Qualifier"))


def _put_events(params: Mapping[str, Any], account: Account) -> list[Need]:
    needs = []
    for entry in params.get("Entries", []):
        bus = entry.get("EventBusName") or "default"
        arn = bus if bus.startswith("arn:") else _arn("events", account, f"event-bus/{bus}")
        context = {"events:source": entry.get("Source", ""), "events:detail-type": entry.get("DetailType", "")}
        needs.append(Need("events:PutEvents", arn, context))
    return needs


def _metric_data(params: Mapping[str, Any], account: Account) -> list[Need]:
    return [Need("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace": params.get("Namespace", "")})]


def _topic(params: Mapping[str, Any], account: Account) -> str:
    return str(params.get("TopicArn") or params.get("TargetArn") or "*")


def _nothing(params: Mapping[str, Any], account: Account) -> list[Need]:
    """Calls that need no permission (sts:GetCallerIdentity answers even under an explicit deny)."""
    return []


def _same_name(service: str, prefix: str, operations: Sequence[str], resource: Callable[..., str]) -> None:
    for operation in operations:
        ACTIONS[(service, operation)] = _on(f"{prefix}:{operation}", resource)


_same_name(
    "dynamodb",
    "dynamodb",
    ["GetItem", "UpdateItem", "DeleteItem", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive"],
    _table,
)
ACTIONS[("dynamodb", "PutItem")] = _put
_same_name("dynamodb", "dynamodb", ["Query", "Scan"], _table_or_index)
_same_name("dynamodbstreams", "dynamodb", ["DescribeStream", "GetShardIterator"], _stream)
_same_name("sqs", "sqs", ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility"], _queue)
_same_name(
    "sqs", "sqs", ["GetQueueAttributes", "SetQueueAttributes", "PurgeQueue", "ListDeadLetterSourceQueues"], _queue
)
_same_name("ssm", "ssm", ["GetParameter", "PutParameter", "DeleteParameter", "GetParameterHistory"], _parameter)
_same_name("s3", "s3", ["GetObject", "DeleteObject", "GetObjectTagging", "PutObjectTagging"], _object)
_same_name("s3", "s3", ["AbortMultipartUpload"], _object)
_same_name("sesv2", "ses", ["GetEmailIdentity", "CreateEmailIdentity", "DeleteEmailIdentity"], _email_identity)
_same_name("scheduler", "scheduler", ["GetSchedule", "DeleteSchedule"], _schedule)
_same_name("secretsmanager", "secretsmanager", ["GetSecretValue", "DescribeSecret"], _secret)

ACTIONS.update(
    {
        # DynamoDB: batches are their own actions; transactions are authorised item by item.
        ("dynamodb", "BatchGetItem"): _per_table("dynamodb:BatchGetItem"),
        ("dynamodb", "BatchWriteItem"): _batch_write,
        ("dynamodb", "TransactWriteItems"): _transaction,
        ("dynamodb", "TransactGetItems"): _transaction,
        ("dynamodb", "ListTables"): _anywhere("dynamodb:ListTables"),
        # DynamoDB Streams (IAM prefix dynamodb): GetRecords names its stream through the shard iterator.
        ("dynamodbstreams", "GetRecords"): _records,
        ("dynamodbstreams", "ListStreams"): _anywhere("dynamodb:ListStreams"),
        # SQS: each batch is authorised as its single action.
        ("sqs", "SendMessageBatch"): _on("sqs:SendMessage", _queue),
        ("sqs", "DeleteMessageBatch"): _on("sqs:DeleteMessage", _queue),
        ("sqs", "ChangeMessageVisibilityBatch"): _on("sqs:ChangeMessageVisibility", _queue),
        ("sqs", "GetQueueUrl"): _on("sqs:GetQueueUrl", _queue_by_name),
        ("sqs", "ListQueues"): _anywhere("sqs:ListQueues"),
        # SSM: GetParameters needs its action on every name; GetParametersByPath on the path.
        ("ssm", "GetParameters"): _parameters,
        ("ssm", "GetParametersByPath"): _on("ssm:GetParametersByPath", _parameter_path),
        ("ssm", "DescribeParameters"): _anywhere("ssm:DescribeParameters"),
        # S3: a HEAD is a read, listing is ListBucket on the bucket, a multipart upload is PutObject throughout.
        ("s3", "HeadObject"): _on("s3:GetObject", _object),
        ("s3", "PutObject"): _put_object,
        ("s3", "CopyObject"): _copy_object,
        ("s3", "DeleteObjects"): _delete_objects,
        ("s3", "ListObjectsV2"): _list_bucket,
        ("s3", "ListObjects"): _list_bucket,
        ("s3", "HeadBucket"): _on("s3:ListBucket", _bucket),
        ("s3", "GetBucketLocation"): _on("s3:GetBucketLocation", _bucket),
        ("s3", "CreateMultipartUpload"): _on("s3:PutObject", _object),
        ("s3", "UploadPart"): _on("s3:PutObject", _object),
        ("s3", "CompleteMultipartUpload"): _on("s3:PutObject", _object),
        # SES: sending is authorised on the identity the From address sends as.
        ("sesv2", "SendEmail"): _sesv2_send,
        ("ses", "SendEmail"): _ses_send("ses:SendEmail"),
        ("ses", "SendRawEmail"): _ses_send("ses:SendRawEmail"),
        # EventBridge Scheduler: a schedule's target role must be passed to the service.
        ("scheduler", "CreateSchedule"): _schedule_with_role("scheduler:CreateSchedule"),
        ("scheduler", "UpdateSchedule"): _schedule_with_role("scheduler:UpdateSchedule"),
        ("scheduler", "ListSchedules"): _anywhere("scheduler:ListSchedules"),
        ("lambda", "Invoke"): _on("lambda:InvokeFunction", _function),
        ("events", "PutEvents"): _put_events,
        ("cloudwatch", "PutMetricData"): _metric_data,
        ("sns", "Publish"): _on("sns:Publish", _topic),
        ("sts", "GetCallerIdentity"): _nothing,
    }
)
