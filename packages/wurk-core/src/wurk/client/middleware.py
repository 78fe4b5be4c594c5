"""Middleware chains: the per-job onion around every push and every perform.

There are two chains with one API. Client middleware wraps the Redis write of
a push; server middleware wraps ``perform`` in the worker. A chain stores
*classes plus constructor arguments*, not instances, and builds fresh instances
for every job: middleware is thread-safe by construction, and never carries a
connection or a socket across a fork. A class that keeps nothing of a job on
``self`` may say so with ``stateless = True``; the chain then builds it once
and every job shares that instance (the built-ins do, since a worker runs
thousands of jobs a second through them).

A client middleware::

    class RequestIdTagger(wurk.ClientMiddleware):
        def call(self, job_class, job, queue, redis_pool, call_next):
            job.setdefault("request_id", current_request_id())
            return call_next()   # a falsy return halts the push

A server middleware::

    class Timing(wurk.ServerMiddleware):
        def call(self, job_instance, job, queue, call_next):
            started = time.monotonic()
            try:
                return call_next()   # returning without calling skips perform
            finally:
                self.logger.info("took %.3fs", time.monotonic() - started)

Entry 0 is the outermost. ``add`` appends (innermost), ``prepend`` puts a
middleware outermost, and ``insert_before`` / ``insert_after`` place it next to
another one, falling back to the front or the end when the anchor is absent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


class Middleware:
    """Base class giving a middleware its configuration, pool and logger.

    The chain assigns ``config`` (the global configuration or a capsule) right
    after building the instance; :attr:`wurk_config` is the configuration
    either way. Both are ``None`` in a middleware built outside a chain.
    """

    config: Config | Capsule | None = None
    #: True when the class keeps nothing of a job on ``self``: one instance,
    #: built on the chain's first job, then serves every job of the chain.
    stateless: ClassVar[bool] = False

    @cached_property
    def wurk_config(self) -> Config | None:
        """The configuration this middleware runs under, a capsule's unwrapped:
        what the worker's services, stats and settings hang off. Kept once
        read: a chain assigns ``config`` before the first job sees the instance."""
        # A capsule holds its configuration as ``config``; a configuration has
        # no such attribute. Asked by name, so this module need not import
        # the capsule (which imports it).
        owner: Any = self.config
        root: Config | None = getattr(owner, "config", owner)
        return root

    @property
    def redis_pool(self) -> RedisPool:
        if self.config is None:
            raise AttributeError(f"{type(self).__name__} was built outside a middleware chain: it has no Redis pool")
        return self.config.redis_pool

    @property
    def logger(self) -> logging.Logger:
        if self.config is None:
            return logging.getLogger("wurk")
        logger: logging.Logger = self.config.logger
        return logger


class ClientMiddleware(Middleware):
    def call(
        self, job_class: str, job: dict[str, Any], queue: str, redis_pool: Any, call_next: Callable[[], Any]
    ) -> Any:
        return call_next()


class ServerMiddleware(Middleware):
    """Wraps ``perform``. For an ``async def perform`` the chain awaits
    ``call_async`` where a class defines one (``call_next`` then returns an
    awaitable), and runs ``call`` on a thread of its own where it does not."""

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        return call_next()


@dataclass(frozen=True)
class Entry:
    """A registered middleware: its class and the arguments to build it with."""

    klass: type
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self, config: Any) -> Any:
        instance = self.klass(*self.args, **self.kwargs)
        if config is not None and hasattr(instance, "config"):
            instance.config = config
        return instance


def _entry(klass: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Entry:
    # A chain builds its own instance per job, so it must be given the class;
    # an instance registered by mistake would only fail at the first push.
    if not isinstance(klass, type):
        raise TypeError(f"register the middleware class, not {klass!r} (the chain builds one instance per job)")
    return Entry(klass, args, dict(kwargs))


class Chain:
    """An ordered list of middleware classes, outermost first."""

    def __init__(self, config: Any = None, entries: list[Entry] | None = None) -> None:
        self.config = config
        self._entries: list[Entry] = list(entries or [])
        #: Innermost first: each entry with its shared instance when its class
        #: is stateless. Built on the first job, dropped when the entries change.
        self._plan: tuple[tuple[Entry, Any], ...] | None = None

    def copy_for(self, config: Any) -> Chain:
        """A copy bound to ``config`` (a capsule); later changes stay apart."""
        return Chain(config, self._entries)

    @property
    def entries(self) -> list[Entry]:
        return list(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        # A chain is an object, not a container to test for emptiness (that is
        # ``empty()``): ``chain or config.client_middleware`` must keep an
        # explicitly given empty chain.
        return True

    def __contains__(self, klass: object) -> bool:
        return self.exists(klass)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<Chain {[entry.klass.__name__ for entry in self._entries]}>"

    def exists(self, klass: type) -> bool:
        return any(entry.klass is klass for entry in self._entries)

    def empty(self) -> bool:
        return not self._entries

    def _index(self, klass: type) -> int | None:
        for index, entry in enumerate(self._entries):
            if entry.klass is klass:
                return index
        return None

    def remove(self, klass: type) -> None:
        self._entries = [entry for entry in self._entries if entry.klass is not klass]
        self._plan = None

    def add(self, klass: type, *args: Any, **kwargs: Any) -> None:
        """Append ``klass`` (innermost), moving it there if already present."""
        entry = _entry(klass, args, kwargs)
        self.remove(klass)
        self._entries.append(entry)
        self._plan = None

    def prepend(self, klass: type, *args: Any, **kwargs: Any) -> None:
        """Put ``klass`` first (outermost), moving it there if already present."""
        entry = _entry(klass, args, kwargs)
        self.remove(klass)
        self._entries.insert(0, entry)
        self._plan = None

    def insert_before(self, anchor: type, klass: type, *args: Any, **kwargs: Any) -> None:
        """Place ``klass`` right before ``anchor``, or first if ``anchor`` is absent."""
        entry = self._take(klass, args, kwargs)
        index = self._index(anchor)
        self._entries.insert(0 if index is None else index, entry)
        self._plan = None

    def insert_after(self, anchor: type, klass: type, *args: Any, **kwargs: Any) -> None:
        """Place ``klass`` right after ``anchor``, or last if ``anchor`` is absent."""
        entry = self._take(klass, args, kwargs)
        index = self._index(anchor)
        self._entries.insert(len(self._entries) if index is None else index + 1, entry)
        self._plan = None

    def _take(self, klass: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Entry:
        """The entry to move for ``klass``, out of the list: the registered one
        (its arguments replaced when new ones are given), or a new one."""
        fresh = _entry(klass, args, kwargs)
        index = self._index(klass)
        if index is None:
            return fresh
        registered = self._entries.pop(index)
        return fresh if args or kwargs else registered

    def clear(self) -> None:
        """Drop every entry, built-ins included (prefer ``remove``)."""
        self._entries = []
        self._plan = None

    def _planned(self) -> tuple[tuple[Entry, Any], ...]:
        plan = self._plan
        if plan is None:
            plan = tuple(
                (entry, entry.make(self.config) if getattr(entry.klass, "stateless", False) else None)
                for entry in reversed(self._entries)
            )
            self._plan = plan
        return plan

    def retrieve(self) -> list[Any]:
        """The instances for one job, outermost first: fresh ones, and the
        chain's own of each stateless class."""
        config = self.config
        return [entry.make(config) if shared is None else shared for entry, shared in reversed(self._planned())]

    def invoke(self, *args: Any, final: Callable[[], Any]) -> Any:
        """Run the chain around ``final``: each middleware's ``call(*args, call_next)``."""
        if not self._entries:
            return final()
        # Built inside out: each middleware's ``call_next`` is the next one's
        # bound ``call``, so a job pays no Python frame of the chain's own per layer.
        call_next = final
        config = self.config
        for entry, shared in self._plan or self._planned():
            instance = entry.make(config) if shared is None else shared
            call_next = partial(instance.call, *args, call_next)
        return call_next()

    def invoke_async(self, *args: Any, final: Callable[[], Awaitable[Any]]) -> Awaitable[Any]:
        """The chain around ``final`` for a job on the event loop, to await.

        A middleware with an ``async def call_async`` is awaited there. One
        with only ``call`` still runs, on a thread of its own whose
        ``call_next`` waits for the rest of the chain on the loop: correct,
        but that thread is held for the job's whole run, which is what
        ``call_async`` spares.

        A plain function, not a coroutine: it hands back the outermost
        middleware's awaitable, so the chain adds no coroutine of its own
        between the job's task and ``perform`` (each one is entered and left
        again at every await of the job).
        """
        call_next = final
        config = self.config
        for entry, shared in self._plan or self._planned():
            instance = entry.make(config) if shared is None else shared
            call_async = getattr(instance, "call_async", None)
            if call_async is not None:
                call_next = partial(call_async, *args, call_next)
            else:
                call_next = partial(_in_thread, instance.call, args, call_next)
        return call_next()


async def _in_thread(call: Callable[..., Any], args: tuple[Any, ...], call_next: Callable[[], Awaitable[Any]]) -> Any:
    """A synchronous middleware's ``call`` in an async job: on a new thread,
    in a copy of the job's context, its ``call_next`` waiting for the inner
    layers on the loop. A thread per call, not a bounded pool: a job holds
    one per such middleware, and a pool too small for them would deadlock."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    inner_runs: list[concurrent.futures.Future[Any]] = []

    async def rest() -> Any:
        return await call_next()

    def inner() -> Any:
        run: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(rest(), loop)
        inner_runs.append(run)
        return run.result()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.done():  # the job was cancelled meanwhile
            return
        if error is None:
            done.set_result(result)
        else:
            done.set_exception(error)

    def run() -> None:
        try:
            result = context.run(call, *args, inner)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name="wurk-sync-middleware", daemon=True).start()
    try:
        return await done
    except asyncio.CancelledError:
        for inner_run in inner_runs:  # the shutdown reaches the job itself too
            inner_run.cancel()
        raise
