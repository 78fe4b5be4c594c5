"""Deploy marks: annotations on the metrics charts, one per release.

A mark is a field of the day's ``<YYYYMMDD>-marks`` HASH (kept 90 days): the
time rounded down to the minute (``2026-11-30T08:35:00Z``) mapped to a label.
Deploy scripts tend to mark once per process or per host; the rounding plus a
60-second ``deploylock-<label>`` lock fold all of those into a single mark::

    wurk.api.Deploy.mark()              # label: the current git commit
    wurk.api.Deploy.mark("v2.14.0")     # an explicit label

The writes are Sidekiq's, so the Sidekiq Web UI draws the same marks.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from wurk.api._base import RedisAccess, text
from wurk.api.processes import hybridmethod
from wurk.metrics import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

__all__ = ["Deploy"]

FALLBACK_LABEL = "deploy"


def git_label() -> str:
    """``<short sha> <subject>`` of the checked-out commit, or ``"deploy"``
    outside a git checkout (or without git)."""
    try:
        done = subprocess.run(
            ["git", "log", "-1", "--format=%h %s"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return FALLBACK_LABEL
    label = done.stdout.strip() if done.returncode == 0 else ""
    return label or FALLBACK_LABEL


def stamp_of(at: datetime) -> str:
    """ISO-8601 UTC, rounded down to the minute: ``2026-11-30T08:35:00Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


class Deploy(RedisAccess):
    def __init__(self, *, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        super().__init__(config, pool)

    @hybridmethod
    def mark(owner: Any, label: str | None = None, at: datetime | None = None) -> str | None:
        """Record a deploy at ``at`` (default now); returns the mark's stamp, or
        ``None`` when this label was already marked within the last minute.

        A naive ``at`` is taken as local time, as ``datetime.timestamp`` does.
        """
        access = owner if isinstance(owner, RedisAccess) else RedisAccess()
        label = (label if label is not None else git_label()).strip()
        if not label:
            return None
        when = (at or datetime.now(UTC)).astimezone(UTC)
        stamp = stamp_of(when)
        marks = keys.deploy_marks(when.date())

        def write(conn: Any) -> bool:
            if not conn.set(keys.deploy_lock(label), stamp, nx=True, ex=keys.DEPLOY_LOCK_TTL):
                return False
            pipe = conn.pipeline(transaction=True)
            pipe.hsetnx(marks, stamp, label)
            pipe.expire(marks, keys.MARKS_TTL)
            pipe.execute()
            return True

        return stamp if access.run(write) else None

    @hybridmethod
    def fetch(owner: Any, day: date | datetime | None = None) -> dict[str, str]:
        """The marks of one UTC day (default today): ``{stamp: label}``, oldest first."""
        access = owner if isinstance(owner, RedisAccess) else RedisAccess()
        if day is None:
            day = datetime.now(UTC).date()
        elif isinstance(day, datetime):
            day = day.astimezone(UTC).date()
        fields = access.run(lambda conn: conn.hgetall(keys.deploy_marks(day)))
        return dict(sorted((text(stamp), text(label)) for stamp, label in fields.items()))
