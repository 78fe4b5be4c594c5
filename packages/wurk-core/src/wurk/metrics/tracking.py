"""Per-class execution metrics: counted in memory per job, written in bulk.

Counting happens on every job, so it is a few dictionary updates under one
lock and nothing else; Redis sees the totals only when the heartbeat flushes
them (at most every ``metrics_flush_interval`` seconds, 5 by default, and once
more at exit). The flush writes exactly the keys and commands Sidekiq 8 does,
so the Sidekiq Web UI's Metrics pages chart Python jobs next to Ruby ones:

* ``h|<Class>-<d>-<H>:<M>``: ``BITFIELD <key> OVERFLOW SAT INCRBY u16 #<i> <n> …``
  for the non-zero duration buckets, then ``EXPIRE <key> 28800``;
* ``j|<YYMMDD>|<H>:<M>`` (ten minutes) then ``j|<YYMMDD>|<H>:<MM>`` (one
  minute): ``HINCRBY`` per field, then ``EXPIRE`` (3 days, 8 hours).

Every key is named after the flush time, as Sidekiq does. The writes go in
one MULTI, so a flush that fails has written nothing and its counts are put
back for the next one.

Counting rules (Sidekiq's, which the Web UI's arithmetic relies on: average =
``ms / (p - f)``): every execution counts in ``p``; one that raised counts in
``f``; only the others add their duration to ``ms`` and the histogram. An
interrupted job (``Interrupted``, or the retry layer's ``Skip``) is not a
failure: it ran for the time it ran. A job cut short by a shutdown is one.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from wurk.client.middleware import ServerMiddleware
from wurk.errors import Interrupted, LostReplyError
from wurk.metrics import keys
from wurk.server.retry import Skip

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: Upper bounds (exclusive, in ms) of the 26 duration buckets; the last one
#: takes everything slower than 335 s.
BUCKET_BOUNDS: tuple[float, ...] = (
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1100, 1700, 2500,
    3800, 5750, 8500, 13000, 20000, 30000, 45000, 65000, 100000, 150000,
    225000, 335000, 1e20,
)  # fmt: skip
BUCKET_LABELS: tuple[str, ...] = (
    "20ms", "30ms", "45ms", "65ms", "100ms", "150ms", "225ms", "335ms", "500ms",
    "750ms", "1.1s", "1.7s", "2.5s", "3.8s", "5.75s", "8.5s", "13s", "20s", "30s",
    "45s", "65s", "100s", "150s", "225s", "335s", "Slow",
)  # fmt: skip
BUCKETS = len(BUCKET_BOUNDS)

#: The service name under which a configuration keeps its tracker.
SERVICE = "execution_metrics"
DEFAULT_FLUSH_INTERVAL = 5.0

_NOT_FAILURES = (Skip, Interrupted)
_create_lock = threading.Lock()


def bucket_index(ms: float) -> int:
    """The histogram bucket of a duration: the first whose bound exceeds it."""
    return bisect.bisect_right(BUCKET_BOUNDS, ms)


class ExecutionTracker:
    """Thread-safe per-class counters and histograms of one process."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._lock = threading.Lock()
        # Each class's three field names, built once: counting a job builds no strings.
        self._fields: dict[str, tuple[str, str, str]] = {}
        self._jobs: dict[str, int] = {}
        self._grams: dict[str, list[int]] = {}
        self._last_flush = time.monotonic()

    def track(self, klass: str, run: Callable[[], Any]) -> Any:
        """Run ``run()`` and count it under ``klass``; its result or exception passes through."""
        started = time.monotonic_ns()
        failed = False
        try:
            return run()
        except _NOT_FAILURES:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            self.record(klass, (time.monotonic_ns() - started) // 1_000_000, failed=failed)

    async def track_async(self, klass: str, run: Callable[[], Awaitable[Any]]) -> Any:
        """:meth:`track` for a job on the event loop."""
        started = time.monotonic_ns()
        failed = False
        try:
            return await run()
        except _NOT_FAILURES:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            self.record(klass, (time.monotonic_ns() - started) // 1_000_000, failed=failed)

    def record(self, klass: str, ms: int, *, failed: bool = False) -> None:
        """Count one execution of ``klass`` that took ``ms`` milliseconds."""
        names = self._fields.get(klass)
        if names is None:
            names = self._fields.setdefault(klass, (f"{klass}|ms", f"{klass}|p", f"{klass}|f"))
        with self._lock:
            jobs = self._jobs
            if failed:
                jobs[names[2]] = jobs.get(names[2], 0) + 1
            else:
                jobs[names[0]] = jobs.get(names[0], 0) + ms
                gram = self._grams.get(klass)
                if gram is None:
                    gram = self._grams[klass] = [0] * BUCKETS
                gram[bucket_index(ms)] += 1
            jobs[names[1]] = jobs.get(names[1], 0) + 1

    def swap(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        """Take the counts gathered so far, leaving empty ones in their place."""
        with self._lock:
            jobs, grams = self._jobs, self._grams
            self._jobs, self._grams = {}, {}
        return jobs, grams

    def restore(self, jobs: dict[str, int], grams: dict[str, list[int]]) -> None:
        """Put back the counts of a flush that did not reach Redis."""
        with self._lock:
            for field, count in jobs.items():
                self._jobs[field] = self._jobs.get(field, 0) + count
            for klass, counts in grams.items():
                gram = self._grams.setdefault(klass, [0] * BUCKETS)
                for index, count in enumerate(counts):
                    gram[index] += count

    def flush_if_due(self) -> int:
        """Flush when ``metrics_flush_interval`` seconds have passed since the last one."""
        interval = float(self.config.option("metrics_flush_interval", DEFAULT_FLUSH_INTERVAL))
        if time.monotonic() - self._last_flush < interval:
            return 0
        return self.flush()

    def flush(self, now: datetime | None = None) -> int:
        """Write the counts to Redis; returns how many fields and buckets were sent."""
        self._last_flush = time.monotonic()
        jobs, grams = self.swap()
        if not jobs:
            return 0
        at = (now or datetime.now(UTC)).astimezone(UTC)
        try:
            return self.config.redis_pool.execute(lambda conn: write(conn, jobs, grams, at), once=True)
        except LostReplyError:
            # Possibly applied: putting the counts back could count them twice.
            self.config.logger.warning(
                "metrics: the reply to a flush was lost; up to %s job counts of this minute may be missing",
                sum(jobs.values()),
            )
            return 0
        except Exception:
            self.restore(jobs, grams)
            raise


def write(conn: Any, jobs: dict[str, int], grams: dict[str, list[int]], at: datetime) -> int:
    """One MULTI with Sidekiq 8's commands for a batch of counts."""
    pipe = conn.pipeline(transaction=True)
    sent = 0
    for klass, counts in grams.items():
        key = keys.histogram(klass, at)
        increments: list[Any] = []
        for index, count in enumerate(counts):
            if count:
                increments += ["INCRBY", "u16", f"#{index}", count]
        if increments:
            pipe.execute_command("BITFIELD", key, "OVERFLOW", "SAT", *increments)
            sent += len(increments) // 4
        pipe.expire(key, keys.HISTOGRAM_TTL)
    for key, ttl in ((keys.ten_minutes(at), keys.TEN_MINUTE_TTL), (keys.one_minute(at), keys.ONE_MINUTE_TTL)):
        for field, count in jobs.items():
            pipe.hincrby(key, field, count)
            sent += 1
        pipe.expire(key, ttl)
    pipe.execute()
    return sent


def tracker_for(config: Any) -> ExecutionTracker:
    """The configuration's tracker, created on first use (once, even under threads)."""
    tracker = config.lookup(SERVICE)
    if tracker is None:
        with _create_lock:
            tracker = config.lookup(SERVICE, ExecutionTracker)
    found: ExecutionTracker = tracker
    return found


def class_name(job: dict[str, Any]) -> str:
    """The name metrics are kept under: an ActiveJob's ``wrapped`` class, else ``class``."""
    return str(job.get("wrapped") or job.get("class"))


class History(ServerMiddleware):
    """Counts every job into the process's :class:`ExecutionTracker`.

    A built-in, innermost in the server chain; remove it with
    ``config.server_middleware.remove(wurk.metrics.History)``.
    """

    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        config = self.wurk_config
        if config is None:
            return call_next()
        return tracker_for(config).track(class_name(job), call_next)

    def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Awaitable[Any]:
        # The tracker's coroutine itself, not one around it: see Chain.invoke_async.
        config = self.wurk_config
        if config is None:
            return call_next()
        return tracker_for(config).track_async(class_name(job), call_next)


#: Sidekiq's name for the same middleware.
Middleware = History


def flush_on_beat(config: Config) -> None:
    """The heartbeat's flush: only when due, and only if this process counted anything."""
    tracker = config.lookup(SERVICE)
    if tracker is not None:
        tracker.flush_if_due()


def flush_at_exit(config: Config) -> None:
    """The last flush, at exit, whatever the interval."""
    tracker = config.lookup(SERVICE)
    if tracker is not None:
        tracker.flush()
