"""DynamoDB's time to live on the emulated clock: expired items deleted by the service, with a REMOVE record naming it.

The tables and their TTL attributes are read from the deployment (what the template's TimeToLiveSpecification
set); the local cloud deletes an expired item as soon as the emulated clock passes its time (time_to_live.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud import LocalCloud

from .support import Recorder

PROBE_CODE = Path(__file__).parent / "fixture_app" / "probe"
SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
EXPIRING_TEMPLATE = f"""
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  SessionsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{{AttributeName: session, AttributeType: S}}]
      KeySchema: [{{AttributeName: session, KeyType: HASH}}]
      TimeToLiveSpecification: {{AttributeName: ends, Enabled: true}}
      StreamSpecification: {{StreamViewType: NEW_AND_OLD_IMAGES}}
  EveryChangeFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: {PROBE_CODE}
      Handler: app.handler
      Runtime: python3.13
      Events:
        Changes:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt SessionsTable.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
  ExpiriesFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: {PROBE_CODE}
      Handler: app.handler
      Runtime: python3.13
      Events:
        Changes:
          Type: DynamoDB
          Properties:
            Stream: !GetAtt SessionsTable.StreamArn
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
            FilterCriteria:
              Filters:
                - Pattern: '{{"userIdentity": {{"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}}}'
Outputs:
  SessionsTableName:
    Value: !Ref SessionsTable
"""


@pytest.fixture
def expiring_cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    """A table with a time to live (attribute `ends`, a name converge does not use) and a stream read by two
    functions: one sees every change, one only the service's deletions (the filter AWS documents for expiries)."""
    template = tmp_path / "template.yaml"
    template.write_text(EXPIRING_TEMPLATE)
    with LocalCloud.start(template) as local:
        yield local


def put(cloud: LocalCloud, table: str, key: dict[str, Any], **numbers: float) -> None:
    item = {**key, **{name: {"N": str(int(value))} for name, value in numbers.items()}}
    cloud.client("dynamodb").put_item(TableName=table, Item=item)


def keys(cloud: LocalCloud, table: str) -> set[str]:
    items = cloud.client("dynamodb").scan(TableName=table)["Items"]
    return {next(iter(value.values())) for item in items for name, value in item.items() if name in ("session", "pk")}


def test_an_expired_item_is_deleted_once_the_emulated_clock_passes_its_time(cloud: LocalCloud) -> None:
    # Given converge's markers table, whose TTL attribute is what the template declares (read from the deployment)
    table = cloud.outputs["MarkersTableName"]
    described = cloud.client("dynamodb").describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert described["TimeToLiveStatus"] == "ENABLED"
    attribute, now = described["AttributeName"], cloud.clock.now()
    # And items expiring in a minute, in a day, with no time to live, with a time five years and more in the past,
    # and with a TTL attribute that is not a number
    put(cloud, table, {"pk": {"S": "soon"}, "sk": {"S": "claim"}}, **{attribute: now + 60})
    put(cloud, table, {"pk": {"S": "later"}, "sk": {"S": "claim"}}, **{attribute: now + 86400})
    put(cloud, table, {"pk": {"S": "kept"}, "sk": {"S": "step#a"}})
    put(cloud, table, {"pk": {"S": "ancient"}, "sk": {"S": "claim"}}, **{attribute: now - 6 * 365 * 86400})
    cloud.client("dynamodb").put_item(
        TableName=table, Item={"pk": {"S": "text"}, "sk": {"S": "claim"}, attribute: {"S": str(now)}}
    )
    # When real time passes (nothing moves the emulated clock): nothing is deleted
    assert cloud.expire_items() == 0
    # When the emulated clock passes the first one's time
    cloud.advance(61)
    # Then it alone is gone; a day later the second one too; the others are kept, as DynamoDB keeps them
    assert keys(cloud, table) == {"later", "kept", "ancient", "text"}
    cloud.advance(86400)
    assert keys(cloud, table) == {"kept", "ancient", "text"}
    assert cloud.time_to_live is not None and cloud.time_to_live.deleted == 2


def test_the_stream_carries_a_ttl_deletion_as_the_services_remove_with_its_old_image(
    expiring_cloud: LocalCloud,
) -> None:
    cloud = expiring_cloud
    every, expiries = Recorder(), Recorder()
    cloud.override_handler("EveryChangeFunction", every)
    cloud.override_handler("ExpiriesFunction", expiries)
    table = cloud.outputs["SessionsTableName"]
    # Given two sessions, one ending in an hour; the other deleted by a user
    put(cloud, table, {"session": {"S": "s-1"}}, ends=cloud.clock.now() + 3600)
    put(cloud, table, {"session": {"S": "s-2"}})
    cloud.client("dynamodb").delete_item(TableName=table, Key={"session": {"S": "s-2"}})
    # When the clock passes the first one's end, and the stream is read
    cloud.advance(3601)
    cloud.drain()
    # Then every change arrives: two INSERTs and two REMOVEs, and only the service's names the service
    removes = [record for record in every.records if record["eventName"] == "REMOVE"]
    assert [record["eventName"] for record in every.records] == ["INSERT", "INSERT", "REMOVE", "REMOVE"]
    by_user, by_service = removes
    assert "userIdentity" not in by_user
    assert by_service["userIdentity"] == SERVICE
    assert by_service["dynamodb"]["OldImage"]["session"] == {"S": "s-1"}
    assert "NewImage" not in by_service["dynamodb"]
    # And a mapping whose filter keeps the service's deletions alone gets the expiry, and nothing else
    assert [record["dynamodb"]["Keys"]["session"]["S"] for record in expiries.records] == ["s-1"]
    assert keys(cloud, table) == set()
