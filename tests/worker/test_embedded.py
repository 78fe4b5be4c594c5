"""An in-process launcher: embedded mode, the built-in middleware, the health check."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import ClassVar

import pytest

import wurk
from tests.helpers import wait_for
from wurk.redis.servers import free_port
from wurk.server.fetch import ReliableFetcher


class Note(wurk.Job):
    def perform(self, key):
        wurk.default_config().redis_pool.client.hincrby("executions", str(key), 1)


class Expiring(wurk.Job, expires_in=60):
    def perform(self, key):
        wurk.default_config().redis_pool.client.hincrby("executions", str(key), 1)


class Interruptible(wurk.Job):
    def perform(self, key):
        conn = wurk.default_config().redis_pool.client
        if conn.hincrby("executions", str(key), 1) == 1:
            raise wurk.Interrupted("checkpoint reached")


@pytest.fixture
def embedded(config):
    events = []
    config.on("startup")(lambda: events.append("startup"))
    config.on("quiet")(lambda: events.append("quiet"))
    config.on("shutdown")(lambda: events.append("shutdown-first-registered"))
    config.on("shutdown")(lambda: events.append("shutdown-last-registered"))
    config.on("exit")(lambda: events.append("exit"))
    config["heartbeat_interval"] = 0.3
    config["poll_interval_average"] = 0.2
    instance = wurk.configure_embed(lambda cfg: cfg.update({"queues": ["default"]}))
    instance.events = events
    yield instance
    instance.stop()


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_embedded_runs_jobs_and_stops_in_order(embedded, redis):
    assert embedded.config.concurrency == 2
    embedded.run()
    Note.perform_async("a")
    wait_for(lambda: redis.hget("executions", "a") == b"1")
    identity = embedded.launcher.identity.identity
    wait_for(lambda: redis.hget(identity, "info"))
    assert json.loads(redis.hget(identity, "info"))["embedded"] is True
    with pytest.raises(wurk.FrozenConfigError):
        wurk.configure_embed()
    embedded.stop()
    assert embedded.events == [
        "startup",
        "quiet",
        "shutdown-last-registered",
        "shutdown-first-registered",
        "exit",
    ]
    assert redis.sismember("processes", identity) == 0


def test_expired_jobs_are_dropped_and_counted(embedded, redis):
    jid = Expiring.perform_async("late")
    stored = redis.lpop("queue:default")
    job = json.loads(stored)
    job["expiry"] = time.time() - 1
    redis.rpush("queue:default", json.dumps(job))
    Expiring.perform_async("in time")
    embedded.run()
    wait_for(lambda: redis.hget("executions", "in time") == b"1")
    embedded.stop()
    assert redis.hget("executions", "late") is None
    assert int(redis.get("stat:expired")) == 1
    assert int(redis.get("stat:processed")) == 2
    assert jid


def test_an_interrupted_job_goes_back_unchanged_and_runs_again(embedded, redis):
    jid = Interruptible.perform_async("resumable")
    embedded.run()
    wait_for(lambda: redis.hget("executions", "resumable") == b"2")
    embedded.stop()
    assert redis.zcard("retry") == 0
    assert int(redis.get("stat:failed") or 0) == 0
    assert jid


def test_health_check_endpoints(config, redis):
    port = free_port()
    config.health_check(port=port, bind="127.0.0.1", ready_window=5)
    config["heartbeat_interval"] = 0.3
    instance = wurk.configure_embed()
    instance.run()
    try:
        base = f"http://127.0.0.1:{port}"
        assert get(f"{base}/live") == (200, {"status": "live"})
        status, body = get(f"{base}/ready")
        assert (status, body["status"]) == (200, "ready")
        assert get(f"{base}/nope")[0] == 404
        request = urllib.request.Request(f"{base}/live", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 405
        refused.value.close()
        instance.quiet()
        assert get(f"{base}/live") == (503, {"status": "quiet"})
    finally:
        instance.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2)


def test_health_check_options_are_validated(config):
    with pytest.raises(wurk.ConfigurationError, match="port"):
        config.health_check(port=70000)
    with pytest.raises(wurk.ConfigurationError, match="ready_window"):
        config.health_check(port=0, ready_window=0)
    with pytest.raises(wurk.ConfigurationError, match="bind"):
        config.health_check(port=0, bind="")


class CountingFetcher(ReliableFetcher):
    """A custom fetcher: the reliable one, counting what it hands out."""

    handed_out = 0

    def retrieve_work(self):
        uow = super().retrieve_work()
        if uow is not None:
            type(self).handed_out += 1
        return uow


def test_a_custom_fetcher_class_and_its_setup_hook(config, redis):
    seen = []
    config["fetch_class"] = CountingFetcher
    config["fetch_setup"] = seen.append
    config["heartbeat_interval"] = 0.3
    CountingFetcher.handed_out = 0
    instance = wurk.configure_embed()
    Note.perform_bulk([["f1"], ["f2"], ["f3"]])
    instance.run()
    try:
        wait_for(lambda: redis.hlen("executions") == 3)
    finally:
        instance.stop()
    assert CountingFetcher.handed_out == 3
    assert len(seen) == 1
    assert isinstance(seen[0], CountingFetcher)


class Failing(wurk.Job, retry=3):
    def perform(self, key):
        wurk.default_config().redis_pool.client.hincrby("executions", str(key), 1)
        raise ValueError("fails every time")


def test_a_failure_that_cannot_be_booked_goes_back_to_its_queue(config, redis):
    redis.set("retry", "not a sorted set")  # every retry booking now fails (WRONGTYPE)
    config["heartbeat_interval"] = 0.3
    instance = wurk.configure_embed()
    Failing.perform_async("unbookable")
    instance.run()
    try:
        wait_for(lambda: int(redis.hget("executions", "unbookable") or 0) >= 2, timeout=15)
        redis.delete("retry")  # the booking works again
        wait_for(lambda: redis.zcard("retry") == 1, timeout=15)
    finally:
        instance.stop()
    assert json.loads(redis.zrange("retry", 0, -1)[0])["retry_count"] == 0
    assert [key for key in redis.keys("queue:*") if b"|" in key] == []


class BrokenFetcher(ReliableFetcher):
    """A fetcher with a bug that kills every processor thread that calls it."""

    #: When each call was made (``time.monotonic``).
    calls: ClassVar[list[float]] = []

    def retrieve_work(self):
        type(self).calls.append(time.monotonic())
        raise RuntimeError("a bug in a custom fetcher")


def test_dead_processor_threads_are_replaced_with_a_growing_pause(config, redis):
    config["fetch_class"] = BrokenFetcher
    config.concurrency = 2
    BrokenFetcher.calls = []
    instance = wurk.configure_embed()
    instance.run()
    try:
        wait_for(lambda: len(BrokenFetcher.calls) >= 5, timeout=30)  # the threads die, and are replaced
    finally:
        instance.stop()
    # Replaced at once, the fifth call would follow the first within
    # milliseconds. With a pause doubling from 0.5 s per death (0.5, 1, 2, 4 s),
    # the two threads die at once, their replacements at 0.5 and 1 s, and the
    # third replacement calls 2.5 s after the first call: a lower bound, which
    # a loaded machine can only make longer.
    calls = BrokenFetcher.calls
    assert calls[4] - calls[0] >= 2.0
