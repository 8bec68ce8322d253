"""Every error converge raises, in one small hierarchy: one class per refusal, raised the same way on every path.

`converge.model.outcomes.classify` maps each class to a delivery's outcome, in one place. The last part
says what an AWS error means, read from the error itself (its code, or no answer at all), so that every
layer asks the same question the same way.
"""

from __future__ import annotations

from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.exceptions import HTTPClientError


class ConvergeError(Exception):
    """Base of every error converge raises on purpose."""


class TransientError(ConvergeError):
    """The work may succeed if tried again later (throttling, a timeout before any effect)."""


class PermanentError(ConvergeError):
    """Trying again cannot help: the operation fails now and its message goes to the DLQ."""


class InvalidMessage(PermanentError):
    """The message or payload does not satisfy its job's contract."""


class UnusableRequest(InvalidMessage):
    """The item's documented attributes have types converge cannot use (a binary payload value, a
    numeric job type, a list for a payload...)."""


class InvalidTiming(InvalidMessage):
    """`run_at` or `expires_at` is not a UTC instant, lies too far ahead, or contradicts the other."""


class UnknownJobType(PermanentError):
    """No binding is registered under this job type."""


class NotRunnable(PermanentError):
    """The operation's stored request is gone or holds other content: there is nothing safe to send."""


class OutcomeUnknown(ConvergeError):
    """The effect may or may not have happened and the provider cannot tell: an operator decides."""


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


class ConfigurationError(ConvergeError):
    """The function's environment is missing or has a malformed setting."""


class LeaseHeld(TransientError):
    """Another worker holds a live lease on this work; try again after it expires."""

    def __init__(self, message: str, until: float | None = None) -> None:
        super().__init__(message)
        self.until = until


class SendFailed(TransientError):
    """A message could not be sent to its queue (SQS refused it even after the inline retries)."""


class RateLimited(ConvergeError):
    """A limited partner refused the call for now (an HTTP 429 and its retry-after): the limiter's key is pushed back
    by that long and the operation waits SCHEDULED for it, its message sent again; no attempt is counted against it
    (docs/flow-control.md)."""

    def __init__(self, limiter: str, retry_after: float, message: str | None = None) -> None:
        super().__init__(message or f"{limiter}: the partner asked to wait {retry_after:g} s")
        self.limiter = limiter
        self.retry_after = retry_after


class OutOfTime(ConvergeError):
    """The Lambda is about to time out: hand the record back without counting a failure."""


class OperationNotFound(ConvergeError):
    """No operation is stored under this id."""


class InvalidTransition(ConvergeError):
    """The operation is not in a state that allows the requested change."""


class InvalidAction(ConvergeError, ValueError):
    """An operator action was asked with bad arguments (an empty reason, an unknown outcome)."""


class InvalidListing(ConvergeError, ValueError):
    """A listing was asked for a state that does not exist."""


class StreamRecordsGone(ConvergeError):
    """The stream no longer holds the records a relay failure names (older than its retention)."""


# -- what an AWS error means -----------------------------------------------------------------------------------


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ClientError, else None."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code")
    return None


THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "Throttling",
        "TooManyRequestsException",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",  # S3, SQS and the query-protocol services
        "AccessDeniedException",  # DynamoDB, SES, Secrets Manager, KMS, Lambda and most JSON services
        "AuthorizationError",  # SNS
        "AuthorizationErrorException",
        "UnauthorizedOperation",  # EC2
    }
)


def missing_grant(exc: BaseException) -> bool:
    """An AWS refusal of the caller's identity (AccessDenied and its kin, by code): a grant is missing from the role
    that made the call. No retry can fix it; a deploy of the grant does (docs/operating.md)."""
    return error_code(exc) in ACCESS_DENIED_CODES


def passing_failure(exc: BaseException) -> bool:
    """A known passing failure of a call to AWS (or any service over the network): throttling or a service
    fault by its error code, or no answer at all (no connection, a broken one, a timeout)."""
    if error_code(exc) in THROTTLING_CODES:
        return True
    return isinstance(exc, (BotocoreConnectionError, HTTPClientError, ConnectionError, TimeoutError))
