"""The event loop that runs ``async def perform`` jobs.

One loop per worker process, on a thread of its own, started on first use.
A processor thread hands it a coroutine and waits for the result, so an
``async`` job gets real asyncio (sockets, timers, ``gather``) while the
thread count still bounds how many jobs run at once.

A forked child inherits the runner but not its thread: the loop would look
started and never run anything. The runner notices that its process changed
and starts a loop of its own instead (see :mod:`wurk.config.forking`).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

_marks = threading.local()


def on_job_loop() -> bool:
    """Whether this thread runs a worker's job loop: a blocking wait here
    stalls every async job of the process, not only the caller."""
    return getattr(_marks, "job_loop", False)


def _run_job_loop(loop: asyncio.AbstractEventLoop) -> None:
    _marks.job_loop = True
    loop.run_forever()


class LoopRunner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _forget_after_fork(self) -> None:
        """Drop what the parent's loop left behind, without closing it.

        The inherited loop believes it is running (its thread was in
        ``run_forever`` at the fork), so ``close`` would refuse; its selector
        and self-pipe are only descriptors, gone with the child. The lock may
        have been held by a parent thread that does not exist here. A runner
        is first used in a child by the threads the child starts, one call
        before any other, so the check needs no lock of its own.
        """
        self._lock = threading.Lock()
        self._loop = self._thread = None
        self._pid = os.getpid()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        if self._pid != os.getpid():
            self._forget_after_fork()
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_run_job_loop, args=(loop,), name="wurk-asyncio", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Run ``awaitable`` on the loop and wait for its result in this thread.

        It runs as a task in a copy of this thread's context, as a thread's
        call would see it: the context variables a server middleware set for
        the job (a carried tenant, the trace's current span) reach an
        ``async def perform`` too, and what the task sets stays in its copy.
        """
        loop = self._ensure()
        context = contextvars.copy_context()

        async def wrapper() -> Any:
            return await asyncio.get_running_loop().create_task(_await(awaitable), context=context)

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result()

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """Call ``callback(*args)`` on the loop's thread, starting the loop if need be."""
        self._ensure().call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        if self._pid != os.getpid():
            self._forget_after_fork()  # the parent's loop is the parent's to stop
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            loop.close()


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
