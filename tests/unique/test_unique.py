"""Unique jobs in one process, on a real server: the lock, its key, its
release, the probes and the testing modes."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from typing import Any, ClassVar

import pytest

import wurk
import wurk_crypto
import wurk_unique
from wurk import api, testing
from wurk.client import payload as wire
from wurk.server.retry import Handled, JobRetry
from wurk_unique import ConfigurationError, UniqueClient, UniqueServer


class Charge(wurk.Job, unique_for=600):
    ran: ClassVar[list[Any]] = []

    def perform(self, account: int, cents: int) -> None:
        Charge.ran.append((account, cents))


class AtStart(wurk.Job, unique_for=60, unique_until="start"):
    seen: ClassVar[list[str | None]] = []

    def perform(self, n: int) -> None:
        AtStart.seen.append(wurk_unique.locked(AtStart, [n]))


class Sync(wurk.Job, unique_for=300, queue="sync"):
    """Deduplicated on the account only: the options hash is ignored."""

    @classmethod
    def unique_context(cls, job: dict[str, Any]) -> Any:
        return ["Sync", job["queue"], [job["args"][0]]]

    def perform(self, account: int, options: dict[str, Any]) -> None:
        pass


class Plain(wurk.Job):
    def perform(self, *args: Any) -> None:
        pass


def name(job_class: type) -> str:
    return wire.class_name(job_class)


def expected_key(job_class: str, queue: str, args: list[Any]) -> str:
    text = json.dumps([job_class, queue, args], separators=(",", ":"), ensure_ascii=False)
    return "unique:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(autouse=True)
def fresh_records():
    Charge.ran, AtStart.seen = [], []


# -- enabling --------------------------------------------------------------------------


def test_enable_installs_once_and_enabled_reports_it(config):
    assert not wurk_unique.enabled()
    assert not config.client_middleware.exists(UniqueClient)
    try:
        wurk_unique.enable()
        wurk_unique.enable()
        assert wurk_unique.enabled()
        assert [e.klass for e in config.client_middleware].count(UniqueClient) == 1
        assert [e.klass for e in config.server_middleware].count(UniqueServer) == 1
        assert sum(isinstance(h, wurk_unique.ReleaseOnDeath) for h in config.death_handlers) == 1
        later = wurk.Config()  # a configuration loaded afterwards gets them too
        assert later.client_middleware.exists(UniqueClient)
        assert sum(isinstance(h, wurk_unique.ReleaseOnDeath) for h in later.death_handlers) == 1
        switched_off = wurk.Config(disabled_plugins=["unique"])
        assert not switched_off.client_middleware.exists(UniqueClient)
    finally:
        wurk_unique.disable()
    assert not wurk_unique.enabled()


def test_without_enable_unique_for_is_ignored_but_still_valid_json(config, redis):
    assert Charge.set(unique_for=timedelta(minutes=5)).perform_async(1, 100)
    assert Charge.perform_async(1, 100)
    assert redis.llen("queue:default") == 2
    assert [r.item["unique_for"] for r in api.Queue("default")] == [600, 300]
    assert redis.keys("unique:*") == []


# -- the lock on push ----------------------------------------------------------------


def test_a_duplicate_is_dropped_with_none_and_written_nowhere(unique, redis):
    jid = Charge.perform_async(1, 2_500)
    assert jid is not None
    assert Charge.perform_async(1, 2_500) is None
    assert Charge.perform_in(60, 1, 2_500) is None
    assert redis.llen("queue:default") == 1
    assert redis.zcard("schedule") == 0
    key = expected_key(name(Charge), "default", [1, 2_500])
    assert redis.get(key) == jid.encode()
    assert 590 < redis.ttl(key) <= 600


def test_the_lock_is_per_queue_and_per_exact_args(unique, redis):
    assert Charge.perform_async(1, 2_500)
    assert Charge.perform_async(1, "2500")  # a string is another job
    assert Charge.perform_async(2_500, 1)  # so is another order
    assert Charge.set(queue="critical").perform_async(1, 2_500)
    assert redis.llen("queue:default") == 3
    assert redis.llen("queue:critical") == 1


def test_bulk_puts_none_where_a_duplicate_was_dropped(unique, redis):
    first = Charge.perform_async(1, 1)
    jids = Charge.perform_bulk([[1, 1], [2, 2], [2, 2], [3, 3]])
    assert jids[0] is None
    assert jids[2] is None
    assert jids[1] is not None
    assert jids[3] is not None
    assert redis.llen("queue:default") == 3
    assert wurk_unique.locked(Charge, [1, 1]) == first


def test_one_info_line_names_both_jids(unique):
    lines: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    unique.logger.addHandler(handler)
    try:
        holder = Charge.perform_async(9, 9)
        Charge.perform_async(9, 9)
    finally:
        unique.logger.removeHandler(handler)
    dropped = [line for line in lines if "duplicate" in line]
    assert len(dropped) == 1
    assert f"blocked by jid={holder}" in dropped[0]
    assert dropped[0].startswith(f"wurk_unique: duplicate {name(Charge)} dropped (jid=")


def test_per_call_options_override_the_class(unique, redis):
    assert Charge.perform_async(5, 5)
    assert Charge.set(unique_for=False).perform_async(5, 5)  # no lock at all
    assert Plain.set(unique_for=30).perform_async("x")
    assert Plain.set(unique_for=30).perform_async("x") is None
    assert redis.ttl(expected_key(name(Plain), "default", ["x"])) <= 30
    assert Plain.set(unique_for=2.9).perform_async("float")  # truncated to 2
    assert redis.ttl(expected_key(name(Plain), "default", ["float"])) <= 2


@pytest.mark.parametrize("value", [True, "10", 0, 0.5, -3, float("inf"), [10]])
def test_a_bad_unique_for_is_refused_before_anything_is_written(unique, redis, value):
    with pytest.raises(ConfigurationError, match="unique_for must be"):
        Plain.set(unique_for=value).perform_async(1)
    assert redis.dbsize() == 0


def test_unique_until_is_start_or_else_success(unique, redis):
    Plain.set(unique_for=60, unique_until="start").perform_async(1)
    Plain.set(unique_for=60, unique_until="whenever").perform_async(2)
    assert sorted(r.item["unique_until"] for r in api.Queue("default")) == ["start", "success"]


def test_a_scheduled_job_holds_its_lock_through_the_wait(unique, redis):
    Charge.perform_in(100, 7, 7)
    ttl = redis.ttl(expected_key(name(Charge), "default", [7, 7]))
    assert 690 < ttl <= 700
    Charge.perform_at(1_000_000_000, 8, 8)  # in the past: runs now, base TTL
    assert redis.ttl(expected_key(name(Charge), "default", [8, 8])) <= 600


def test_promotion_of_its_own_scheduled_copy_proceeds(unique, redis):
    from wurk.server.scheduled import ReliableEnq

    jid = Charge.perform_in(100, 3, 3)
    [(member, _)] = redis.zrange("schedule", 0, -1, withscores=True)
    redis.zadd("schedule", {member: 1.0})  # due now
    assert ReliableEnq(unique).enqueue_jobs() == 1
    [queued] = api.Queue("default")
    assert queued.jid == jid
    assert redis.zcard("schedule") == 0


# -- the key ---------------------------------------------------------------------------


def test_lock_key_is_sha256_of_the_compact_json_triple(config):
    assert wurk_unique.lock_key("HardJob", "default", (1, "two", {"é": 3})) == expected_key(
        "HardJob", "default", [1, "two", {"é": 3}]
    )
    assert wurk_unique.lock_key(Sync, "sync", [1, {}]) == expected_key(name(Sync), "sync", [1, {}])


def test_unique_context_narrows_the_lock_and_the_probe_follows_it(unique, redis):
    jid = Sync.perform_async(1, {"at": 1})
    assert Sync.perform_async(1, {"at": 2}) is None
    assert wurk_unique.locked(Sync, [1, {"anything": True}]) == jid
    assert wurk_unique.locked("sync", Sync, [1, {}]) == jid
    digest = hashlib.sha256(b'["Sync","sync",[1]]').hexdigest()
    assert redis.get(f"unique:{digest}") == jid.encode()
    # lock_key is the verbatim triple, with no hook applied
    assert wurk_unique.lock_key(Sync, "sync", [1, {"at": 1}]) != f"unique:{digest}"


def test_an_unknown_class_uses_the_default_triple(unique, redis):
    client = wurk.Client(unique)
    jid = client.push({"class": "RubyJob", "args": [1], "unique_for": 60})
    assert client.push({"class": "RubyJob", "args": [1], "unique_for": 60}) is None
    assert redis.get(expected_key("RubyJob", "default", [1])) == jid.encode()
    assert wurk_unique.locked("default", "RubyJob", [1]) == jid
    assert wurk_unique.locked("RubyJob", [1]) == jid


def active_job(job_id: str, enqueued_at: str, arguments: list[Any]) -> dict[str, Any]:
    return {
        "job_class": "ChargeJob",
        "job_id": job_id,
        "provider_job_id": None,
        "queue_name": "default",
        "priority": None,
        "arguments": arguments,
        "executions": 0,
        "exception_executions": {},
        "locale": "en",
        "timezone": "UTC",
        "enqueued_at": enqueued_at,
        "scheduled_at": None,
    }


def test_wrapper_payloads_are_deduplicated_on_the_task_and_its_arguments(unique, redis):
    client = wurk.Client(unique)
    wrapper = "Sidekiq::ActiveJob::Wrapper"
    first = client.push(
        {"class": wrapper, "wrapped": "ChargeJob", "args": [active_job("a1", "t1", [1])], "unique_for": 60}
    )
    assert first
    again = {"class": wrapper, "wrapped": "ChargeJob", "args": [active_job("b2", "t2", [1])], "unique_for": 60}
    assert client.push(again) is None
    other = {"class": wrapper, "wrapped": "ChargeJob", "args": [active_job("c3", "t3", [2])], "unique_for": 60}
    assert client.push(other)
    context = json.dumps([wrapper, "default", "ChargeJob", [1]], separators=(",", ":"))
    assert redis.get("unique:" + hashlib.sha256(context.encode()).hexdigest()) == first.encode()
    django = "wurk.contrib.django.backend.TaskWrapper"
    task = {"task_path": "app.tasks.mail", "args": [1], "kwargs": {"to": "a"}}
    assert client.push({"class": django, "args": [{**task, "priority": 0, "run_after": "t1"}], "unique_for": 60})
    assert (
        client.push({"class": django, "args": [{**task, "priority": 5, "run_after": "t2"}], "unique_for": 60}) is None
    )
    assert redis.llen("queue:default") == 3


# -- release -----------------------------------------------------------------------------


def test_perform_inline_takes_and_releases_the_lock_around_the_run(unique, redis):
    Charge.perform_inline(4, 4)
    assert Charge.ran == [(4, 4)]
    assert wurk_unique.locked(Charge, [4, 4]) is None
    assert redis.keys("unique:*") == []


def test_unique_until_start_releases_before_perform(unique):
    AtStart.perform_inline(1)
    assert AtStart.seen == [None]


class Boom(wurk.Job, unique_for=60):
    def perform(self) -> None:
        raise ValueError("boom")


def test_a_raising_job_keeps_its_lock(unique):
    with pytest.raises(ValueError, match="boom"):
        Boom.perform_inline()
    assert wurk_unique.locked(Boom, []) is not None


def test_release_only_deletes_a_lock_still_held_by_the_job(unique, redis):
    Charge.perform_async(6, 6)
    key = expected_key(name(Charge), "default", [6, 6])
    [record] = api.Queue("default")
    redis.set(key, "f" * 24)  # the first lock expired and a later push took it
    middleware = UniqueServer()
    middleware.config = unique
    assert middleware.call(Charge(), record.item, "default", lambda: "done") == "done"
    assert redis.get(key) == b"f" * 24


def test_a_failed_release_logs_a_warning_and_the_job_completes(unique, redis):
    Charge.perform_async(7, 7)
    key = expected_key(name(Charge), "default", [7, 7])
    [record] = api.Queue("default")
    redis.delete(key)
    redis.rpush(key, "not a string")  # the release script's GET now fails
    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
    unique.logger.addHandler(handler)
    middleware = UniqueServer()
    middleware.config = unique
    try:
        assert middleware.call(Charge(), record.item, "default", lambda: "done") == "done"
    finally:
        unique.logger.removeHandler(handler)
    assert len(warnings) == 1
    assert warnings[0].startswith("wurk_unique: release failed: ")


def fail_with(retrier: JobRetry, job: dict[str, Any], exc: BaseException) -> None:
    def raising() -> None:
        raise exc

    with pytest.raises(Handled):
        retrier.run_global(job, "default", lambda: retrier.run_local(Charge, job, "default", raising))


def test_an_automatic_death_releases_and_a_kill_keeps_the_lock(unique, redis):
    retrier = JobRetry(unique)
    dying = Charge.set(retry=0).perform_async(10, 10)
    [record] = api.Queue("default")
    fail_with(retrier, record.item, ValueError("out of retries"))
    assert wurk_unique.locked(Charge, [10, 10]) is None
    assert api.DeadSet().find_job(dying) is not None

    no_retry = Charge.set(retry=False).perform_async(11, 11)
    job = next(r.item for r in api.Queue("default") if r.jid == no_retry)
    fail_with(retrier, job, ValueError("retry false"))
    assert wurk_unique.locked(Charge, [11, 11]) is None

    kept = Charge.perform_async(12, 12)
    entry = next(r for r in api.Queue("default") if r.jid == kept)
    api.DeadSet().kill(entry.value)  # a person's kill
    assert wurk_unique.locked(Charge, [12, 12]) == kept


# -- with encryption ------------------------------------------------------------------


def test_unique_for_with_encrypt_is_refused_while_encryption_is_enabled(unique, redis):
    wurk_crypto.enable(1, lambda version: b"k" * 32)
    try:
        with pytest.raises(ConfigurationError) as refused:
            Charge.set(encrypt=True).perform_async(1, 1)
        message = str(refused.value)
        assert name(Charge) in message
        assert "unique_for" in message
        assert "encrypt" in message
        with pytest.raises(ConfigurationError):
            Plain.set(unique_for=60, encrypt=True).perform_bulk([[1]])
    finally:
        wurk_crypto.disable()
    assert redis.dbsize() == 0


# -- testing modes ------------------------------------------------------------------------


def test_fake_mode_deduplicates_with_locks_in_real_redis(unique, redis):
    with testing.fake():
        assert Charge.perform_async(1, 1)
        assert Charge.perform_async(1, 1) is None
        assert len(Charge.jobs) == 1
        assert redis.keys("unique:*") != []
        Charge.drain()  # the testing chain is empty: no release
    assert wurk_unique.locked(Charge, [1, 1]) is not None


def test_inline_mode_releases_only_with_the_server_middleware_registered(unique, redis):
    with testing.inline():
        Charge.perform_async(2, 2)
        assert wurk_unique.locked(Charge, [2, 2]) is not None
        testing.server_middleware.add(UniqueServer)
        try:
            Charge.perform_async(3, 3)
        finally:
            testing.server_middleware.remove(UniqueServer)
    assert Charge.ran == [(2, 2), (3, 3)]
    assert wurk_unique.locked(Charge, [3, 3]) is None
