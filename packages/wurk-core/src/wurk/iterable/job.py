"""``wurk.IterableJob``: a long job as a walk over ``(item, cursor)`` pairs.

The class owns ``perform``: it loads the job's progress from ``it-<jid>``,
asks ``build_enumerator`` for the walk from the saved cursor, and calls
``each_iteration`` per item, checkpointing on a five-second timer (``STATE_FLUSH_INTERVAL``, which a
subclass may change). A stop
(quiet, shutdown, or ``Interrupted`` raised by the job) checkpoints the exact
position and gives the payload back to its queue unchanged, so the next run
resumes where this one stopped; a crash or a hard kill resumes from the last
timed checkpoint.

A saved cursor is where a run starts, inclusive (Sidekiq's meaning): a stop
at an iteration boundary saves the next item's cursor, so nothing is run
twice, while a timed checkpoint saves the cursor of the item just done, so a
crash replays at most the items since it, plus that one.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from wurk.client import interception
from wurk.client.job import Job
from wurk.config.defaults import current_capsule, current_config
from wurk.current import stopping
from wurk.errors import Interrupted
from wurk.iterable import enumerators, orm, state

if TYPE_CHECKING:
    from wurk.redis.connection import RedisPool

#: Methods that run inside the loop's thread and so must be plain ``def``s.
SYNC_ONLY = (
    "build_enumerator",
    "each_iteration",
    "around_iteration",
    "on_start",
    "on_resume",
    "on_stop",
    "on_cancel",
    "on_complete",
)


class _Cancelled(Exception):
    """Unwinds the loop when a cancellation trips; never leaves ``perform``."""


class IterableJob(Job):
    """Override ``build_enumerator(*args, cursor)`` (any iterable of
    ``(item, cursor)`` pairs, or ``None`` to skip the run) and
    ``each_iteration(item, *args)``; never ``perform``."""

    #: The same class as :class:`wurk.Interrupted`.
    Interrupted: ClassVar[type[Interrupted]] = Interrupted
    STATE_FLUSH_INTERVAL: ClassVar[float] = state.STATE_FLUSH_INTERVAL
    STATE_TTL: ClassVar[int] = state.STATE_TTL
    CANCELLATION_PERIOD: ClassVar[int] = state.CANCELLATION_PERIOD

    #: The item being processed; left set after the loop, for the callbacks.
    current_object: Any = None

    def __init_subclass__(cls, **options: Any) -> None:
        if "perform" in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} is an IterableJob; override each_iteration instead of perform")
        for name in SYNC_ONLY:
            method = cls.__dict__.get(name)
            if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
                raise TypeError(
                    f"{cls.__qualname__}.{name} is async: an iterable job's loop runs in the worker thread, "
                    "so its methods must be plain def (run a coroutine inside with asyncio.run if needed)"
                )
        super().__init_subclass__(**options)

    # -- what a subclass provides ---------------------------------------------------------

    def build_enumerator(self, *args: Any, cursor: Any) -> Iterable[tuple[Any, Any]] | None:
        raise NotImplementedError(f"{type(self).__qualname__} must implement build_enumerator(*args, cursor)")

    def each_iteration(self, item: Any, *args: Any) -> None:
        raise NotImplementedError(f"{type(self).__qualname__} must implement each_iteration(item, *args)")

    def around_iteration(self) -> Any:
        """Wraps every ``each_iteration``: return a context manager, or write
        it as a generator that yields once (a transaction, a timer)."""
        return contextlib.nullcontext()

    def on_start(self) -> None:
        """Once per jid, before its first iteration."""

    def on_resume(self) -> None:
        """Instead of ``on_start`` when an earlier run of this jid started."""

    def on_stop(self) -> None:
        """Whenever the loop stops early: interrupted, or cancelled."""

    def on_cancel(self) -> None:
        """When the loop stops because the job was cancelled (before ``on_stop``)."""

    def on_complete(self) -> None:
        """When the walk is over, or cancelled: after the last checkpoint,
        before the state is deleted."""

    # -- builders (see the modules for details) ---------------------------------------

    array_enumerator = staticmethod(enumerators.array_enumerator)
    csv_enumerator = staticmethod(enumerators.csv_enumerator)
    csv_batches_enumerator = staticmethod(enumerators.csv_batches_enumerator)
    django_records_enumerator = staticmethod(orm.django_records)
    django_batches_enumerator = staticmethod(orm.django_batches)
    django_relations_enumerator = staticmethod(orm.django_relations)
    sqlalchemy_records_enumerator = staticmethod(orm.sqlalchemy_records)
    sqlalchemy_batches_enumerator = staticmethod(orm.sqlalchemy_batches)
    sqlalchemy_relations_enumerator = staticmethod(orm.sqlalchemy_relations)

    # -- readers ---------------------------------------------------------------------

    @property
    def cursor(self) -> Any:
        """The cursor of the last completed iteration (the saved one before the first)."""
        return self._cursor

    @property
    def arguments(self) -> tuple[Any, ...]:
        return self._arguments

    @property
    def executions(self) -> int:
        """Runs of this jid started so far, this one included."""
        return self._executions

    @property
    def iteration_key(self) -> str:
        return state.iteration_key(self.jid or "")

    # -- cancellation ---------------------------------------------------------------------

    def cancel(self) -> int:
        """Cancel this job: the next iteration does not run. Returns the
        cancellation's epoch seconds (the first one, if it was cancelled before)."""
        if self._persisted():
            self._cancelled = state.cancel(self._redis_pool(), self.jid or "")
        elif self._cancelled is None:
            self._cancelled = int(time.time())
        return self._cancelled

    def cancelled(self) -> bool:
        """Cancelled here, or seen cancelled at the last checkpoint's poll."""
        return self._cancelled is not None

    # -- the run loop -------------------------------------------------------------------

    _arguments: tuple[Any, ...] = ()
    _cursor: Any = None
    _position: Any = None
    _executions: int = 0
    _runtime: float = 0.0
    _started: float = 0.0
    #: The saved cursor this run began from, as saved (JSON text).
    _began_at: str = "null"
    _cancelled: int | None = None

    _persist: bool | None = None

    def _persisted(self) -> bool:
        """State goes to Redis only for a real run: a job with a jid, outside
        the testing modes (a plain ``MyJob().perform()`` stays in memory).
        Decided once per run, so a run never writes half its state."""
        if self._persist is None:
            return self.jid is not None and not interception.intercepting()
        return self._persist

    def perform(self, *args: Any) -> None:
        self._persist = None
        self._persist = self._persisted()
        self._arguments = tuple(args)
        progress = state.load(self._redis_pool(), self.jid or "") if self._persisted() else state.Progress()
        self._executions = progress.executions
        self._cursor = self._position = progress.cursor
        self._began_at = state.encode_cursor(progress.cursor, self._owner())
        self._runtime = progress.runtime
        self._cancelled = progress.cancelled
        self._started = time.monotonic()
        if self._executions > 0:
            self.on_resume()
        else:
            self.on_start()
        self._executions += 1
        walk = self.build_enumerator(*args, cursor=self._cursor)
        if walk is None:
            current_config().logger.info("%s: build_enumerator returned None, nothing to do", self._owner())
            return
        if not isinstance(walk, Iterable):
            raise TypeError(
                f"{self._owner()}: build_enumerator must return an iterable of (item, cursor) pairs, "
                f"got {type(walk).__name__}"
            )
        try:
            self._iterate(walk, args)
        except Interrupted as stop:
            stop.cursor = self._checkpoint()  # where the next run starts, for the job log
            self.on_stop()
            raise
        except _Cancelled:
            current_config().logger.info("%s: cancelled", self._owner())
            self.on_cancel()
            self.on_stop()
        else:
            self._checkpoint()
        self.on_complete()
        if self._persisted():
            state.delete(self._redis_pool(), self.jid or "")

    def _iterate(self, walk: Iterable[Any], args: tuple[Any, ...]) -> None:
        """The loop; returns at the end of the walk, raises ``Interrupted`` to
        stop (the position then holds the first item not done) and
        ``_Cancelled`` when a cancellation trips."""
        hooked = type(self).around_iteration is not IterableJob.around_iteration
        if self._cancelled is not None:
            raise _Cancelled()  # cancelled before this run began
        flushed_at = time.monotonic()
        flush_interval = self.STATE_FLUSH_INTERVAL
        for pair in walk:
            try:
                item, cursor = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"{self._owner()}: build_enumerator must yield (item, cursor) pairs, got {pair!r}"
                ) from None
            self._position = cursor
            self.current_object = item
            if self._cancelled is not None:
                raise _Cancelled()
            if stopping():
                raise Interrupted()
            if hooked:
                with self._around():
                    self.each_iteration(item, *args)
            else:
                self.each_iteration(item, *args)
            self._cursor = cursor
            if time.monotonic() - flushed_at >= flush_interval:
                self._checkpoint()
                flushed_at = time.monotonic()

    def _around(self) -> contextlib.AbstractContextManager[Any]:
        hook = self.around_iteration()
        if inspect.isgenerator(hook):
            return contextlib.contextmanager(lambda: hook)()
        if isinstance(hook, contextlib.AbstractContextManager):
            return hook
        raise TypeError(
            f"{self._owner()}: around_iteration must yield once (a generator) or return a context manager, "
            f"got {type(hook).__name__}"
        )

    def _checkpoint(self) -> str:
        """Save the position; learn of a cancellation made elsewhere. The
        cursor is checked in memory too, so a unit test finds a bad one.
        The position saved, as JSON text."""
        text = state.encode_cursor(self._position, self._owner())
        if not self._persisted():
            return text
        runtime = self._runtime + (time.monotonic() - self._started)
        progressed = text != self._began_at
        cancelled = state.flush(
            self._redis_pool(), self.jid or "", self._executions, text, runtime, progressed=progressed
        )
        if cancelled is not None and self._cancelled is None:
            self._cancelled = cancelled
        return text

    def _redis_pool(self) -> RedisPool:
        """Where the state lives: the Redis of the worker running this job
        (its capsule's pool), else of the configuration a caller outside any
        worker uses (``cancel`` from the application)."""
        # Asked of the context, not of ``self.config``: a subclass may have
        # an attribute of that name for its own use.
        capsule = current_capsule()
        return capsule.redis_pool if capsule is not None else current_config().redis_pool

    def _owner(self) -> str:
        return f"{type(self).__qualname__} (jid {self.jid})" if self.jid else f"{type(self).__qualname__} (no jid)"
