"""Greets each name it is sent: an item in the child's table and an object in the parent's bucket.

A message's `key` says where the object goes (greetings/<name> by default), so a test can ask for a
place the function's role does not allow.
"""

import json
import os

import boto3


def handler(event, context):
    if "tick" in event:
        return {"tick": event["tick"]}
    failures = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        name = body["name"]
        greeting = f"{os.environ['GREETING']}: {name}"
        try:
            boto3.client("s3").put_object(
                Bucket=os.environ["GREETINGS_BUCKET"], Key=body.get("key", f"greetings/{name}"), Body=greeting.encode()
            )
        except Exception:  # a refused write fails this record only
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        boto3.client("dynamodb").put_item(
            TableName=os.environ["GREETINGS_TABLE"], Item={"id": {"S": name}, "greeting": {"S": greeting}}
        )
    return {"batchItemFailures": failures}
