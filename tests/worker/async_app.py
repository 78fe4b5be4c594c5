"""The application of the async-job tests: ``async def perform`` jobs that
leave evidence in Redis, a synchronous job beside them, and a middleware that
has only a synchronous ``call``.

``ASYNC_CONCURRENCY`` in the environment sets ``async_concurrency``.
"""

from __future__ import annotations

import asyncio
import os
import threading

import redis

import wurk
from tests.evidence import evidence_url
from wurk.client.middleware import ServerMiddleware

_local = threading.local()


def evidence() -> redis.Redis:
    # One client per thread: the loop's thread and the processors' each
    # keep theirs, so no call waits for another's connection.
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(evidence_url())
    return client


class SyncOnly(ServerMiddleware):
    """Has ``call`` and no ``call_async``: still wraps an async job."""

    def call(self, job_instance, job, queue, call_next):
        evidence().rpush("around", f"before {job['jid']}")
        result = call_next()
        evidence().rpush("around", f"after {job['jid']}")
        return result


@wurk.configure_server
def tune(config):
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    if os.environ.get("ASYNC_CONCURRENCY"):
        config["async_concurrency"] = int(os.environ["ASYNC_CONCURRENCY"])
    if os.environ.get("SYNC_ONLY_MIDDLEWARE"):
        config.server_middleware.add(SyncOnly)


class Gathering(wurk.Job):
    """Waits until ``total`` jobs of its kind have started: it finishes only
    if that many run at once."""

    async def perform(self, key, total):
        evidence().hincrby("started", str(key), 1)
        for _ in range(600):
            if int(evidence().hlen("started")) >= total:
                evidence().hincrby("gathered", str(key), 1)
                evidence().rpush("threads", threading.current_thread().name)
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"only {evidence().hlen('started')} of {total} started together")


_in_flight = 0


class Counted(wurk.Job):
    """Keeps the highest number of its kind in flight at once in this process."""

    async def perform(self, key, seconds):
        global _in_flight
        _in_flight += 1
        try:
            pid = str(os.getpid())
            evidence().hset("peak", pid, max(_in_flight, int(evidence().hget("peak", pid) or 0)))
            await asyncio.sleep(seconds)
        finally:
            _in_flight -= 1
        evidence().hincrby("finished", str(key), 1)


class Sleeper(wurk.Job):
    async def perform(self, key, seconds):
        evidence().hincrby("started", str(key), 1)
        await asyncio.sleep(seconds)
        evidence().hincrby("finished", str(key), 1)


class AsyncBoom(wurk.Job, retry=3):
    async def perform(self, key):
        await asyncio.sleep(0.01)
        raise ValueError(f"async boom {key}")


class SyncMark(wurk.Job):
    def perform(self, key):
        evidence().hset("sync", str(key), threading.current_thread().name)
