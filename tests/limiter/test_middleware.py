"""The server middleware, called directly on the real server: reschedule with
``overrated``, backoff precedence, ``reschedule=0``, the poison brake, extra
error classes, and settings read at every job."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import wurk
from tests.helpers import with_db
from wurk.server.builtin_middleware import Expiry
from wurk_limiter import Limiter, LimiterMiddleware, OverLimit, Rescheduled, limiter_config


class UpstreamThrottled(Exception):
    """A client library's "429"."""


def job(**fields: Any) -> dict[str, Any]:
    return {"class": "app.Sync", "args": [1], "jid": "a" * 24, "queue": "crawl", "retry": True, **fields}


def run(config: wurk.Config, payload: dict[str, Any], exc: BaseException) -> None:
    middleware = LimiterMiddleware()
    middleware.config = config

    def perform() -> None:
        raise exc

    middleware.call(None, payload, "crawl", perform)


def scheduled(redis) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(member), score) for member, score in redis.zrange("schedule", 0, -1, withscores=True)]


@pytest.fixture
def heard(config: wurk.Config) -> Iterator[list[tuple[str, str | None]]]:
    """The outcomes told while the test runs, and the jobs death handlers saw."""
    told: list[tuple[str, str | None]] = []

    class Listener:
        @wurk.hookimpl
        def wurk_job_outcome(self, outcome: Any, config: Any) -> None:
            told.append((outcome.kind, outcome.reason))

    config.plugins.register(Listener(), name="limiter-test-listener")
    yield told
    config.plugins.unregister(name="limiter-test-listener")


def over(limiter: Limiter) -> OverLimit:
    return OverLimit(limiter)


def test_registered_inside_expiry(config):
    classes = [entry.klass for entry in config.server_middleware]
    assert classes.index(LimiterMiddleware) == classes.index(Expiry) + 1


def test_over_limit_reschedules_on_the_same_queue_with_overrated(config, redis, heard):
    limiter = Limiter.window("api", 1, 60)
    payload = job()
    before = time.time()
    with pytest.raises(Rescheduled):
        run(config, payload, over(limiter))
    ((entry, score),) = scheduled(redis)
    assert entry["overrated"] == 1
    assert entry["queue"] == "crawl"
    assert entry["jid"] == payload["jid"]
    assert before + 301 - 1 <= score <= time.time() + 600 + 1  # 300 × 1 + rand(300) + 1
    assert payload["overrated"] == 1
    assert heard == [("rescheduled", None)]
    assert redis.zcard("retry") == 0
    assert redis.zcard("dead") == 0


def test_backoff_precedence_limiter_then_settings_then_default(config, redis):
    settings = limiter_config(config)
    settings.backoff = lambda limiter, job, exc: 1000 * job["overrated"]
    own = Limiter.window("own", 1, 60, backoff=lambda limiter, job, exc: 7)
    shared = Limiter.window("shared", 1, 60)
    fixed = Limiter.bucket("fixed", 1, "minute", backoff=42)
    for limiter, expected in ((own, 7), (shared, 3000), (fixed, 42)):
        redis.delete("schedule")
        now = time.time()
        with pytest.raises(Rescheduled):
            run(config, job(overrated=2), over(limiter))
        ((entry, score),) = scheduled(redis)
        assert entry["overrated"] == 3
        assert now + expected - 1 <= score <= time.time() + expected + 1, limiter.name


def test_reschedule_zero_re_raises(config, redis):
    limiter = Limiter.bucket("strict", 1, "minute", reschedule=0)
    with pytest.raises(OverLimit):
        run(config, job(), over(limiter))
    assert redis.zcard("schedule") == 0


@pytest.mark.parametrize(
    ("build", "cap"),
    [
        (lambda: Limiter.concurrent("c", 1), 20),
        (lambda: Limiter.leaky("l", 1, 1), 20),
        (lambda: Limiter.window("w", 1, 1, reschedule=3), 3),
    ],
)
def test_poison_brake_at_the_cap_sends_to_dead(config, redis, heard, build, cap):
    limiter = build()
    died: list[dict[str, Any]] = []
    config.death_handlers.append(lambda payload, exc: died.append(payload))
    with pytest.raises(Rescheduled):
        run(config, job(overrated=cap - 2), over(limiter))
    assert redis.zcard("dead") == 0
    redis.delete("schedule")
    with pytest.raises(Rescheduled):
        run(config, job(overrated=cap - 1), over(limiter))
    assert redis.zcard("schedule") == 0
    ((member,),) = [redis.zrange("dead", 0, -1)]
    dead = json.loads(member)
    assert dead["overrated"] == cap
    assert dead["error_message"] == f"rate_limited: limit '{limiter.name}' ({limiter.type}) reached"
    assert dead["error_class"] == "wurk_limiter.errors.OverLimit"
    assert [payload["jid"] for payload in died] == [dead["jid"]]
    assert heard[-1] == ("died", "rate_limited")


def test_extra_error_classes_are_treated_alike(config, redis):
    settings = limiter_config(config)
    with pytest.raises(UpstreamThrottled):
        run(config, job(), UpstreamThrottled("429"))
    settings.errors.append(UpstreamThrottled)  # read at the next job
    with pytest.raises(Rescheduled):
        run(config, job(), UpstreamThrottled("429"))
    ((entry, _),) = scheduled(redis)
    assert entry["overrated"] == 1
    with pytest.raises(Rescheduled):
        run(config, job(overrated=19), UpstreamThrottled("429"))  # no limiter: the default cap
    assert json.loads(redis.zrange("dead", 0, -1)[0])["error_message"] == "rate_limited: 429"


def test_other_errors_pass_through(config, redis):
    with pytest.raises(ZeroDivisionError):
        run(config, job(), ZeroDivisionError())
    assert redis.zcard("schedule") == 0


def test_over_limit_carries_the_job(config):
    exc = over(Limiter.window("api", 1, 60))
    payload = job()
    with pytest.raises(Rescheduled):
        run(config, payload, exc)
    assert exc.job is payload


def test_a_dedicated_pool_takes_the_limiter_traffic(config, redis_url):
    import redis as redis_py

    settings = limiter_config(config)
    settings.redis = {"size": 2, "url": with_db(redis_url, 3)}
    limiter = Limiter.window("elsewhere", 1, 60)
    with limiter.within_limit():
        pass
    other = redis_py.Redis.from_url(with_db(redis_url, 3))
    try:
        assert other.exists("lmtr-w:elsewhere", "lmtr:elsewhere") == 2
        assert settings.pool() is not config.redis_pool
    finally:
        other.close()
    settings.redis = None  # read at every acquire
    assert settings.pool() is config.redis_pool
