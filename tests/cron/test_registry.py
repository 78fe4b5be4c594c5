"""Registering loops: the keys and fields of the guides' table, lids, the
``paused`` initial value, blocks that accumulate, and pruning by class."""

from __future__ import annotations

import hashlib
import json
from zoneinfo import ZoneInfo

import pytest

import wurk
import wurk_cron
from wurk.errors import ConfigurationError
from wurk_cron import LoopSet, Manager
from wurk_cron.manager import periodic_service


class Report(wurk.Job):
    def perform(self, *args):
        pass


def boot(config) -> Manager | None:
    """What a worker's start does with the configuration's blocks."""
    return periodic_service(config).run()


def test_a_lid_is_the_sha1_of_schedule_class_and_sorted_options(config, redis):
    loop = Manager(config).register("0 4 * * *", "NightlyJob", queue="low", retry=2, args=["nightly"])
    options = '{"args":["nightly"],"queue":"low","retry":2}'
    expected = hashlib.sha1(f"0 4 * * *|NightlyJob|{options}".encode()).hexdigest()[:16]
    assert loop.lid == expected == wurk_cron.loop_id("0 4 * * *", "NightlyJob", json.loads(options))
    assert redis.smembers("periodic") == {expected.encode()}
    assert redis.hgetall(f"loops:{expected}") == {
        b"schedule": b"0 4 * * *",
        b"klass": b"NightlyJob",
        b"options": options.encode(),
        b"tz": b"",
        b"paused": b"0",
    }


def test_registering_the_same_loop_again_rewrites_the_same_keys(config, redis):
    first = Manager(config).register("*/5 * * * *", "ReportJob")
    redis.hset(f"loops:{first.lid}", mapping={"nf": "1700000100", "lf": "1700000000"})
    again = Manager(config).register("*/5 * * * *", "ReportJob")
    assert again.lid == first.lid
    assert redis.scard("periodic") == 1
    assert redis.hget(f"loops:{first.lid}", "nf") == b"1700000100"  # the poller's marks are kept


def test_register_takes_a_job_class_and_stores_its_wire_name(config):
    loop = Manager(config).register("@hourly", Report)
    assert loop.klass == "tests.cron.test_registry.Report"


def test_only_class_args_queue_and_retry_enter_the_job_other_options_only_the_lid(config):
    plain = Manager(config).register("@daily", "ReportJob", args=[1])
    tagged = Manager(config).register("@daily", "ReportJob", args=[1], owner="billing")
    assert plain.lid != tagged.lid
    assert tagged.options == {"args": [1], "owner": "billing"}
    assert tagged.payload() == {"class": "ReportJob", "args": [1], "queue": "default", "retry": True}


def test_the_zone_is_stored_beside_the_options_and_defaults_from_mgr_tz(config, redis):
    mgr = Manager(config)
    mgr.tz = "America/Chicago"
    chicago = mgr.register("0 * * * *", "A")
    tokyo = mgr.register("0 * * * *", "B", tz=ZoneInfo("Asia/Tokyo"))
    utc = mgr.register("0 * * * *", "C", tz=None)
    assert mgr.tz == "America/Chicago"
    assert [loop.tz_name for loop in (chicago, tokyo, utc)] == ["America/Chicago", "Asia/Tokyo", None]
    assert redis.hget(f"loops:{tokyo.lid}", "tz") == b"Asia/Tokyo"
    assert "tz" not in tokyo.options


def test_paused_is_only_the_initial_value_so_a_dashboard_pause_survives_boots(config, redis):
    loop = Manager(config).register("@daily", "ReportJob", paused=True)
    assert redis.hget(f"loops:{loop.lid}", "paused") == b"1"
    assert wurk_cron.unpause(loop.lid, config=config)
    Manager(config).register("@daily", "ReportJob", paused=True)  # the next deploy
    assert redis.hget(f"loops:{loop.lid}", "paused") == b"0"
    assert wurk_cron.pause(loop.lid, config=config)
    Manager(config).register("@daily", "ReportJob")
    assert LoopSet(config).fetch(loop.lid).paused


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda mgr: mgr.register("0 0 * * MON", "ReportJob"), "'0 0 * * MON'"),
        (lambda mgr: mgr.register("61 * * * *", "ReportJob"), "minute value 61"),
        (lambda mgr: mgr.register("@daily", ""), "needs a class name"),
        (lambda mgr: mgr.register("@daily", 42), "got 42"),
        (lambda mgr: mgr.register("@daily", "ReportJob", queue=""), "ReportJob: queue"),
        (lambda mgr: mgr.register("@daily", "ReportJob", args="x"), "ReportJob: args must be a list"),
        (lambda mgr: mgr.register("@daily", "ReportJob", args=[object()]), "JSON-native"),
        (lambda mgr: mgr.register("@daily", "ReportJob", paused="maybe"), "paused must be"),
        (lambda mgr: mgr.register("@daily", "ReportJob", tz=""), "IANA zone name"),
    ],
)
def test_bad_registrations_fail_at_once_naming_the_problem_and_write_nothing(config, redis, call, message):
    with pytest.raises(ConfigurationError) as raised:  # a ValueError too, as documented
        call(Manager(config))
    assert message in str(raised.value)
    assert redis.keys("*") == []


def test_a_bad_schedule_names_the_job_it_was_given_for(config):
    with pytest.raises(ConfigurationError) as raised:
        Manager(config).register("0 9 * * MON-FRI", "app.jobs.ReportJob")
    assert str(raised.value).startswith("periodic job app.jobs.ReportJob: cron schedule '0 9 * * MON-FRI': ")


