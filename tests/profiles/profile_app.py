"""The application the profiling tests run in real ``wurk`` worker processes."""

from __future__ import annotations

import redis

import wurk
from tests.evidence import evidence_url


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


def fibonacci(n: int) -> int:
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


class Crunch(wurk.Job):
    """Spends its time in ``fibonacci``, so the profile has a clear top function."""

    def perform(self, n: int) -> None:
        evidence().rpush("done", str(fibonacci(n)))


class AlwaysProfiled(wurk.Job, profile="ops"):
    """Profiled through its class options rather than ``set``."""

    def perform(self) -> None:
        evidence().rpush("done", "always")


class Fails(wurk.Job, retry=False):
    def perform(self) -> None:
        evidence().rpush("done", "failed")
        raise RuntimeError("no profile for a failed job")
