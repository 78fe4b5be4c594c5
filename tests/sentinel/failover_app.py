"""The application of the failover tests: a job that records each run in a file.

Loaded by a real ``wurk`` worker (``-r tests.sentinel.failover_app``) and by
the pushing process (``tests/sentinel/pusher.py``). A run appends one line,
``<jid> <epoch seconds>``, to the file named by ``FAILOVER_EVIDENCE``: a file,
not Redis, so that the record survives the primary it ran against. Lines of
a few dozen bytes written with ``O_APPEND`` never interleave.
"""

from __future__ import annotations

import os
import time

import wurk

EVIDENCE_ENV = "FAILOVER_EVIDENCE"


@wurk.configure_server
def tune(config):
    config["heartbeat_interval"] = 1.0
    config["fetch_poll_interval"] = 0.5


class Recorded(wurk.Job):
    """Records that it ran."""

    def perform(self, n):
        fd = os.open(os.environ[EVIDENCE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{self.jid} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)
