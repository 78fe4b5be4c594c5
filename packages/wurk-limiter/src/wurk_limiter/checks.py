"""Validation of a limiter's construction arguments.

Everything is checked when the limiter is built, so a typo in an interval or
a zero size fails when the application loads instead of at the first job.
Each error is a ``ValueError`` (Ruby's ``ArgumentError``) naming the
argument and the value it refused.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

#: Word characters plus ``- : . # @``, ASCII only, as Ruby's ``\w`` is.
NAME = re.compile(r"[\w\-:.#@]+", re.ASCII)

#: 90 days, the guides' default TTL on every limiter key.
DEFAULT_TTL = 90 * 24 * 3600

#: A shorter TTL could expire a limiter's metadata mid-job and orphan slots.
MIN_TTL = 86_400

#: The calendar units a bucket resets on (and that window and leaky accept).
UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}

POLICIES = ("raise", "ignore")


def name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValueError(
            f"limiter name {value!r} is not allowed: use letters, digits, '_' and '- : . # @' only "
            "(it becomes a Redis key suffix)"
        )
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(argument: str, value: Any) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if _is_number(value):
        return float(value)
    raise ValueError(f"{argument} must be a number of seconds or a timedelta, got {value!r}")


def positive_int(argument: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{argument} must be a whole number > 0, got {value!r}")
    return value


def positive(argument: str, value: Any) -> float:
    if not _is_number(value) or value <= 0:
        raise ValueError(f"{argument} must be a number > 0, got {value!r}")
    return float(value)


def non_negative(argument: str, value: Any) -> float:
    if not _is_number(value) or value < 0:
        raise ValueError(f"{argument} must be a number >= 0, got {value!r}")
    return float(value)


def wait_timeout(value: Any) -> float:
    seconds = _seconds("wait_timeout", value)
    if seconds < 0:
        raise ValueError(f"wait_timeout must be >= 0 seconds (0 fails at once), got {value!r}")
    return seconds


def lock_timeout(value: Any) -> float:
    seconds = _seconds("lock_timeout", value)
    if seconds <= 0:
        raise ValueError(f"lock_timeout must be > 0 seconds, got {value!r}")
    return seconds


def ttl(value: Any) -> int:
    seconds = _seconds("ttl", value)
    if seconds < MIN_TTL:
        raise ValueError(
            f"ttl must be at least {MIN_TTL} seconds (one day), got {value!r}: "
            "a limiter whose keys expire mid-job orphans its slots"
        )
    return int(seconds)


def policy(value: Any) -> str:
    if value not in POLICIES:
        raise ValueError(f"policy must be 'raise' or 'ignore', got {value!r}")
    return str(value)


def reschedule(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"reschedule must be a whole number >= 0 (0 re-raises), got {value!r}")
    return value


def backoff(value: Any) -> Any:
    if value is None or callable(value):
        return value
    if _is_number(value) and value >= 0:
        return value
    raise ValueError(f"backoff must be None, seconds >= 0 or a callable(limiter, job, exc), got {value!r}")


def unit(argument: str, value: Any) -> int:
    """A calendar unit only: a bucket resets at the top of one."""
    if isinstance(value, str) and value in UNITS:
        return UNITS[value]
    raise ValueError(
        f"{argument} must be one of 'second', 'minute', 'hour', 'day', got {value!r}"
        + (" (a bucket resets at a unit's boundary, so it takes no raw number)" if _is_number(value) else "")
    )


def interval(argument: str, value: Any) -> float:
    """A calendar unit, or a positive number of seconds, or a timedelta."""
    if isinstance(value, str):
        return float(unit(argument, value))
    if isinstance(value, timedelta) or _is_number(value):
        seconds = _seconds(argument, value)
        if seconds > 0:
            return seconds
    raise ValueError(f"{argument} must be 'second', 'minute', 'hour', 'day', seconds > 0 or a timedelta, got {value!r}")


def wire(value: Any) -> Any:
    """An option as it is written to the metadata's JSON: a timedelta as
    seconds, a callable as its qualified name."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
    return value
