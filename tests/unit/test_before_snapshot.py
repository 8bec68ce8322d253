"""What a function's snapshot holds (SnapStart's before-snapshot hook): what its first request would load."""

from __future__ import annotations

import sys

from converge.flow.registry import JobBinding, Policy, Queue, Registry, load_named
from converge.runtime import Converge
from converge.runtime.settings import Settings

NAMED = "tests.unit.snapshot_jobs"


def _registry() -> Registry:
    return Registry(
        [
            JobBinding(
                job_type=f"snap.{name}.v1",
                message=f"{NAMED}:Item",
                runner=f"{NAMED}:build_runner",
                queue=queue,
                policy=Policy.EFFECT_THEN_CLAIM,
            )
            for name, queue in (("critical", Queue.CRITICAL), ("bulk", Queue.BULK))
        ]
    )


def _settings(**extra: str) -> Settings:
    return Settings.model_validate({"JOBS_TABLE": "jobs", "MARKERS_TABLE": "markers", "STATE_TABLE": "state", **extra})


def _unloaded(monkeypatch) -> None:
    """The jobs' module as a fresh process has it: not imported yet."""
    monkeypatch.delitem(sys.modules, NAMED, raising=False)
    load_named.cache_clear()


def test_the_enqueue_apis_snapshot_holds_its_routes_and_every_jobs_model(aws, monkeypatch):
    # Given an enqueue API's runtime (it has the idempotency table) over a catalogue whose models are named
    _unloaded(monkeypatch)
    runtime = Converge(_settings(IDEMPOTENCY_TABLE="idempotency"), registry=_registry())
    assert "enqueue_api" not in vars(runtime)
    # When the before-snapshot hook runs
    runtime.before_snapshot()
    # Then its part is built and the jobs' module is loaded, so a restored environment's first POST loads neither
    assert "enqueue_api" in vars(runtime) and NAMED in sys.modules
    # And it built no worker and no runner (it runs none)
    assert "worker" not in vars(runtime) and sys.modules[NAMED].BUILT == []


def test_a_workers_snapshot_holds_the_models_and_runners_of_its_queues_jobs_only(aws, monkeypatch):
    import boto3

    sqs = boto3.client("sqs")
    queue, dlq = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("critical", "critical-dlq"))
    _unloaded(monkeypatch)
    runtime = Converge(_settings(QUEUE_NAME="critical", QUEUE_URL=queue, DLQ_URL=dlq), registry=_registry())
    # When the before-snapshot hook runs / Then the worker is built with its queue's runner, and not the API
    runtime.before_snapshot()
    assert "worker" in vars(runtime) and "enqueue_api" not in vars(runtime)
    assert sys.modules[NAMED].BUILT == ["built"]  # one runner: the critical job's, not the bulk one's
