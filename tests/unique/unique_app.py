"""The application real workers and pushers of the unique-job tests load
(``-r tests.unique.unique_app``): unique jobs enabled, and jobs that report
what they saw to the ``ran`` list."""

from __future__ import annotations

import json
import os
import signal
import time

import redis

import wurk
import wurk_unique

wurk_unique.enable()

RAN = "ran"
#: The jids the test keeps inside ``perform`` (see :class:`Gated`).
HOLD = "hold"
#: What each run of a :class:`Gated` job did: ``[event, n, jid, pid]``.
EVENTS = "events"


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5


def report(entry: str) -> None:
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        client.rpush(RAN, entry)
    finally:
        client.close()


class Once(wurk.Job, unique_for=600):
    def perform(self, n: int) -> None:
        report(f"once:{n}")


class ReleasedAtStart(wurk.Job, unique_for=600, unique_until="start"):
    def perform(self, n: int) -> None:
        # The lock is gone before perform runs: a duplicate could be pushed now.
        report("free" if wurk_unique.locked(ReleasedAtStart, [n]) is None else "held")


class HeldThroughRetries(wurk.Job, unique_for=600, retry=3):
    def perform(self, n: int) -> None:
        report("held" if wurk_unique.locked(HeldThroughRetries, [n]) == self.jid else "free")
        raise ValueError("fails, will retry")


class DiesAtOnce(wurk.Job, unique_for=600, retry=0):
    def perform(self, n: int) -> None:
        raise ValueError("straight to the dead set")


class Gated(wurk.Job, unique_for=600):
    """Notes its start, stays in ``perform`` while the test holds its jid, and
    notes its end: the test decides when its worker is killed mid-run."""

    def perform(self, n: int) -> None:
        gate(self, n)


class GatedUntilStart(wurk.Job, unique_for=600, unique_until="start"):
    def perform(self, n: int) -> None:
        gate(self, n)


def gate(job: wurk.Job, n: int) -> None:
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    try:
        client.rpush(EVENTS, json.dumps(["start", n, job.jid, os.getpid()]))
        while client.sismember(HOLD, str(job.jid)):
            time.sleep(0.05)
        client.rpush(EVENTS, json.dumps(["done", n, job.jid, os.getpid()]))
    finally:
        client.close()


class Crasher(wurk.Job, unique_for=600):
    """Notes its start and kills the process running it: a poison pill."""

    def perform(self, n: int) -> None:
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        client.rpush(EVENTS, json.dumps(["start", n, self.jid, os.getpid()]))
        os.kill(os.getpid(), signal.SIGKILL)
