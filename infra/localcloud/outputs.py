"""converge's settings for a deployed stack, read from its outputs: the names the template gives its functions.

The command line reaches a deployment (on AWS or a local endpoint) by its stack's outputs, and the local cloud
binds converge to the stack it deployed the same way; both read the outputs through this one mapping.
"""

from __future__ import annotations

from converge.runtime.settings import Settings

OUTPUT_SETTINGS = {
    "JobsTableName": "JOBS_TABLE",
    "MarkersTableName": "MARKERS_TABLE",
    "BatchesTableName": "BATCHES_TABLE",
    "StateTableName": "STATE_TABLE",
    "ConflictIndexName": "CONFLICT_INDEX",
    "ScheduleIndexName": "SCHEDULE_INDEX",
    "TogglePrefix": "TOGGLE_PREFIX",
    "CriticalQueueUrl": "CRITICAL_QUEUE_URL",
    "DefaultQueueUrl": "DEFAULT_QUEUE_URL",
    "BulkQueueUrl": "BULK_QUEUE_URL",
    "CriticalDlqUrl": "CRITICAL_DLQ_URL",
    "DefaultDlqUrl": "DEFAULT_DLQ_URL",
    "BulkDlqUrl": "BULK_DLQ_URL",
    "AttentionIndexName": "ATTENTION_INDEX",
    "ScheduleGroupName": "SCHEDULE_GROUP",
}


def settings_from_outputs(outputs: dict[str, str], catalogue: str | None = None) -> Settings:
    """converge's settings for a deployed stack, from its outputs (as the template sets them for functions)."""
    env = {name: outputs[key] for key, name in OUTPUT_SETTINGS.items() if key in outputs}
    prefix = env.get("TOGGLE_PREFIX", "/converge/dev/toggles")
    env.setdefault("CONVERGE_STAGE", prefix.strip("/").split("/")[1] if prefix.count("/") >= 2 else "dev")
    if catalogue:
        env["CONVERGE_CATALOGUE"] = catalogue
    return Settings.from_env(env)
