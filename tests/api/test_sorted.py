"""The sorted sets (schedule, retry, dead) and their entries against a real server."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest

from wurk.api import DeadSet, JobSet, Queue, RetrySet, ScheduledSet, SortedEntry, SortedSet
from wurk.client import payload as wire

from .jobs import ScheduledJob


def failed_job(jid: str, retry_count: int = 1, klass: str = "tests.api.jobs.HardJob", **extra) -> dict:
    return {
        "retry": True,
        "queue": "default",
        "class": klass,
        "args": [jid],
        "jid": jid,
        "created_at": 1796027746766,
        "error_message": "boom",
        "error_class": "RuntimeError",
        "failed_at": 1796027747092,
        "retry_count": retry_count,
        **extra,
    }


def jid_of(number: int) -> str:
    return f"{number:024x}"


def fill(job_set: JobSet, count: int, base: float = 1_800_000_000.0) -> list[str]:
    jids = [jid_of(n) for n in range(count)]
    for n, jid in enumerate(jids):
        job_set.schedule(base + n, failed_job(jid))
    return jids


def test_the_three_sets_and_their_keys(config):
    assert (ScheduledSet().name, RetrySet().name, DeadSet().name) == ("schedule", "retry", "dead")
    assert RetrySet("other-retry").name == "other-retry"
    assert DeadSet.API_KILL_MESSAGE == "Job killed by API"
    assert RetrySet().as_json() == {"name": "retry"}
    assert repr(RetrySet()) == "<RetrySet retry>"


def test_size_clear_and_schedule(config, redis):
    retries = RetrySet()
    assert retries.size == 0
    assert retries.schedule(datetime(2027, 1, 1, tzinfo=UTC), failed_job(jid_of(1))) == 1
    assert retries.schedule(1_800_000_000.5, json.dumps({"class": "X", "args": []})) == 1
    assert retries.size == 2
    assert redis.zscore("retry", wire.dumps(failed_job(jid_of(1)))) == datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    assert retries.clear() is True
    assert redis.exists("retry") == 0


def test_iteration_is_highest_score_first_across_pages(config):
    jids = fill(RetrySet(), 120)
    seen = list(RetrySet())
    assert [entry.jid for entry in seen] == list(reversed(jids))
    assert all(isinstance(entry, SortedEntry) for entry in seen)
    assert seen[0].score == 1_800_000_119.0
    assert seen[0].at == datetime.fromtimestamp(1_800_000_119.0, UTC)


def test_deleting_while_iterating_visits_every_entry_once(config):
    fill(DeadSet(), 130)
    dead = DeadSet()
    visited = []
    for entry in dead:
        visited.append(entry.jid)
        if int(entry.jid, 16) % 3 == 0:
            assert entry.delete() is True
    assert sorted(visited) == [jid_of(n) for n in range(130)]
    assert dead.size == 130 - 44


def test_entry_fields_id_and_error(config):
    RetrySet().schedule(1796027770.0939162, failed_job(jid_of(7)))
    entry = next(iter(RetrySet()))
    assert entry.score == 1796027770.0939162
    assert entry.id == f"1796027770.0939162|{jid_of(7)}"
    assert entry.error() is True
    assert entry.queue == "default"
    assert entry["error_class"] == "RuntimeError"
    assert entry.failed_at == datetime(2026, 11, 30, 8, 35, 47, 92000, tzinfo=UTC)
    assert "score=1796027770.0939162" in repr(entry)
    ScheduledSet().schedule(1.0, {"class": "X", "args": []})
    assert next(iter(ScheduledSet())).error() is False


def test_fetch_by_score_range_and_id(config):
    jids = fill(ScheduledSet(), 5)
    scheduled = ScheduledSet()
    assert [entry.jid for entry in scheduled.fetch(1_800_000_002.0)] == [jids[2]]
    at = datetime.fromtimestamp(1_800_000_003.0, UTC)
    assert [entry.jid for entry in scheduled.fetch(at)] == [jids[3]]
    assert [entry.jid for entry in scheduled.fetch((1_800_000_001, 1_800_000_003))] == jids[1:4]
    assert scheduled.fetch((1_800_000_001, 1_800_000_003), jids[2])[0].jid == jids[2]
    assert scheduled.fetch(1_800_000_002.0, jid_of(99)) == []
    entry = scheduled.fetch(1_800_000_004.0)[0]
    score, jid = entry.id.split("|")
    assert scheduled.fetch(score, jid)[0].value == entry.value
    with pytest.raises(TypeError):
        scheduled.fetch([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        scheduled.fetch((1, 2, 3))  # type: ignore[arg-type]


def test_find_job_scans_for_the_exact_jid(config):
    jids = fill(RetrySet(), 300)
    entry = RetrySet().find_job(jids[123])
    assert entry is not None
    assert entry.jid == jids[123]
    assert entry.score == 1_800_000_123.0
    assert RetrySet().find_job(jid_of(5000)) is None


def test_scan_yields_entries_raw_pairs_or_feeds_a_callback(config):
    fill(DeadSet(), 10)
    DeadSet().schedule(5.0, failed_job("other", klass="Special[Job]?"))
    dead = DeadSet()
    assert [entry.jid for entry in dead.scan("Special[Job]?")] == ["other"]
    assert len(list(dead.scan("HardJob"))) == 10
    pairs = list(dead.scan_raw("Special"))
    assert pairs == [(wire.dumps(failed_job("other", klass="Special[Job]?")).encode(), 5.0)]
    assert dead.scan("*Special*", lambda entry: entry.delete()) == 1
    assert dead.size == 10
    with pytest.raises(TypeError, match="callback"):
        dead.scan("x", 50)  # type: ignore[call-overload]


def test_a_plain_sorted_set(config, redis):
    redis.zadd("plain", {"alpha": 1.0, "beta": 2.0})
    plain = SortedSet("plain")
    assert plain.size == 2
    assert list(plain.scan_raw("bet")) == [(b"beta", 2.0)]
    assert plain.delete_by_value("plain", b"alpha") is True
    assert plain.clear() is True
    assert plain.size == 0


def test_delete_by_value_and_by_jid(config, redis):
    jids = fill(RetrySet(), 3)
    retries = RetrySet()
    member = wire.dumps(failed_job(jids[0]))
    assert retries.delete_by_value("retry", member) is True
    assert retries.delete_by_value("retry", member) is False
    assert retries.delete_by_jid(1_800_000_001.0, jids[1]) is True
    assert retries.delete_by_jid(1_800_000_001.0, jids[1]) is False
    assert retries.delete(1_800_000_002.0, jids[0]) is False  # wrong jid at that score
    assert retries.delete(1_800_000_002.0, jids[2]) is True
    assert retries.size == 0


def test_remove_job_falls_back_to_score_and_jid(config):
    RetrySet().schedule(1_800_000_000.0, failed_job(jid_of(1)))
    stored = next(iter(RetrySet()))
    rebuilt = SortedEntry(RetrySet(), stored.score, json.dumps(stored.item))  # other bytes, same job
    assert rebuilt.value != stored.value
    assert RetrySet().remove_job(rebuilt) is True
    assert RetrySet().remove_job(stored) is False


def test_retry_decrements_retry_count_and_pushes_through_the_client(config, redis):
    RetrySet().schedule(time.time() + 60, failed_job(jid_of(1), retry_count=3))
    entry = next(iter(RetrySet()))
    pushed = entry.retry()
    assert pushed is not None
    assert pushed["retry_count"] == 2
    assert RetrySet().size == 0
    [job] = list(Queue())
    assert job.jid == jid_of(1)
    assert job["retry_count"] == 2
    assert job["enqueued_at"] is not None  # stamped by the client
    assert entry.retry() is None  # gone: nothing pushed twice
    assert Queue().size == 1


def test_add_to_queue_leaves_the_payload_alone(config):
    ScheduledSet().schedule(time.time() + 3600, failed_job(jid_of(2), retry_count=3, at=time.time() + 3600))
    pushed = next(iter(ScheduledSet())).add_to_queue()
    assert pushed is not None
    assert pushed["retry_count"] == 3
    [job] = list(Queue())
    assert job["retry_count"] == 3
    assert job["at"] is None  # queued now, not rescheduled
    assert ScheduledSet().size == 0


def test_two_concurrent_retries_of_one_entry_push_one_job(config):
    for round_number in range(20):
        RetrySet().schedule(1_800_000_000.0, failed_job(jid_of(round_number)))
        entries = [next(iter(RetrySet())) for _ in range(2)]
        barrier = threading.Barrier(2)
        results: list[object] = [None, None]

        def retry(index: int, entries=entries, barrier=barrier, results=results) -> None:
            barrier.wait()
            results[index] = entries[index].retry()

        threads = [threading.Thread(target=retry, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sum(result is not None for result in results) == 1
        assert Queue().size == round_number + 1
    assert RetrySet().size == 0


def test_a_failed_push_puts_the_entry_back(config, redis):
    RetrySet().schedule(1_800_000_000.0, {"class": "X", "jid": jid_of(3)})  # no args: the client refuses it
    entry = next(iter(RetrySet()))
    with pytest.raises(ValueError, match="args"):
        entry.retry()
    assert redis.zscore("retry", entry.value) == 1_800_000_000.0


def test_an_entry_that_is_not_json_cannot_be_enqueued_but_can_be_deleted(config, redis):
    redis.zadd("dead", {b"{broken": 5.0})
    entry = next(iter(DeadSet()))
    assert entry.valid is False
    assert entry.id == "5.0|None"
    with pytest.raises(ValueError, match="not a JSON job"):
        entry.retry()
    assert DeadSet().size == 1
    assert entry.delete() is True


def test_reschedule_moves_the_score_by_a_delta(config, redis):
    ScheduledSet().schedule(1_800_000_000.0, failed_job(jid_of(4)))
    entry = next(iter(ScheduledSet()))
    target = datetime.fromtimestamp(1_800_003_600.25, UTC)
    assert entry.reschedule(target) == pytest.approx(1_800_003_600.25)
    assert entry.score == pytest.approx(1_800_003_600.25)
    assert redis.zscore("schedule", entry.value) == pytest.approx(1_800_003_600.25)
    entry.delete()
    assert entry.reschedule(1_900_000_000.0) is None  # gone: not brought back
    assert redis.exists("schedule") == 0


def test_entry_kill_moves_to_dead_and_runs_death_handlers(config, redis):
    seen = []
    config.death_handlers.append(lambda job, exc: seen.append((job["jid"], type(exc), str(exc), exc.__traceback__)))
    RetrySet().schedule(1_800_000_000.0, failed_job(jid_of(5)))
    entry = next(iter(RetrySet()))
    assert entry.kill() == entry.item
    assert entry.kill() is None
    assert RetrySet().size == 0
    [dead] = list(DeadSet())
    assert dead.value == entry.value  # the payload is moved byte for byte
    assert abs(dead.score - time.time()) < 5
    assert len(seen) == 1
    jid, kind, message, traceback = seen[0]
    assert (jid, kind, message) == (jid_of(5), RuntimeError, "Job killed by API")
    assert traceback is not None


def test_dead_set_kill_options(config, redis):
    seen = []
    config.death_handlers.append(lambda job, exc: seen.append(exc))
    dead = DeadSet()
    assert dead.kill(wire.dumps(failed_job(jid_of(1))), notify_failure=False) is True
    assert seen == []
    boom = KeyError("real")
    dead.kill(failed_job(jid_of(2)), exc=boom)
    assert seen == [boom]
    dead.kill(b"{not json")  # nothing to hand a handler
    assert len(seen) == 1
    assert dead.size == 3


def test_kill_trims_by_count_and_age_after_adding(config, redis):
    config["dead_max_jobs"] = 5
    now = time.time()
    redis.zadd("dead", {f"old-{n}": now - 86_400 * 200 for n in range(2)})
    redis.zadd("dead", {f"recent-{n}": now - 100 + n for n in range(6)})
    DeadSet().kill(failed_job(jid_of(1)), notify_failure=False)
    members = [member.decode() for member in redis.zrange("dead", 0, -1)]
    # age first (the two 200-day-old ones), then rank 0..-5 leaves the newest 4
    assert len(members) == 4
    assert members[-1].startswith("{")
    assert not any(member.startswith("old-") for member in members)
    DeadSet().kill(failed_job(jid_of(2)), notify_failure=False, trim=False)
    assert DeadSet().size == 5
    DeadSet().kill(failed_job(jid_of(3)), notify_failure=False, max_jobs=3)
    assert DeadSet().size == 2


def test_kill_raw_adds_and_trims_in_one_transaction_without_handlers(config, redis):
    seen = []
    config.death_handlers.append(lambda job, exc: seen.append(job))
    redis.zadd("dead", {"ancient": time.time() - 10_000})
    assert DeadSet().kill_raw(b"raw bytes", timeout=3600) is True
    assert redis.zrange("dead", 0, -1) == [b"raw bytes"]
    assert seen == []


def test_trim_alone(config, redis):
    now = time.time()
    redis.zadd("dead", {f"m{n}": now - n for n in range(10)})
    assert DeadSet().trim(max_jobs=4) is True
    assert redis.zcard("dead") == 3
    assert DeadSet().trim(timeout=1.5) is True
    assert redis.zcard("dead") == 2


def test_pop_each_pops_lowest_first_and_is_bounded(config, redis):
    fill(ScheduledSet(), 3)
    popped = list(ScheduledSet().pop_each())
    assert [json.loads(member)["jid"] for member, _ in popped] == [jid_of(0), jid_of(1), jid_of(2)]
    assert [score for _, score in popped] == [1_800_000_000.0, 1_800_000_001.0, 1_800_000_002.0]
    assert ScheduledSet().size == 0


def test_retry_all_enqueues_everything_and_leaves_what_it_cannot(config, redis):
    fill(RetrySet(), 120)
    redis.zadd("retry", {b"{garbage": 1.0, b'{"class":"X"}': 2.0})
    assert RetrySet().retry_all() == 120
    assert Queue().size == 120
    assert all(job["retry_count"] == 0 for job in Queue())
    assert sorted(redis.zrange("retry", 0, -1)) == [b'{"class":"X"}', b"{garbage"]


def test_kill_all_moves_everything_to_dead_with_handlers_and_one_trim(config, redis):
    seen = []
    config.death_handlers.append(lambda job, exc: seen.append(str(exc)))
    config["dead_max_jobs"] = 50
    fill(RetrySet(), 60)
    assert RetrySet().kill_all() == 60
    assert RetrySet().size == 0
    assert DeadSet().size == 49
    assert seen == ["Job killed by API"] * 60
    seen.clear()
    fill(ScheduledSet(), 3)
    assert ScheduledSet().kill_all(notify_failure=False) == 3
    assert seen == []


def test_kill_all_on_the_dead_set_itself_ends(config):
    fill(DeadSet(), 5)
    assert DeadSet().kill_all(notify_failure=False) == 5
    assert DeadSet().size == 5


def test_scheduled_job_entries_from_perform_in(config):
    jid = ScheduledJob.perform_in(3600, "later")
    entry = ScheduledSet().find_job(jid)
    assert entry is not None
    assert entry.args == ["later"]
    assert entry["retry"] == 3
    assert 3590 < entry.score - time.time() < 3610
