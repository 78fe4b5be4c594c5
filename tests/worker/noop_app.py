"""The application of the hot-path budget tests: jobs that do nothing.

Loaded by real ``wurk`` worker processes (``-r tests.worker.noop_app``) and
imported by the tests, which push raw payloads naming these classes. Nothing
here configures the worker or talks to Redis, so what a drain costs is the
worker's own cost and nothing else.
"""

from __future__ import annotations

import time

import wurk


class Noop(wurk.Job):
    def perform(self, number: int) -> None:
        pass


class AsyncNoop(wurk.Job):
    async def perform(self, number: int) -> None:
        pass


class Wait5(wurk.Job):
    """Waits 5 ms, as a job waiting on a short query would."""

    def perform(self, number: int) -> None:
        time.sleep(0.005)
