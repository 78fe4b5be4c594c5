"""Redis connection pools and the transient-failure rules.

A worker process keeps disjoint pools on purpose (main, fetch, web), so that a
burst on one never starves another. Each :class:`RedisPool` wraps a blocking
redis-py pool of a fixed size and adds the rules by which a short outage is
absorbed instead of failing a job:

* ``READONLY`` / ``NOREPLICAS`` / ``UNBLOCKED`` mean a failover happened under
  us: drop the pool's connections and retry once, at once.
* A connection error or socket timeout: drop the connections, sleep
  ``0.5 × 2ⁿ + rand × 0.25`` seconds and retry, three attempts in all —
  unless the command had already gone out and the operation is a write that
  must not be applied twice (``execute(..., once=True)``): then nobody knows
  whether the server applied it, and :class:`wurk.errors.LostReplyError` is
  raised at once for the caller to decide. Writes that are safe to repeat —
  reads, ``SET``, ``HSET``, ``DEL``, and every script that recognises its
  own re-sent call (a fence, see :mod:`wurk.redis.fence`) — are retried as before.
* No free connection within ``pool_timeout``: one more try after 0.1–0.3 s.
  A pool that stays starved is undersized, and retrying longer would hide it.

Every retry and every final give-up is reported to the ``on_redis_error``
handlers. A give-up on connectivity raises
:class:`wurk.errors.RedisConnectionError`, whose message names the URL.

A URL that cannot work (no scheme, a database that is not a whole number, a
database the server does not have) is a :class:`wurk.errors.ConfigurationError`
naming the URL, raised when the pool is built or on its first use: retrying
cannot fix it, and redis-py's own messages do not say which setting is wrong.
So is a TLS problem (a certificate not trusted, a client certificate missing,
a plain URL for a TLS-only port; see :mod:`wurk.redis.tls`).

redis-py's own retry layer is switched off so that the rules above are the only
ones in force, and so that the number of attempts is exactly what the
documentation says.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, ReadOnlyError, ResponseError
from redis.exceptions import ConnectionError as RedisPyConnectionError
from redis.exceptions import TimeoutError as RedisPyTimeoutError
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from wurk.errors import ConfigurationError, LostReplyError, RedisConnectionError
from wurk.redis import sentinel
from wurk.redis.tls import tls_problem

#: The plugin API (docs/plugins.md): a feature's own pool is a RedisPool, and
#: a URL it shows anyone goes through ``mask_url`` first.
__all__ = ["DEFAULT_URL", "PoolTimeoutError", "RedisPool", "mask_url"]

T = TypeVar("T")

DEFAULT_URL = "redis://localhost:6379/0"
DEFAULT_POOL_TIMEOUT = 1.0
DEFAULT_CONNECT_TIMEOUT = 1.0
DEFAULT_READ_TIMEOUT = 2.5
CONNECTION_ATTEMPTS = 3
FAILOVER_PREFIXES = ("READONLY", "NOREPLICAS", "UNBLOCKED")
URL_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel")
# The server's reply to SELECT of a database it does not have.
NO_SUCH_DB = "DB index is out of range"

# Keys of ``config.redis`` that shape the pool rather than the connection.
STRUCTURAL_KEYS = frozenset({"size", "name"})

logger = logging.getLogger("wurk.redis")

RedisErrorHandler = Callable[[dict[str, Any]], object]


class PoolTimeoutError(RedisPyConnectionError):
    """No connection became free within the pool's checkout timeout."""


#: Failures that mean "Redis is not there right now" (after the pool's retries).
TRANSIENT = (RedisConnectionError, RedisPyConnectionError)

