"""The application the limiter worker tests run (``-r tests.limiter.limited_app``):
a job whose limiter is always full, a job that sits in a concurrent slot for
as long as the test says, and a recorder of what each run saw."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import redis

import wurk
from tests.evidence import evidence_url
from wurk.client.middleware import ServerMiddleware
from wurk_limiter import Limiter


def client() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


class RecordRuns(ServerMiddleware):
    """Notes the ``overrated`` each run of a job arrived with."""

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Any) -> Any:
        client().rpush("runs", json.dumps([job["jid"], job.get("overrated"), queue]))
        return call_next()

    async def call_async(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Any) -> Any:
        # Awaited on the loop, so an async job holds no thread for it.
        client().rpush("runs", json.dumps([job["jid"], job.get("overrated"), queue]))
        return await call_next()


class Metrics:
    """A statsd client that records each counter in the ``metrics`` list."""

    def increment(self, metric: str, tags: list[str] | None = None) -> None:
        client().rpush("metrics", metric)


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config.dogstatsd = Metrics
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    config.server_middleware.prepend(RecordRuns)
    config.death_handlers.append(lambda job, exc: client().rpush("deaths", job["jid"]))


class Throttled(wurk.Job, queue="crawl"):
    """Over its limit at every run: rescheduled at once, dead at the third."""

    def perform(self) -> None:
        full = Limiter.window("always-full", 1, 3600, wait_timeout=0, reschedule=3, backoff=0)
        with full.within_limit():
            client().rpush("performed", self.jid)


class Paced(wurk.Job, queue="crawl"):
    """Over its limit at every run, put back a second later each time: the
    job log names the limiter and the delay; dead at the third run."""

    def perform(self) -> None:
        full = Limiter.window("always-full", 1, 3600, wait_timeout=0, reschedule=3, backoff=1)
        with full.within_limit():
            client().rpush("performed", self.jid)


class Steady(wurk.Job):
    """Runs within a roomy limiter: succeeds."""

    def perform(self) -> None:
        with Limiter.concurrent("roomy", 5).within_limit():
            client().rpush("performed", self.jid)


#: The lock_timeout of the ``seat`` limiter: short, so a test can wait it out.
SEAT_LEASE = 4.0
#: Jids that stay inside their slot until the test takes them out of this set.
HOLD = "hold"
#: What each run of :class:`Seated` did: ``[event, jid, Redis time]``.
SEATS = "seats"


class Seated(wurk.Job):
    """Waits for the one ``seat``, notes when it got it (Redis's clock), stays
    in it while the test holds its jid, and notes when it left."""

    def perform(self) -> None:
        seat = Limiter.concurrent("seat", 1, lock_timeout=SEAT_LEASE, wait_timeout=30)
        conn = client()
        seconds, micros = conn.time()
        conn.rpush(SEATS, json.dumps(["waiting", self.jid, seconds + micros / 1e6]))
        with seat.within_limit() as handle:
            conn.rpush(SEATS, json.dumps(["in", self.jid, handle.admitted_at]))
            while conn.sismember(HOLD, str(self.jid)):
                time.sleep(0.05)
        conn.rpush(SEATS, json.dumps(["out", self.jid, None]))


class AsyncThrottled(wurk.Job, queue="crawl"):
    """:class:`Throttled` with an ``async def perform``, admitted by ``async with``."""

    async def perform(self) -> None:
        full = Limiter.window("always-full", 1, 3600, wait_timeout=0, reschedule=3, backoff=0)
        async with full.within_limit():
            client().rpush("performed", self.jid)


#: The size of the ``async-seats`` limiter.
ASYNC_SEATS = 3
#: How many :class:`AsyncSeated` jobs are inside their seat now.
INSIDE = "inside"
#: The value of ``inside`` each :class:`AsyncSeated` saw as it sat down.
SAT_WITH = "sat-with"
#: Set once ``ASYNC_SEATS`` jobs sat at once.
FILLED = "filled"


class AsyncSeated(wurk.Job):
    """Awaits one of the ``async-seats``, counts itself in, and stays seated
    until every seat has been taken at once (on a worker with one thread,
    only awaiting jobs can fill them together); then leaves."""

    async def perform(self, key: int) -> None:
        seats = Limiter.concurrent("async-seats", ASYNC_SEATS, lock_timeout=60, wait_timeout=60)
        conn = client()
        async with seats.within_limit():
            inside = int(conn.incr(INSIDE))
            conn.rpush(SAT_WITH, inside)
            if inside >= ASYNC_SEATS:
                conn.set(FILLED, 1)
            for _ in range(600):
                if conn.exists(FILLED):
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError(f"the seats never filled: {int(conn.get(INSIDE) or 0)} inside")
            await asyncio.sleep(0.05)
            conn.decr(INSIDE)
        conn.hset("seated", str(key), threading.current_thread().name)
