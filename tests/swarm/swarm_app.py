"""The application the swarm tests run under ``wurkswarm -r tests.swarm.swarm_app``.

Jobs leave their evidence in the file named by ``SWARM_EVIDENCE``, one JSON
line per event written with ``O_APPEND`` (whole lines never interleave across
processes), so what the tests judge survives any child being killed. The
timing knobs come from the environment so each test runs its scenario fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import wurk
from wurk.server.logger import build_logger

EVIDENCE_ENV = "SWARM_EVIDENCE"

#: The Gather jobs started in this process.
_gathered: set[str] = set()

#: Memory a Hog job holds on to until its process exits.
_hoard: list[bytes] = []


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
        ("heartbeat_interval", "SWARM_HEARTBEAT"),
        ("super_fetch_reaper_interval", "SWARM_REAPER_INTERVAL"),
        ("fetch_poll_interval", "SWARM_FETCH_POLL"),
        ("poll_interval_average", "SWARM_SCHEDULER_POLL"),
        ("swarm_memory_interval", "SWARM_MEMORY_INTERVAL"),
    ):
        if os.environ.get(variable):
            config[option] = float(os.environ[variable])
    if os.environ.get("SWARM_HEALTH_PORT"):
        # Written as for one process: the swarm switches port sharing on itself.
        config.health_check(port=int(os.environ["SWARM_HEALTH_PORT"]), bind="127.0.0.1", retry=0.5)
    if os.environ.get("SWARM_LOG"):
        config.logger = build_logger(os.environ["SWARM_LOG"])


class Note(wurk.Job):
    """Notes its start, takes ``seconds``, notes its end."""

    def perform(self, label, seconds=0):
        note(self, "start", label)
        if seconds:
            time.sleep(seconds)
        note(self, "done", label)


class Gather(wurk.Job):
    """An ``async def perform``: notes its start, then waits until ``total``
    jobs of its kind have started in this process, so it ends only if they
    all await at once."""

    async def perform(self, label, total):
        note(self, "start", label)
        _gathered.add(self.jid)
        for _ in range(400):
            if len(_gathered) >= total:
                note(self, "done", threading.current_thread().name)
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"only {len(_gathered)} of {total} started together")


class Hog(wurk.Job):
    """Holds ``mb`` megabytes (written, so resident) for the rest of its process's life."""

    def perform(self, label, mb, seconds=0):
        note(self, "start", label)
        _hoard.append(b"\x01" * (mb * 1024 * 1024))
        if seconds:
            time.sleep(seconds)
        note(self, "done", label)


class Spin(wurk.Job):
    """Burns CPU for ``rounds`` iterations (the GIL-bound work a swarm parallelises)."""

    def perform(self, label, rounds):
        total = 0
        for number in range(rounds):
            total += number * number
        note(self, "done", label)
