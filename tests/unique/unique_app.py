"""The application real workers and pushers of the unique-job tests load
(``-r tests.unique.unique_app``): unique jobs enabled, and jobs that report
what they saw to the ``ran`` list."""

from __future__ import annotations

import os

import redis

import wurk
import wurk_unique

wurk_unique.enable()

RAN = "ran"


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
