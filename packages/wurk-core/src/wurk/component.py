"""The shared base of the worker's background threads.

The heartbeat, the scheduler, the reaper, the leader election and the
metrics rollup each run one named daemon thread that sleeps on a stop event,
so that ``stop()`` wakes it at once instead of waiting out its interval, and
joins it for a bounded time so a wedged Redis call cannot hang a shutdown.
"""

from __future__ import annotations

import threading


class BackgroundThread:
    #: The thread's name, as ``TTIN`` dumps and debuggers show it.
    thread_name = "wurk-background"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; ``True`` when ``stop()`` cut it short."""
        return self._stop.wait(seconds)

    def _run(self) -> None:
        raise NotImplementedError
