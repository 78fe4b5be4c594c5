"""The application real workers and pushers of the unique-job tests load
(``-r tests.unique.unique_app``): unique jobs enabled, and jobs that report
what they saw to the ``ran`` list."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time

import redis

import wurk
import wurk_unique
from tests.evidence import evidence_url

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
    client = redis.Redis.from_url(evidence_url())
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
    client = redis.Redis.from_url(evidence_url())
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
        client = redis.Redis.from_url(evidence_url())
        client.rpush(EVENTS, json.dumps(["start", n, self.jid, os.getpid()]))
        os.kill(os.getpid(), signal.SIGKILL)


#: The async jobs that have started, by ``n`` (see :func:`gather`).
ASYNC_STARTED = "async-started"


async def gather(n: int, total: int) -> None:
    """Note ``n`` started and await until ``total`` have: they go on only
    if they run at once, which on a worker with one thread only the event
    loop allows."""
    client = redis.Redis.from_url(evidence_url())
    try:
        client.sadd(ASYNC_STARTED, n)
        for _ in range(600):
            if int(client.scard(ASYNC_STARTED)) >= total:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"only {client.scard(ASYNC_STARTED)} of {total} async jobs started together")
    finally:
        client.close()


class AsyncOnce(wurk.Job, unique_for=600):
    async def perform(self, n: int, total: int) -> None:
        await gather(n, total)
        report(f"async-once:{n}:{threading.current_thread().name}")


class AsyncFailsUntilHealed(wurk.Job, unique_for=600, retry=3):
    """Reports whether it still holds its lock, then fails until ``healed`` is set."""

    async def perform(self, n: int, total: int) -> None:
        await gather(n, total)
        held = wurk_unique.locked(AsyncFailsUntilHealed, [n, total]) == self.jid
        report(f"{n}:{'held' if held else 'free'}")
        client = redis.Redis.from_url(evidence_url())
        try:
            healed = client.get("healed")
        finally:
            client.close()
        if not healed:
            raise ValueError("fails until healed, will retry")