#: What the outage log counts: the above, and a socket that stopped answering.
UNREACHABLE = (*TRANSIENT, RedisPyTimeoutError)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the server cannot be reached (rather than that it
    answered with an error). A pool with no free connection is not an outage
    but an undersized pool, and is reported on its own."""
    return isinstance(exc, UNREACHABLE) and not isinstance(exc, PoolTimeoutError)


class _Sends(threading.local):
    """How many commands this thread has started to send, ever: an attempt
    that raised after the count moved may have been applied by the server."""

    count = 0


_sends = _Sends()


class _CountingSends:
    """Connection mixin: counts a send once the connection is open, so a
    refused or timed-out connect still counts as nothing sent."""

    _sock: Any

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if self._sock is None:
            self.connect()  # type: ignore[attr-defined]
        _sends.count += 1
        super().send_packed_command(command, check_health)  # type: ignore[misc]


_counting_classes: dict[type, type] = {}


def _counting(connection_class: type) -> type:
    counting = _counting_classes.get(connection_class)
    if counting is None:
        counting = type(f"Counting{connection_class.__name__}", (_CountingSends, connection_class), {})
        _counting_classes[connection_class] = counting
    return counting


#: The argument types hiredis packs exactly as redis-py's encoder does.
_PLAIN_ARGS = frozenset((str, bytes, int))


def _pack(connection: Any, commands: Sequence[tuple[Any, ...]]) -> Any:
    """The commands in the wire format. Packed by hiredis in one call each
    when every argument is text, bytes or an integer and the connection
    encodes text as strict UTF-8, which gives the bytes redis-py's encoder
    gives: a claim carries a job's payload for each acknowledgement, and
    redis-py encoded them one Python call at a time (a tenth of a claim's
    cost). Anything else goes through redis-py."""
    encoder = connection.encoder
    # Each command's argument types are checked in C: a claim has dozens.
    if (
        encoder.encoding == "utf-8"
        and encoder.encoding_errors == "strict"
        and all(_PLAIN_ARGS.issuperset(map(type, command)) for command in commands)
    ):
        # One buffer, one write: the connection writes each item of a list apart.
        return [b"".join([hiredis.pack_command(command) for command in commands])]
    return connection.pack_commands(commands)


def _exchange(connection: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Send ``commands`` in one write on ``connection`` and read every reply;
    on an error the caller drops the connection (replies may be unread)."""
    connection.send_packed_command(_pack(connection, commands))
    return [connection.read_response() for _ in commands]


class _BlockingPool(redis.BlockingConnectionPool):
    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return redis.BlockingConnectionPool.get_connection(self, *args, **kwargs)
        except RedisPyConnectionError as exc:
            if str(exc) == "No connection available.":
                raise PoolTimeoutError(f"no free connection within {self.timeout}s") from exc
            raise


class _SentinelBlockingPool(SentinelConnectionPool, _BlockingPool):
    """A pool whose master address comes from Sentinel, and that waits for a
    free connection like the others instead of failing at once."""


def mask_url(url: str) -> str:
    """The URL with its password (and any ``…password`` in its query)
    replaced by ``***``, safe to log.

    Read as text rather than through ``urlsplit``, which would lose all but
    one host of a ``redis+sentinel://`` URL, and which reads ``user:secret@host``
    written without a scheme as a scheme and a path: a malformed URL is
    exactly the one that ends up in an error message. The userinfo runs to
    the last ``@`` before the query, so a password holding ``/`` is masked
    whole too.
    """
    if "://" not in url:
        return re.sub(r"^([^@/]*?:)[^@/]*@", r"\1***@", url)
    scheme, _, rest = url.partition("://")
    head, mark, query = rest.partition("?")
    userinfo, at, after = head.rpartition("@")
    if at and ":" in userinfo:
        head = f"{userinfo.partition(':')[0]}:***@{after}"
    # A query may carry a secret too: ``ssl_password`` (a client key's
    # passphrase), ``sentinel_password``.
    query = re.sub(r"((?:^|&)[^=&]*password=)[^&#]*", r"\1***", query)
    return f"{scheme}://{head}{mark}{query}"


def check_url(url: str) -> None:
    """Refuse a Redis URL that cannot work, with a message saying how to fix it.

    redis-py would raise a bare ``ValueError`` for a missing scheme and would
    silently use database 0 for ``redis://host/abc``; both hide which setting
    is wrong.
    """
    shown = mask_url(url)
    where = "Set REDIS_URL (or config.redis['url'])"
    if "://" not in url:
        hint = f"redis://{shown}" + ("" if "/" in shown else "/0")
        raise ConfigurationError(f"Redis URL {shown!r} has no scheme. {where} to a URL such as {hint}.")
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        raise ConfigurationError(f"Redis URL {shown!r} has a port that is not a number. {where} correctly.") from None
    if parts.scheme not in URL_SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in URL_SCHEMES)
        raise ConfigurationError(f"Redis URL {shown!r} has scheme {parts.scheme}://; use one of {schemes}.")
    if parts.scheme != "unix":
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise ConfigurationError(
                f"Redis URL {shown!r}: the database {db!r} is not a whole number; the path is the database, as in /0."
            )


