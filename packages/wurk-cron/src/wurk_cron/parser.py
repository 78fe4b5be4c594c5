"""Cron strings: exactly the syntax the guides define, and when one fires next.

The accepted grammar is deliberately narrow: five numeric fields (or one of
the ``@`` aliases), each a comma list of ``*``, a value or an ``a-b`` range,
optionally ``/step``. Everything a larger dialect would add (seconds, names
such as ``MON``, ``L W # ?``, ``@reboot``) is refused with a ``ValueError``
naming the expression, because a schedule ported from another scheduler that
is silently read differently fires at the wrong times.

Validation is ours; expanding a checked field into its values is croniter's
(the dependency the design names). Finding the next fire is ours too: croniter's
own iteration across DST transitions is not the guides' rule, which walks
forward evaluating the wall clock of the loop's zone, so that the skipped
spring hour never matches and a fixed-hour schedule fires once when the fall
hour repeats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo

from croniter import croniter

__all__ = ["ALIASES", "LOOKAHEAD_SECONDS", "Parser"]

ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

#: How far ahead a next fire is looked for: about four years, so that a
#: February 29th schedule still finds its leap day.
LOOKAHEAD_SECONDS = (4 * 365 + 2) * 86400

#: (name, lowest, highest) of each field; day-of-week 7 is Sunday, as 0.
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7))
ITEM = re.compile(r"^(?:(\*)|(\d+)(?:-(\d+))?)(?:/(\d+))?$")


@dataclass(frozen=True)
class _Field:
    values: frozenset[int]
    #: Whether the field was written starting with ``*``: for day-of-month and
    #: day-of-week that decides AND (one is a wildcard) or OR (both restricted).
    star: bool


class Parser:
    """One checked cron expression::

    Parser("5/15 * * * *").minutes  # frozenset({5, 20, 35, 50})
    Parser("0 2 * * *").next_fire_at(time.time(), ZoneInfo("America/Chicago"))
    """

    def __init__(self, expression: str) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise ValueError(f"a cron schedule must be a non-empty string, got {expression!r}")
        self.expression = expression
        text = " ".join(expression.split())
        if text.startswith("@"):
            if text not in ALIASES:
                known = ", ".join(ALIASES)
                raise ValueError(f"cron schedule {expression!r}: unknown alias {text!r} (supported: {known})")
            text = ALIASES[text]
        parts = text.split(" ")
        if len(parts) != 5:
            extra = " (there is no seconds field: one minute is the finest resolution)" if len(parts) == 6 else ""
            raise ValueError(
                f"cron schedule {expression!r}: expected 5 fields "
                f"'minute hour day-of-month month day-of-week', got {len(parts)}{extra}"
            )
        for part, (name, low, high) in zip(parts, FIELDS, strict=True):
            _check_field(expression, part, name, low, high)
        self.schedule = text
        fields = _expand(expression, parts)
        self.minutes, self.hours = fields[0].values, fields[1].values
        self.days, self.months, self.weekdays = fields[2].values, fields[3].values, fields[4].values
        self._day_star, self._weekday_star = fields[2].star, fields[4].star
        #: A fixed-hour schedule fires once when the fall-back hour repeats; an
        #: every-hour one keeps both runs, since both are genuine hours.
        self.fixed_hour = not fields[1].star or len(self.hours) < 24

    def __repr__(self) -> str:
        return f"Parser({self.expression!r})"

    # -- matching ---------------------------------------------------------------

    def day_matches(self, day: datetime) -> bool:
        """Whether the schedule may fire on ``day``'s date (month and days)."""
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self._day_star or self._weekday_star:
            return in_month and in_week  # the wildcard one matches every day anyway
        return in_month or in_week  # Vixie cron: both restricted means either

    # -- the next fire ----------------------------------------------------------

    def next_fire_at(self, after: float, tz: tzinfo | None = None) -> int | None:
        """Epoch seconds of the first matching minute strictly after ``after``
        in ``tz`` (UTC when None), or None if there is none within about four
        years."""
        zone = tz or UTC
        moment = (int(after) // 60 + 1) * 60
        limit = after + LOOKAHEAD_SECONDS
        while moment <= limit:
            local = datetime.fromtimestamp(moment, zone)
            if not self.day_matches(local):
                moment = _next_wall(local, zone, days=1, fallback=moment + 60)
            elif local.hour not in self.hours:
                moment = _next_wall(local.replace(minute=0), zone, hours=1, fallback=moment + 60)
            elif local.minute not in self.minutes or (local.fold and self.fixed_hour):
                moment += 60  # fold=1: the repeated fall-back hour, already run at fold=0
            else:
                return moment
        return None


def _check_field(expression: str, part: str, name: str, low: int, high: int) -> None:
    for item in part.split(","):
        found = ITEM.match(item)
        if found is None:
            raise ValueError(
                f"cron schedule {expression!r}: {name} field {part!r} is not '*', a number, "
                "a list 'a,b', a range 'a-b' or a step '/n' (names and L W # ? are not supported)"
            )
        _star, start, end, step = found.groups()
        for value in (start, end):
            if value is not None and not low <= int(value) <= high:
                raise ValueError(f"cron schedule {expression!r}: {name} value {value} is outside {low}-{high}")
        if end is not None and int(start) > int(end):
            raise ValueError(f"cron schedule {expression!r}: {name} range {start}-{end} runs backwards")
        if step is not None and int(step) < 1:
            raise ValueError(f"cron schedule {expression!r}: {name} step must be >= 1, got {step}")


def _expand(expression: str, parts: list[str]) -> list[_Field]:
    try:
        expanded, _nth = croniter.expand(" ".join(parts))
    except Exception as exc:  # croniter's own error types vary between releases
        raise ValueError(f"cron schedule {expression!r}: {exc}") from exc
    fields = []
    for part, values, (_name, low, high) in zip(parts, expanded, FIELDS, strict=True):
        full = range(low, 7 if high == 7 else high + 1)
        numbers = {int(v) % 7 if high == 7 else int(v) for v in values if v != "*"}
        fields.append(_Field(frozenset(full) if "*" in values else frozenset(numbers), part.startswith("*")))
    return fields


def _next_wall(local: datetime, zone: tzinfo, *, fallback: int, days: int = 0, hours: int = 0) -> int:
    """The first instant at the start of the next wall-clock day or hour.

    Built from wall-clock parts with ``fold=0``: a start that falls in a
    spring gap maps to the first instant after it, and one that repeats in the
    fall to its first occurrence, so no candidate minute is jumped over.
    """
    if days:
        start = datetime.combine(local.date() + timedelta(days=days), time(0), tzinfo=zone)
    else:
        wall = local.replace(tzinfo=None, fold=0) + timedelta(hours=hours)
        start = wall.replace(tzinfo=zone)
    return max(int(start.timestamp()), fallback)
