"""Deploy marks against a real server, compared with what Sidekiq 8.1.7 wrote."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, date, datetime, timedelta, timezone

import wurk
from tests.helpers import ROOT, with_db
from wurk.api.deploy import Deploy, git_label

CAPTURED = json.loads((ROOT / "tests/fixtures/sidekiq-8.1.7/deploy-marks.json").read_text(encoding="utf-8"))
AT = datetime(2026, 11, 30, 8, 35, 42, 123456, tzinfo=UTC)


def test_a_mark_is_written_exactly_as_sidekiq_writes_it(config, redis):
    assert Deploy.mark("fixture deploy", at=AT) == "2026-11-30T08:35:00Z"
    marks = CAPTURED["entries"]["20261130-marks"]
    lock = CAPTURED["entries"]["deploylock-fixture deploy"]
    assert redis.type("20261130-marks").decode() == marks["type"]
    assert {k.decode(): v.decode() for k, v in redis.hgetall("20261130-marks").items()} == marks["value"]
    assert marks["ttl_s"] - 5 <= redis.ttl("20261130-marks") <= marks["ttl_s"]
    assert redis.get("deploylock-fixture deploy").decode() == lock["value"]
    assert 55 <= redis.ttl("deploylock-fixture deploy") <= lock["ttl_s"]
    assert set(redis.keys("*")) == {b"20261130-marks", b"deploylock-fixture deploy"}


def test_one_mark_per_label_and_minute(config, redis):
    assert Deploy.mark("v2", at=AT) == "2026-11-30T08:35:00Z"
    assert Deploy.mark("v2", at=AT.replace(second=59)) is None  # every host of a deploy marks: one survives
    assert Deploy.mark("v2-hotfix", at=AT.replace(minute=36)) == "2026-11-30T08:36:00Z"
    assert Deploy.fetch(date(2026, 11, 30)) == {"2026-11-30T08:35:00Z": "v2", "2026-11-30T08:36:00Z": "v2-hotfix"}
    redis.delete("deploylock-v2")  # a minute later
    assert Deploy.mark("v2", at=AT.replace(minute=40)) == "2026-11-30T08:40:00Z"


def test_hsetnx_keeps_the_first_label_of_a_minute(config, redis):
    Deploy.mark("first", at=AT)
    Deploy.mark("second", at=AT)
    assert Deploy.fetch(AT) == {"2026-11-30T08:35:00Z": "first"}


def test_the_default_label_is_the_current_commit(config, redis):
    expected = subprocess.run(
        ["git", "log", "-1", "--format=%h %s"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    assert git_label() == (expected or "deploy")
    stamp = Deploy.mark()
    assert Deploy.fetch() == {stamp: expected or "deploy"}


def test_outside_a_git_checkout_the_label_is_deploy(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert git_label() == "deploy"
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert git_label() == "deploy"


def test_a_blank_label_marks_nothing(config, redis):
    assert Deploy.mark("   ", at=AT) is None
    assert redis.dbsize() == 0


def test_an_instance_uses_its_own_configuration(config, redis, redis_url):
    other = wurk.Config()
    other.redis = {"url": with_db(redis_url, 3)}
    try:
        assert Deploy(config=other).mark("elsewhere", at=AT) == "2026-11-30T08:35:00Z"
        assert Deploy.fetch(AT) == {}
        assert Deploy(config=other).fetch(AT) == {"2026-11-30T08:35:00Z": "elsewhere"}
    finally:
        other.reset_redis_pools()


def test_fetch_takes_a_date_a_datetime_or_nothing(config):
    berlin_morning = datetime(2026, 12, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    assert Deploy.mark("late", at=berlin_morning) == "2026-11-30T23:30:00Z"  # marks are UTC
    assert Deploy.fetch(date(2026, 11, 30)) == {"2026-11-30T23:30:00Z": "late"}
    assert Deploy.fetch(berlin_morning) == {"2026-11-30T23:30:00Z": "late"}
    assert Deploy.fetch(date(2026, 12, 1)) == {}
