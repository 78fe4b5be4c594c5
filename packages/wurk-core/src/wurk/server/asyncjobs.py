"""Jobs whose ``perform`` is ``async def``: run on the event loop, holding no thread.

A processor thread fetches every job. When the job's class has an ``async
def perform``, the thread does not run it: it hands the job to the process's
event loop (:class:`~wurk.server.loop.LoopRunner`) and goes back to fetching.
On the loop the job goes through the same steps a thread's job does (log
context, the retry guards, stats, the server middleware, ``perform``, the
acknowledgement), awaited instead of called, so while it awaits it holds
nothing but its place among ``async_concurrency``.

What stays the same:

* **Claims stay bounded.** A job handed to the loop is *lent* by the claim
  ledger: it is still held in the private list, and the bound widens by one
  while it is, so the threads can claim the next jobs without the bound
  counting the async ones against them; while async jobs run, a tenth of
  ``async_concurrency`` more may be claimed ahead for the loop. What a crash
  hands back is at most that.
* **At-least-once.** The job stays in the private list until it is
  acknowledged, as every job does; a SIGKILL leaves it there for the next
  fetch or the reaper.
* **The retry layer.** A failure is booked (retry or dead set) by the same
  code, called on the loop; it makes no await, so nothing cuts into it.
* **Shutdown.** Quiet stops the fetching, and the stop waits for async jobs
  until the deadline as for threads. Past it each task still running is
  cancelled: the cancellation reaches the job where it awaits, the job is not
  acknowledged and goes back to its queue with the others. A booking or an
  acknowledgement is never cut, since neither awaits.
* **Middleware.** The chain awaits a middleware's ``call_async`` (every
  built-in one has one); a middleware with only ``call`` runs on a thread
  of its own for the job (see :meth:`wurk.client.middleware.Chain.invoke_async`).

A job whose ``perform`` is a plain function returning an awaitable still
runs on its thread, awaiting through the loop, as before.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import inspect
import itertools
import threading
import time
from typing import TYPE_CHECKING, Any

from wurk.server.logger import tid

if TYPE_CHECKING:
    from wurk.server.fetch import UnitOfWork
    from wurk.server.loop import LoopRunner
    from wurk.server.processor import Processor

#: How often a thread waiting for room among the async jobs checks for a quiet.
ROOM_CHECK = 0.2


def is_async_job(job_class: type) -> bool:
    """Whether ``job_class`` runs on the event loop: its ``perform`` is ``async def``."""
    return inspect.iscoroutinefunction(getattr(job_class, "perform", None))


class AsyncJobs:
    """One capsule's async jobs in flight: the room for them, their tasks, their stop."""

    def __init__(self, loop: LoopRunner, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._count = 0
        #: Each task and its job, changed on the loop's thread only.
        self._tasks: dict[asyncio.Task[None], UnitOfWork] = {}
        self._keys = itertools.count(1)
        #: Jobs handed over and not yet started on the loop, with whether the
        #: loop was already asked to start them: a burst of jobs costs the
        #: loop one wake-up, not one each.
        self._handed: collections.deque[tuple[Any, UnitOfWork, contextvars.Context]] = collections.deque()
        self._asked = False

    @property
    def running(self) -> int:
        """How many async jobs are in flight now."""
        with self._lock:
            return self._count

    def active(self) -> bool:
        """Whether async jobs run now: then the threads claim ahead, since
        each job they claim is handed on at once (or waits its turn in the
        claimed jobs, still under the bound)."""
        return self._count > 0  # read without the lock: a hint, not a decision

    def start(self, processor: Processor, uow: UnitOfWork, job: dict[str, Any], jobstr: str, job_class: type) -> bool:
        """Hand the job to the loop once there is room; ``False`` when the
        processor was told to stop while waiting (the job is the caller's to
        give back)."""
        with self._lock:
            while self._count >= self.limit:
                if processor.stopping():
                    return False
                self._changed.wait(ROOM_CHECK)
            self._count += 1
        lend = getattr(processor.fetcher, "lend", None)
        if lend is not None:
            lend(uow)
        key = f"{tid()}-{next(self._keys):x}"  # its own row on the Busy page
        coroutine = processor.process_async(uow, job, jobstr, job_class, key)
        # The task runs in a copy of the processor thread's context (the
        # worker's configuration and stopping flag), as the thread's job would.
        self._handed.append((coroutine, uow, contextvars.copy_context()))
        with self._lock:
            ask, self._asked = not self._asked, True
        if ask:
            self.loop.call_soon(self._spawn)
        return True

    def _spawn(self) -> None:
        """On the loop: start every job handed over since the last call."""
        with self._lock:
            self._asked = False
        loop = asyncio.get_running_loop()
        handed = self._handed
        while handed:
            coroutine, uow, context = handed.popleft()
            task = loop.create_task(coroutine, context=context)
            self._tasks[task] = uow
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        with self._lock:
            self._count -= 1
            self._changed.notify_all()

    def wait(self, deadline: float) -> bool:
        """Wait until every async job has ended or ``deadline`` passed; whether they all ended."""
        with self._lock:
            while self._count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def cancel(self, grace: float) -> None:
        """Cancel every async job still running and wait up to ``grace``
        seconds for them to unwind (not acknowledged: back to their queues)."""
        if self.running:
            self.loop.call_soon(self._cancel_all)
            self.wait(time.monotonic() + grace)

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
