"""The Statsd middleware, with small recording clients standing in for statsd servers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import wurk
from tests.helpers import wait_for
from wurk.metrics import Statsd
from wurk.server.retry import Skip


class DogStyle:
    """Records calls the way a DogStatsD client takes them (tags everywhere)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def increment(self, metric: str, tags: list[str] | None = None) -> None:
        self.calls.append(("increment", metric, tags))

    def timing(self, metric: str, value: float, tags: list[str] | None = None) -> None:
        self.calls.append(("timing", metric, round(value, 3) >= 0, tags))


class PlainStyle:
    """Records calls the way the ``statsd`` package's client takes them (no tags)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def incr(self, metric: str) -> None:
        self.calls.append(("incr", metric))

    def timing(self, metric: str, value: float) -> None:
        self.calls.append(("timing", metric))


class Broken:
    def increment(self, metric: str, tags: list[str] | None = None) -> None:
        raise OSError("statsd host unreachable")


class Fine(wurk.Job):
    def perform(self, key):
        pass


class Failing(wurk.Job, retry=False):
    def perform(self, key):
        raise ValueError("nope")


def middleware(config) -> Statsd:
    instance = Statsd()
    instance.config = config
    return instance


JOB = {"class": "app.Report", "args": [], "jid": "a" * 24}
TAGS = ["worker:app.Report", "queue:low"]
#: What a tagging client receives for a job that succeeds, one that fails and
#: one that is skipped, in that order.
SUCCESS_FAILURE_SKIP = [
    ("increment", "jobs.count", TAGS),
    ("increment", "jobs.success", TAGS),
    ("timing", "jobs.perform", True, TAGS),
    ("increment", "jobs.count", TAGS),
    ("increment", "jobs.failure", TAGS),
    ("timing", "jobs.perform", True, TAGS),
    ("increment", "jobs.count", TAGS),  # an interrupted job neither succeeded nor failed
    ("timing", "jobs.perform", True, TAGS),
]


def test_without_a_client_factory_it_only_passes_the_job_on(config):
    assert config.dogstatsd is None
    assert middleware(config).call(None, JOB, "low", lambda: "result") == "result"
    assert config.statsd is None


def test_a_tagging_client_gets_sidekiq_pros_metric_names(config):
    client = DogStyle()
    config.dogstatsd = lambda: client
    assert middleware(config).call(None, JOB, "low", lambda: 1) == 1
    with pytest.raises(ValueError, match="bad"):
        middleware(config).call(None, JOB, "low", lambda: (_ for _ in ()).throw(ValueError("bad")))
    with pytest.raises(Skip):
        middleware(config).call(None, JOB, "low", lambda: (_ for _ in ()).throw(Skip()))
    assert client.calls == SUCCESS_FAILURE_SKIP


def test_an_async_job_gets_the_same_metrics_and_no_client_means_no_coroutine(config):
    async def returns(value):
        return value

    async def raises(exc):
        raise exc

    def run(call_next):
        async def awaited():
            return await middleware(config).call_async(None, JOB, "low", call_next)

        return asyncio.run(awaited())

    inner = returns(7)
    assert middleware(config).call_async(None, JOB, "low", lambda: inner) is inner  # handed back as it is
    assert asyncio.run(inner) == 7
    client = DogStyle()
    config.dogstatsd = lambda: client
    assert run(lambda: returns(1)) == 1
    with pytest.raises(ValueError, match="bad"):
        run(lambda: raises(ValueError("bad")))
    with pytest.raises(Skip):
        run(lambda: raises(Skip()))
    assert client.calls == SUCCESS_FAILURE_SKIP


def test_a_plain_statsd_client_gets_the_bare_names(config):
    client = PlainStyle()
    config.dogstatsd = lambda: client
    middleware(config).call(None, {**JOB, "wrapped": "Wrapped"}, "low", lambda: None)
    assert client.calls == [("incr", "jobs.count"), ("incr", "jobs.success"), ("timing", "jobs.perform")]


def test_a_failing_client_never_fails_the_job(config):
    reported = []
    config.error_handlers.append(lambda exc, context, cfg: reported.append((str(exc), context["context"])))
    config.dogstatsd = Broken
    assert middleware(config).call(None, JOB, "low", lambda: "still fine") == "still fine"
    assert reported == [("statsd host unreachable", "statsd")]


def test_a_running_worker_reports_every_job(config, redis):
    client = DogStyle()
    config.dogstatsd = lambda: client
    config["heartbeat_interval"] = 0.3
    instance = wurk.configure_embed(lambda cfg: cfg.update({"queues": ["default"]}))
    instance.run()
    try:
        Fine.perform_async(1)
        Failing.perform_async(2)
        wait_for(lambda: len(client.calls) == 6, timeout=10)
    finally:
        instance.stop()
    fine = ["worker:tests.metrics.test_statsd.Fine", "queue:default"]
    failing = ["worker:tests.metrics.test_statsd.Failing", "queue:default"]
    assert sorted(client.calls, key=repr) == sorted(
        [
            ("increment", "jobs.count", fine),
            ("increment", "jobs.success", fine),
            ("timing", "jobs.perform", True, fine),
            ("increment", "jobs.count", failing),
            ("increment", "jobs.failure", failing),
            ("timing", "jobs.perform", True, failing),
        ],
        key=repr,
    )
