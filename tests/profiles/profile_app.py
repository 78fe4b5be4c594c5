"""The application the profiling tests run in real ``wurk`` worker processes."""

from __future__ import annotations

import os

import redis

import wurk


def evidence() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


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
