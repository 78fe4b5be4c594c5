"""The application the iterable-job tests run on real ``wurk`` workers.

Every job leaves its evidence in Redis: each iteration sets the item's bit in
the ``seen`` bitmap and counts one ``calls`` (one round trip, so the per-item
work stays tiny), and each callback appends its name to ``events``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from typing import Any

import redis

import wurk
from tests.evidence import evidence_url

_local = threading.local()


def evidence() -> redis.Redis:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = redis.Redis.from_url(evidence_url())
    return conn


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = float(os.environ.get("TEST_POLL_INTERVAL", "0.2"))
    config["heartbeat_interval"] = float(os.environ.get("TEST_HEARTBEAT_INTERVAL", "0.5"))
    config.death_handlers.append(lambda job, exc: evidence().rpush("deaths", job["jid"]))
    config.on_poison(lambda pill: evidence().rpush("poisoned", str(pill["jid"])))


class Recorded(wurk.IterableJob):
    """Callbacks append their names to ``events``; iterations mark ``seen``."""

    def mark(self, index: int) -> None:
        pipe = evidence().pipeline(transaction=False)
        pipe.setbit("seen", index, 1)
        pipe.incr("calls")
        pipe.execute()

    def on_start(self) -> None:
        evidence().rpush("events", "on_start")

    def on_resume(self) -> None:
        evidence().rpush("events", "on_resume")

    def on_stop(self) -> None:
        evidence().rpush("events", "on_stop")

    def on_cancel(self) -> None:
        evidence().rpush("events", "on_cancel")

    def on_complete(self) -> None:
        evidence().rpush("events", "on_complete")


class Walk(Recorded):
    """``count`` items of an array, each marked once per run of it (and, with
    a ``pause``, a sleep that keeps the pace steady on a fast machine)."""

    def build_enumerator(self, count: int, pause: float, cursor: Any) -> Any:
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int, pause: float) -> None:
        self.mark(item)
        if pause:
            time.sleep(pause)


class QuickSaves(Walk):
    """A :class:`Walk` that checkpoints every half second, so a test sees
    progress saved soon after each start."""

    STATE_FLUSH_INTERVAL = 0.5


class ExitsAt(Recorded):
    """Walks ``count`` items, saving after each, and ends its process with
    ``os._exit`` at item ``bad``, every time: a poison item."""

    STATE_FLUSH_INTERVAL = 0.0

    def build_enumerator(self, count: int, bad: int, cursor: Any) -> Any:
        evidence().rpush("runs", f"{self.jid}:{cursor}")
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int, bad: int) -> None:
        if item == bad:
            os._exit(3)
        self.mark(item)


class Endless(Recorded):
    """Runs until cancelled; each iteration takes ``pause`` seconds."""

    def build_enumerator(self, pause: float, cursor: Any) -> Any:
        return ((n, n) for n in itertools.count(cursor or 0))

    def each_iteration(self, item: int, pause: float) -> None:
        self.mark(item)
        evidence().set("last-iteration", time.time())
        time.sleep(pause)


class FailsOnce(Recorded, retry=3):
    """Fails at item ``bad`` on its first run, after a checkpoint; the retry
    resumes from that checkpoint under the same jid."""

    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict[str, Any]) -> int:
        return 1

    def build_enumerator(self, count: int, bad: int, cursor: Any) -> Any:
        evidence().rpush("runs", f"{self.jid}:{cursor}")
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int, bad: int) -> None:
        self.mark(item)
        if item == bad and evidence().set("failed-once", 1, nx=True):
            raise RuntimeError(f"item {item} failed")
        time.sleep(0.002)


class Cooperative(Recorded):
    """One long iteration that bails out itself once the worker stops."""

    def build_enumerator(self, cursor: Any) -> Any:
        return self.array_enumerator([0, 1], cursor=cursor)

    def each_iteration(self, item: int) -> None:
        self.mark(item)
        if item == 0 and not evidence().exists("bailed"):
            evidence().rpush("events", "in-long-iteration")
            while True:
                if self.interrupted():
                    evidence().set("bailed", 1)
                    evidence().rpush("events", "bailing-out")
                    raise wurk.Interrupted()
                time.sleep(0.01)


class Stuck(Recorded):
    """Walks ``count`` items quickly, then sticks in an item from ``stuck`` on,
    once a checkpoint is saved (on its first run only), far past any shutdown
    timeout."""

    def build_enumerator(self, count: int, stuck: int, cursor: Any) -> Any:
        evidence().rpush("runs", f"{self.jid}:{cursor}")
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int, stuck: int) -> None:
        self.mark(item)
        # Stuck at ``stuck`` or, on a slow machine, at the first item after
        # the first checkpoint, so that there is one to resume from.
        past = item >= stuck and evidence().hexists(f"it-{self.jid}", "c")
        if past and evidence().set("stuck-once", 1, nx=True):
            evidence().rpush("events", "stuck")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.05)
        time.sleep(0.001)


class AsyncPatient(wurk.Job):
    """A plain ``async def perform`` that waits for its worker to stop."""

    async def perform(self) -> None:
        evidence().rpush("events", "async-started")
        while not self.interrupted():
            await asyncio.sleep(0.01)
        evidence().rpush("events", "async-saw-stop")
        raise wurk.Interrupted()


class BesideAnAsyncJob(Recorded):
    """Walks ``count`` items; at the first it notes its thread and waits (a
    blocking wait) until :class:`AwaitsTheWalk` is running."""

    def build_enumerator(self, count: int, cursor: Any) -> Any:
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int) -> None:
        if item == 0:
            evidence().set("walking", threading.current_thread().name)
            deadline = time.monotonic() + 60
            while not evidence().exists("awaiting"):
                if time.monotonic() > deadline:
                    raise TimeoutError("the async job never ran beside the walk")
                time.sleep(0.02)
        self.mark(item)


class AwaitsTheWalk(wurk.Job):
    """An ``async def perform`` that notes its thread and awaits until
    :class:`BesideAnAsyncJob` is walking."""

    async def perform(self) -> None:
        evidence().set("awaiting", threading.current_thread().name)
        for _ in range(1200):
            if evidence().exists("walking"):
                return
            await asyncio.sleep(0.05)
        raise TimeoutError("the walk never started")
