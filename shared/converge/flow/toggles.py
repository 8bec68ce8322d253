"""Kill switches: one SSM parameter per job, read with GetParameter and cached, failing closed.

A present, parsable value wins. A missing parameter gives the job's own default, so a misspelled
or deleted key can never start a fail-closed job. An unparsable value gives the default, with a
warning and a metric. When SSM itself fails, the last value seen is used, and with none the default.

Values are cached for `max_age` seconds on converge's clock (the emulated one in the local cloud). The cache
is a dict of the values read and when: Powertools' Parameters did the same, at the cost of loading boto3 and
its providers into every worker's cold start (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from converge.model.clock import Clock, SystemClock
from converge.model.errors import error_code
from converge.observability import count, logger

_TRUE = frozenset({"true", "on", "1", "yes", "enabled"})
_FALSE = frozenset({"false", "off", "0", "no", "disabled"})


class ToggleSource(StrEnum):
    PARAMETER = "parameter"
    DEFAULT = "default"
    LAST_KNOWN = "last known value"


@dataclass(frozen=True)
class ToggleState:
    enabled: bool
    source: ToggleSource
    raw: str | None = None
    note: str = ""


def parse_toggle(raw: str) -> bool | None:
    """true/false/on/off/1/0 in any case, trimmed; None when the value is anything else."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


class Toggles:
    """`is_enabled(job_key, default)` over Parameter Store, cached for at most `max_age` seconds."""

    def __init__(
        self,
        prefix: str,
        ssm_client: Any,
        max_age: int = 15,
        clock: Clock | None = None,
    ) -> None:
        """`ssm_client`: an SSM client (the runtime's: `converge.runtime` builds the clients)."""
        self._prefix = prefix.rstrip("/")
        self._client: Any = ssm_client
        self._max_age = max_age
        self._clock = clock or SystemClock()
        self._values: dict[str, tuple[str, float]] = {}  # parameter -> (value, when it was read)
        self._last_known: dict[str, bool] = {}
        self._missing_until: dict[str, float] = {}
        self._confirmed: set[str] = set()  # parameters read fresh in this batch

    def parameter_name(self, job_key: str) -> str:
        return f"{self._prefix}/{job_key}"

    def is_enabled(self, job_key: str, default_enabled: bool) -> bool:
        return self.state(job_key, default_enabled).enabled

    def state(self, job_key: str, default_enabled: bool, fresh: bool = False) -> ToggleState:
        """The effective state and where it came from (parameter, default or last known value).

        `fresh` skips the cache: worth one read before acting on an "off" that may be stale. It reads
        SSM at most once per parameter per batch (see `begin_batch`), so a batch of a paused job's
        messages costs one read, not one each.
        """
        name = self.parameter_name(job_key)
        fresh = fresh and name not in self._confirmed
        if fresh:
            self._confirmed.add(name)
        if not fresh and self._missing_until.get(name, 0.0) > self._clock.now():
            return ToggleState(default_enabled, ToggleSource.DEFAULT, note="parameter not found")
        try:
            raw = self._read(name, fresh)
        except Exception as exc:
            if error_code(exc) == "ParameterNotFound":
                self._missing_until[name] = self._clock.now() + self._max_age
                self._last_known.pop(name, None)
                return ToggleState(default_enabled, ToggleSource.DEFAULT, note="parameter not found")
            return self._ssm_unavailable(name, default_enabled, exc)
        parsed = parse_toggle(raw)
        if parsed is None:
            logger.warning(
                "toggle value is not a boolean; using the job's default",
                parameter=name,
                default_enabled=default_enabled,
            )
            count("ToggleUnparsable")
            return ToggleState(default_enabled, ToggleSource.DEFAULT, raw=raw, note="value is not a boolean")
        self._last_known[name] = parsed
        return ToggleState(parsed, ToggleSource.PARAMETER, raw=raw)

    def _ssm_unavailable(self, name: str, default_enabled: bool, exc: Exception) -> ToggleState:
        count("ToggleReadFailed")
        if name in self._last_known:
            logger.warning("SSM unavailable; using the last known toggle value", parameter=name, error=str(exc))
            return ToggleState(self._last_known[name], ToggleSource.LAST_KNOWN, note="SSM unavailable")
        logger.warning(
            "SSM unavailable and no known value; using the job's default",
            parameter=name,
            default_enabled=default_enabled,
            error=str(exc),
        )
        return ToggleState(default_enabled, ToggleSource.DEFAULT, note="SSM unavailable")

    def _read(self, name: str, fresh: bool) -> str:
        """The parameter's value: the cached one while younger than max_age, else read from SSM."""
        now = self._clock.now()
        cached = self._values.get(name)
        if not fresh and cached is not None and now < cached[1] + self._max_age:
            return cached[0]
        value = str(self._client.get_parameter(Name=name)["Parameter"]["Value"])
        self._values[name] = (value, now)
        return value

    def set(self, job_key: str, value: str, description: str) -> None:
        """Write a job's kill switch (an operator's action; the resumer hears of it from the change event), and
        drop the cached values so the next read sees it."""
        self._client.put_parameter(
            Name=self.parameter_name(job_key), Value=value, Type="String", Overwrite=True, Description=description
        )
        self.forget()

    def begin_batch(self) -> None:
        """A new invocation: the next `fresh` read of each parameter goes to SSM again."""
        self._confirmed.clear()

    def forget(self) -> None:
        """Drop cached values (not the last known ones), so the next read goes to SSM."""
        self._values.clear()
        self._missing_until.clear()

    def restored(self) -> None:
        """After a SnapStart restore: the snapshot may be days old, so nothing read before it is trusted, not
        even as a last known value (with SSM unavailable, a job gets its default: fail-closed stays closed)."""
        self.forget()
        self._last_known.clear()
        self._confirmed.clear()
