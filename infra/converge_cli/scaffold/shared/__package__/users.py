"""Users of the project, and signing one up: their row and their greeting's job, written in one transaction.

The example producer (functions/sign_up/app.py) delegates here. `converge.enqueue_put` gives the job's write, which
goes into the same TransactWriteItems as the business row: both are written, or neither. The operation id is the
business operation's (`greet-<user id>`), so a retried sign-up is the same operation, never a second greeting.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from botocore.exceptions import ClientError
from pydantic import BaseModel

from converge import Converge, Identifier, error_code


class SignUp(BaseModel):
    """What a sign-up carries: identifiers only here (a real one would hold the e-mail address in the user's row)."""

    user_id: Identifier


@cache
def _dynamodb() -> Any:
    return boto3.client("dynamodb")  # built on first use, once per process


def sign_up(converge: Converge, request: SignUp) -> bool:
    """Write the user and enqueue their greeting, atomically; False when the user is already signed up (a retry)."""
    user = {
        "Put": {
            "TableName": os.environ["USERS_TABLE"],
            "Item": {"user_id": {"S": request.user_id}},
            "ConditionExpression": "attribute_not_exists(user_id)",
        }
    }
    greeting = converge.enqueue_put("{{toggle_key}}.v1", f"greet-{request.user_id}", {"user_id": request.user_id})
    try:
        _dynamodb().transact_write_items(TransactItems=[user, greeting])
    except ClientError as exc:
        if error_code(exc) == "TransactionCanceledException":  # the user (and so the greeting's job) exists already
            return False
        raise
    return True
