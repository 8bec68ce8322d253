"""Settings read from the function's environment once, at cold start, and checked there.

`Settings` owns every environment variable converge reads: no other module of the package reads the
environment (Powertools' own variables, such as POWERTOOLS_TRACE_DISABLED, are Powertools'), but
`catalogue_environment`, which reads a catalogue's settings for its runners.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from converge.flow.registry import Queue, Queues
from converge.model.errors import ConfigurationError

if TYPE_CHECKING:
    from converge.flow.delays import Schedules
    from converge.operate.deadletters import DlqUrls


CATALOGUE_ENVIRONMENT = "CONVERGE_CATALOGUE_ENVIRONMENT"
"""Where converge's application hands every function its catalogue's settings: a JSON object of names to values
(the application's CatalogueEnvironment parameter, which the team's template sets)."""


def catalogue_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The catalogue's settings as its runners read them: the JSON object the team's template passes converge's
    application (`CatalogueEnvironment`), with the function's own environment variables over it (so a test or a
    tool may set one directly). Read when called, not at import: call it where a runner is built.

        bucket = converge.catalogue_environment()["GREETINGS_BUCKET"]
    """
    variables = dict(os.environ if env is None else env)
    try:
        passed = json.loads(variables.get(CATALOGUE_ENVIRONMENT) or "{}")
    except ValueError as exc:
        raise ConfigurationError(f"{CATALOGUE_ENVIRONMENT} is not a JSON object: {exc}") from None
    if not isinstance(passed, dict) or not all(isinstance(value, str) for value in passed.values()):
        raise ConfigurationError(f"{CATALOGUE_ENVIRONMENT} is not a JSON object of names to text values")
    return {**passed, **variables}


class QueueSettings(BaseModel):
    """One work queue's place: its URL and ARN, and its DLQ's URL (each None where a function is not given it)."""

    model_config = ConfigDict(frozen=True)

    url: str | None = None
    arn: str | None = None
    dlq_url: str | None = None


QUEUE_VARIABLES = {"url": "{NAME}_QUEUE_URL", "arn": "{NAME}_QUEUE_ARN", "dlq_url": "{NAME}_DLQ_URL"}
"""The environment variables of each queue's settings, by field (`CRITICAL_QUEUE_URL`, `BULK_DLQ_URL`, ...)."""


class Settings(BaseModel):
    """What converge needs to know about the deployment; the template sets each as an env var."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    stage: str = Field(default="dev", alias="CONVERGE_STAGE")
    jobs_table: str = Field(alias="JOBS_TABLE")
    markers_table: str = Field(alias="MARKERS_TABLE")
    state_table: str = Field(alias="STATE_TABLE")
    batches_table: str | None = Field(default=None, alias="BATCHES_TABLE")
    """Batches' records and counting shards (`converge.enqueue_batch`); without it there are no batches."""
    attention_index: str = Field(default="attention-index", alias="ATTENTION_INDEX")
    conflict_index: str = Field(default="conflict-index", alias="CONFLICT_INDEX")
    toggle_prefix: str = Field(default="/converge/dev/toggles", alias="TOGGLE_PREFIX")
    catalogue: str | None = Field(default=None, alias="CONVERGE_CATALOGUE")
    per_queue: dict[Queue, QueueSettings] = Field(default_factory=dict)
    """Each work queue's URL, ARN and DLQ URL (`QUEUE_VARIABLES`): the relay sends to the queues, the redrive
    function, the reconciler and the operator's tools read the DLQs."""
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
    relay_failure_queue_url: str | None = Field(default=None, alias="RELAY_FAILURE_QUEUE_URL")
    """The relay's on-failure destination, which the reconciler reads."""
    idempotency_table: str | None = Field(default=None, alias="IDEMPOTENCY_TABLE")
    """The enqueue API's request records (Powertools Idempotency)."""
    idempotency_retention_seconds: int = Field(default=24 * 3600, ge=1, alias="IDEMPOTENCY_RETENTION_SECONDS")
    toggle_max_age_seconds: int = Field(default=15, ge=0, le=30, alias="CONVERGE_TOGGLE_MAX_AGE")
    time_margin_ms: int = Field(default=5_000, ge=0, alias="CONVERGE_TIME_MARGIN_MS")
    region: str = Field(default="us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"))
    """Lambda sets both; a shell may set either."""

    @model_validator(mode="before")
    @classmethod
    def _per_queue(cls, values: Any) -> Any:
        """Gather each queue's variables into its `QueueSettings` (given as `per_queue` already: kept)."""
        if not isinstance(values, Mapping) or "per_queue" in values:
            return values
        per_queue = {
            queue: {field: values.get(name.format(NAME=queue.name)) for field, name in QUEUE_VARIABLES.items()}
            for queue in Queue
        }
        return {**values, "per_queue": per_queue}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        try:
            return cls.model_validate(dict(os.environ if env is None else env))
        except ValidationError as exc:
            fields = ", ".join(str(error["loc"][0]) for error in exc.errors())
            raise ConfigurationError(f"missing or invalid environment settings: {fields}") from None

    @property
    def queues(self) -> Queues:
        """Where each work queue is (a missing one is a ConfigurationError when it is needed, not before)."""
        return Queues(
            {queue: place.url for queue, place in self.per_queue.items()},
            {queue: place.arn for queue, place in self.per_queue.items()},
        )

    @property
    def schedules(self) -> Schedules:
        from converge.flow.delays import Schedules  # only a function that delays work loads delayed dispatch

        return Schedules(self.schedule_group, self.scheduler_role_arn, self.schedule_dlq_arn)

    @property
    def dlq_urls(self) -> DlqUrls:
        from converge.operate.deadletters import DlqUrls  # only a function that reads DLQs loads their code

        return DlqUrls.model_validate(
            {
                QUEUE_VARIABLES["dlq_url"].format(NAME=queue.name): place.dlq_url
                for queue, place in self.per_queue.items()
            }
        )

    def toggle_parameter(self, toggle_key: str) -> str:
        return f"{self.toggle_prefix.rstrip('/')}/{toggle_key}"
