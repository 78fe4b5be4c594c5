"""The Python half of the Ruby interop tests: jobs that leave evidence in Redis.

Loaded by the Python worker subprocess (``-r tests.interop.interop_app``) and
imported by the tests to enqueue. Ruby code names some of these jobs by short
foreign names (``"PyEcho"``, ``"InteropCount"``), mapped below; the rest are
reached by their dotted path.

``RubyEcho`` and ``RubyFail`` go the other way: Python names for Ruby classes,
used only to push.

Every run appends one JSON line to ``interop:results`` with the same fields the
Ruby job classes write, plus ``"runner": "python"``.
"""

from __future__ import annotations

import json
import os
import time

import redis

import wurk
from tests.evidence import evidence_url

RESULTS_KEY = "interop:results"
COUNTS_KEY = "interop:counts"
STARTED_KEY = "interop:started"


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


def record(job: wurk.Job, args: list) -> None:
    entry = {
        "jid": job.jid,
        "class": type(job).__name__,
        "args": args,
        "runner": "python",
        "pid": os.getpid(),
        "ran_at": time.time(),
    }
    client = evidence()
    try:
        client.rpush(RESULTS_KEY, json.dumps(entry, separators=(",", ":"), ensure_ascii=False))
    finally:
        client.close()


class PyEcho(wurk.Job):
    """Records its arguments exactly as they arrived."""

    def perform(self, *args):
        record(self, list(args))


class PyCount(wurk.Job):
    """The Python twin of Ruby's ``InteropCount``: counts runs per jid."""

    def perform(self, label=None, seconds=0):
        client = evidence()
        try:
            client.hincrby(COUNTS_KEY, str(self.jid), 1)
        finally:
            client.close()
        if seconds:
            time.sleep(float(seconds))
        record(self, [label, seconds])


class PySlow(wurk.Job):
    """Keeps a processor busy so the job shows on the Busy page."""

    def perform(self, seconds=20):
        client = evidence()
        try:
            client.rpush(STARTED_KEY, str(self.jid))
        finally:
            client.close()
        time.sleep(float(seconds))


class PyFail(wurk.Job, retry=2, backtrace=True):
    """Fails every time; lands in the retry set."""

    def perform(self, *args):
        raise ValueError(f"PyFail refuses {args!r}")


class PyDie(wurk.Job, retry=0, backtrace=4):
    """Fails once and goes straight to the dead set."""

    def perform(self, *args):
        raise KeyError(f"PyDie gives up on {args!r}")


# Python stand-ins for Ruby job classes: pushing through them writes the Ruby
# class name, with the options the Ruby class declares.


class RubyEcho(wurk.Job):
    wire_name = "InteropEcho"


class RubyFail(wurk.Job, retry=2, backtrace=10):
    wire_name = "FailJob"


@wurk.configure_server
def tune(config):
    """Short heartbeats and scheduler polls, so the tests see changes quickly."""
    config["heartbeat_interval"] = float(os.environ.get("INTEROP_HEARTBEAT", "1.0"))
    config["poll_interval_average"] = float(os.environ.get("INTEROP_POLL", "1.0"))
    config.jobs.register("PyEcho", PyEcho)
    config.jobs.register("InteropCount", PyCount)
