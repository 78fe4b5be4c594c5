"""The loop registry in Redis: writing, pruning, removing and reading loops.

The keys are Sidekiq Enterprise's (see :mod:`wurk_cron.keys`): the
``periodic`` SET of lids, one ``loops:<lid>`` HASH each, and a capped
``loop-history:<lid>`` LIST. Registration writes the code's view of a loop
(schedule, class, options, zone) and leaves the runtime's alone: the fire
marks, and ``paused`` once it exists, since a pause from the dashboard must
survive every later boot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from wurk_cron import keys
from wurk_cron.loop import Loop, canonical_options

if TYPE_CHECKING:
    import redis

    from wurk.config.configuration import Config

__all__ = ["LoopSet", "prune", "reset", "unregister", "write_loop"]


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def decode_fields(fields: dict[Any, Any]) -> dict[str, str]:
    return {_text(name): _text(value) for name, value in fields.items()}


def write_loop(config: Config, loop: Loop) -> None:
    """Persist a registration; idempotent, so every process may boot it."""

    def write(conn: redis.Redis) -> None:
        pipe = conn.pipeline(transaction=True)
        pipe.sadd(keys.PERIODIC, loop.lid)
        fields = {
            keys.SCHEDULE: loop.schedule,
            keys.KLASS: loop.klass,
            keys.OPTIONS: canonical_options(loop.options),
            keys.TZ: loop.tz_name or "",
        }
        pipe.hset(keys.loop(loop.lid), mapping=fields)  # type: ignore[arg-type]
        pipe.hsetnx(keys.loop(loop.lid), keys.PAUSED, "1" if loop.paused else "0")
        pipe.execute()

    config.redis_pool.execute(write)


def unregister(config: Config, lid: str) -> bool:
    """Remove a loop, its hash and its history; whether it was registered."""

    def remove(conn: redis.Redis) -> int:
        pipe = conn.pipeline(transaction=True)
        pipe.srem(keys.PERIODIC, lid)
        pipe.unlink(keys.loop(lid), keys.history(lid))
        removed, _ = pipe.execute()
        return int(removed)

    return bool(config.redis_pool.execute(remove))


def prune(config: Config, classes: Iterable[str], kept: Iterable[str]) -> list[str]:
    """Unregister every loop of one of ``classes`` whose lid is not in ``kept``.

    Scoped by class so that a process registering some loops never touches
    the others, and one registering none deletes nothing. Returns the lids
    removed.
    """
    wanted, keep = set(classes), set(kept)
    if not wanted:
        return []
    removed = []
    for lid, klass in _classes(config):
        if klass in wanted and lid not in keep and unregister(config, lid):
            removed.append(lid)
    return removed


def _classes(config: Config) -> list[tuple[str, str]]:
    def read(conn: redis.Redis) -> list[tuple[str, str]]:
        lids = sorted(_text(lid) for lid in conn.smembers(keys.PERIODIC))
        pipe = conn.pipeline(transaction=False)
        for lid in lids:
            pipe.hget(keys.loop(lid), keys.KLASS)
        return [(lid, _text(klass or b"")) for lid, klass in zip(lids, pipe.execute(), strict=True)]

    return config.redis_pool.execute(read)


def reset(config: Config) -> int:
    """Remove every loop of the cluster. A test helper: never call it in production."""
    lids = LoopSet(config).lids()
    return sum(unregister(config, lid) for lid in lids)


class LoopSet:
    """Every registered loop, read from Redis (the dashboard's list view).

    ``each`` re-reads Redis as it goes; it is sized for listing loops, not
    for a hot path.
    """

    def __init__(self, config: Config | None = None) -> None:
        if config is None:
            from wurk import current_config

            config = current_config()
        self.config = config

    def lids(self) -> list[str]:
        members = self.config.redis_pool.execute(lambda conn: conn.smembers(keys.PERIODIC))
        return sorted(_text(lid) for lid in members)

    @property
    def size(self) -> int:
        return int(self.config.redis_pool.execute(lambda conn: conn.scard(keys.PERIODIC)))

    def __len__(self) -> int:
        return self.size

    def fetch(self, lid: str) -> Loop | None:
        """The loop ``lid``, or None when it is not registered."""
        fields = self.config.redis_pool.execute(lambda conn: conn.hgetall(keys.loop(lid)))
        if not fields:
            return None
        return Loop.from_hash(lid, decode_fields(fields), self.config)

    def each(self) -> Iterator[Loop]:
        for lid in self.lids():
            loop = self.fetch(lid)
            if loop is not None:  # unregistered while we were listing
                yield loop

    def __iter__(self) -> Iterator[Loop]:
        return self.each()
