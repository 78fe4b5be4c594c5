"""The application the outcome tests run: one job per way a run can end, and a
plugin that writes every ``wurk_job_outcome`` it hears to the ``outcomes``
list, as ``[kind, reason, jid]``.

Loaded by real ``wurk`` worker processes (``-r tests.worker.outcome_app``);
the tests register the same plugin on their own configuration to hear the
outcomes told in the test process (API kills, the reaper, the Retrier).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

import redis

import wurk
from tests.evidence import evidence_url
from wurk.api import RetrySet
from wurk.client.middleware import ServerMiddleware
from wurk.errors import Interrupted
from wurk.server.retry import Retrier, Skip

OUTCOMES = "outcomes"


@wurk.hookimpl
def wurk_job_outcome(outcome: Any, config: Any) -> None:
    entry = json.dumps([outcome.kind, outcome.reason, outcome.jid])
    config.redis_pool.execute(lambda conn: conn.rpush(OUTCOMES, entry))


class Deaf:
    """A listener that always raises: the recorder must still hear everything."""

    @wurk.hookimpl(tryfirst=True)
    def wurk_job_outcome(self, outcome: Any, config: Any) -> None:
        raise RuntimeError(f"a broken listener heard {outcome.kind}")


def listen(config: wurk.Config) -> None:
    """Register the broken listener and then the recorder on ``config``."""
    config.plugins.register(Deaf(), name="deaf")
    config.plugins.register(sys.modules[__name__], name="outcome-recorder")


class Reschedule(ServerMiddleware):
    """Puts ``Limited`` back in the schedule, as a rate limiter over its limit would."""

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Any) -> Any:
        if job["class"].endswith(".Limited"):
            Retrier(self.config).reschedule(job, 3600)
            raise Skip()
        return call_next()


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    config.server_middleware.add(Reschedule)
    listen(config)


class Ok(wurk.Job):
    def perform(self) -> None:
        pass


class Flaky(wurk.Job, retry=3):
    def perform(self) -> None:
        raise ValueError("fails, will retry")


class DeadNow(wurk.Job, retry=0):
    def perform(self) -> None:
        raise KeyError("straight to the dead set")


class NoRetry(wurk.Job, retry=False):
    def perform(self) -> None:
        raise RuntimeError("no retry, no dead set")


class Discarded(wurk.Job, retry=0):
    @classmethod
    def retries_exhausted(cls, job: dict[str, Any], exc: BaseException) -> str:
        return "discard"

    def perform(self) -> None:
        raise RuntimeError("discard me")


class Limited(wurk.Job):
    def perform(self) -> None:
        raise AssertionError("the middleware reschedules it before it runs")


class Sleepy(wurk.Job):
    def perform(self) -> None:
        redis.Redis.from_url(evidence_url()).rpush("started", "sleepy")
        time.sleep(60)


class StopsOnce(wurk.Job):
    """Stops early at its first run (``Interrupted``) and finishes at its second."""

    def perform(self) -> None:
        if redis.Redis.from_url(evidence_url()).incr("stops_once") == 1:
            raise Interrupted()


class Crashes(wurk.Job):
    """Kills the process that runs it, every time: a poison pill."""

    def perform(self) -> None:
        redis.Redis.from_url(evidence_url()).rpush("crashes", str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


class KillsARetry(wurk.Job):
    """Kills a retry entry through the data API, from inside the worker, as an
    operator's script or the dashboard in a worker's process would."""

    def perform(self, jid: str) -> None:
        entry = RetrySet().find_job(jid)
        assert entry is not None, f"no retry entry {jid}"
        entry.kill()
