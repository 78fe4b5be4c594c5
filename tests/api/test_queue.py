"""Queue and JobRecord against a real server."""

from __future__ import annotations

import json
import time

import pytest

from wurk.api import JobRecord, Queue

from .jobs import HardJob, OtherJob

QUEUE_KEY = "queue:default"


def test_all_lists_known_queues_sorted_by_name(config):
    OtherJob.perform_async(1)
    HardJob.perform_async(1)
    HardJob.set(queue="alpha").perform_async(1)
    assert [q.name for q in Queue.all()] == ["alpha", "default", "other"]
    assert Queue.all()[0] == Queue("alpha")
    assert Queue().name == "default" == Queue().id
    assert Queue("x").as_json() == {"name": "x"}


def test_size_and_latency_of_an_empty_and_a_filled_queue(config, redis):
    queue = Queue()
    assert queue.size == 0
    assert queue.latency == 0.0
    stamp = int(time.time() * 1000) - 5_000
    redis.lpush(QUEUE_KEY, json.dumps({"class": "X", "args": [], "jid": "a" * 24, "enqueued_at": stamp}))
    redis.lpush(QUEUE_KEY, json.dumps({"class": "X", "args": [], "jid": "b" * 24, "enqueued_at": stamp + 5_000}))
    assert queue.size == 2
    assert 4.5 < queue.latency < 10  # the tail (oldest) decides


def test_latency_reads_float_seconds_and_falls_back_to_created_at(config, redis):
    redis.lpush(QUEUE_KEY, json.dumps({"class": "X", "args": [], "created_at": time.time() - 30.0}))
    assert 29 < Queue().latency < 40
    redis.delete(QUEUE_KEY)
    redis.lpush(QUEUE_KEY, "not json")
    assert Queue().latency == 0.0
    redis.delete(QUEUE_KEY)
    redis.lpush(QUEUE_KEY, json.dumps({"class": "X", "args": [], "enqueued_at": time.time() + 3600.0}))
    assert Queue().latency == 0.0  # a clock ahead of ours is not a negative wait


def test_iteration_is_newest_first_and_pages_through_everything(config):
    jids = HardJob.perform_bulk([[i] for i in range(120)])
    seen = list(Queue())
    assert len(seen) == 120
    assert [record.args[0] for record in seen] == list(range(119, -1, -1))
    assert {record.jid for record in seen} == set(jids)
    assert all(record.queue == "default" for record in seen)


def test_deleting_while_iterating_visits_every_job_once(config):
    HardJob.perform_bulk([[i] for i in range(130)])
    queue = Queue()
    visited = []
    for record in queue:
        visited.append(record.args[0])
        if record.args[0] % 2 == 0:
            assert record.delete() is True
    assert sorted(visited) == list(range(130))
    assert queue.size == 65
    assert all(record.args[0] % 2 == 1 for record in queue)


def test_find_job_and_delete_by_exact_bytes(config, redis):
    jid = HardJob.perform_async("target")
    HardJob.perform_async("other")
    record = Queue().find_job(jid)
    assert record is not None
    assert record.args == ["target"]
    assert isinstance(record.value, bytes)
    assert redis.lrange(QUEUE_KEY, 0, -1).count(record.value) == 1
    assert Queue().find_job("0" * 24) is None
    assert record.delete() is True
    assert record.delete() is False
    assert Queue().size == 1


def test_clear_removes_the_list_and_the_queue_name(config, redis):
    HardJob.perform_async(1)
    assert Queue().clear() is True
    assert redis.exists(QUEUE_KEY) == 0
    assert redis.sismember("queues", "default") == 0


def test_pause_and_unpause_are_idempotent(config, redis):
    queue = Queue("mail")
    assert queue.paused is False
    assert queue.pause() is True
    assert queue.pause() is True
    assert queue.paused is True
    assert redis.smembers("paused") == {b"mail"}
    assert queue.unpause() is True
    assert queue.unpause() is True
    assert queue.paused is False


