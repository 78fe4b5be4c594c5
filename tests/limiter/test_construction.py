"""Every construction argument is checked when the limiter is built."""

from __future__ import annotations

from datetime import timedelta

import pytest

from wurk_limiter import Limiter


@pytest.mark.parametrize("name", ["has space", "a/b", "", "ünïcode", "semi;colon", "star*", 42])
def test_names_outside_the_pattern_are_refused(config, redis, name):
    with pytest.raises(ValueError, match="limiter name"):
        Limiter.concurrent(name, 1)
    assert redis.keys("*") == []


@pytest.mark.parametrize("name", ["stripe", "shop-12", "a:b.c#d@e_f", "UPPER9"])
def test_names_inside_the_pattern_are_accepted(config, name):
    assert Limiter.window(name, 1, 1, register=False).name == name


@pytest.mark.parametrize(
    "build",
    [
        lambda ttl: Limiter.concurrent("x", 1, ttl=ttl),
        lambda ttl: Limiter.bucket("x", 1, "second", ttl=ttl),
        lambda ttl: Limiter.window("x", 1, 1, ttl=ttl),
        lambda ttl: Limiter.leaky("x", 1, 1, ttl=ttl),
        lambda ttl: Limiter.points("x", 1, 1, ttl=ttl),
    ],
)
def test_ttl_under_a_day_is_refused(config, redis, build):
    with pytest.raises(ValueError, match="ttl must be at least 86400"):
        build(86_399)
    assert build(timedelta(days=1)).ttl == 86_400
    assert build(86_400).ttl == 86_400


def test_bucket_takes_units_only(config):
    with pytest.raises(ValueError, match="takes no raw number"):
        Limiter.bucket("b", 10, 60)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one of 'second'"):
        Limiter.bucket("b", 10, "fortnight")
    with pytest.raises(ValueError, match="one of 'second'"):
        Limiter.bucket("b", 10, timedelta(minutes=1))  # type: ignore[arg-type]
    assert Limiter.bucket("b", 10, "minute", register=False).interval == 60


def test_window_and_leaky_take_units_seconds_or_timedeltas(config):
    assert Limiter.window("w", 5, 10, register=False).interval == 10
    assert Limiter.window("w", 5, "minute", register=False).interval == 60
    assert Limiter.window("w", 5, timedelta(seconds=90), register=False).interval == 90
    assert Limiter.leaky("l", 5, "hour", register=False).drain == 3600
    assert Limiter.leaky("l", 5, 2.5, register=False).drain == 2.5
    for bad in (0, -1, "eon", None):
        with pytest.raises(ValueError, match="interval"):
            Limiter.window("w", 5, bad)
        with pytest.raises(ValueError, match="drain"):
            Limiter.leaky("l", 5, bad)


@pytest.mark.parametrize(
    ("build", "argument"),
    [
        (lambda n: Limiter.concurrent("x", n), "limit"),
        (lambda n: Limiter.bucket("x", n, "second"), "count"),
        (lambda n: Limiter.window("x", n, 1), "count"),
        (lambda n: Limiter.leaky("x", n, 1), "bucket_size"),
        (lambda n: Limiter.points("x", n, 1), "initial_points"),
    ],
)
@pytest.mark.parametrize("size", [0, -3, True, "5", None])
def test_non_positive_sizes_are_refused(config, redis, build, argument, size):
    with pytest.raises(ValueError, match=argument):
        build(size)
    assert redis.keys("*") == []


def test_other_options_are_checked(config):
    with pytest.raises(ValueError, match="policy"):
        Limiter.concurrent("x", 1, policy="skip")
    with pytest.raises(ValueError, match="lock_timeout"):
        Limiter.concurrent("x", 1, lock_timeout=0)
    with pytest.raises(ValueError, match="wait_timeout"):
        Limiter.window("x", 1, 1, wait_timeout=-1)
    with pytest.raises(ValueError, match="reschedule"):
        Limiter.bucket("x", 1, "second", reschedule=-1)
    with pytest.raises(ValueError, match="backoff"):
        Limiter.leaky("x", 1, 1, backoff="soon")
    with pytest.raises(ValueError, match="refill_per_second"):
        Limiter.points("x", 1, -1)
    with pytest.raises(TypeError):
        Limiter.concurrent("x", 1, reschedule=5)  # only bucket and window take it
    with pytest.raises(TypeError):
        Limiter.points("x", 1, 1, wait_timeout=5)  # points never waits


def test_defaults_are_the_guides(config):
    assert Limiter.concurrent("c", 50, register=False).options == {
        "limit": 50,
        "wait_timeout": 5.0,
        "lock_timeout": 30.0,
        "policy": "raise",
        "backoff": None,
        "ttl": 7_776_000,
    }
    assert Limiter.bucket("b", 1000, "hour", register=False).options == {
        "count": 1000,
        "interval": "hour",
        "wait_timeout": 5.0,
        "backoff": None,
        "ttl": 7_776_000,
        "reschedule": 20,
    }
    assert Limiter.window("w", 60, "minute", register=False).reschedule == 20
    assert Limiter.leaky("l", 100, "minute", register=False).options["wait_timeout"] == 5.0
    assert Limiter.points("p", 100_000, 500, register=False).options == {
        "initial_points": 100_000,
        "refill_per_second": 500,
        "backoff": None,
        "ttl": 7_776_000,
    }


def test_within_limit_keywords_are_checked(config):
    points = Limiter.points("p", 10, 1)
    for estimate in (None, 0, -1):
        with pytest.raises(ValueError, match="estimate"):
            points.within_limit(estimate=estimate)
    with pytest.raises(ValueError, match="used= is for bucket and window"):
        Limiter.concurrent("c", 1).within_limit(used=2)
    with pytest.raises(ValueError, match="estimate= is for points"):
        Limiter.window("w", 1, 1).within_limit(estimate=2)
    with pytest.raises(ValueError, match="used"):
        Limiter.bucket("b", 1, "second").within_limit(used=0)
