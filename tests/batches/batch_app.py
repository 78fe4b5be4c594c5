"""The application the batch tests run on real ``wurk`` workers: jobs and
callbacks that leave evidence in Redis.

Every callback appends ``[event, bid, options, order, seen]`` to the
``callbacks`` list: ``order`` is a tick of the shared ``clock`` counter taken
when the callback starts (jobs take one when they finish), and ``seen`` is
what the callback read of its batch (pending, and the jobs run so far).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

import wurk
from tests.evidence import evidence_url
from wurk_batches import Batch, BatchJob, Status, keys
from wurk_limiter import Limiter


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


def tick() -> int:
    return int(evidence().incr("clock"))


#: Set in a worker's environment to have it killed once by :class:`KillAfterTheLastBooking`.
KILL_AFTER_LAST_ENV = "BATCH_KILL_AFTER_LAST"
#: The jid of the job whose worker :class:`KillAfterTheLastBooking` killed.
KILLED_AFTER = "killed-after-last"


class KillAfterTheLastBooking(wurk.ServerMiddleware):
    """Outermost: once per test, SIGKILLs its own process right after the
    job whose success brought its batch's pending to zero (so its callbacks
    have just fired) returned, before that job is acknowledged."""

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        result = call_next()
        bid = job.get("bid")
        conn = evidence()
        if bid and conn.hget(keys.batch(str(bid)), "pending") == b"0" and conn.set(KILLED_AFTER, job["jid"], nx=True):
            os.kill(os.getpid(), signal.SIGKILL)
        return result


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = float(os.environ.get("TEST_POLL_INTERVAL", "0.2"))
    config["heartbeat_interval"] = float(os.environ.get("TEST_HEARTBEAT_INTERVAL", "0.5"))
    if os.environ.get(KILL_AFTER_LAST_ENV):
        config.server_middleware.prepend(KillAfterTheLastBooking)


class Work(BatchJob, wurk.Job):
    """Counts its runs per key, and records when it finished."""

    def perform(self, key: Any) -> None:
        conn = evidence()
        conn.hincrby("executions", str(key), 1)
        conn.hset("finished", str(key), tick())


class Slow(BatchJob, wurk.Job):
    def perform(self, key: Any, seconds: float) -> None:
        evidence().rpush("started", str(key))
        time.sleep(seconds)
        evidence().hincrby("executions", str(key), 1)


class Paced(BatchJob, wurk.Job):
    """Counts its starts and, ``seconds`` later, its finished runs: a run
    started and not finished was cut short."""

    def perform(self, key: Any, seconds: float) -> None:
        evidence().hincrby("starts", str(key), 1)
        time.sleep(seconds)
        evidence().hincrby("executions", str(key), 1)


class Crasher(BatchJob, wurk.Job):
    """Counts its attempts and kills the process running it: a poison pill."""

    def perform(self, key: Any) -> None:
        evidence().hincrby("attempts", str(key), 1)
        os.kill(os.getpid(), signal.SIGKILL)


class DiesUntilHealed(BatchJob, wurk.Job, retry=0):
    """Dies (straight to the dead set) until the ``healed`` key is set."""

    def perform(self, key: Any) -> None:
        evidence().hincrby("attempts", str(key), 1)
        if not evidence().get("healed"):
            raise RuntimeError(f"{key} is not healed yet")
        evidence().hincrby("executions", str(key), 1)


class Throttled(BatchJob, wurk.Job):
    """Over its rate limit until the test resets the limiter: rescheduled, a
    second later, at every run before that."""

    def perform(self, key: Any) -> None:
        gate = Limiter.window("batch-gate", 1, 3600, wait_timeout=0, reschedule=20, backoff=1)
        with gate.within_limit():
            evidence().hincrby("executions", str(key), 1)


class AddsSibling(BatchJob, wurk.Job):
    """Adds a follow-up job to its own batch, from inside it."""

    def perform(self, key: Any) -> None:
        assert self.batch is not None
        assert self.valid_within_batch()
        with self.batch.jobs():
            Work.perform_async(f"{key}-sibling")
        evidence().hincrby("executions", str(key), 1)


#: How many of the async batch jobs have started (see :class:`AsyncWork`).
ASYNC_STARTS = "async-starts"


async def gather(total: int) -> None:
    """Await until ``total`` async jobs have started: they all finish only
    if they run at once, which on a worker with one thread only the event
    loop allows."""
    conn = evidence()
    for _ in range(600):
        if int(conn.hlen(ASYNC_STARTS)) >= total:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"only {conn.hlen(ASYNC_STARTS)} of {total} async jobs started together")


class AsyncWork(BatchJob, wurk.Job):
    """:class:`Work` with an ``async def perform`` that waits for ``total``
    of its kind to have started; notes the thread it ran on."""

    async def perform(self, key: Any, total: int) -> None:
        conn = evidence()
        conn.hincrby(ASYNC_STARTS, str(key), 1)
        await gather(total)
        conn.hincrby("executions", str(key), 1)
        conn.hset("threads", str(key), threading.current_thread().name)
        conn.hset("finished", str(key), tick())


class AsyncFailsUntilHealed(BatchJob, wurk.Job, retry=1):
    """An ``async def perform`` that fails (to the retry set) until the
    ``healed`` key is set."""

    async def perform(self, key: Any, total: int) -> None:
        conn = evidence()
        conn.hincrby(ASYNC_STARTS, str(key), 1)
        conn.hincrby("attempts", str(key), 1)
        await gather(total)
        if not conn.get("healed"):
            raise RuntimeError(f"{key} is not healed yet")
        conn.hincrby("executions", str(key), 1)
        conn.hset("threads", str(key), threading.current_thread().name)


class AsyncHeld(BatchJob, wurk.Job):
    """An ``async def perform`` that counts its starts and awaits while the
    ``hold`` key is set: a shutdown past its timeout cancels it there."""

    async def perform(self, key: Any) -> None:
        conn = evidence()
        conn.hincrby(ASYNC_STARTS, str(key), 1)
        while conn.exists("hold"):
            await asyncio.sleep(0.05)
        conn.hincrby("executions", str(key), 1)


class AsyncThrottled(BatchJob, wurk.Job):
    """:class:`Throttled` with an ``async def perform``, admitted by ``async with``."""

    async def perform(self, key: Any) -> None:
        gate = Limiter.window("batch-gate", 1, 3600, wait_timeout=0, reschedule=20, backoff=1)
        async with gate.within_limit():
            evidence().hincrby("executions", str(key), 1)


class Recorder:
    """Records each event it hears."""

    def _record(self, event: str, status: Status, options: dict[str, Any]) -> None:
        conn = evidence()
        seen = {"pending": status.pending, "jobs_run": conn.hlen("executions"), "complete": status.complete}
        conn.rpush("callbacks", json.dumps([event, status.bid, options, tick(), seen]))
        conn.hset("callbacks_done", f"{event}:{status.bid}", tick())

    def on_success(self, status: Status, options: dict[str, Any]) -> None:
        self._record("success", status, options)

    def on_complete(self, status: Status, options: dict[str, Any]) -> None:
        self._record("complete", status, options)

    def on_death(self, status: Status, options: dict[str, Any]) -> None:
        self._record("death", status, options)

    def finished(self, status: Status, options: dict[str, Any]) -> None:
        self._record("finished", status, options)


class Workflow:
    """A two-stage workflow: stage one's callback opens its parent and adds stage two."""

    def stage_one_done(self, status: Status, options: dict[str, Any]) -> None:
        Recorder()._record("stage_one_done", status, options)
        assert status.parent_bid is not None
        parent = Batch(status.parent_bid)
        with parent.jobs():
            stage_two = Batch()
            stage_two.on("success", "tests.batches.batch_app.Recorder#finished", {"stage": 2})
            with stage_two.jobs():
                Work.perform_async("pack")
                Work.perform_async("label")