def test_config_periodic_blocks_accumulate_onto_one_manager_run_at_boot(config, redis):
    @config.periodic
    def first(mgr):
        mgr.tz = "America/Chicago"
        mgr.register("*/5 * * * *", "ReportJob")

    def second(mgr):
        mgr.register("0 4 * * *", "NightlyJob")  # inherits the first block's zone

    assert config.periodic(second) is second
    assert redis.keys("*") == []  # nothing is written until a worker starts
    manager = boot(config)
    assert [loop.klass for loop in manager.loops] == ["ReportJob", "NightlyJob"]
    assert {loop.tz_name for loop in LoopSet(config)} == {"America/Chicago"}
    assert LoopSet(config).size == 2


def test_config_periodic_without_the_plugin_says_which_to_enable(redis_url, monkeypatch):
    monkeypatch.setenv("WURK_DISABLE_PLUGINS", "cron")
    cfg = wurk.Config()
    with pytest.raises(wurk.ConfigurationError, match="needs the wurk-cron plugin"):
        cfg.periodic(lambda mgr: None)


def test_a_changed_schedule_prunes_the_old_loop_a_deleted_line_does_not(config, redis):
    def old_code(mgr):
        mgr.register("0 4 * * *", "NightlyJob")
        mgr.register("*/5 * * * *", "ReportJob")
        mgr.register("@hourly", "RetiredJob")

    def new_code(mgr):
        mgr.register("0 5 * * *", "NightlyJob")  # edited schedule
        mgr.register("*/5 * * * *", "ReportJob", queue="low")  # changed queue
        # the RetiredJob line was deleted

    periodic_service(config).add(old_code)
    old_manager = boot(config)
    old_lids = {loop.klass: loop.lid for loop in old_manager.loops}
    service = periodic_service(config)
    service.blocks[:] = [new_code]
    new_manager = boot(config)
    remaining = {loop.klass: loop.lid for loop in LoopSet(config)}
    assert remaining == {
        "NightlyJob": next(loop.lid for loop in new_manager.loops if loop.klass == "NightlyJob"),
        "ReportJob": next(loop.lid for loop in new_manager.loops if loop.klass == "ReportJob"),
        "RetiredJob": old_lids["RetiredJob"],  # nothing in the new code names it
    }
    assert redis.exists(f"loops:{old_lids['NightlyJob']}", f"loop-history:{old_lids['NightlyJob']}") == 0


def test_two_blocks_registering_one_class_on_two_schedules_keep_both(config):
    periodic_service(config).add(lambda mgr: mgr.register("0 4 * * *", "NightlyJob"))
    periodic_service(config).add(lambda mgr: mgr.register("0 16 * * *", "NightlyJob"))
    boot(config)
    assert sorted(loop.schedule for loop in LoopSet(config)) == ["0 16 * * *", "0 4 * * *"]


def test_a_process_registering_nothing_prunes_nothing(config):
    Manager(config).register("@daily", "ReportJob")
    assert boot(config) is None
    periodic_service(config).add(lambda mgr: mgr.register("@hourly", "OtherJob"))
    boot(config)
    assert sorted(loop.klass for loop in LoopSet(config)) == ["OtherJob", "ReportJob"]


def test_module_level_register_stores_a_label_unregister_and_reset_remove(config, redis):
    loop = wurk_cron.register("nightly report", "0 4 * * *", "ReportJob", ["x"], queue="low")
    assert loop.options == {"args": ["x"], "label": "nightly report", "queue": "low"}
    assert loop.label == "nightly report"
    other = wurk_cron.register("other", "@hourly", "OtherJob")
    assert loop.lid != other.lid
    redis.lpush(f"loop-history:{loop.lid}", json.dumps([1, "j"]))
    assert wurk_cron.unregister(loop.lid)
    assert not wurk_cron.unregister(loop.lid)
    assert redis.exists(f"loops:{loop.lid}", f"loop-history:{loop.lid}") == 0
    assert LoopSet(config).lids() == [other.lid]
    with pytest.raises(ValueError, match="name"):
        wurk_cron.register("", "@daily", "ReportJob")
    assert wurk_cron.reset() == 1
    assert redis.keys("*") == []


def test_loopset_reads_every_loop_back(config, redis):
    mgr = Manager(config)
    mgr.tz = "Asia/Tokyo"
    loop = mgr.register("0 4 * * *", "NightlyJob", queue="low", args=["nightly"])
    redis.hset(f"loops:{loop.lid}", mapping={"nf": "1700000100", "lf": "1700000040"})
    redis.lpush(f"loop-history:{loop.lid}", json.dumps([1700000040, "a" * 24]))
    loops = LoopSet(config)
    assert loops.size == len(loops) == 1
    [read] = list(loops.each())
    assert (read.lid, read.schedule, read.klass) == (loop.lid, "0 4 * * *", "NightlyJob")
    assert read.options == {"queue": "low", "args": ["nightly"]}
    assert (read.queue, read.args, read.retry, read.paused, read.tz_name) == (
        "low",
        ["nightly"],
        True,
        False,
        "Asia/Tokyo",
    )
    assert (read.next_fire_at, read.last_fired_at) == (1700000100, 1700000040)
    assert read.history() == [(1700000040, "a" * 24)]
    assert loops.fetch("0" * 16) is None
    wurk_cron.pause(loop.lid, config=config)
    assert loops.fetch(loop.lid).next_fire_at is None  # a paused loop shows no next fire
