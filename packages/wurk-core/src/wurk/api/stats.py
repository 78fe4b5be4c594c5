"""Cluster-wide counters, and their per-day history.

:class:`Stats` takes its cheap numbers in one pipeline when it is built, so a
dashboard can read a dozen fields from one instance for the price of one round
trip. The readers whose cost grows with the number of queues or processes
(``enqueued``, ``workers_size``, ``queues``, ``queue_summaries``) ask Redis
again on every access; keep the result in a variable if you need it twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from wurk.api._base import RedisAccess, as_int, busy_threads, text
from wurk.api.record import raw_latency
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The counters ``reset`` knows, by the names it accepts.
RESETTABLE = {
    "processed": keys.STAT_PROCESSED,
    "failed": keys.STAT_FAILED,
    "expired": keys.STAT_EXPIRED,
    "rescheduled": keys.STAT_RESCHEDULED,
}

#: The dated counters are kept five years, so that is as far back as history goes.
MAX_HISTORY_DAYS = 5 * 365


class QueueSummary(NamedTuple):
    """One queue at a glance; unpacks as ``name, size, latency, paused``."""

    name: str
    size: int
    latency: float
    paused: bool


class History:
    """Per-day counters (``stat:<name>:YYYY-MM-DD``, UTC) for the last N days.

    Each reader returns ``{"YYYY-MM-DD": count}``, newest day first, with 0 for
    a day nothing was recorded. Results are kept per instance.
    """

    def __init__(
        self,
        days_previous: int,
        start_date: date | None = None,
        *,
        config: Config | None = None,
        pool: RedisPool | str | None = None,
    ) -> None:
        if isinstance(days_previous, bool) or not isinstance(days_previous, int):
            raise TypeError(f"days_previous must be a whole number, got {days_previous!r}")
        if not 1 <= days_previous <= MAX_HISTORY_DAYS:
            raise ValueError(f"days_previous must be within 1..{MAX_HISTORY_DAYS}, got {days_previous}")
        self.days_previous = days_previous
        self.start_date = _utc_date(start_date)
        self._access = RedisAccess(config, pool)
        self._cache: dict[str, dict[str, int]] = {}

    @property
    def dates(self) -> list[str]:
        """The days covered, newest first, as ``YYYY-MM-DD``."""
        return [(self.start_date - timedelta(days=back)).isoformat() for back in range(self.days_previous)]

    @property
    def processed(self) -> dict[str, int]:
        return self._counts(keys.STAT_PROCESSED)

    @property
    def failed(self) -> dict[str, int]:
        return self._counts(keys.STAT_FAILED)

    @property
    def expired(self) -> dict[str, int]:
        return self._counts(keys.STAT_EXPIRED)

    @property
    def rescheduled(self) -> dict[str, int]:
        return self._counts(keys.STAT_RESCHEDULED)

    def _counts(self, stat: str) -> dict[str, int]:
        if stat not in self._cache:
            days = self.dates
            names = [keys.daily_stat(stat, day) for day in days]
            values = self._access.run(lambda conn: conn.mget(names))
            self._cache[stat] = {day: as_int(value) for day, value in zip(days, values, strict=True)}
        return dict(self._cache[stat])


def _utc_date(start: date | None) -> date:
    if start is None:
        return datetime.now(UTC).date()
    if isinstance(start, datetime):
        return start.astimezone(UTC).date() if start.tzinfo else start.date()
    if isinstance(start, date):
        return start
    raise TypeError(f"start_date must be a date, got {start!r}")


class Stats(RedisAccess):
    """A snapshot of the cluster's counters, taken in one pipeline at construction."""

    History = History

    def __init__(self, *, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        super().__init__(config, pool)

        def snapshot(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            pipe.get(keys.STAT_PROCESSED)
            pipe.get(keys.STAT_FAILED)
            pipe.get(keys.STAT_EXPIRED)
            pipe.get(keys.STAT_RESCHEDULED)
            pipe.zcard(keys.SCHEDULE)
            pipe.zcard(keys.RETRY)
            pipe.zcard(keys.DEAD)
            pipe.scard(keys.PROCESSES)
            pipe.lindex(keys.queue("default"), -1)
            return list(pipe.execute())

        processed, failed, expired, rescheduled, scheduled, retries, dead, processes, tail = self.run(snapshot)
        self.processed: int = as_int(processed)
        self.failed: int = as_int(failed)
        self.expired: int = as_int(expired)
        #: Runs that put their job back to run later (a rate limiter's
        #: reschedule) instead of finishing: Wurk's own counter, not in ``processed``.
        self.rescheduled: int = as_int(rescheduled)
        self.scheduled_size: int = int(scheduled)
        self.retry_size: int = int(retries)
        self.dead_size: int = int(dead)
        self.processes_size: int = int(processes)
        #: Seconds the oldest job of the ``default`` queue had waited at the snapshot.
        self.default_queue_latency: float = raw_latency(tail, time.time())

    def __repr__(self) -> str:
        return (
            f"<Stats processed={self.processed} failed={self.failed} scheduled={self.scheduled_size} "
            f"retry={self.retry_size} dead={self.dead_size} processes={self.processes_size}>"
        )

    # -- re-querying readers -------------------------------------------------------

    def _queue_names(self, conn: Any) -> list[str]:
        return [text(name) for name in conn.sscan_iter(keys.QUEUES)]

    @property
    def enqueued(self) -> int:
        """Jobs waiting in every known queue (one LLEN per queue, pipelined)."""
        return sum(self.queues.values())

    @property
    def workers_size(self) -> int:
        """Jobs running right now: the ``busy`` field summed over every process."""
        return int(self.run(busy_threads))

    @property
    def queues(self) -> dict[str, int]:
        """``{queue: size}``, largest first."""

        def sizes(conn: Any) -> dict[str, int]:
            names = self._queue_names(conn)
            if not names:
                return {}
            pipe = conn.pipeline(transaction=False)
            for name in names:
                pipe.llen(keys.queue(name))
            pairs = zip(names, (int(size) for size in pipe.execute()), strict=True)
            return dict(sorted(pairs, key=lambda pair: (-pair[1], pair[0])))

        return self.run(sizes)

    @property
    def queue_summaries(self) -> list[QueueSummary]:
        """Name, size, latency and paused flag of every queue, largest first."""

        def summaries(conn: Any) -> list[QueueSummary]:
            names = self._queue_names(conn)
            if not names:
                return []
            pipe = conn.pipeline(transaction=False)
            for name in names:
                pipe.llen(keys.queue(name))
                pipe.lindex(keys.queue(name), -1)
                pipe.sismember(keys.PAUSED, name)
            replies = pipe.execute()
            now = time.time()
            found = [
                QueueSummary(name, int(replies[3 * i]), raw_latency(replies[3 * i + 1], now), bool(replies[3 * i + 2]))
                for i, name in enumerate(names)
            ]
            return sorted(found, key=lambda summary: (-summary.size, summary.name))

        return self.run(summaries)

    # -- writes --------------------------------------------------------------------

    def reset(self, *names: str | Iterable[str]) -> list[str]:
        """Set counters back to 0 (``SET``, so they keep reading as numbers).

        With no names: ``processed``, ``failed``, ``expired`` and
        ``rescheduled``. Names may be given as separate arguments or as a
        list; unknown names are ignored. Returns the names reset.
        """
        wanted: list[str] = []
        for name in names:
            wanted.extend([name] if isinstance(name, str) else list(name))
        chosen = list(RESETTABLE) if not names else [name for name in RESETTABLE if name in wanted]
        if not chosen:
            return []

        def zero(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            for name in chosen:
                pipe.set(RESETTABLE[name], 0)
            pipe.execute()

        self.run(zero)
        return chosen
