"""ConfigTester's verify (every class resolves, a failure rolls back) and
the ``wurk cron`` command on the test server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import wurk
import wurk_cron
from tests.helpers import ROOT
from wurk_cron import ConfigTester, LoopSet, Manager


class ReportJob(wurk.Job):
    def perform(self):
        pass


def good(mgr):
    mgr.register("*/5 * * * *", ReportJob)
    mgr.register("@daily", "tests.cron.test_tester_and_cli.ReportJob", queue="low")


def test_verify_registers_and_resolves_every_class(config):
    manager = ConfigTester(config).verify(good)
    assert [loop.klass for loop in manager.loops] == ["tests.cron.test_tester_and_cli.ReportJob"] * 2
    assert LoopSet(config).size == 2


def test_an_unknown_class_fails_verify_by_name_and_rolls_the_block_back(config, redis):
    def typo(mgr):
        mgr.register("*/5 * * * *", ReportJob)
        mgr.register("@daily", "tests.cron.test_tester_and_cli.RepotJob")

    with pytest.raises(ValueError, match=r"periodic job class 'tests\.cron\.test_tester_and_cli\.RepotJob'"):
        ConfigTester(config).verify(typo)
    assert redis.keys("*") == []


def test_a_rollback_keeps_a_loop_that_was_registered_before(config):
    before = Manager(config).register("*/5 * * * *", ReportJob)

    def typo(mgr):
        mgr.register("*/5 * * * *", ReportJob)  # the same loop again
        mgr.register("@hourly", ReportJob)  # a new one
        mgr.register("@daily", "NoSuchJob")

    with pytest.raises(ValueError, match="'NoSuchJob'"):
        ConfigTester(config).verify(typo)
    assert LoopSet(config).lids() == [before.lid]


def test_a_bad_schedule_fails_verify_by_name_and_rolls_back(config, redis):
    def bad(mgr):
        mgr.register("*/5 * * * *", ReportJob)
        mgr.register("0 0 * * MON-FRI", ReportJob)

    with pytest.raises(ValueError, match=r"cron schedule '0 0 \* \* MON-FRI'"):
        ConfigTester(config).verify(bad)
    assert redis.keys("*") == []


def test_a_bad_schedule_in_a_periodic_block_fails_the_boot(config, redis):
    from wurk_cron.manager import periodic_service

    config.periodic(lambda mgr: mgr.register("* * * * * *", ReportJob))
    with pytest.raises(ValueError, match="6"):
        config.fire_event("startup", reraise=True)
    assert periodic_service(config).manager is not None
    assert redis.keys("*") == []


BAD_SCHEDULE_APP = """
import wurk


class ReportJob(wurk.Job):
    def perform(self):
        pass


@wurk.configure_server
def configure(config):
    @config.periodic
    def loops(mgr):
        mgr.register("@daily", ReportJob)
        mgr.register("*/5 * * * * *", ReportJob)
"""


def test_a_worker_with_a_bad_schedule_exits_with_one_line_naming_the_job_and_the_string(tmp_path, redis_url, redis):
    (tmp_path / "periodic_app.py").write_text(BAD_SCHEDULE_APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("WURK_DISABLE_PLUGINS", "WURK_DEBUG")}
    worker = subprocess.run(
        [sys.executable, "-m", "wurk.cli", "-r", "periodic_app.py", "-c", "1"],
        env={**env, "REDIS_URL": redis_url},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == 2
    assert "Traceback" not in worker.stdout + worker.stderr
    assert worker.stderr.strip() == (
        "wurk: periodic job periodic_app.ReportJob: cron schedule '*/5 * * * * *': expected 5 fields "
        "'minute hour day-of-month month day-of-week', got 6 "
        "(there is no seconds field: one minute is the finest resolution)"
    )
    assert redis.scard("processes") == 0


def wurk_cli(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url}
    env.pop("WURK_DISABLE_PLUGINS", None)
    return subprocess.run(
        [sys.executable, "-m", "wurk.cli", "cron", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_cron_command_lists_pauses_unpauses_fires_and_enqueues(config, redis, redis_url):
    assert "no periodic loops registered" in wurk_cli(redis_url, "list").stdout
    assert "no periodic loops registered" in wurk_cli(redis_url).stdout
    loop = Manager(config).register("0 4 * * *", "NightlyJob", queue="low", tz="America/Chicago")
    listed = wurk_cli(redis_url, "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["LID", "SCHEDULE", "CLASS", "QUEUE", "TZ", "LAST", "NEXT", "STATE"]
    assert row.split() == [
        loop.lid,
        "0",
        "4",
        "*",
        "*",
        "*",
        "NightlyJob",
        "low",
        "America/Chicago",
        "-",
        "-",
        "active",
    ]

    assert wurk_cli(redis_url).stdout == listed.stdout  # `wurk cron` alone lists them too

    assert wurk_cli(redis_url, "pause", loop.lid).stdout.strip() == f"paused {loop.lid}"
    [entry] = json.loads(wurk_cli(redis_url, "list", "--json").stdout)
    assert (entry["lid"], entry["paused"], entry["next_fire_at"]) == (loop.lid, True, None)
    assert wurk_cli(redis_url, "unpause", loop.lid).returncode == 0
    [entry] = json.loads(wurk_cli(redis_url, "list", "--json").stdout)
    assert entry["paused"] is False
    assert entry["next_fire_at"] == LoopSet(config).fetch(loop.lid).next_fire_at is not None

    fired = wurk_cli(redis_url, "fire", loop.lid)
    assert fired.returncode == 0, fired.stderr
    jid = fired.stdout.split()[-1]
    assert wurk_cron.history(loop.lid, config=config)[0][1] == jid
    enqueued = wurk_cli(redis_url, "enqueue", loop.lid)
    assert enqueued.returncode == 0, enqueued.stderr
    assert redis.llen("queue:low") == 2
    assert len(wurk_cron.history(loop.lid, config=config)) == 1
    assert jid in wurk_cli(redis_url, "history", loop.lid).stdout

    missing = wurk_cli(redis_url, "pause", "0" * 16)
    assert missing.returncode == 1
    assert f"no periodic loop '{'0' * 16}'" in missing.stderr
