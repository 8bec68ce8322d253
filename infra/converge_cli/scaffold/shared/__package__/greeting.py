"""The example job: a greeting, delivered at least once and recorded exactly once.

A job is three things: its message (identifiers only, never PII or secrets), its runner (load what
the job needs, then the effect) and its binding (type, queue, policy, toggle default). Replace the
runner's effect with yours: an e-mail, an object, a call to a provider keyed by `ctx.operation_id`.
"""

from __future__ import annotations

from converge import Identifier, JobBinding, JobContext, JobMessage, Policy, Queue, logger


class Greet(JobMessage):
    user_id: Identifier


class GreetingRunner:
    def load(self, message: Greet, ctx: JobContext) -> str | None:
        """What the effect needs; None means "nothing to do" (the operation ends NOOP)."""
        return message.user_id

    def run(self, message: Greet, user_id: str, ctx: JobContext) -> None:
        logger.info("hello", user_id=user_id, operation_id=ctx.operation_id)


def build_runner() -> GreetingRunner:
    return GreetingRunner()


GREETING = JobBinding(
    job_type="{{toggle_key}}.v1",
    message=Greet,
    runner="{{catalogue}}.greeting:build_runner",  # imported by the first worker that runs a greeting
    queue=Queue.DEFAULT,
    policy=Policy.EFFECT_THEN_CLAIM,
    default_enabled=True,
    description="Say hello to a user (the example job).",
    example_payload={"user_id": "u-1"},
)
