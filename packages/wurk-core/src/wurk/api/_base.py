"""What every Data API object shares: where it reads and writes, and how
Redis replies become Python values.

An API object talks to the Redis of one configuration (the process default
unless given) through that configuration's main pool, or through a ``pool``
passed explicitly (a second Redis shard, say: a pool or a shard's name). Every call goes through
:meth:`wurk.redis.connection.RedisPool.execute`, so a failover or a dropped
connection is retried under the same rules as the rest of Wurk.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from wurk.config import shards

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

T = TypeVar("T")

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: Entries read per round trip when walking a queue or a sorted set.
PAGE_SIZE = 50


class RedisAccess:
    """A configuration plus an optional pool override: a pool, or the name
    of a configured shard (``Queue("mail", pool="east")``)."""

    def __init__(self, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        if config is None:  # the running job's configuration, else the process default
            from wurk.config.defaults import current_config

            config = current_config()
        self.config = config
        self._pool = shards.resolve(config, pool)

    @property
    def pool(self) -> RedisPool:
        return self._pool or self.config.redis_pool

    def run(self, operation: Callable[[redis.Redis], T]) -> T:
        """``operation(client)`` under the pool's transient-failure rules."""
        return self.pool.execute(operation)


def text(value: bytes | str | None) -> str:
    """A Redis reply as text (names are ASCII; anything else is shown, not lost)."""
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def as_int(value: Any) -> int:
    """A counter as Redis stores it: missing or garbled reads as 0."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def busy_threads(conn: Any) -> int:
    """Jobs running right now: the ``busy`` field summed over every member of
    ``processes`` (lapsed ones count 0), one pipelined round trip."""
    from wurk.redis import keys

    members = list(conn.sscan_iter(keys.PROCESSES))
    if not members:
        return 0
    pipe = conn.pipeline(transaction=False)
    for member in members:
        pipe.hget(member, "busy")
    return sum(as_int(value) for value in pipe.execute())


def time_from_stamp(stamp: Any) -> datetime | None:
    """A payload timestamp as an aware UTC datetime.

    Sidekiq 8 writes integer epoch milliseconds; Sidekiq 7 and older wrote
    float epoch seconds. The JSON type tells them apart, as it does in Ruby.
    """
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return None
    try:
        if isinstance(stamp, int):
            return EPOCH + timedelta(milliseconds=stamp)
        return datetime.fromtimestamp(stamp, UTC)
    except (OverflowError, OSError, ValueError):
        return None  # out of datetime's range: unreadable, not fatal


def seconds_since(stamp: Any, now: float) -> float:
    """Seconds from a payload timestamp (either form) to ``now``; never negative,
    so a writer whose clock runs ahead does not produce a negative latency."""
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        return 0.0
    seconds = stamp / 1000.0 if isinstance(stamp, int) else stamp
    return max(0.0, now - seconds)


def epoch_seconds(value: Any) -> float:
    """A score: a ``datetime`` (naive means local time), epoch seconds, or a
    numeric string such as the first half of a ``SortedEntry.id``."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, date):
        raise TypeError(f"a score needs a time of day: pass a datetime, not the date {value!r}")
    if isinstance(value, bool):
        raise TypeError(f"a score must be a datetime or epoch seconds, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str | bytes):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"not a score: {value!r}") from None
    raise TypeError(f"a score must be a datetime or epoch seconds, got {value!r}")
