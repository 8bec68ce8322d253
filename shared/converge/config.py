"""Settings read from the function's environment once, at cold start, and checked there."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from converge.errors import ConvergeError
from converge.registry import Queue


class ConfigurationError(ConvergeError):
    """The function's environment is missing or has a malformed setting."""


class Settings(BaseModel):
    """What converge needs to know about the deployment; the template sets each as an env var."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    stage: str = Field(default="dev", alias="CONVERGE_STAGE")
    jobs_table: str = Field(alias="JOBS_TABLE")
    markers_table: str = Field(alias="MARKERS_TABLE")
    state_table: str = Field(alias="STATE_TABLE")
    attention_index: str = Field(default="attention-index", alias="ATTENTION_INDEX")
    conflict_index: str = Field(default="conflict-index", alias="CONFLICT_INDEX")
    toggle_prefix: str = Field(default="/converge/dev/toggles", alias="TOGGLE_PREFIX")
    catalogue: str | None = Field(default=None, alias="CONVERGE_CATALOGUE")
    critical_queue_url: str | None = Field(default=None, alias="CRITICAL_QUEUE_URL")
    default_queue_url: str | None = Field(default=None, alias="DEFAULT_QUEUE_URL")
    bulk_queue_url: str | None = Field(default=None, alias="BULK_QUEUE_URL")
    critical_queue_arn: str | None = Field(default=None, alias="CRITICAL_QUEUE_ARN")
    default_queue_arn: str | None = Field(default=None, alias="DEFAULT_QUEUE_ARN")
    bulk_queue_arn: str | None = Field(default=None, alias="BULK_QUEUE_ARN")
    schedule_group: str | None = Field(default=None, alias="SCHEDULE_GROUP")
    """The EventBridge Scheduler group holding delayed operations' one-time schedules."""
    scheduler_role_arn: str | None = Field(default=None, alias="SCHEDULER_ROLE_ARN")
    """The role the schedules send their message with (sqs:SendMessage on the queues and the schedules' DLQ)."""
    schedule_dlq_arn: str | None = Field(default=None, alias="SCHEDULE_DLQ_ARN")
    """Where Scheduler puts a firing it could not deliver (each schedule's DeadLetterConfig)."""
    schedule_dlq_url: str | None = Field(default=None, alias="SCHEDULE_DLQ_URL")
    """The same queue, for the reconciler that reads it."""
    schedule_index: str = Field(default="schedule-index", alias="SCHEDULE_INDEX")
    """The state table's index of listed operations by run_at (overdue SCHEDULED operations)."""
    queue_name: Queue | None = Field(default=None, alias="QUEUE_NAME")
    queue_url: str | None = Field(default=None, alias="QUEUE_URL")
    dlq_url: str | None = Field(default=None, alias="DLQ_URL")
    max_receive_count: int = Field(default=5, ge=1, alias="MAX_RECEIVE_COUNT")
    toggle_max_age_seconds: int = Field(default=15, ge=0, le=30, alias="CONVERGE_TOGGLE_MAX_AGE")
    time_margin_ms: int = Field(default=5_000, ge=0, alias="CONVERGE_TIME_MARGIN_MS")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        try:
            return cls.model_validate(dict(os.environ if env is None else env))
        except ValidationError as exc:
            fields = ", ".join(str(error["loc"][0]) for error in exc.errors())
            raise ConfigurationError(f"missing or invalid environment settings: {fields}") from None

    def queue_url_for(self, queue: Queue) -> str:
        url = {
            Queue.CRITICAL: self.critical_queue_url,
            Queue.DEFAULT: self.default_queue_url,
            Queue.BULK: self.bulk_queue_url,
        }[queue]
        if not url:
            raise ConfigurationError(f"no URL configured for the {queue.value} queue ({queue.value.upper()}_QUEUE_URL)")
        return url

    def queue_arn_for(self, queue: Queue) -> str:
        arn = {
            Queue.CRITICAL: self.critical_queue_arn,
            Queue.DEFAULT: self.default_queue_arn,
            Queue.BULK: self.bulk_queue_arn,
        }[queue]
        if not arn:
            raise ConfigurationError(f"no ARN configured for the {queue.value} queue ({queue.value.upper()}_QUEUE_ARN)")
        return arn

    def toggle_parameter(self, toggle_key: str) -> str:
        return f"{self.toggle_prefix.rstrip('/')}/{toggle_key}"
