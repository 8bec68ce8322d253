"""Job types by name (the framework's lookup, which operator actions share), re-exported for the commands."""

from converge.flow.names import find_binding, require_job_type, unknown_job_type

__all__ = ["find_binding", "require_job_type", "unknown_job_type"]
