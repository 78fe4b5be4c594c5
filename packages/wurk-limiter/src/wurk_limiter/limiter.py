"""The limiter base: construction, registration, the acquire loop, introspection.

Building a limiter touches no Redis, so limiters can be module-level
constants of a job module that imports without a server: the arguments are
checked at once, and the limiter registers itself (its metadata in
``lmtr:<name>``, its name in ``lmtr-list``) at its first use — once per
process for each Redis pool it uses, and again in a forked child.

Each type (:mod:`~wurk_limiter.concurrent`, :mod:`~wurk_limiter.counting`,
:mod:`~wurk_limiter.draining`, :mod:`~wurk_limiter.unlimited`) supplies one
acquire script call, its poll interval and how to read its state; this base
does the rest the same way for all of them, which is why one contract suite
tests every type.

Admission decisions are made inside Lua on Redis's ``TIME``. The only clock
read here is ``time.monotonic``, for ``wait_timeout``: a deadline on the
calling host, as the guides say.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast, overload

import wurk
from wurk.errors import LostReplyError
from wurk.redis import fence
from wurk.redis.connection import RedisPool
from wurk_limiter import checks, keys
from wurk_limiter.admission import Admission
from wurk_limiter.errors import OverLimit
from wurk_limiter.handle import Attempt, Handle, Request
from wurk_limiter.settings import LimiterConfig, limiter_config

if TYPE_CHECKING:
    from wurk_limiter.concurrent import Concurrent
    from wurk_limiter.counting import Bucket, Window
    from wurk_limiter.draining import Leaky, Points
    from wurk_limiter.unlimited import Unlimited

T = TypeVar("T")

#: The cap on reschedules for types without a ``reschedule`` option.
DEFAULT_RESCHEDULE = 20

#: Each kind of limiter by its ``type``, filled as the kinds' modules define
#: their classes (the package imports every kind before anyone can build one).
#: The constructors on :class:`Limiter` look a kind up here rather than import
#: its module: that module imports this one for the base class.
KINDS: dict[str, Callable[..., Limiter]] = {}


class Limiter:
    """A rate limiter shared through Redis. Build one with a constructor
    (:meth:`concurrent`, :meth:`bucket`, :meth:`window`, :meth:`leaky`,
    :meth:`points`, :meth:`unlimited`), once, and call :meth:`within_limit`.

    Building one checks its arguments and touches no Redis; it registers
    itself at its first use. Every limiter takes ``register=False`` (never
    register: read-only introspection, with no write) and ``config=`` (the
    ``wurk.Config`` whose Redis it uses; when omitted, decided at each use:
    the configuration running the current job, else the process default).
    """

    type: ClassVar[str] = ""
    #: Seconds between two attempts while waiting.
    poll_interval: ClassVar[float] = 0.05
    #: ``within_limit(used=n)`` is accepted (bucket and window).
    takes_used: ClassVar[bool] = False

    def __init__(
        self, name: str, options: dict[str, Any], *, register: bool = True, config: wurk.Config | None = None
    ) -> None:
        self.name = checks.name(name)
        self._options = dict(options)
        self._config = config
        self._registers = register
        self._registration_lock = threading.Lock()
        self._registered_in = os.getpid()
        #: The pools this process wrote the registration to.
        self._registered: weakref.WeakSet[RedisPool] = weakref.WeakSet()
        self.ttl: int = options.get("ttl", checks.DEFAULT_TTL)
        self.wait_timeout: float = options.get("wait_timeout", 0.0)
        wire = json.dumps({key: checks.wire(value) for key, value in self._options.items()}, sort_keys=True)
        self._options_json = wire
        self.fingerprint = hashlib.sha256(f"{self.type}|{self.name}|{wire}".encode()).hexdigest()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Enter a kind in :data:`KINDS` under the ``type`` it declares. The
        first class to declare a type keeps it: a subclass of a built-in kind
        does not take over the built-in's constructor."""
        super().__init_subclass__(**kwargs)
        if "type" in cls.__dict__:
            KINDS.setdefault(cls.type, cls)

    # -- constructors --------------------------------------------------------

    @classmethod
    def concurrent(cls, name: str, limit: int, **options: Any) -> Concurrent:
        """At most ``limit`` blocks at once. Options: ``wait_timeout=5``,
        ``lock_timeout=30``, ``policy="raise"`` (or ``"ignore"``),
        ``backoff=None``, ``ttl=7776000``."""
        return cast("Concurrent", KINDS["concurrent"](name, limit, **options))

    @classmethod
    def bucket(cls, name: str, count: int, interval: str, **options: Any) -> Bucket:
        """``count`` per calendar ``interval`` (``"second"``, ``"minute"``,
        ``"hour"``, ``"day"``; no raw number). Options: ``wait_timeout=5``,
        ``backoff=None``, ``ttl=7776000``, ``reschedule=20``."""
        return cast("Bucket", KINDS["bucket"](name, count, interval, **options))

    @classmethod
    def window(cls, name: str, count: int, interval: Any, **options: Any) -> Window:
        """``count`` in any sliding ``interval`` (a unit name, seconds or a
        timedelta). Options as :meth:`bucket`."""
        return cast("Window", KINDS["window"](name, count, interval, **options))

    @classmethod
    def leaky(cls, name: str, bucket_size: int, drain: Any, **options: Any) -> Leaky:
        """Bursts of ``bucket_size``, draining in ``drain`` (a unit name,
        seconds or a timedelta). Options: ``wait_timeout=5``, ``backoff=None``,
        ``ttl=7776000``."""
        return cast("Leaky", KINDS["leaky"](name, bucket_size, drain, **options))

    @classmethod
    def points(cls, name: str, initial_points: float, refill_per_second: float, **options: Any) -> Points:
        """A balance of ``initial_points`` refilling at ``refill_per_second``;
        each call spends its ``estimate``. Never waits. Options:
        ``backoff=None``, ``ttl=7776000``."""
        return cast("Points", KINDS["points"](name, initial_points, refill_per_second, **options))

    @classmethod
    def unlimited(cls, *ignored: Any, **also_ignored: Any) -> Unlimited:
        """Admits everything and never touches Redis (tests, or a swap)."""
        return cast("Unlimited", KINDS["unlimited"]())

    @staticmethod
    def configure(fn: Callable[[LimiterConfig], object]) -> Callable[[LimiterConfig], object]:
        """Decorator: run ``fn(settings)`` on the process default
        configuration's limiter settings (``backoff``, ``redis``, ``errors``)."""
        fn(limiter_config())
        return fn

    @staticmethod
    def names(config: wurk.Config | None = None) -> list[str]:
        """Every registered limiter's name (``lmtr-list``), sorted."""
        pool = limiter_config(config).pool()
        members = pool.execute(lambda conn: conn.smembers(keys.REGISTRY))
        return sorted(member.decode() if isinstance(member, bytes) else str(member) for member in members)

    # -- what each type provides ----------------------------------------------

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        """One acquire script call. ``call`` is the same on every sending of
        one attempt (the pool sends it again after a lost reply): the script
        recognises by it an admission it already made, by the fence of
        ``call.key`` or by an entry named with :func:`call_token`."""
        raise NotImplementedError

    def _status(self, conn: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _state_keys(self, conn: Any) -> list[str]:
        raise NotImplementedError

    def _release(self, handle: Handle) -> None:
        """Give back what an admitted call holds (only ``concurrent`` holds anything)."""

    def _settle(self, handle: Handle, actual: float) -> float:
        raise TypeError(f"points_used is for points limiters; {self.name!r} is a {self.type} limiter")

    def _overage(self) -> None:
        """A wait timed out (``concurrent`` counts it)."""

    def _poll(self, attempt: Attempt) -> float:
        return self.poll_interval

    def _charge(self, request: Request) -> float:
        return float(request.used)

    def _learn_time(self, now: float) -> None:
        """Redis's clock at registration (a bucket learns its period from it)."""

    @property
    def reschedule(self) -> int:
        """The middleware's cap on reschedules for a job this limiter refuses."""
        return int(self._options.get("reschedule", DEFAULT_RESCHEDULE))

    @property
    def ignores(self) -> bool:
        return self._options.get("policy") == "ignore"

    # -- plumbing -----------------------------------------------------------

    @property
    def config(self) -> wurk.Config:
        """The configuration whose Redis this limiter uses now: the one it was
        built with, else the one running the current job, else the process
        default."""
        return self._config if self._config is not None else wurk.current_config()

    @property
    def settings(self) -> LimiterConfig:
        return limiter_config(self.config)

    def _pool(self) -> RedisPool:
        """The pool to use now, the limiter registered on it first."""
        pool = self.settings.pool()
        if self._registers:
            self._ensure_registered(pool)
        return pool

    def _ensure_registered(self, pool: RedisPool) -> None:
        """Register on ``pool`` unless this process did already; one thread
        writes it, the others wait for it."""
        if self._registered_in != os.getpid():
            # A forked child: the parent's lock may have been held at the
            # fork, and its writes are not this process's.
            self._registration_lock = threading.Lock()
            self._registered = weakref.WeakSet()
            self._registered_in = os.getpid()
        if pool in self._registered:
            return
        with self._registration_lock:
            if pool not in self._registered:
                self._register(pool)
                self._registered.add(pool)

    def _script(self, conn: Any, script: str, keys_: list[str], args: list[Any]) -> Any:
        return self.config.scripts.call(f"limiter.{script}", conn, keys_, args)

    def _register(self, pool: RedisPool) -> None:
        def write(conn: Any) -> Any:
            pipe = conn.pipeline(transaction=True)
            pipe.sadd(keys.REGISTRY, self.name)
            pipe.hset(
                keys.meta(self.name),
                mapping={"type": self.type, "options": self._options_json, "fingerprint": self.fingerprint},
            )
            pipe.expire(keys.meta(self.name), self.ttl)
            pipe.time()
            return pipe.execute()[-1]

        seconds, micros = pool.execute(write)
        self._learn_time(seconds + micros / 1_000_000)

    # -- within_limit ------------------------------------------------------------

    def _request(self, used: int | None, estimate: float | None) -> Request:
        if used is not None:
            if not self.takes_used:
                raise ValueError(f"used= is for bucket and window limiters; {self.name!r} is a {self.type} limiter")
            checks.positive_int("used", used)
        if estimate is not None:
            raise ValueError(f"estimate= is for points limiters; {self.name!r} is a {self.type} limiter")
        return Request(used=used or 1)

    @overload
    def within_limit(
        self, fn: None = None, /, *, used: int | None = None, estimate: float | None = None
    ) -> Admission: ...

    @overload
    def within_limit(
        self, fn: Callable[..., Awaitable[T]], /, *, used: int | None = None, estimate: float | None = None
    ) -> Awaitable[T | None]: ...

    @overload
    def within_limit(
        self, fn: Callable[..., T], /, *, used: int | None = None, estimate: float | None = None
    ) -> T | None: ...

    def within_limit(
        self, fn: Callable[..., Any] | None = None, /, *, used: int | None = None, estimate: float | None = None
    ) -> Any:
        """Run a block once the limiter admits it.

        ``with limiter.within_limit() as handle:`` (or ``async with``, whose
        wait does not block the event loop) waits up to ``wait_timeout`` and
        raises :class:`OverLimit` if still refused. Passing the block as a
        callable, ``limiter.within_limit(fn)``, returns what it returns — or
        ``None`` when a ``policy="ignore"`` limiter skips it, which a ``with``
        statement cannot do. An ``async def`` callable gives an awaitable. A
        callable gets the handle when ``estimate=`` is passed (points style),
        no argument otherwise.
        """
        request = self._request(used, estimate)
        admission = Admission(self, request)
        if fn is None:
            if self.ignores:
                raise TypeError(
                    f"limiter {self.name!r} has policy='ignore', which skips the block: a with statement "
                    "cannot be skipped, so pass the work as a callable, within_limit(fn), which returns None"
                )
            return admission
        wants_handle = estimate is not None
        if inspect.iscoroutinefunction(fn):
            return admission.run_async(fn, wants_handle)
        return admission.run(fn, wants_handle)

    def _try(self, request: Request, first: float | None) -> Attempt:
        call = fence.ticket()  # taken once, outside the retried operation
        return self._pool().execute(lambda conn: self._acquire(conn, request, first, call))

    def _next_delay(self, attempt: Attempt, started: float) -> float | None:
        """Seconds to sleep before the next attempt, or None once the wait is over."""
        remaining = self.wait_timeout - (time.monotonic() - started)
        if remaining <= 0:
            return None
        return max(0.001, min(self._poll(attempt), remaining))

    def _refused(self) -> None:
        """The wait is over: ``None`` under ``policy="ignore"``, else OverLimit."""
        self._overage()
        if not self.ignores:
            raise OverLimit(self)

    def _admit(self, request: Request) -> Handle | None:
        started, first = time.monotonic(), None
        while True:
            attempt = self._try(request, first)
            if attempt.admitted:
                return Handle(self, attempt, self._charge(request))
            first = attempt.now if first is None else first
            delay = self._next_delay(attempt, started)
            if delay is None:
                self._refused()
                return None
            time.sleep(delay)

    async def _admit_async(self, request: Request) -> Handle | None:
        started, first = time.monotonic(), None
        while True:
            attempt = await asyncio.to_thread(self._try, request, first)
            if attempt.admitted:
                return Handle(self, attempt, self._charge(request))
            first = attempt.now if first is None else first
            delay = self._next_delay(attempt, started)
            if delay is None:
                self._refused()
                return None
            await asyncio.sleep(delay)

    # -- introspection -------------------------------------------------------------

    @property
    def options(self) -> dict[str, Any]:
        """The options it was built with, defaults filled in."""
        return dict(self._options)

    @property
    def size(self) -> float:
        """Current usage: an int, or a float for ``leaky`` and ``points``."""
        used: float = self.status()["used"]
        return used

    def status(self) -> dict[str, Any]:
        """``used``, ``limit``, ``reset_at`` (epoch seconds on Redis's clock,
        or None) and ``available``; ``concurrent`` adds its counters."""
        return self._pool().execute(self._status)

    def reset(self) -> None:
        """Clear the state; the limiter stays registered."""

        def clear(conn: Any) -> None:
            state = self._state_keys(conn)
            if state:
                conn.delete(*state)

        self._pool().execute(clear)

    def delete(self) -> None:
        """Clear the state and the metadata, and leave ``lmtr-list`` (a later
        use registers it again)."""

        def forget(conn: Any) -> None:
            state = self._state_keys(conn)
            pipe = conn.pipeline(transaction=True)
            if state:
                pipe.delete(*state)
            pipe.delete(keys.meta(self.name))
            pipe.srem(keys.REGISTRY, self.name)
            pipe.execute()

        pool = self.settings.pool()
        with self._registration_lock:
            pool.execute(forget)
            self._registered.discard(pool)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self._options_json}>"


