"""The two core seams feature plugins stand on: option coercers, and the
death reason a death handler can ask for."""

from __future__ import annotations

from datetime import timedelta

import pytest

import wurk
from wurk import api
from wurk.config.options import OptionRegistry
from wurk.errors import ConfigurationError
from wurk.server.retry import Handled, JobRetry, Retrier, death_reason


class Plain(wurk.Job):
    def perform(self, *args):
        pass


class Seconds:
    """A plugin owning a duration option, checked on every push."""

    @wurk.hookimpl
    def wurk_register_options(self, options: OptionRegistry) -> None:
        options.add("hold_for", owner="wurk-hold", coerce=self.coerce)

    @staticmethod
    def coerce(value, job):
        if isinstance(value, timedelta):
            return int(value.total_seconds())
        if not isinstance(value, int):
            raise ConfigurationError(f"job {job['class']}: hold_for must be seconds, got {value!r}")
        return value


def test_a_coercer_shapes_the_value_every_push_writes(config, redis):
    config.plugins.register(Seconds(), name="hold")
    Plain.set(hold_for=timedelta(minutes=2)).perform_async(1)
    Plain.set(hold_for=timedelta(seconds=5)).perform_bulk([[1], [2]])
    Plain.set(hold_for=7).perform_in(60, 1)
    held = sorted(job["hold_for"] for job in (record.item for record in api.Queue("default")))
    assert held == [5, 5, 120]
    assert [entry.item["hold_for"] for entry in api.ScheduledSet()] == [7]


def test_a_coercer_refusal_writes_nothing(config, redis):
    config.plugins.register(Seconds(), name="hold")
    with pytest.raises(ConfigurationError, match="hold_for must be seconds, got 'soon'"):
        Plain.set(hold_for="soon").perform_async(1)
    with pytest.raises(ConfigurationError, match="hold_for must be seconds"):
        Plain.set(hold_for="soon").perform_bulk([[1], [2]])
    assert redis.dbsize() == 0


@pytest.fixture
def reasons(config):
    """Every death handler call, as (jid, death_reason())."""
    heard: list[tuple[str, str | None]] = []
    config.death_handlers.append(lambda job, exc: heard.append((job["jid"], death_reason())))
    return heard


def job(jid, **fields):
    return {"class": "x", "queue": "default", "args": [], "jid": jid * 24, **fields}


def raise_it(exc):
    raise exc


def test_a_death_handler_hears_why_the_job_died(config, redis, reasons):
    retrier = JobRetry(config)
    retrier.retries_exhausted(None, job("a"), RuntimeError("out of attempts"))
    with pytest.raises(Handled):
        retrier.run_global(job("b", retry=False), "default", lambda: raise_it(ValueError("no retries")))
    Retrier(config).kill(job("c"))
    api.DeadSet().kill(wurk.client.payload.dumps(job("d")))
    Retrier(config).kill(job("e"), reason="expired")
    assert reasons == [
        ("a" * 24, "retries_exhausted"),
        ("b" * 24, "retry_false"),
        ("c" * 24, "killed"),
        ("d" * 24, "killed"),
        ("e" * 24, "expired"),
    ]
    assert death_reason() is None  # only while the handlers run
