"""The jobs the fuzz tests push and the worker they start runs.

Loaded by a real ``wurk`` worker (``-r tests.fuzz.fuzz_app``) and imported by
the tests to enqueue. Every run of :class:`Echo` is counted by jid in the
``executions`` hash, so a test can tell a job that ran once from one that ran
twice or never.
"""

from __future__ import annotations

import os

import redis

import wurk
from tests.evidence import evidence_url


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


def broken_cleaner(lines):
    raise RuntimeError("the backtrace cleaner is broken")


@wurk.configure_server
def tune(config):
    if os.environ.get("TEST_POLL_INTERVAL"):
        config["poll_interval_average"] = float(os.environ["TEST_POLL_INTERVAL"])
    if os.environ.get("TEST_BROKEN_CLEANER"):
        config["backtrace_cleaner"] = broken_cleaner


class Echo(wurk.Job):
    """Takes any arguments and counts its run."""

    def perform(self, *args):
        evidence().hincrby("executions", str(self.jid), 1)


class Fails(wurk.Job):
    """Always raises, so its payload goes through the retry layer."""

    def perform(self, *args):
        evidence().hincrby("executions", str(self.jid), 1)
        raise RuntimeError("failing on purpose")


class Unprintable(Exception):
    """An error whose message cannot be read: ``str()`` of it raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class FailsUnprintably(wurk.Job):
    """Raises an error whose message cannot be read."""

    def perform(self, *args):
        evidence().hincrby("executions", str(self.jid), 1)
        raise Unprintable()
