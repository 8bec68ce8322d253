"""Schedule expressions (rate and cron) evaluated on the emulated clock.

`Scheduler.tick(now)` fires each schedule that came due since the previous tick, once: periods missed
while nobody ticked coalesce into one firing (a recurring sweep only needs to run, not to catch up).
A rate schedule first comes due one period after the local cloud starts, as on AWS.
cron supports AWS's six fields with *, ?, numbers, names, ranges, lists and steps (not L, W or #).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .rules import Delivery, EventBus, EventRule

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {m: i + 1 for i, m in enumerate(_MONTH_NAMES)}
_DAYS = {d: i + 1 for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_CRON_SCAN_LIMIT = timedelta(days=400)


def rate_seconds(expression: str) -> int | None:
    match = _RATE.match(expression.strip())
    if not match:
        return None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def _field_values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int] | None:
    """The set of allowed values, or None for "any" (* or ?)."""
    if field in ("*", "?"):
        return None
    values: set[int] = set()
    for part in field.split(","):
        if any(c in part for c in "LW#"):
            raise ValueError(f"cron field {field!r} uses L, W or #, which the local cloud does not support")
        base, _, step = part.partition("/")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-")
            start, end = _cron_number(a, names), _cron_number(b, names)
        else:
            start = _cron_number(base, names)
            end = high if step else start
        values.update(range(start, end + 1, int(step) if step else 1))
    return values


def _cron_number(token: str, names: dict[str, int] | None) -> int:
    return names[token.upper()] if names and token.upper() in names else int(token)


class CronExpression:
    def __init__(self, body: str) -> None:
        fields = body.split()
        if len(fields) != 6:
            raise ValueError(f"cron needs 6 fields (minutes hours day-of-month month day-of-week year): {body!r}")
        self.minutes = _field_values(fields[0], 0, 59)
        self.hours = _field_values(fields[1], 0, 23)
        self.days = _field_values(fields[2], 1, 31)
        self.months = _field_values(fields[3], 1, 12, _MONTHS)
        self.weekdays = _field_values(fields[4], 1, 7, _DAYS)
        self.years = _field_values(fields[5], 1970, 2199)

    def _day_matches(self, moment: datetime) -> bool:
        aws_weekday = (moment.isoweekday() % 7) + 1  # AWS numbers days 1 (Sunday) to 7 (Saturday)
        return all(
            allowed is None or value in allowed
            for allowed, value in (
                (self.days, moment.day),
                (self.months, moment.month),
                (self.weekdays, aws_weekday),
                (self.years, moment.year),
            )
        )

    def next_after(self, epoch_seconds: float) -> float | None:
        moment = datetime.fromtimestamp(epoch_seconds, tz=UTC).replace(second=0, microsecond=0)
        limit = moment + _CRON_SCAN_LIMIT
        moment += timedelta(minutes=1)
        while moment <= limit:
            if not self._day_matches(moment):
                moment = (moment + timedelta(days=1)).replace(hour=0, minute=0)
            elif self.hours is not None and moment.hour not in self.hours:
                moment = (moment + timedelta(hours=1)).replace(minute=0)
            elif self.minutes is not None and moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
            else:
                return moment.timestamp()
        return None


def next_due(expression: str, after: float) -> float | None:
    """When a schedule expression next fires after `after` (epoch seconds)."""
    period = rate_seconds(expression)
    if period is not None:
        return after + period
    cron = _CRON.match(expression.strip())
    if cron:
        return CronExpression(cron.group(1)).next_after(after)
    if expression.startswith("at("):
        moment = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC).timestamp()
        return moment if moment > after else None
    raise ValueError(f"unsupported schedule expression {expression!r}")


class Scheduler:
    def __init__(self, bus: EventBus, started_at: float) -> None:
        self._bus = bus
        for rule in bus.schedules:
            rule.next_due = next_due(rule.schedule or "", started_at)

    def due(self, now: float) -> list[EventRule]:
        return [r for r in self._bus.schedules if r.enabled and r.next_due is not None and r.next_due <= now]

    def tick(self, now: float) -> list[Delivery]:
        """Fire every schedule due at `now`; returns the deliveries made."""
        deliveries: list[Delivery] = []
        for rule in self.due(now):
            deliveries.extend(self._bus.fire(rule))
            following = rule.next_due
            while following is not None and following <= now:
                following = next_due(rule.schedule or "", following)
            rule.next_due = following
        return deliveries
