"""One small error hierarchy; `converge.outcomes` maps each class to an outcome in one place."""

from __future__ import annotations


class ConvergeError(Exception):
    """Base of every error converge raises on purpose."""


class TransientError(ConvergeError):
    """The work may succeed if tried again later (throttling, a timeout before any effect)."""


class PermanentError(ConvergeError):
    """Trying again cannot help: the operation fails now and its message goes to the DLQ."""


class InvalidMessage(PermanentError):
    """The message or payload does not satisfy its job's contract."""


class UnknownJobType(PermanentError):
    """No binding is registered under this job type."""


class OutcomeUnknown(ConvergeError):
    """The effect may or may not have happened and the provider cannot tell: an operator decides."""


class JobDisabled(ConvergeError):
    """The job's kill switch is off."""


class IdentityConflict(ConvergeError):
    """The operation id is already taken by different content."""

    def __init__(self, operation_id: str) -> None:
        super().__init__(
            f"operation {operation_id!r} already exists with a different job type or payload; "
            "an operation id names one business operation and cannot be reused for other content"
        )
        self.operation_id = operation_id


class RegistryError(ConvergeError):
    """A binding is malformed or registered twice."""


class LeaseHeld(TransientError):
    """Another worker holds a live lease on this work; try again after it expires."""

    def __init__(self, message: str, until: float | None = None) -> None:
        super().__init__(message)
        self.until = until


class OutOfTime(ConvergeError):
    """The Lambda is about to time out: hand the record back without counting a failure."""


class OperationNotFound(ConvergeError):
    """No operation is stored under this id."""


class InvalidTransition(ConvergeError):
    """The operation is not in a state that allows the requested change."""
