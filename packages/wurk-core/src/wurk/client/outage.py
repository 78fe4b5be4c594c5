"""Living through a Redis outage: the client buffer and the outage log.

:class:`OutageLog` keeps an outage from flooding the log. Every thread of a
worker notices a dead server on its own (each processor's fetch, the
heartbeat, the scheduler…), once a second or so; logged one by one, that is
hundreds of identical lines a minute that bury the line that says what is
wrong. The outage log turns them into one warning when the outage starts, a
reminder with counts at most once a minute while it lasts, and one line when
Redis answers again. The client buffer below reports through it too, so an
outage reads the same in a web process and in a worker.

The client-side outage buffer (``config.reliable_push()``).

While Redis is unreachable, pushes land in a bounded in-memory ring buffer
instead of raising. Every later push first replays the buffer oldest-first,
one payload per write, and stops at the first failure with the payload put
back at the head, so order is kept and nothing is skipped. An optional
background thread replays it when the producer goes quiet.

What this is not: durable. The buffer lives in one process's memory, so that
process's death loses it, and under ``drop_oldest`` a long outage evicts the
oldest jobs. A push that gave up with its reply lost (Redis applied it, then
the connection dropped for good) is looked up before its jobs are replayed:
core's push is fenced (:mod:`wurk.redis.fence`), so a write that reached Redis is
not written twice.

Payloads are replayed through the push writer that took them
(:mod:`wurk.client.writers`). A writer that declares its payloads not replayable
(one whose bookkeeping happens at push time and cannot be replayed
safely) is never buffered: its push raises :class:`NotReplayableError`.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from wurk.config import forking
from wurk.errors import ConfigurationError, NotReplicatedError, WurkError
from wurk.plugins.component import Component
from wurk.redis.connection import TRANSIENT
from wurk.redis.fence import Unsettled, applied
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.config.configuration import Config


Writer = Callable[[list[Payload]], None]

OVERFLOW_MODES = ("drop_oldest", "raise")

#: How the outage log names a push that went to the buffer.
PUSH_CONTEXT = "buffered_push"

#: Seconds between two reminders of the same outage.
REMINDER_INTERVAL = 60.0
#: Seconds without a failure after which an outage nobody saw end is over.
STALE_OUTAGE = 300.0


def _summary(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class OutageLog:
    """One warning per outage, a reminder a minute, one line at recovery.

    ``error`` is called for each failure that means Redis is unreachable (the
    default error handler routes them here), ``recovered`` by whatever has
    just talked to Redis successfully (the heartbeat, the buffer's replay).

    An outage that starts again less than ``reminder_interval`` after the last
    one ended is not announced afresh: a server that flaps, or one pool that
    cannot connect while another can, then still costs at most a few lines a
    minute, and the next reminder carries the count.
    """

    def __init__(self, config: Config, reminder_interval: float = REMINDER_INTERVAL) -> None:
        self.config = config
        self.reminder_interval = reminder_interval
        self._lock = threading.Lock()
        self._since: float | None = None
        self._reported_at = 0.0
        self._recovered_at: float | None = None
        self._last_error_at = 0.0
        self._announced = False
        self._errors = 0
        self._counts: collections.Counter[str] = collections.Counter()

    @property
    def down(self) -> bool:
        """Whether an outage is under way (errors seen, no success since)."""
        return self._since is not None

    def error(self, exc: BaseException, context: str) -> None:
        """Count one failure to reach Redis; log only if the outage is new or
        the last line is ``reminder_interval`` old."""
        now = time.monotonic()
        with self._lock:
            if self._since is not None and now - self._last_error_at > STALE_OUTAGE:
                # Nothing failed for minutes and nothing said Redis was back:
                # that outage ended unnoticed, and this is a new one.
                self._end(self._last_error_at)
            self._last_error_at = now
            self._errors += 1
            self._counts[context] += 1
            due = now - self._reported_at >= self.reminder_interval
            if self._since is None:
                self._since = now
                flapping = self._recovered_at is not None and now - self._recovered_at < self.reminder_interval
                if flapping and not due:
                    return
                message = (
                    f"Redis unreachable: {_summary(exc)} (context={context}); further errors are counted "
                    f"and reported every {_duration(self.reminder_interval)} until it answers again"
                )
                self._report(now)
                self.config.logger.warning(message)
                return
            if not due:
                return
            counts = " ".join(f"{name}={count}" for name, count in sorted(self._counts.items()))
            errors = sum(self._counts.values())
            message = (
                f"Redis still unreachable after {_duration(now - self._since)}: {errors} error(s) since the "
                f"last report ({counts}); last: {_summary(exc)}"
            )
            self._report(now)
        self.config.logger.warning(message)

    def _report(self, now: float) -> None:
        self._reported_at = now
        self._announced = True
        self._counts.clear()

    def recovered(self, note: str = "") -> bool:
        """Redis answered: end the outage (``True`` if one was under way).

        ``note`` is appended to the line, say what was replayed.
        """
        if self._since is None:  # the common case, without the lock
            return False
        now = time.monotonic()
        with self._lock:
            since, announced, errors = self._since, self._announced, self._errors
            if since is None:
                return False
            self._end(now)
        if announced:
            extra = f"; {note}" if note else ""
            self.config.logger.info(
                "Redis is reachable again after %s (%s error(s) during the outage%s)",
                _duration(now - since),
                errors,
                extra,
            )
        return True

    def _end(self, at: float) -> None:
        if self._announced:
            # Only an announced outage's counts were reported; an unannounced
            # one's wait for the next reminder.
            self._counts.clear()
        self._since = None
        self._recovered_at = at
        self._announced = False
        self._errors = 0


class NotReplayableError(WurkError, ConnectionError):
    """Redis is unreachable and the push's writer declares its payloads not
    replayable, so they were not buffered: nothing was pushed for them.
    ``writer`` names the writer; the outage is the exception's cause."""

    def __init__(self, writer: str, count: int) -> None:
        super().__init__(
            f"Redis is unreachable and push writer {writer!r} does not allow its {count} job(s) to be "
            "buffered for later; nothing was pushed for them"
        )
        self.writer = writer


class BufferOverflowError(WurkError):
    """The buffer is full and its overflow mode is ``raise``; ``payload`` is the
    job that did not fit, for the caller to keep elsewhere."""

    def __init__(self, payload: Payload) -> None:
        super().__init__(f"outage buffer full; job {payload.get('class')} {payload.get('jid')} was not buffered")
        self.payload = payload


class OutageBuffer:
    def __init__(self, config: Config, *, size: int = 1000, overflow: str = "drop_oldest") -> None:
        self.config = config
        #: (payload, its writer, the failed write it was part of if that may
        #: have reached Redis after all: a ``wurk.redis.fence.Unsettled``).
        self._items: collections.deque[tuple[Payload, Writer, Unsettled | None]] = collections.deque()
        self._lock = threading.RLock()
        self._drainer: Drainer | None = None
        #: Jobs buffered and dropped since the buffer was last empty, for the
        #: line that reports the replay.
        self._buffered = 0
        self._dropped = 0
        self.configure(size=size, overflow=overflow)
        forking.reset_in_child(self)

    def configure(self, *, size: int, overflow: str) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"reliable_push buffer_size must be a whole number > 0, got {size!r}")
        if overflow not in OVERFLOW_MODES:
            raise ConfigurationError(f"reliable_push overflow must be 'drop_oldest' or 'raise', got {overflow!r}")
        self.size = size
        self.overflow = overflow

    def reset_after_fork(self) -> None:
        # The parent still holds these jobs and will replay them; a child that
        # replayed them too would push each one twice.
        self._items = collections.deque()
        self._buffered = self._dropped = 0
        self._lock = threading.RLock()
        self._drainer = None

    def __len__(self) -> int:
        return len(self._items)

    def push(
        self, writer: Writer, payloads: list[Payload], *, writer_name: str = "core", replayable: bool = True
    ) -> None:
        """Write ``payloads`` behind whatever is still buffered.

        Payloads that are not ``replayable`` are written only once the buffer
        is empty, so they do not jump the jobs before them, and raise
        :class:`NotReplayableError` (naming ``writer_name``) rather than wait
        in the buffer.
        """
        with self._lock:
            if self._items:
                failure = self._drain_locked()
                if failure is not None:
                    self.config.outage_log.error(failure, PUSH_CONTEXT)
                    if not replayable:
                        raise NotReplayableError(writer_name, len(payloads)) from failure
                    self._buffer(writer, payloads)
                    return
            try:
                writer(payloads)
            except TRANSIENT as exc:
                self.config.outage_log.error(exc, PUSH_CONTEXT)
                if not replayable:
                    raise NotReplayableError(writer_name, len(payloads)) from exc
                self._buffer(writer, payloads, getattr(exc, "unsettled", None))

    def _buffer(self, writer: Writer, payloads: list[Payload], unsettled: Unsettled | None = None) -> None:
        for job in payloads:
            if len(self._items) >= self.size:
                if self.overflow == "raise":
                    raise BufferOverflowError(job)
                self._items.popleft()
                self._dropped += 1
                if self._dropped == 1:
                    self.config.logger.warning(
                        "outage buffer full (%s jobs): the oldest buffered jobs are dropped until Redis answers",
                        self.size,
                    )
            self._items.append((job, writer, unsettled))
            self._buffered += 1

    def drain(self) -> bool:
        """Replay buffered jobs oldest-first; ``True`` when the buffer is empty."""
        with self._lock:
            return self._drain_locked() is None

    def _drain_locked(self) -> BaseException | None:
        """Replay until empty (``None``) or until a write fails (its error)."""
        if not self._items:
            return None
        while self._items:
            job, writer, unsettled = self._items[0]
            if unsettled is not None:
                try:
                    self._settle(unsettled)
                except TRANSIENT as exc:
                    return exc
                continue
            try:
                writer([job])
            except TRANSIENT as exc:
                retried = getattr(exc, "unsettled", None)
                if retried is not None:
                    self._items[0] = (job, writer, retried)
                return exc
            except NotReplicatedError as exc:
                # Written, its replicas silent: writing it again would run it
                # twice, and nobody waits on this push to be told.
                self.config.logger.warning("outage buffer: %s", exc)
            self._items.popleft()
            self.config.statsd_increment("jobs.recovered.push")
        note = f"replayed {self._buffered} buffered job(s)"
        if self._dropped:
            note += f", dropped the {self._dropped} oldest when the buffer was full"
        self._buffered = self._dropped = 0
        self.config.outage_log.recovered(note)
        return None

    def _settle(self, unsettled: Unsettled) -> None:
        """The jobs at the head buffered after a write that may have reached
        Redis: dropped if it did (the reply was lost, not the write), else
        replayed as usual."""
        reached = applied(unsettled.pool, unsettled.ticket)
        run = []
        while self._items and self._items[0][2] is unsettled:
            run.append(self._items.popleft())
        if not reached:
            self._items.extendleft((job, writer, None) for job, writer, _ in reversed(run))
            return
        self._buffered -= len(run)
        self.config.logger.warning(
            "outage buffer: %s buffered job(s) were in Redis already (their push's reply was lost); not pushed again",
            len(run),
        )

    def start_drainer(self, interval: float = 2.0) -> None:
        """Replay the buffer every ``interval`` seconds even if nothing pushes."""
        if interval <= 0:
            raise ConfigurationError(f"drain interval must be > 0, got {interval!r}")
        if self.drainer_running():
            return
        self._drainer = Drainer(self, interval)
        self._drainer.start()

    def drainer_running(self) -> bool:
        return self._drainer is not None and self._drainer.running

    def stop_drainer(self) -> None:
        drainer, self._drainer = self._drainer, None
        if drainer is not None:
            drainer.stop()


class Drainer(Component):
    """Replays a buffer on a timer, for a producer that went quiet: its jobs
    should not wait in memory for a push that may never come."""

    name = "wurk-outage-drainer"
    context = "outage buffer drainer"

    def __init__(self, buffer: OutageBuffer, interval: float) -> None:
        super().__init__(buffer.config)
        self.buffer = buffer
        self.interval = interval

    def tick(self) -> None:
        if len(self.buffer):
            self.buffer.drain()
