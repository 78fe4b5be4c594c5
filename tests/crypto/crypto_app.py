"""The application real workers of the encryption tests load
(``-r tests.crypto.crypto_app``): encryption enabled with active version 2,
a statsd client and a death handler that write to Redis, and jobs that
report a digest of what they received (never the plaintext itself)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import redis

import wurk
import wurk_crypto
from tests.crypto.keys import fingerprint, worker_resolver
from tests.evidence import evidence_url

wurk_crypto.enable(2, worker_resolver)

RAN = "ran"
#: What each run of :class:`HeldSecret` received, noted as it starts.
STARTED = "started"
#: Jids that stay in ``perform`` until the test takes them out of this set.
HOLD = "hold"
DIED = "died"
METRICS = "metrics"


def _client() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


def report(key: str, entry: str) -> None:
    client = _client()
    try:
        client.rpush(key, entry)
    finally:
        client.close()


class Metrics:
    """A statsd client that records each counter in the ``metrics`` list."""

    def increment(self, metric: str, tags: list[str] | None = None) -> None:
        report(METRICS, metric)


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    config.dogstatsd = Metrics
    config.death_handlers.append(lambda job, exc: report(DIED, job["jid"]))


class Secret(wurk.Job, encrypt=True):
    def perform(self, account: int, secret: Any) -> None:
        report(RAN, f"{account}:{fingerprint(secret)}")


class Declined(wurk.Job, encrypt=True, retry=3):
    def perform(self, account: int, secret: Any) -> None:
        report(RAN, f"{account}:{fingerprint(secret)}")
        raise ValueError("card declined")  # the message carries no secret


class DeclinedForGood(wurk.Job, encrypt=True, retry=0):
    def perform(self, account: int, secret: Any) -> None:
        report(RAN, f"{account}:{fingerprint(secret)}")
        raise ValueError("card declined for good")


class HeldSecret(wurk.Job, encrypt=True):
    """Notes what it received, stays in ``perform`` while the test holds its
    jid (so its worker can be killed mid-run), then reports as ``Secret``."""

    def perform(self, account: int, secret: Any) -> None:
        report(STARTED, f"{self.jid}:{account}:{fingerprint(secret)}")
        client = _client()
        try:
            while client.sismember(HOLD, str(self.jid)):
                time.sleep(0.05)
        finally:
            client.close()
        report(RAN, f"{account}:{fingerprint(secret)}")


#: The accounts of the async jobs that have started (see :func:`gather`).
ASYNC_STARTED = "async-started"


async def gather(account: int, total: int) -> None:
    """Note ``account`` started and await until ``total`` have: they go on
    only if they run at once, which on a worker with one thread only the
    event loop allows."""
    client = _client()
    try:
        client.sadd(ASYNC_STARTED, account)
        for _ in range(600):
            if int(client.scard(ASYNC_STARTED)) >= total:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"only {client.scard(ASYNC_STARTED)} of {total} async jobs started together")
    finally:
        client.close()


class AsyncSecret(wurk.Job, encrypt=True):
    """:class:`Secret` with an ``async def perform``; notes the thread it ran on."""

    async def perform(self, account: int, total: int, secret: Any) -> None:
        await gather(account, total)
        report(RAN, f"{account}:{fingerprint(secret)}:{threading.current_thread().name}")


class AsyncDeclined(wurk.Job, encrypt=True, retry=3):
    async def perform(self, account: int, total: int, secret: Any) -> None:
        await gather(account, total)
        report(RAN, f"{account}:{fingerprint(secret)}:{threading.current_thread().name}")
        raise ValueError("card declined")  # the message carries no secret


class AsyncHeldSecret(wurk.Job, encrypt=True):
    """:class:`HeldSecret` with an ``async def perform``: awaits while the
    test holds its jid, so Redis can be read while it runs."""

    async def perform(self, account: int, secret: Any) -> None:
        report(STARTED, f"{self.jid}:{account}:{fingerprint(secret)}")
        client = _client()
        try:
            while client.sismember(HOLD, str(self.jid)):
                await asyncio.sleep(0.05)
        finally:
            client.close()
        report(RAN, f"{account}:{fingerprint(secret)}")