def call_token(call: fence.Ticket) -> str:
    """A name unique to one acquire call, the same on every sending of it:
    a concurrent slot's token, a window's entries' prefix."""
    return f"{call.token}.{call.seq}"


def count_once(limiter: Limiter, what: str, operation: Callable[[Any], Any]) -> None:
    """Run a counter's write that must not be applied twice (``HINCRBY`` of a
    metric): after a lost reply it is not sent again but logged, since it may
    or may not have been counted."""
    try:
        limiter._pool().execute(operation, once=True)
    except LostReplyError:
        limiter.config.logger.warning(
            "limiter %s: the reply to counting %s was lost; it may not have been counted", limiter.name, what
        )


def server_read(conn: Any, *commands: tuple[str, tuple[Any, ...]]) -> tuple[float, list[Any]]:
    """Redis's ``TIME`` and the replies of ``commands`` (method name and
    arguments), all in one MULTI: a state and the instant it was read at."""
    pipe = conn.pipeline(transaction=True)
    pipe.time()
    for method, arguments in commands:
        getattr(pipe, method)(*arguments)
    (seconds, micros), *replies = pipe.execute()
    return seconds + micros / 1_000_000, replies


def number(value: Any, default: float = 0.0) -> float:
    """A script's or a hash's numeric reply (bytes, str or int) as a float."""
    if value is None or value == b"" or value == "":
        return default
    return float(value.decode() if isinstance(value, bytes) else value)
