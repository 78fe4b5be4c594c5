"""Why a job died is an open set of names: core registers its own, a plugin
registers its own where the code that gives it lives, and a name nobody
registered is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wurk.errors import PluginError
from wurk.plugins import outcomes
from wurk.plugins.outcomes import Outcome, add_reason, reasons
from wurk.server.retry import Retrier

JOB = {"jid": "b" * 24, "class": "tests.Nothing", "args": [], "queue": "default"}

CORE_REASONS = {"retries_exhausted", "retry_false", "discarded", "expired", "killed", "poison_pill"}


@pytest.fixture
def registry(monkeypatch):
    """The process-wide reasons, restored after the test."""
    monkeypatch.setattr(outcomes, "_reasons", dict(outcomes._reasons))


def test_core_registers_the_reasons_it_gives():
    assert set(reasons()) >= CORE_REASONS
    for reason in CORE_REASONS:
        assert Outcome.of("died", JOB, reason=reason).reason == reason


def test_the_limiters_reason_is_registered_by_the_limiter_not_by_core():
    code = (
        "import wurk.plugins.outcomes as o, wurk.server.retry, wurk.server.reaper, wurk.api\n"
        "before = 'rate_limited' in o.reasons()\n"
        "import wurk_limiter.middleware\n"
        "print(before, 'rate_limited' in o.reasons())\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "WURK_DISABLE_PLUGINS"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_a_plugin_registers_a_reason_and_an_outcome_may_then_give_it(registry):
    add_reason("quota_exceeded", "the tenant's monthly quota was used up")
    add_reason("quota_exceeded", "the tenant's monthly quota was used up")  # again, same meaning: nothing
    assert reasons()["quota_exceeded"] == "the tenant's monthly quota was used up"
    assert Outcome.of("died", JOB, reason="quota_exceeded").reason == "quota_exceeded"


def test_a_reason_registered_twice_with_two_meanings_is_refused(registry):
    add_reason("quota_exceeded", "the monthly quota was used up")
    with pytest.raises(PluginError, match="'quota_exceeded' is already registered, meaning 'the monthly quota"):
        add_reason("quota_exceeded", "the daily quota was used up")
    with pytest.raises(PluginError, match="'killed' is already registered"):
        add_reason("killed", "something else")


@pytest.mark.parametrize("name", ["Rate_Limited", "rate-limited", "2fast", "", "rate limited", None])
def test_a_reason_must_be_a_lowercase_identifier(registry, name):
    with pytest.raises(PluginError, match="lowercase identifier"):
        add_reason(name, "a meaning")


def test_a_reason_needs_a_meaning(registry):
    with pytest.raises(PluginError, match="needs a meaning"):
        add_reason("quota_exceeded", " ")


def test_an_outcome_with_an_unknown_reason_is_refused():
    expected = r"unknown outcome reason 'over_quota': register it with wurk\.plugins\.outcomes"
    with pytest.raises(PluginError, match=expected):
        Outcome.of("died", JOB, reason="over_quota")


def test_a_kill_with_an_unknown_reason_books_nothing(config, redis):
    with pytest.raises(PluginError, match="unknown outcome reason 'over_quota'"):
        Retrier(config).kill(dict(JOB), reason="over_quota")
    assert redis.zcard("dead") == 0
    Retrier(config).kill(dict(JOB), reason="killed")
    assert redis.zcard("dead") == 1
