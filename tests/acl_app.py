"""The application of tests/test_acl.py: every feature used once, lightly.

Loaded by a real worker running as the least-privilege ACL user of
docs/deployment.md. The test pushes only :class:`Kickoff`; the worker's own
client then pushes a batch, a unique job (twice), an encrypted job, an
iterable job, a rate-limited job and two failing ones, so that client and
server middleware of each feature run under the rule. Evidence goes to the
administrator's connection (``tests.evidence``).
"""

from __future__ import annotations

from typing import Any

import redis

import wurk
import wurk_crypto
import wurk_unique
from tests.crypto.keys import worker_resolver
from tests.evidence import evidence_url
from wurk_batches import Batch, BatchJob, Status
from wurk_limiter import Limiter

wurk_unique.enable()
wurk_crypto.enable(2, worker_resolver)

RAN = "acl:ran"


def note(what: str) -> None:
    client = redis.Redis.from_url(evidence_url())
    try:
        client.rpush(RAN, what)
    finally:
        client.close()


@wurk.configure_server
def tune(config: wurk.Config) -> None:
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5

    @config.periodic
    def loops(mgr: Any) -> None:
        mgr.register("* * * * *", Step, args=["cron"])


class Step(BatchJob, wurk.Job):
    def perform(self, label: str) -> None:
        note(label)


class Finished:
    def on_success(self, status: Status, options: dict[str, Any]) -> None:
        note("batch-success")


class Once(wurk.Job, unique_for=600):
    def perform(self, n: int) -> None:
        note(f"unique {n}")


class Secret(wurk.Job, encrypt=True):
    def perform(self, secret: str) -> None:
        note("secret" if secret == "s3" else "secret garbled")


class Walk(wurk.IterableJob):
    def build_enumerator(self, count: int, cursor: Any) -> Any:
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item: int, count: int) -> None:
        note(f"walk {item}")


SEATS = Limiter.concurrent("acl-seats", 2, wait_timeout=0)
HOURLY = Limiter.window("acl-hourly", 100, 3600)


class Limited(wurk.Job):
    def perform(self) -> None:
        with SEATS.within_limit(), HOURLY.within_limit():
            note("limited")


class Dies(wurk.Job, retry=0):
    def perform(self) -> None:
        raise RuntimeError("this job always fails")


class Retries(wurk.Job, retry=3):
    def perform(self) -> None:
        raise RuntimeError("this job fails and is retried")


class Kickoff(wurk.Job):
    def perform(self) -> None:
        batch = Batch()
        batch.on("success", Finished)
        with batch.jobs():
            Step.perform_async("batch 1")
            Step.perform_async("batch 2")
        Once.perform_async(1)
        Once.perform_async(1)
        Secret.perform_async("s3")
        Walk.perform_async(3)
        Limited.perform_async()
        Step.perform_in(0.5, "scheduled")
        Dies.perform_async()
        Retries.perform_async()
        note("kickoff")
