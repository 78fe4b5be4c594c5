"""The leader's rollup: history samples and day totals for the dashboard's charts.

Every process runs this loop, but only the cluster leader acts, so the fleet
writes one sample per interval however many processes it has. Every
``metrics_rollup_interval`` seconds (60) the leader:

1. appends one entry to the ``wurk:history`` stream: the processed and failed
   totals, the enqueued, busy, retry, scheduled, dead and process counts, and
   each queue's depth and latency (a JSON object under ``queues``); the stream
   is trimmed to about ``history_stream_cap`` entries (10,000: a week at one a
   minute);
2. adds every finished minute of execution metrics to the per-class day totals
   ``wurk:history:jobs:<YYYYMMDD>`` (kept 90 days, where the one-minute hashes
   live only 8 hours). A minute counts as finished two minutes after it ends,
   so the last heartbeats' flushes are in; a script advances a cursor in the
   same step, so no minute is added twice, even across a change of leader.

Both are best effort: a failure is reported and the next tick carries on.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from wurk.api._base import as_int, seconds_since, text
from wurk.client import payload as wire
from wurk.metrics import keys
from wurk.plugins.component import Component
from wurk.redis import keys as core_keys
from wurk.server.leader import leadership

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

    from wurk.config.configuration import Config

DEFAULT_INTERVAL = 60.0
DEFAULT_STREAM_CAP = 10_000
#: How long after a minute ends before its metrics are taken as complete.
SETTLE_SECONDS = 60
#: The one-minute hashes live 8 hours; older minutes are gone anyway.
BACKLOG_MINUTES = keys.ONE_MINUTE_TTL // 60


class MetricsRollup(Component):
    """A named thread that samples and rolls up while this process leads.

    It asks :func:`wurk.server.leader.leadership` at each tick rather than holding the
    leader, so any process with a registered leader gates it the same way."""

    name = "wurk-metrics-rollup"
    context = "metrics rollup"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.interval = float(config.option("metrics_rollup_interval", DEFAULT_INTERVAL))
        self.stream_cap = int(config.option("history_stream_cap", DEFAULT_STREAM_CAP))

    def tick(self) -> None:
        """One round, while this process leads: a history sample, then the
        day totals of finished minutes."""
        if not leadership(self.config).leading:
            return
        now = time.time()
        self.record_sample(now)
        self.roll_up(now)

    def record_sample(self, now: float) -> str:
        """Append one gauge sample to the history stream; returns its entry id."""
        sampled = self.config.redis_pool.execute(lambda conn: sample(conn, now))
        # redis-py types ``fields`` as an invariant ``dict`` of its own unions
        # (a ``Mapping`` would do), which no ``dict[str, str]`` matches.
        fields = cast("dict[FieldT, EncodableT]", sampled)
        entry = self.config.redis_pool.execute(
            lambda conn: conn.xadd(keys.HISTORY_STREAM, fields, maxlen=self.stream_cap, approximate=True)
        )
        return text(entry)

    def roll_up(self, now: float) -> int:
        """Add every finished, not yet added minute to the day totals; returns how many minutes."""
        newest = (int(now) - 60 - SETTLE_SECONDS) // 60 * 60
        pool = self.config.redis_pool
        cursor = as_int(pool.execute(lambda conn: conn.get(keys.ROLLUP_CURSOR)))
        first = max(cursor + 60, newest - (BACKLOG_MINUTES - 1) * 60)
        minutes = list(range(first, newest + 1, 60))
        if not minutes:
            return 0

        def add(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for minute in minutes:
                at = datetime.fromtimestamp(minute, UTC)
                self.config.scripts.queue(
                    "core.metrics_rollup",
                    pipe,
                    [keys.ROLLUP_CURSOR, keys.one_minute(at), keys.daily_jobs(at.date())],
                    [minute, keys.DAILY_TTL],
                )
            return self.config.scripts.execute(pipe)

        return sum(1 for reply in pool.execute(add) if int(reply) >= 0)


def sample(conn: Any, now: float) -> dict[str, str]:
    """The cluster's gauges right now, as stream fields."""
    queues = sorted(text(name) for name in conn.sscan_iter(core_keys.QUEUES))
    members = list(conn.sscan_iter(core_keys.PROCESSES))
    pipe = conn.pipeline(transaction=False)
    for name in queues:
        pipe.llen(core_keys.queue(name))
        pipe.lindex(core_keys.queue(name), -1)
    pipe.get(core_keys.STAT_PROCESSED)
    pipe.get(core_keys.STAT_FAILED)
    for sorted_set in (core_keys.RETRY, core_keys.SCHEDULE, core_keys.DEAD):
        pipe.zcard(sorted_set)
    for member in members:
        pipe.hget(member, "busy")
    replies = pipe.execute()
    depths = {}
    for index, name in enumerate(queues):
        size, oldest = replies[index * 2], replies[index * 2 + 1]
        depths[name] = [int(size), round(latency(oldest, now), 3)]
    rest = replies[len(queues) * 2 :]
    processed, failed, retry, scheduled, dead = (as_int(value) for value in rest[:5])
    return {
        "processed": str(processed),
        "failed": str(failed),
        "enqueued": str(sum(size for size, _ in depths.values())),
        "busy": str(sum(as_int(value) for value in rest[5:])),
        "retry": str(retry),
        "scheduled": str(scheduled),
        "dead": str(dead),
        "processes": str(len(members)),
        "queues": json.dumps(depths, separators=(",", ":"), ensure_ascii=False),
    }


def latency(oldest: bytes | None, now: float) -> float:
    """Seconds the oldest job has waited: from ``enqueued_at``, else ``created_at``."""
    if oldest is None:
        return 0.0
    try:
        job = wire.loads(oldest)
    except ValueError:
        return 0.0
    if not isinstance(job, dict):
        return 0.0
    return seconds_since(job.get("enqueued_at", job.get("created_at")), now)
