"""Time zones of loops: stored by name, resolved with ``zoneinfo``.

A loop's zone is written into its Redis hash as a name, because the process
that fires it is not the one that registered it. So ``tz=`` accepts an IANA
name, a :class:`zoneinfo.ZoneInfo`, or another ``datetime.tzinfo`` that has
a name (``datetime.timezone.utc``, whole-hour fixed offsets, the ``.zone`` of
a pytz zone), and refuses one whose name could not be resolved elsewhere.

Resolution never touches ``TZ`` in the environment: that is process-wide
and would leak the schedule's zone into the jobs' own code.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, timedelta, tzinfo
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["TzSpec", "ZoneResolver", "zone_name"]

TzSpec = str | tzinfo | None


def zone_name(tz: TzSpec) -> str:
    """The name a zone is stored under; empty for UTC (the default)."""
    if tz is None:
        return ""
    if isinstance(tz, str):
        if not tz.strip():
            raise ValueError("tz must be an IANA zone name such as 'America/Chicago', got an empty string")
        return tz.strip()
    if not isinstance(tz, tzinfo):
        raise ValueError(f"tz must be an IANA zone name, a ZoneInfo or a datetime.tzinfo, got {tz!r}")
    if isinstance(tz, ZoneInfo):
        return tz.key
    for attribute in ("key", "zone"):  # other libraries' zones carry their IANA name
        name = getattr(tz, attribute, None)
        if isinstance(name, str) and name:
            return name
    if isinstance(tz, dt_timezone):
        return _fixed_offset_name(tz)
    raise ValueError(f"tz {tz!r} has no IANA name to store; pass a name such as 'Europe/Berlin' or a ZoneInfo")


def _fixed_offset_name(tz: dt_timezone) -> str:
    offset = tz.utcoffset(None)
    if offset == timedelta(0):
        return "UTC"
    hours, rest = divmod(offset, timedelta(hours=1))
    if rest:
        raise ValueError(f"tz {tz!r}: only whole-hour fixed offsets have an IANA name (Etc/GMT±h)")
    return f"Etc/GMT{-hours:+d}"  # the Etc zones' sign is POSIX's, the reverse of ISO's


class ZoneResolver:
    """Names to zones, memoised, with one warning per unknown name.

    An unknown name must not crash the poller (every loop would stop), so
    the loop runs as UTC and the operator is told once, not every minute.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._zones: dict[str, tzinfo] = {}
        self._lock = threading.Lock()

    def zone(self, name: str | None) -> tzinfo:
        if not name:
            return UTC
        with self._lock:
            found = self._zones.get(name)
            if found is None:
                found = self._zones[name] = self._resolve(name)
            return found

    def _resolve(self, name: str) -> tzinfo:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            self._logger.warning("[cron] unknown time zone %r: its loops run as UTC", name)
            return UTC
