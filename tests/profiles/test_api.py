"""The data API over stored profiles, on profiles written by the real profiler
and one shaped as Ruby Sidekiq writes it."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from tests.profiles.profile_app import Crunch
from wurk.api import ProfileSet
from wurk.server import profiler

JOB = "tests.profiles.profile_app.Crunch"


def store(config, token: str, jid: str) -> None:
    """A real profile of a small computation, stored as the worker stores it."""
    job = {"class": JOB, "jid": jid, "profile": token, "args": []}
    assert profiler.profile_job(config, job, lambda: sum(range(1000))) == sum(range(1000))


def ruby_profile(redis, token: str, jid: str, expires: float) -> None:
    """A profile as Sidekiq 8 writes one: Vernier's gzipped JSON, no format field."""
    data = gzip.compress(json.dumps({"meta": {"product": "Vernier"}}).encode())
    key = f"{token}-{jid}"
    redis.zadd("profiles", {key: expires})
    fields = {"started_at": int(time.time()), "token": token, "type": "HardJob", "jid": jid}
    redis.hset(key, mapping={**fields, "filename": "x.json.gz", "elapsed": 0.25, "data": data, "size": len(data)})


def test_list_fetch_and_delete(config, redis):
    store(config, "alice", "a" * 24)
    ruby_profile(redis, "bob", "b" * 24, time.time() + 60)
    profiles = ProfileSet()
    assert profiles.size == len(profiles) == 2
    newest, oldest = list(profiles)
    assert (newest.token, newest.jid, newest.type, newest.python) == ("alice", "a" * 24, JOB, True)
    assert (oldest.token, oldest.type, oldest.python, oldest.format) == ("bob", "HardJob", False, None)
    assert oldest.elapsed == 0.25
    assert oldest.size == len(oldest.data)
    record = profiles.fetch("alice-" + "a" * 24)
    assert record is not None
    assert record.size == len(record.data) > 0
    assert record.expires_at.timestamp() == pytest.approx(time.time() + profiler.EXPIRY, abs=5)
    assert any(row.function.endswith("<built-in method builtins.sum>") for row in record.top(50))
    with pytest.raises(ValueError, match="Ruby Sidekiq"):
        oldest.stats()
    assert profiles.fetch("nobody-" + "c" * 24) is None
    assert record.delete() is True
    assert record.delete() is False
    assert redis.exists("alice-" + "a" * 24) == 0
    assert redis.zrange("profiles", 0, -1) == [b"bob-" + b"b" * 24]


def test_pages_are_newest_first_and_stable(config, redis):
    now = time.time()
    for n in range(7):
        ruby_profile(redis, "ops", f"{n:024x}", now + 100 + n)
    profiles = ProfileSet()
    first, cursor = profiles.page(limit=3)
    assert [r.jid[-1] for r in first] == ["6", "5", "4"]
    ruby_profile(redis, "ops", "f" * 24, now + 500)  # a newer one does not shift the pages
    second, cursor = profiles.page(limit=3, cursor=cursor)
    assert [r.jid[-1] for r in second] == ["3", "2", "1"]
    third, cursor = profiles.page(limit=3, cursor=cursor)
    assert [r.jid[-1] for r in third] == ["0"]
    assert cursor is None
    with pytest.raises(ValueError, match="not a page cursor"):
        profiles.page(cursor="soon")
    with pytest.raises(ValueError, match="limit"):
        profiles.page(limit=0)


def test_expired_entries_are_not_listed_and_prune_drops_them(config, redis):
    ruby_profile(redis, "old", "1" * 24, time.time() - 1)  # lapsed: its score has passed
    redis.zadd("profiles", {"gone-" + "2" * 24: time.time() + 60})  # the hash expired first
    store(config, "new", "3" * 24)
    profiles = ProfileSet()
    assert [r.token for r in profiles] == ["new"]
    assert profiles.fetch("old-" + "1" * 24) is None
    assert profiles.prune() == 1
    assert redis.zcard("profiles") == 2
    assert profiles.clear() == 2
    assert redis.exists("profiles", "new-" + "3" * 24) == 0


def test_a_bad_profile_option_is_refused_before_anything_is_pushed(config, redis):
    for bad in (3, "", "a\nb", "x" * 201):
        with pytest.raises(ValueError, match="'profile' option"):
            Crunch.set(profile=bad).perform_async(1)
    assert redis.llen("queue:default") == 0
    Crunch.set(profile="alice").perform_async(1)
    assert json.loads(redis.lindex("queue:default", 0))["profile"] == "alice"


def test_one_profile_at_a_time_per_process(config, redis):
    """The interpreter has one profiler slot: a job profiled while another is
    runs unprofiled, and still runs."""
    inner = {"class": JOB, "jid": "i" * 24, "profile": "inner", "args": []}
    outer = {"class": JOB, "jid": "o" * 24, "profile": "outer", "args": []}
    assert profiler.profile_job(config, outer, lambda: profiler.profile_job(config, inner, lambda: 7)) == 7
    assert redis.zrange("profiles", 0, -1) == [b"outer-" + b"o" * 24]


def test_a_profile_from_a_ruby_client_with_profile_true_uses_rubys_spelling(config, redis):
    job = {"class": JOB, "jid": "r" * 24, "profile": True, "args": []}
    profiler.profile_job(config, job, lambda: None)
    assert redis.zrange("profiles", 0, -1) == [b"true-" + b"r" * 24]