def test_delete_job_removes_only_that_job(config, redis):
    keep = HardJob.perform_async(1)
    doomed = HardJob.perform_async(2)
    # A job that mentions the doomed jid in its arguments is not that job.
    mention = HardJob.perform_async({"jid": doomed})
    assert Queue().delete_job(doomed) == 1
    assert {record.jid for record in Queue()} == {keep, mention}
    assert Queue().delete_job(doomed) == 0
    with pytest.raises(ValueError, match="jid"):
        Queue().delete_job("  ")


def test_delete_job_removes_a_corrupt_payload_carrying_the_jid(config, redis):
    redis.lpush(QUEUE_KEY, '{"class":"X","jid":"abc","args":[1,}')
    HardJob.perform_async(1)
    assert Queue().delete_job("abc") == 1
    assert Queue().size == 1


def test_delete_by_class_matches_class_and_wrapped(config, redis):
    HardJob.perform_bulk([[1], [2], [3]])
    OtherJob.set(queue="default").perform_async(9)
    wrapper = {
        "class": "Sidekiq::ActiveJob::Wrapper",
        "wrapped": "tests.api.jobs.HardJob",
        "queue": "default",
        "args": [{"job_class": "tests.api.jobs.HardJob", "arguments": [4]}],
        "jid": "c" * 24,
    }
    redis.lpush(QUEUE_KEY, json.dumps(wrapper, separators=(",", ":")))
    assert Queue().delete_by_class(HardJob) == 4
    assert [record.klass for record in Queue()] == ["tests.api.jobs.OtherJob"]
    assert Queue().delete_by_class("tests.api.jobs.OtherJob") == 1
    assert Queue().size == 0
    with pytest.raises(ValueError, match="class"):
        Queue().delete_by_class("")


def test_delete_by_class_of_a_ruby_class_name(config, redis):
    for number in range(5):
        redis.lpush(QUEUE_KEY, json.dumps({"class": "RubyJob", "args": [number], "jid": f"{number:024x}"}))
    redis.lpush(QUEUE_KEY, json.dumps({"class": "RubyJobTwo", "args": [], "jid": "f" * 24}))
    assert Queue().delete_by_class("RubyJob") == 5
    assert Queue().size == 1


def test_a_payload_that_is_not_json_still_lists_displays_and_deletes(config, redis):
    redis.lpush(QUEUE_KEY, b"\xff not json at all")
    HardJob.perform_async(1)
    records = list(Queue())
    broken = records[-1]
    assert broken.valid is False
    assert broken.klass is None
    assert broken.display_class == "unknown"
    assert broken.args == []
    assert broken.jid is None
    assert broken.item == {}
    assert broken["class"] is None
    assert broken.display_args == ["\ufffd not json at all"]
    assert broken.enqueued_at is None
    assert broken.latency == 0.0
    assert broken.error_backtrace is None
    assert broken.delete() is True
    assert Queue().size == 1
    assert records[0].valid is True


def test_a_standalone_record_can_be_built_from_text_or_a_dict(config):
    record = JobRecord('{"class":"A","args":[1],"jid":"j","queue":"q"}')
    assert (record.klass, record.args, record.jid, record.queue) == ("A", [1], "j", "q")
    assert JobRecord({"class": "B", "args": []}, "low").queue == "low"
    assert JobRecord({"class": "B", "args": []}).delete() is False  # no queue to delete from
    assert "B" in repr(JobRecord({"class": "B", "args": []}))


@pytest.mark.parametrize("every", [2, 50], ids=["many-matches", "few-matches"])
def test_deletion_keeps_the_order_of_what_remains(config, redis, every):
    for number in range(100):
        klass = "Doomed" if number % every == 0 else "Kept"
        redis.lpush(QUEUE_KEY, json.dumps({"class": klass, "args": [number], "jid": f"{number:024x}"}))
    assert Queue().delete_by_class("Doomed") == 100 // every
    expected = [number for number in range(99, -1, -1) if number % every]
    assert [record.args[0] for record in Queue()] == expected
    assert Queue().delete_job(f"{expected[10]:024x}") == 1
    assert [record.args[0] for record in Queue()] == expected[:10] + expected[11:]
