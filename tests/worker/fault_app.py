"""The application the fault-scenario tests run: jobs that leave evidence in a file.

Loaded by real ``wurk`` worker processes (``-r tests.worker.fault_app``).
Each job appends one JSON line per event to the file named by
``FAULT_EVIDENCE``, not to Redis, so the evidence survives whatever the test
does to the server (a script flush, a restart, a stall). Lines of a few dozen
bytes written with ``O_APPEND`` never interleave, across threads or processes.

The timing knobs come from the environment, so each test can make the fetch
block, the reaper, heartbeats and the scheduler as slow or as fast as its
scenario needs.
"""

from __future__ import annotations

import json
import os
import signal
import time

import wurk

EVIDENCE_ENV = "FAULT_EVIDENCE"


def note(job: wurk.Job, event: str, label: object) -> None:
    line = json.dumps({"jid": job.jid, "label": label, "event": event, "at": time.time(), "pid": os.getpid()})
    fd = os.open(os.environ[EVIDENCE_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@wurk.configure_server
def tune(config):
    for option, variable in (
        ("fetch_poll_interval", "FAULT_FETCH_POLL"),
        ("super_fetch_reaper_interval", "FAULT_REAPER_INTERVAL"),
        ("poll_interval_average", "FAULT_SCHEDULER_POLL"),
        ("heartbeat_interval", "FAULT_HEARTBEAT"),
    ):
        if os.environ.get(variable):
            config[option] = float(os.environ[variable])
    if os.environ.get("FAULT_READ_TIMEOUT"):
        config.redis = {"read_timeout": float(os.environ["FAULT_READ_TIMEOUT"])}


class Note(wurk.Job):
    """Notes its start, takes ``seconds``, notes its end."""

    def perform(self, label, seconds=0):
        note(self, "start", label)
        if seconds:
            time.sleep(seconds)
        note(self, "done", label)


class Killer(wurk.Job):
    """Notes its start, then kills the process that runs it: a poison pill."""

    def perform(self, label):
        note(self, "start", label)
        os.kill(os.getpid(), signal.SIGKILL)
