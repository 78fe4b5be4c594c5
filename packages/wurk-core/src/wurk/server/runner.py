"""Running a worker process in the foreground: boot, then wait for signals.

Signals are turned into names on a queue that the main thread reads, so every
action runs in the main thread, never inside a signal handler:

* ``TERM`` / ``INT``: graceful stop (drain up to ``timeout``, requeue the rest);
* ``TSTP``: quiet (stop fetching; one-way);
* ``TTIN``: log every thread's stack;
* ``USR2``: reopen the log file (rotation).

The same names arrive from Redis (``<identity>-signals``), popped by the
heartbeat, which is how the dashboard quiets or stops a process.
"""

from __future__ import annotations

import queue
import signal
from typing import TYPE_CHECKING

from wurk.server.launcher import Launcher
from wurk.server.logger import reopen

if TYPE_CHECKING:
    from wurk.config.configuration import Config

HANDLED = ("TERM", "INT", "TSTP", "TTIN", "USR2")


def run_foreground(config: Config) -> int:
    """Run a worker until it is told to stop; the process exit code."""
    names: queue.SimpleQueue[str] = queue.SimpleQueue()
    previous = {}
    for name in HANDLED:
        signum = getattr(signal, f"SIG{name}")
        previous[signum] = signal.signal(signum, lambda number, frame: names.put(signal.Signals(number).name[3:]))
    launcher = Launcher(config, on_signal=names.put)
    try:
        launcher.run()
        while True:
            try:
                name = names.get(timeout=1.0)
            except queue.Empty:
                continue
            if name in ("TERM", "INT"):
                config.logger.info("received %s, shutting down", name)
                launcher.stop()
                return 0
            if name == "TSTP":
                launcher.quiet()
            elif name == "TTIN":
                launcher.dump_threads()
            elif name == "USR2":
                reopen(config.logger)
            else:
                config.logger.warning("ignoring unknown signal %r", name)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
