"""The example job: a greeting, written once per operation to the project's bucket, however often it runs.

A job is three things: its message (identifiers only, never PII or secrets), its runner (load what
the job needs, then the effect) and its binding (type, queue, policy, toggle default). The effect here is
an object keyed by the operation (greetings/<operation id>): writing it again writes the same object, so the
binding's policy is `keyed_effect`. Replace it with yours: an e-mail, a call to a provider keyed by
`ctx.operation_id`, a row.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3

from converge import Identifier, JobBinding, JobContext, JobMessage, Policy, Queue, catalogue_environment


class Greet(JobMessage):
    user_id: Identifier


@cache
def _s3() -> Any:
    return boto3.client("s3")  # built on first use, once per process: not at import (cold start) time


class GreetingRunner:
    def __init__(self, bucket: str) -> None:
        self.bucket = bucket

    def load(self, message: Greet, ctx: JobContext) -> str | None:
        """What the effect needs; None means "nothing to do" (the operation ends NOOP)."""
        return message.user_id

    def run(self, message: Greet, user_id: str, ctx: JobContext) -> None:
        _s3().put_object(
            Bucket=self.bucket,
            Key=f"greetings/{ctx.operation_id}",
            Body=f"Hello, {user_id}!".encode(),
        )


def build_runner() -> GreetingRunner:
    # The bucket's name: what the template passes converge's application as CatalogueEnvironment
    return GreetingRunner(catalogue_environment()["GREETINGS_BUCKET"])


GREETING = JobBinding(
    job_type="{{toggle_key}}.v1",
    message=Greet,
    runner="{{catalogue}}.greeting:build_runner",  # imported by the first worker that runs a greeting
    queue=Queue.DEFAULT,
    policy=Policy.KEYED_EFFECT,
    default_enabled=True,
    description="Write a greeting for a user, once per operation (the example job).",
    example_payload={"user_id": "u-1"},
)
