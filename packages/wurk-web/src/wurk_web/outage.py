"""The dashboard while Redis cannot be used: a 503 that says why, and few log lines.

Every page and JSON route needs Redis. When it is down, each request would
otherwise end in "Internal Server Error" and a traceback of a hundred lines
in the terminal, per request and per live update. Instead each answers 503
with one line naming the server (its password masked) and what to do, and
the failures go to the configuration's outage log (``config.outage_log``),
which says once that Redis is unreachable, reminds once a minute, and says
when it answers again, as a worker's log does. Nothing is cached: the first
request after Redis is back is served as usual.

A page is only a shell its script fills from the JSON routes, so rendering
one never touches Redis; it PINGs first (one attempt, no retries), so that a
dashboard opened during an outage shows the reason rather than an empty page.
"""

from __future__ import annotations

import html
import logging
from typing import TYPE_CHECKING

import redis

from wurk.cli.main import explain
from wurk.errors import ConfigurationError, RedisConnectionError
from wurk.redis.connection import PoolTimeoutError, mask_url
from wurk_web.pool import redis_pool

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

__all__ = ["FAILURES", "RETRY_AFTER", "page_body", "ping", "recovered", "report"]

log = logging.getLogger("wurk.web")

#: What a handler raises when Redis cannot be used: redis-py's errors, the
#: pool giving up (``RedisConnectionError``), and a URL or database the pool
#: refuses on its first use (``ConfigurationError``).
FAILURES: tuple[type[Exception], ...] = (redis.RedisError, RedisConnectionError, ConfigurationError)

#: Seconds a 503 asks the browser (``Retry-After``) to wait before asking again.
RETRY_AFTER = 5

#: How the outage log names the dashboard's failures.
CONTEXT = "dashboard"


def ping(config: Config, pool: RedisPool | None = None) -> None:
    """One PING on the dashboard's pool (or on ``pool``, a shard's), without
    the pool's retries: a page should say at once that Redis is away, not
    after the back-off."""
    (pool or redis_pool(config)).client.ping()


def report(config: Config, exc: BaseException, *, shard: str | None = None) -> str:
    """Log ``exc`` in proportion and return the one line that says what is
    wrong and what to do: an outage goes to the outage log (one line an
    outage), another failure to one line of its own, never a traceback.
    ``shard``: the request was for that shard, whose server is named."""
    url = str(config.shards.get(shard, {}).get("url") if shard else config.redis["url"])
    message = explain(exc, url).format_message()
    if _unreachable(exc):
        if not isinstance(exc, RedisConnectionError):  # redis-py's own, from the PING: name the server
            exc = RedisConnectionError(mask_url(url), exc)
        config.outage_log.error(exc, CONTEXT)
    else:
        log.warning("dashboard: %s", message)
    return message


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` means the server cannot be reached (an outage), rather
    than that it answered with an error or the pool had no free connection."""
    unreachable = (RedisConnectionError, redis.ConnectionError, redis.TimeoutError)
    return isinstance(exc, unreachable) and not isinstance(exc, PoolTimeoutError)


def recovered(config: Config) -> None:
    """Redis answered: end the outage the log holds open, if there is one."""
    config.outage_log.recovered()


def page_body(message: str) -> str:
    """The body of a page shown while Redis cannot be used."""
    return (
        f'<p class="notice error" role="alert">{html.escape(message)}</p>\n'
        "<p>This page works again as soon as Redis answers: reload it then.</p>"
    )
