"""The event loop that runs ``async def perform`` jobs.

One loop per worker process, on a thread of its own, started on first use.
A processor thread hands it a coroutine and waits for the result, so an
``async`` job gets real asyncio (sockets, timers, ``gather``) while the
thread count still bounds how many jobs run at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any


class LoopRunner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="wurk-asyncio", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, awaitable: Awaitable[Any]) -> Any:
        """Run ``awaitable`` on the loop and wait for its result in this thread."""
        loop = self._ensure()

        async def wrapper() -> Any:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapper(), loop).result()

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            loop.close()
