"""A manager: the processors and the fetcher of one capsule in one process.

It starts ``concurrency`` processor threads, replaces one that dies, and
carries the two-phase stop: ``quiet`` stops fetching, ``stop(deadline)`` waits
for running jobs, interrupts those still running (each once it is out of its
critical sections, :mod:`wurk.server.interrupts`), flushes acknowledgements, and
gives back to their queues every job still in this process's private lists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wurk.server.asyncjobs import AsyncJobs, is_async_job
from wurk.server.fetch import Fetcher, ReliableFetcher
from wurk.server.fetch.reliable import async_ahead
from wurk.server.processor import Processor, ProcessStats
from wurk.server.retry import JobRetry

#: Jobs shorter than this on average are claimed ahead of the threads: below
#: it, the round trip of a claim per job (a few tenths of a millisecond) would
#: cost the threads more than half a percent of their time.
FAST_JOB = 0.05
SLOW_JOB = 1.0
#: A processor thread that died is replaced after 0.5 s, doubling with each
#: death within the window, up to the cap.
DEATH_WINDOW = 60.0
MAX_REPLACE_DELAY = 30.0
#: Seconds past the jobs' deadline a thread inside a critical section (a
#: failure being booked, an acknowledgement) gets to finish it before its job
#: is given back anyway: a booking is a round trip or two, and the death
#: handlers.
BOOKING_GRACE = 1.0

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.server.identity import ProcessIdentity
    from wurk.server.loop import LoopRunner


class Manager:
    def __init__(
        self,
        capsule: Capsule,
        identity: ProcessIdentity,
        stats: ProcessStats,
        work_state: dict[str, Any],
        loop: LoopRunner,
    ) -> None:
        self.capsule = capsule
        self.config = capsule.config
        self.stats = stats
        self.work_state = work_state
        self.loop = loop
        fetch_class: Callable[[Capsule, ProcessIdentity], Fetcher] = (
            self.config.option("fetch_class") or ReliableFetcher
        )
        self.fetcher: Fetcher = fetch_class(capsule, identity)
        setup = self.config.option("fetch_setup")
        if setup is not None:
            setup(self.fetcher)
        self.fetcher.prefetch = self.prefetch
        self._average = SLOW_JOB
        self.retrier = JobRetry(self.config)
        self._resolved: dict[str, type] = {}
        #: Job class name -> its class when ``perform`` is ``async def``, else ``None``.
        self.async_classes: dict[str, type | None] = {}
        self.asyncs = AsyncJobs(loop, int(self.config["async_concurrency"]))
        self._lock = threading.Lock()
        self._done = False
        self._deaths: list[float] = []
        self.processors = [Processor(self, index) for index in range(capsule.concurrency)]

    def resolve(self, name: str) -> type:
        found = self._resolved.get(name)
        if found is None:
            found = self._resolved[name] = self.config.jobs.resolve(name)
        return found

    def async_class(self, name: str) -> type | None:
        """The class named ``name`` if it runs on the event loop, else
        ``None`` (also when it cannot be resolved: the thread's run reports that)."""
        try:
            found = self.resolve(name)
        except Exception:
            return None  # not remembered: a module deployed later resolves then
        kind = found if is_async_job(found) else None
        self.async_classes[name] = kind
        return kind

    def job_finished(self, seconds: float) -> None:
        """Fold one job's duration into the moving average the prefetch uses."""
        self._average += (seconds - self._average) * 0.05

    def prefetch(self) -> int:
        """Claim ahead while jobs are short, or while async jobs run (each
        hands its thread back at once); none while threads' jobs are long, so
        a slow job never holds back work another process could run.

        Short jobs: as many as there are threads, two fewer for every ten,
        so that with many threads one claim does not reserve all the room
        under the bound (twice the concurrency) and the threads that finish
        while its reply is on the way claim for themselves rather than wait
        for it. Measured with 5 ms jobs: 25 threads drained a third slower
        with 25 ahead than with 20, 10 threads 5% slower with 10 than with
        8, and 5 threads 10% slower with 4 than with 5."""
        concurrency = self.capsule.concurrency
        if self.asyncs.active():
            return concurrency + async_ahead(self.asyncs.limit)
        if self._average < FAST_JOB:
            return concurrency - 2 * (concurrency // 10)
        return 0

    def start(self) -> None:
        for processor in self.processors:
            processor.start()

    def busy(self) -> int:
        return sum(1 for p in list(self.processors) if p.current is not None) + self.asyncs.running

    def processor_died(self, processor: Processor, exc: BaseException) -> None:
        """Replace a processor whose thread ended on an unexpected error, after
        a pause that doubles with each death in the last minute (up to 30 s),
        so a fault that kills every thread does not spin."""
        with self._lock:
            if self._done:
                return
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < DEATH_WINDOW] + [now]
            delay = min(MAX_REPLACE_DELAY, 0.5 * 2 ** (len(self._deaths) - 1))
            index = self.processors.index(processor)
            replacement = Processor(self, index)
            self.processors[index] = replacement
        timer = threading.Timer(delay, self._start_replacement, args=(replacement,))
        timer.daemon = True
        timer.start()

    def _start_replacement(self, replacement: Processor) -> None:
        with self._lock:
            if self._done:
                return
        replacement.start()

    def quiet(self) -> None:
        with self._lock:
            self._done = True
        for processor in self.processors:
            processor.terminate()
        self.fetcher.quiet()

    def stop(self, deadline: float) -> int:
        """Wait for running jobs until ``deadline``, then requeue what is left.

        A thread still running then is interrupted; one inside a critical
        section (booking its job's fate, acknowledging) finishes it first, up
        to :data:`BOOKING_GRACE` seconds, so that its job ends booked and
        acknowledged rather than booked and given back too. Only then are the
        acknowledgements flushed and everything left in the private lists
        given back. Returns the number of jobs given back to their queues.
        """
        self.quiet()
        for processor in self.processors:
            remaining = deadline - time.monotonic()
            if remaining > 0 and processor.thread.ident is not None:
                processor.thread.join(remaining)
        self.asyncs.wait(deadline)
        running = [processor for processor in self.processors if processor.alive]
        for processor in running:
            processor.interrupt()  # now (its outcome told first), or where its critical section ends
        self.asyncs.cancel(BOOKING_GRACE)  # each one's job goes back to its queue below
        settled_by = time.monotonic() + BOOKING_GRACE
        for processor in running:
            if not processor.shield.settle(settled_by - time.monotonic()):
                self.config.logger.warning(
                    "%s was still booking its job %.1f s past the deadline: the job goes back to its queue "
                    "and may also be booked",
                    processor.thread.name,
                    BOOKING_GRACE,
                )
        self.fetcher.flush_acks()
        return int(self.fetcher.requeue_all())
