"""The limiters' global configuration: ``backoff``, ``redis`` and ``errors``.

One :class:`LimiterConfig` belongs to each ``wurk.Config`` (a service of
it, never a module global). The middleware and every limiter read it at each
job and each acquire, so a change made while the process runs takes effect
at once::

    @Limiter.configure
    def limits(settings):
        settings.backoff = lambda limiter, job, exc: 60 * job["overrated"]
        settings.redis = {"size": 10, "url": "redis://limiter:6379/0"}
        settings.errors.append(UpstreamRateLimited)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import wurk
from wurk.redis.connection import RedisPool
from wurk_limiter import checks
from wurk_limiter.errors import OverLimit

if TYPE_CHECKING:
    from collections.abc import Mapping

#: The name the settings are registered under on a ``wurk.Config``.
SERVICE = "limiter"

#: Connections in a dedicated pool when ``redis`` is a dict without ``size``.
DEFAULT_POOL_SIZE = 10


class LimiterConfig:
    """``backoff``: the fallback delay for limiters without their own (seconds,
    or ``backoff(limiter, job, exc) -> seconds``); ``None`` means the default
    ``300 × overrated + rand(300) + 1``.

    ``redis``: ``None`` shares the configuration's pool; a dict (``size``,
    default 10, plus connection options such as ``url``) builds a dedicated
    pool, so limiter traffic cannot starve fetching; or a built
    ``wurk.redis.connection.RedisPool``.

    ``errors``: exception classes the middleware treats exactly like
    :class:`OverLimit` (a client library's "429" error), OverLimit included.
    """

    def __init__(self, config: wurk.Config) -> None:
        self._config = config
        self.backoff: Any = None
        self.redis: Mapping[str, Any] | RedisPool | None = None
        self.errors: list[type[BaseException]] = [OverLimit]
        self._lock = threading.Lock()
        self._built: tuple[dict[str, Any], RedisPool] | None = None

    def pool(self) -> RedisPool:
        """The pool limiter traffic uses now, following ``redis`` as it is."""
        chosen = self.redis
        if chosen is None:
            return self._config.redis_pool
        if isinstance(chosen, RedisPool):
            return chosen
        options = dict(chosen)
        with self._lock:
            if self._built is None or self._built[0] != options:
                size = int(options.pop("size", DEFAULT_POOL_SIZE))
                pool = self._config.new_redis_pool(size, name="limiter", **options)
                self._built = (dict(chosen), pool)
            return self._built[1]

    def catches(self) -> tuple[type[BaseException], ...]:
        """The exception classes the middleware handles."""
        return (OverLimit, *(kind for kind in self.errors if kind is not OverLimit))

    def check(self) -> None:
        """Refuse a ``backoff`` of the wrong kind with a message saying so."""
        checks.backoff(self.backoff)


def limiter_config(config: wurk.Config | None = None) -> LimiterConfig:
    """The limiter settings of ``config`` (the one running the code at hand when omitted)."""
    owner = config if config is not None else wurk.current_config()
    found: LimiterConfig = owner.lookup(SERVICE, LimiterConfig)
    return found
