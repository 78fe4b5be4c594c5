"""The application the worker tests run: jobs that leave evidence in Redis.

Loaded by real ``wurk`` worker processes (``-r tests.worker.worker_app``) and
imported by the tests to enqueue. Timing knobs come from the environment so
each test can make heartbeats, the scheduler and elections fast.
"""

from __future__ import annotations

import json
import os
import signal
import time

import redis

import wurk
from wurk.client.middleware import ServerMiddleware


def evidence() -> redis.Redis:
    return redis.Redis.from_url(os.environ.get("WURK_TEST_EVIDENCE_URL") or os.environ["REDIS_URL"])


class TenantFromPayload(ServerMiddleware):
    """Gives the job instance an attribute read from its payload, the way a
    feature's server middleware hands a job what it carries (a batch its id)."""

    def call(self, job_instance, job, queue, call_next):
        if "tenant" in job:
            job_instance.tenant = job["tenant"]
        return call_next()


@wurk.configure_server
def tune(config):
    for option, variable in (
        ("poll_interval_average", "TEST_POLL_INTERVAL"),
        ("heartbeat_interval", "TEST_HEARTBEAT_INTERVAL"),
        ("leader_ttl", "TEST_LEADER_TTL"),
        ("leader_renew_interval", "TEST_LEADER_RENEW"),
        ("leader_follower_interval", "TEST_LEADER_FOLLOWER"),
        ("super_fetch_reaper_interval", "TEST_REAPER_INTERVAL"),
        ("poison_pill_window", "TEST_POISON_WINDOW"),
    ):
        if os.environ.get(variable):
            config[option] = float(os.environ[variable])
    config.death_handlers.append(
        lambda job, exc: evidence().rpush("deaths", json.dumps([job["jid"], type(exc).__name__]))
    )
    config.on_poison(lambda pill: evidence().rpush("poisoned", json.dumps(pill)))
    config.super_fetch(lambda jobstr, pill: evidence().rpush("recoveries", "poison" if pill else "recovered"))
    config.server_middleware.add(TenantFromPayload)


class Record(wurk.Job):
    """Counts its executions per argument."""

    def perform(self, key):
        evidence().hincrby("executions", str(key), 1)


class Slow(wurk.Job):
    def perform(self, key, seconds):
        evidence().rpush("started", str(key))
        time.sleep(seconds)
        evidence().hincrby("executions", str(key), 1)


class Boom(wurk.Job, retry=2, backtrace=3):
    def perform(self, key):
        raise ValueError(f"boom {key}")


class NoRetry(wurk.Job, retry=False):
    def perform(self, key):
        raise RuntimeError("no retry for me")


class DeadNow(wurk.Job, retry=0):
    def perform(self, key):
        raise KeyError("straight to the dead set")


class Killer(wurk.Job):
    """Kills the process that runs it: a poison pill."""

    def perform(self, key):
        evidence().hincrby("executions", str(key), 1)
        os.kill(os.getpid(), signal.SIGKILL)


class Exits(wurk.Job):
    """Ends the process that runs it with ``os._exit``: no exception, no
    cleanup, the way a native extension's fatal error ends it."""

    def perform(self, key):
        evidence().hincrby("executions", str(key), 1)
        os._exit(3)


class TenantRecord(wurk.Job):
    tenant = None

    def perform(self, key):
        evidence().hset("tenants", str(key), str(self.tenant))


class AsyncRecord(wurk.Job):
    async def perform(self, key):
        import asyncio

        await asyncio.sleep(0.01)
        evidence().hincrby("executions", str(key), 1)