def _db_of(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return next((value for key, value in parse_qsl(parts.query) if key == "db"), "0")
    if sentinel.is_sentinel_url(url):  # /service_name/db
        return parts.path.strip("/").partition("/")[2] or "0"
    return parts.path.strip("/") or "0"


def _is_failover(exc: BaseException) -> bool:
    if isinstance(exc, ReadOnlyError):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(FAILOVER_PREFIXES)


class RedisPool:
    """A named, fixed-size pool of Redis connections with Wurk's retry rules.

    ``options`` is the ``config.redis`` mapping: ``url`` plus the timeouts
    below; any other key is handed to redis-py unchanged (``username``,
    ``password``, ``ssl_*``, ``health_check_interval``…). With
    ``sentinels=[("host", 26379), ...]`` and ``master_name``, the master's
    address comes from Redis Sentinel (``url`` then only supplies the database
    and credentials).
    """

    def __init__(
        self,
        options: Mapping[str, Any],
        *,
        size: int,
        name: str,
        error_handlers: Iterable[RedisErrorHandler] = (),
    ) -> None:
        if size < 1:
            raise ValueError(f"Redis pool {name} needs at least one connection, got size={size}")
        opts = {key: value for key, value in options.items() if key not in STRUCTURAL_KEYS}
        self.url: str = opts.pop("url", None) or DEFAULT_URL
        self.name = name
        self.size = size
        self.error_handlers = error_handlers
        pool_timeout = opts.pop("pool_timeout", DEFAULT_POOL_TIMEOUT)
        connect_timeout = opts.pop("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        read_timeout = opts.pop("read_timeout", DEFAULT_READ_TIMEOUT)
        opts.pop("write_timeout", None)  # redis-py has one socket timeout for both directions
        opts.pop("reconnect_attempts", None)  # the rules above decide the attempts
        self._tls_options = {key: value for key, value in opts.items() if key.startswith("ssl_")}
        #: Whether the server ever answered: until then a dropped connection
        #: may be a TLS mismatch, worth one diagnosing handshake.
        self._answered = False
        common = {
            "socket_connect_timeout": connect_timeout,
            "socket_timeout": read_timeout,
            "retry": Retry(NoBackoff(), 0),
        }
        self._pool: _BlockingPool
        if opts.get("sentinels") or sentinel.is_sentinel_url(self.url):
            settings = sentinel.sentinel_options(self.url, opts, mask_url(self.url))
            self.url = sentinel.display_url(settings)
            self._pool = sentinel.sentinel_pool(
                _SentinelBlockingPool, settings, common, max_connections=size, timeout=pool_timeout
            )  # type: ignore[assignment]
        else:
            check_url(self.url)
            self._pool = _BlockingPool.from_url(self.url, max_connections=size, timeout=pool_timeout, **common, **opts)
        self._pool.connection_class = _counting(self._pool.connection_class)
        self.client = redis.Redis(connection_pool=self._pool)

    @property
    def connection_pool(self) -> redis.ConnectionPool:
        return self._pool

    def __repr__(self) -> str:
        return f"<RedisPool {self.name} size={self.size} url={mask_url(self.url)}>"

    def execute(self, operation: Callable[[redis.Redis], T], *, once: bool = False) -> T:
        """Run ``operation(client)`` under the transient-failure rules.

        ``once``: the operation writes something that must not be applied
        twice and cannot recognise a repeat; after a connection error that
        came once a command had gone out, :class:`LostReplyError` is raised
        instead of sending it again.
        """
        attempt = 0
        failover_retried = False
        pool_retried = False
        while True:
            attempt += 1
            sends = _sends.count
            try:
                result = operation(self.client)
                self._answered = True
                return result
            except (AuthenticationError, AuthorizationError):
                raise  # wrong credentials: retrying cannot help, and the message says why
            except PoolTimeoutError as exc:
                if pool_retried:
                    self._report(exc, attempt, retried=False)
                    raise
                pool_retried = True
                self._report(exc, attempt, retried=True)
                time.sleep(random.uniform(0.1, 0.3))
            except (RedisPyConnectionError, RedisPyTimeoutError) as exc:
                self._drop_idle()
                problem = tls_problem(self.url, self._tls_options, exc, first_contact=not self._answered)
                if problem is not None:
                    self._report(exc, attempt, retried=False)
                    raise ConfigurationError(problem) from exc
                if once and _sends.count != sends:
                    self._report(exc, attempt, retried=False)
                    raise LostReplyError(mask_url(self.url), exc) from exc
                if attempt >= CONNECTION_ATTEMPTS:
                    self._report(exc, attempt, retried=False)
                    raise RedisConnectionError(mask_url(self.url), exc) from exc
                self._report(exc, attempt, retried=True)
                time.sleep(0.5 * 2 ** (attempt - 1) + random.random() * 0.25)
            except ResponseError as exc:
                if str(exc).startswith(NO_SUCH_DB):
                    self.disconnect()
                    raise self._no_such_db() from exc
                if not _is_failover(exc) or failover_retried:
                    if _is_failover(exc):
                        self._report(exc, attempt, retried=False)
                    raise
                failover_retried = True
                self._drop_idle()
                self._report(exc, attempt, retried=True)

    def _no_such_db(self) -> ConfigurationError:
        db = _db_of(self.url) if "://" in self.url else "?"
        return ConfigurationError(
            f"Redis at {mask_url(self.url)} has no database {db}: a server has databases 0 to 15 unless its "
            "`databases` setting says otherwise. Use a lower database number in REDIS_URL."
        )

    def _report(self, exc: BaseException, attempt: int, *, retried: bool) -> None:
        info = {"error": exc, "attempt": attempt, "retried": retried, "pool": self.name}
        for handler in list(self.error_handlers):
            try:
                handler(info)
            except Exception:
                logger.exception("on_redis_error handler raised")

    def send(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` in one write on one connection and read every reply.

        A pipeline without redis-py's pipeline object, whose bookkeeping costs
        about as much as the round trip itself on the push path. An error reply
        raises (after the connection is dropped, since the replies behind it are
        unread); wrap the call in :meth:`execute` for the retry rules.
        """
        connection = self._pool.get_connection()
        try:
            return _exchange(connection, commands)
        except BaseException:
            connection.disconnect()
            raise
        finally:
            self._pool.release(connection)

    def kept(self) -> KeptConnection:
        """A connection of this pool kept out of it between calls (see
        :class:`KeptConnection`); it counts against the pool's size for as
        long as it is kept, so size the pool for one more."""
        return KeptConnection(self)

    def ping(self) -> bool:
        return bool(self.execute(lambda conn: conn.ping()))

    def _drop_idle(self) -> None:
        """Close the idle connections, which share the failed one's fate (a
        restarted server, a failover), but not those other threads are using:
        closing a socket under a thread mid-command makes its call fail with an
        error of its own, and each finds out about its connection by itself."""
        self._pool.disconnect(inuse_connections=False)

    def disconnect(self) -> None:
        """Close every connection; the pool reconnects lazily on next use."""
        self._pool.disconnect(inuse_connections=True)

    def reset_after_fork(self) -> None:
        """In a forked child: drop the parent's connections without touching them.

        A socket inherited through ``fork`` is the parent's open conversation
        with the server; a child that wrote on it (even a ``QUIT``) would mix
        its replies with the parent's, and a ``shutdown(2)`` would end the
        parent's session. Each inherited connection is only closed (our copy
        of the descriptor: redis-py skips the shutdown in a process other than
        the one that connected), and the pool starts empty, connecting afresh
        on first use. The locks are replaced first: another parent thread may
        have held one when the process forked, and nothing in the child would
        ever release it.
        """
        pool = self._pool
        inherited = list(getattr(pool, "_connections", ()))
        pool._fork_lock = threading.RLock()
        pool._lock = threading.RLock()
        pool.reset()
        for connection in inherited:
            if connection.pid != os.getpid():  # never one made here: those would need a clean close
                try:
                    connection.disconnect()
                except Exception:  # a half-built connection: the descriptor goes with it at exit
                    pass


class KeptConnection:
    """One connection of a pool, kept out of it from one call to the next by
    a caller that makes the same short call again and again: the fetcher's
    claims, a round trip every few jobs.

    Taking a connection from redis-py's pool and giving it back cost about as
    much as a tenth of the claim's round trip (a lock, a queue, a readiness
    poll of the socket), paid once per claim. Kept, it is ready: a call that
    raised dropped it (its replies may be unread), and nothing else uses it.
    A caller that finds it in use by another thread sends through the pool.
    :meth:`release` gives it back.
    """

    def __init__(self, pool: RedisPool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._connection: Any = None

    def send(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """:meth:`RedisPool.send` on the kept connection."""
        if not self._lock.acquire(blocking=False):
            return self.pool.send(commands)
        try:
            connection = self._connection
            if connection is None:
                connection = self._connection = self.pool.connection_pool.get_connection()
            try:
                return _exchange(connection, commands)
            except BaseException:
                self._connection = None
                connection.disconnect()
                self.pool.connection_pool.release(connection)
                raise
        finally:
            self._lock.release()

    def release(self) -> None:
        """Give the connection back to the pool (the next call takes one
        again). A call still under way on it (a shutdown that did not wait
        for a hung thread) keeps it: the shutdown does not wait for it."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            connection, self._connection = self._connection, None
        finally:
            self._lock.release()
        if connection is not None:
            self.pool.connection_pool.release(connection)
