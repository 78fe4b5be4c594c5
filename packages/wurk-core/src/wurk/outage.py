"""The client-side outage buffer (``config.reliable_push()``).

While Redis is unreachable, pushes land in a bounded in-memory ring buffer
instead of raising. Every later push first replays the buffer oldest-first,
one payload per write, and stops at the first failure with the payload put
back at the head, so order is kept and nothing is skipped. An optional
background thread replays it when the producer goes quiet.

What this is not: durable. The buffer lives in one process's memory, so that
process's death loses it, and under ``drop_oldest`` a long outage evicts the
oldest jobs. A payload whose reply was lost mid-write (Redis applied it, then
the connection dropped) is replayed too: at-least-once, like the rest of Wurk.

Payloads of a batch (with a ``bid``) are never buffered: the batch's
bookkeeping happens at push time and cannot be replayed safely, so they raise.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisPyConnectionError

from wurk.errors import ConfigurationError, RedisConnectionError, WurkError

if TYPE_CHECKING:
    from wurk.config import Config

Payload = dict[str, Any]
Writer = Callable[[list[Payload]], None]

#: Failures that mean "Redis is not there right now" (after the pool's retries).
TRANSIENT = (RedisConnectionError, RedisPyConnectionError)
OVERFLOW_MODES = ("drop_oldest", "raise")


class BatchNotBufferedError(WurkError, ConnectionError):
    """Redis is unreachable and the job belongs to a batch, which is never buffered."""


class BufferOverflowError(WurkError):
    """The buffer is full and its overflow mode is ``raise``; ``payload`` is the
    job that did not fit, for the caller to keep elsewhere."""

    def __init__(self, payload: Payload) -> None:
        super().__init__(f"outage buffer full; job {payload.get('class')} {payload.get('jid')} was not buffered")
        self.payload = payload


class OutageBuffer:
    def __init__(self, config: Config, *, size: int = 1000, overflow: str = "drop_oldest") -> None:
        self.config = config
        self._items: collections.deque[tuple[Payload, Writer]] = collections.deque()
        self._lock = threading.RLock()
        self._drainer: threading.Thread | None = None
        self._stop = threading.Event()
        self.configure(size=size, overflow=overflow)
        os.register_at_fork(after_in_child=self._forget_after_fork)

    def configure(self, *, size: int, overflow: str) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"reliable_push buffer_size must be a whole number > 0, got {size!r}")
        if overflow not in OVERFLOW_MODES:
            raise ConfigurationError(f"reliable_push overflow must be 'drop_oldest' or 'raise', got {overflow!r}")
        self.size = size
        self.overflow = overflow

    def _forget_after_fork(self) -> None:
        # The parent still holds these jobs and will replay them; a child that
        # replayed them too would push each one twice.
        self._items = collections.deque()
        self._lock = threading.RLock()
        self._drainer = None
        self._stop = threading.Event()

    def __len__(self) -> int:
        return len(self._items)

    def push(self, writer: Writer, payloads: list[Payload]) -> None:
        """Write ``payloads`` behind whatever is still buffered."""
        with self._lock:
            if self._items and not self._drain_locked():
                self._buffer(writer, payloads, None)
                return
            try:
                writer(payloads)
            except TRANSIENT as exc:
                self._buffer(writer, payloads, exc)

    def _buffer(self, writer: Writer, payloads: list[Payload], exc: BaseException | None) -> None:
        batched = [job for job in payloads if job.get("bid")]
        for job in payloads:
            if job.get("bid"):
                continue
            if len(self._items) >= self.size:
                if self.overflow == "raise":
                    raise BufferOverflowError(job)
                self._items.popleft()
            self._items.append((job, writer))
        if batched:
            if exc is not None:
                raise exc
            raise BatchNotBufferedError(
                f"Redis is unreachable and {len(batched)} batch job(s) cannot be buffered; nothing was pushed for them"
            )

    def drain(self) -> bool:
        """Replay buffered jobs oldest-first; ``True`` when the buffer is empty."""
        with self._lock:
            return self._drain_locked()

    def _drain_locked(self) -> bool:
        while self._items:
            job, writer = self._items[0]
            try:
                writer([job])
            except TRANSIENT:
                return False
            self._items.popleft()
            self.config.statsd_increment("jobs.recovered.push")
        return True

    def start_drainer(self, interval: float = 2.0) -> None:
        """Replay the buffer every ``interval`` seconds even if nothing pushes."""
        if interval <= 0:
            raise ConfigurationError(f"drain interval must be > 0, got {interval!r}")
        if self.drainer_running():
            return
        self._stop.clear()
        self._drainer = threading.Thread(target=self._drain_loop, args=(interval,), name="wurk-outage-drainer")
        self._drainer.daemon = True
        self._drainer.start()

    def _drain_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            if self._items:
                try:
                    self.drain()
                except Exception as exc:
                    self.config.handle_exception(exc, {"context": "outage buffer drainer"})

    def drainer_running(self) -> bool:
        return self._drainer is not None and self._drainer.is_alive()

    def stop_drainer(self) -> None:
        self._stop.set()
        drainer, self._drainer = self._drainer, None
        if drainer is not None:
            drainer.join(timeout=5)
