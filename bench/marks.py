"""The two moments a drain benchmark is timed by, sent from inside the jobs.

A job writes one line to the harness's FIFO when the first job of its
process starts and when the last job of the run ends: timing from the jobs
themselves leaves out the workers' boot and shutdown, which the harness
measures apart. Shared by ``drain.py`` and ``swarm.py``, whose worker
processes import it from this directory (it is on their ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


class Marks:
    def __init__(self, fifo: str) -> None:
        self.fifo = fifo
        self._started = False
        self._lock = threading.Lock()

    def send(self, word: str) -> None:
        """One ``<word> <monotonic seconds> <pid>`` line; nothing without a FIFO."""
        if not self.fifo:
            return
        fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, f"{word} {time.monotonic():.6f} {os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def first(self, unless: Callable[[], bool] | None = None) -> None:
        """Send ``first`` at this process's first job, once, however many
        threads race to it; not when ``unless()`` says an earlier job
        elsewhere already did."""
        if self._started:
            return
        with self._lock:
            if self._started:
                return
            self._started = True
        if unless is None or not unless():
            self.send("first")
