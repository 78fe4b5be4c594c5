"""The Redis pools of one configuration, beyond what each capsule keeps.

A worker process keeps disjoint pools on purpose (each capsule's main and
fetch pools, the dashboard's web pool, any extra pool a plugin asks for), so
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

from wurk.errors import ConfigurationError
from wurk.redis_pool import RedisPool

if TYPE_CHECKING:
    from wurk.config import Config

#: Seconds the dashboard waits for a free connection: a page that cannot get
#: one soon should say so rather than hang the browser.
WEB_POOL_TIMEOUT = 1.0


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
        self._web: RedisPool | None = None

    def new(self, size: int, name: str = "custom", **overrides: Any) -> RedisPool:
        """An extra pool on the configured server (``overrides`` change its
        connection options); :meth:`reset` drops it too."""
        options = {**self._config.redis, **overrides}
        pool = RedisPool(options, size=size, name=name, error_handlers=LiveHandlers(self._config))
        with self._lock:
            self.custom.append(pool)
        return pool

    @property
    def web(self) -> RedisPool:
        """The dashboard's pool, ``web_pool_size`` connections (a setting of
        wurk-web), built on first use."""
        with self._lock:
            if self._web is None:
                size = self._config.get("web_pool_size")
                if size is None:
                    raise ConfigurationError(
                        "the web pool is sized by web_pool_size, a setting of the wurk-web plugin: "
                        "is wurk-web installed, and not disabled in WURK_DISABLE_PLUGINS "
                        "or config['disabled_plugins']?"
                    )
                options = {**self._config.redis, "pool_timeout": WEB_POOL_TIMEOUT}
                self._web = RedisPool(options, size=size, name="web", error_handlers=LiveHandlers(self._config))
            return self._web

    def reset(self, capsule_pools: Iterable[Any]) -> None:
        """Disconnect and forget every pool, the capsules' (``capsule_pools``:
        objects with ``reset_redis_pools``) included; they are rebuilt on next
        use from the current connection options."""
        with self._lock:
            pools, self.custom = self.custom, []
            self._web = None
        for owner in capsule_pools:
            owner.reset_redis_pools()
        for pool in pools:
            pool.disconnect()

    def reset_after_fork(self) -> None:
        """In a forked child: every pool keeps its identity, so code holding
        one keeps working, but drops the parent's connections and reconnects
        afresh. The lock is replaced first: a parent thread may have held it."""
        self._lock = threading.RLock()
        for pool in [*self.custom, *([self._web] if self._web is not None else [])]:
            pool.reset_after_fork()
