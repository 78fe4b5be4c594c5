"""The Redis pools of one configuration, beyond what each capsule keeps.

A worker process keeps disjoint pools on purpose (each capsule's main and
fetch pools, any extra pool a plugin asks for, such as the dashboard's), so
that a burst on one never starves another. Every one of them is built by
:meth:`ConfigPools.new`, which is what lets :meth:`ConfigPools.reset` and
:meth:`ConfigPools.reset_after_fork` reach them all: a pool nobody tracked
would keep a dead server's sockets after ``config.redis = ...``, or the
parent's sockets in a forked child.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from wurk.redis.connection import RedisPool

if TYPE_CHECKING:
    from wurk.config.configuration import Config


class LiveHandlers:
    """The current ``redis_error_handlers`` list, read at each report, so that
    pools built earlier also call handlers registered (or assigned) later."""

    def __init__(self, config: Config) -> None:
        self._config = config

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._config.option("redis_error_handlers") or ()))


class ConfigPools:
    """Builds, tracks and resets the pools of one configuration."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._lock = threading.RLock()
        #: Every pool built by :meth:`new` since the last reset.
        self.custom: list[RedisPool] = []
        #: The pools asked for by name through :meth:`shared`.
        self._shared: dict[str, RedisPool] = {}

    def new(self, size: int, name: str = "custom", **overrides: Any) -> RedisPool:
        """An extra pool on the configured server (``overrides`` change its
        connection options); :meth:`reset` drops it too."""
        options = {**self._config.redis, **overrides}
        pool = RedisPool(options, size=size, name=name, error_handlers=LiveHandlers(self._config))
        with self._lock:
            self.custom.append(pool)
        return pool

    def shared(self, name: str, size: int, **overrides: Any) -> RedisPool:
        """The pool called ``name``: built by :meth:`new` on the first ask,
        the same one for every later ask (whose ``size`` and ``overrides``
        are then ignored) until :meth:`reset`."""
        with self._lock:
            pool = self._shared.get(name)
            if pool is None:
                pool = self._shared[name] = self.new(size, name, **overrides)
            return pool

    def shard(self, name: str, options: dict[str, Any], size: int) -> RedisPool:
        """The pool of shard ``name``, on ``options`` alone (nothing of the
        main server's options carries over: another server may need other
        credentials and certificates), built on the first ask."""
        key = f"shard:{name}"
        with self._lock:
            pool = self._shared.get(key)
            if pool is None:
                pool = RedisPool(options, size=size, name=key, error_handlers=LiveHandlers(self._config))
                self._shared[key] = pool
                self.custom.append(pool)
            return pool

    def reset(self, capsule_pools: Iterable[Any]) -> None:
        """Disconnect and forget every pool, the capsules' (``capsule_pools``:
        objects with ``reset_redis_pools``) included; they are rebuilt on next
        use from the current connection options."""
        with self._lock:
            pools, self.custom = self.custom, []
            self._shared = {}
        for owner in capsule_pools:
            owner.reset_redis_pools()
        for pool in pools:
            pool.disconnect()

    def reset_after_fork(self) -> None:
        """In a forked child: every pool keeps its identity, so code holding
        one keeps working, but drops the parent's connections and reconnects
        afresh. The lock is replaced first: a parent thread may have held it."""
        self._lock = threading.RLock()
        for pool in self.custom:  # the shared pools among them
            pool.reset_after_fork()
