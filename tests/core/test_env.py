"""The environment variables Wurk reads, through the helpers of ``wurk.config.env``.

Most tests pass an explicit ``environ`` mapping; a few go through the real
process environment (with ``monkeypatch``) to prove the default source.
"""

from __future__ import annotations

import socket

import pytest

from wurk.config import env

# -- the WURK_* / SIDEKIQ_* lookup ------------------------------------------------


def test_get_reads_the_native_name():
    assert env.get("COUNT", {"WURK_COUNT": "3"}) == "3"


def test_get_falls_back_to_the_sidekiq_alias():
    assert env.get("COUNT", {"SIDEKIQ_COUNT": "4"}) == "4"


def test_native_name_wins_over_the_alias():
    assert env.get("COUNT", {"WURK_COUNT": "3", "SIDEKIQ_COUNT": "4"}) == "3"


def test_get_is_none_when_neither_is_set():
    assert env.get("COUNT", {}) is None


def test_get_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.delenv("WURK_LEADER", raising=False)
    monkeypatch.setenv("SIDEKIQ_LEADER", "false")
    assert env.get("LEADER") == "false"
    monkeypatch.setenv("WURK_LEADER", "true")
    assert env.get("LEADER") == "true"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, False),
        ("", False),
        ("0", False),
        ("false", False),
        ("FALSE", False),
        ("no", False),
        ("off", False),
        (" Off ", False),
        ("1", True),
        ("true", True),
        ("yes", True),
        ("on", True),
        ("anything", True),
    ],
)
def test_truthy(value, expected):
    assert env.truthy(value) is expected


# -- WURK_LEADER ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["false", "FALSE", "False", " false "])
def test_leader_false_opts_out(value):
    assert env.leader_opted_out({"WURK_LEADER": value}) is True


@pytest.mark.parametrize("value", ["true", "0", "no", "", "1"])
def test_only_false_opts_out_of_leadership(value):
    assert env.leader_opted_out({"WURK_LEADER": value}) is False


def test_leader_unset_takes_part():
    assert env.leader_opted_out({}) is False


def test_leader_reads_the_sidekiq_alias_and_native_wins():
    assert env.leader_opted_out({"SIDEKIQ_LEADER": "false"}) is True
    assert env.leader_opted_out({"WURK_LEADER": "true", "SIDEKIQ_LEADER": "false"}) is False


# -- WURK_WEB_READ_ONLY -----------------------------------------------------------


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off", "OFF"])
def test_web_read_only_off_values(value):
    assert env.web_read_only({"WURK_WEB_READ_ONLY": value}) is False


@pytest.mark.parametrize("value", ["1", "true", "yes", "on"])
def test_web_read_only_on_values(value):
    assert env.web_read_only({"WURK_WEB_READ_ONLY": value}) is True


def test_web_read_only_unset_is_off(monkeypatch):
    monkeypatch.delenv("WURK_WEB_READ_ONLY", raising=False)
    assert env.web_read_only() is False
    monkeypatch.setenv("WURK_WEB_READ_ONLY", "1")
    assert env.web_read_only() is True


# -- WURK_DEBUG, WURK_DISABLED ----------------------------------------------------


def test_debug_is_on_for_any_value():
    assert env.debug({}) is False
    assert env.debug({"WURK_DEBUG": "1"}) is True
    assert env.debug({"WURK_DEBUG": "0"}) is True  # presence is what counts
    assert env.debug({"SIDEKIQ_DEBUG": "yes"}) is True


def test_disabled_only_for_one():
    assert env.disabled({}) is False
    assert env.disabled({"WURK_DISABLED": "1"}) is True
    assert env.disabled({"WURK_DISABLED": "true"}) is False


# -- the application environment ------------------------------------------------


def test_environment_defaults_to_development():
    assert env.environment(None, {}) == "development"


def test_environment_flag_wins_over_everything():
    environ = {"APP_ENV": "staging", "RAILS_ENV": "qa", "RACK_ENV": "demo"}
    assert env.environment("production", environ) == "production"


def test_environment_order_app_then_rails_then_rack():
    assert env.environment(None, {"APP_ENV": "staging", "RAILS_ENV": "qa", "RACK_ENV": "demo"}) == "staging"
    assert env.environment(None, {"RAILS_ENV": "qa", "RACK_ENV": "demo"}) == "qa"
    assert env.environment(None, {"RACK_ENV": "demo"}) == "demo"


def test_empty_environment_values_are_skipped():
    assert env.environment("", {"APP_ENV": "", "RAILS_ENV": "qa"}) == "qa"


def test_environment_reads_the_process_environment(monkeypatch):
    for name in ("APP_ENV", "RAILS_ENV", "RACK_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RACK_ENV", "production")
    assert env.environment() == "production"


# -- RAILS_MAX_THREADS, DYNO ------------------------------------------------------


def test_max_threads():
    assert env.max_threads({}) is None
    assert env.max_threads({"RAILS_MAX_THREADS": "10"}) == 10


@pytest.mark.parametrize("value", ["", "0", "-1", "ten"])
def test_max_threads_ignores_unusable_values(value):
    assert env.max_threads({"RAILS_MAX_THREADS": value}) is None


def test_hostname_is_the_dyno_on_heroku():
    assert env.hostname({"DYNO": "worker.3"}) == "worker.3"


def test_hostname_is_the_system_host_name_elsewhere():
    assert env.hostname({}) == socket.gethostname()
