"""What the client writes, byte for byte, against fixtures captured from Ruby Sidekiq 8.1.7.

Jobs here carry the Ruby class names (``wire_name``) so that the bytes can be
compared whole: the fixture's JSON with its jid and timestamps replaced by ours
must equal what Wurk stored.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import wurk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sidekiq-8.1.7"


class OkJob(wurk.Job):
    wire_name = "OkJob"

    def perform(self, *args):
        pass


class FailJob(wurk.Job, retry=2, backtrace=5):
    wire_name = "FailJob"


class NoRetryJob(wurk.Job, retry=False):
    wire_name = "NoRetryJob"


class CriticalJob(wurk.Job, queue="critical"):
    wire_name = "CriticalJob"


class TaggedJob(wurk.Job, tags=["alpha", "beta"]):
    wire_name = "TaggedJob"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def same_bytes_but_ids(ours: str, theirs: str) -> None:
    """Equal once the fixture's jid and timestamps are replaced by ours."""
    mine = json.loads(ours)
    expected = theirs
    original = json.loads(theirs)
    for key in ("jid", "created_at", "enqueued_at"):
        if key in original:
            expected = expected.replace(json.dumps(original[key]), json.dumps(mine[key]), 1)
    assert ours == expected


def only(redis, key: str) -> str:
    items = redis.lrange(key, 0, -1)
    assert len(items) == 1, items
    return items[0].decode()


@pytest.mark.parametrize(
    ("name", "push", "key"),
    [
        (
            "job-perform_async.json",
            lambda: OkJob.perform_async(1, "two", {"three": 3, "nested": [None, True, 1.5]}, "héllo ✓ </script>"),
            "queue:default",
        ),
        ("job-set-queue-retry.json", lambda: OkJob.set(queue="low", retry=5).perform_async("set opts"), "queue:low"),
        ("job-retry-2-backtrace-5.json", lambda: FailJob.perform_async("will fail"), "queue:default"),
        ("job-retry-false.json", lambda: NoRetryJob.perform_async("no retry"), "queue:default"),
        ("job-queue-critical.json", lambda: CriticalJob.perform_async("crit"), "queue:critical"),
        ("job-tags.json", lambda: TaggedJob.perform_async("tagged"), "queue:default"),
        (
            "job-client_push-string-class.json",
            lambda: wurk.Client().push({"class": "OkJob", "args": ["via Client.push with a String class"]}),
            "queue:default",
        ),
    ],
)
def test_immediate_pushes_match_sidekiq_byte_for_byte(config, redis, name, push, key):
    jid = push()
    stored = only(redis, key)
    same_bytes_but_ids(stored, fixture(name)["raw"])
    job = json.loads(stored)
    assert job["jid"] == jid
    assert re.fullmatch(r"[0-9a-f]{24}", jid)
    assert list(job) == fixture(name)["key_order"]
    assert type(job["created_at"]) is int
    assert type(job["enqueued_at"]) is int
    assert abs(job["created_at"] - time.time() * 1000) < 5000


def test_queues_set_holds_every_queue_pushed_to(config, redis):
    OkJob.perform_async(1)
    OkJob.set(queue="low").perform_async(2)
    CriticalJob.perform_async(3)
    OkJob.perform_in(60, 4)  # scheduled pushes do not touch `queues`
    OkJob.set(queue="later").perform_in(60, 5)
    assert sorted(m.decode() for m in redis.smembers("queues")) == fixture("queues-set.json")["members_sorted"]


def test_perform_in_is_a_schedule_member_without_at_or_enqueued_at(config, redis):
    before = time.time()
    jid = OkJob.perform_in(3600, "in one hour")
    after = time.time()
    [(member, score)] = redis.zrange("schedule", 0, -1, withscores=True)
    same_bytes_but_ids(member.decode(), fixture("schedule-perform_in.json")["member_raw"])
    assert json.loads(member)["jid"] == jid
    assert before + 3600 <= score <= after + 3600
    assert redis.llen("queue:default") == 0


def test_perform_at_scores_the_exact_float(config, redis):
    OkJob.perform_at(2000000000.25, "at fixed ts 2000000000.25")
    OkJob.perform_at(datetime.fromtimestamp(2000000001.5, tz=UTC), "as a datetime")
    OkJob.perform_in(timedelta(hours=2), "as a timedelta")
    entries = {json.loads(m)["args"][0]: (m.decode(), s) for m, s in redis.zrange("schedule", 0, -1, withscores=True)}
    member, score = entries["at fixed ts 2000000000.25"]
    same_bytes_but_ids(member, fixture("schedule-perform_at.json")["member_raw"])
    assert score == 2000000000.25
    assert entries["as a datetime"][1] == 2000000001.5
    assert abs(entries["as a timedelta"][1] - (time.time() + 7200)) < 5


def test_interval_rules_relative_absolute_and_past(config, redis):
    OkJob.perform_in(999_999_999, "relative, far")
    OkJob.perform_in(3_000_000_000, "absolute: 2065")
    OkJob.perform_in(1_000_000_000, "absolute: 2001, in the past")
    OkJob.perform_in(-5, "past: pushed now")
    OkJob.perform_at(time.time() - 1, "past time: pushed now")
    OkJob.set(wait=0).perform_async("wait 0: pushed now")
    scores = {json.loads(m)["args"][0]: s for m, s in redis.zrange("schedule", 0, -1, withscores=True)}
    assert scores["absolute: 2065"] == 3_000_000_000.0
    assert scores["relative, far"] > time.time() + 999_999_000
    assert len(scores) == 2
    now_jobs = [json.loads(item)["args"][0] for item in redis.lrange("queue:default", 0, -1)]
    assert sorted(now_jobs) == sorted(
        ["absolute: 2001, in the past", "past: pushed now", "past time: pushed now", "wait 0: pushed now"]
    )
    for item in redis.lrange("queue:default", 0, -1):
        assert "at" not in json.loads(item)


def test_bulk_is_one_lpush_in_argument_order(config, redis):
    before = redis.info("commandstats")
    jids = OkJob.perform_bulk([[1], [2], [3]])
    after = redis.info("commandstats")
    assert after["cmdstat_lpush"]["calls"] - before.get("cmdstat_lpush", {"calls": 0})["calls"] == 1
    raw = [item.decode() for item in redis.lrange("queue:default", 0, -1)]
    expected = fixture("job-perform_bulk.json")["raw_list_head_to_tail"]
    for ours, theirs in zip(raw, expected, strict=True):
        same_bytes_but_ids(ours, theirs)
    jobs = [json.loads(item) for item in raw]
    assert [job["jid"] for job in reversed(jobs)] == jids
    assert len({job["created_at"] for job in jobs}) == 1
    assert len({job["enqueued_at"] for job in jobs}) == 1
    assert len(set(jids)) == 3


def test_scheduled_bulk_is_one_zadd(config, redis):
    at = time.time() + 7200
    before = redis.info("commandstats").get("cmdstat_zadd", {"calls": 0})["calls"]
    wurk.Client().push_bulk({"class": OkJob, "args": [[10], [11], [12]], "at": at})
    assert redis.info("commandstats")["cmdstat_zadd"]["calls"] - before == 1
    entries = redis.zrange("schedule", 0, -1, withscores=True)
    assert [score for _, score in entries] == [at, at, at]
    theirs = fixture("schedule-perform_bulk-at.json")["entries"][0]["member_raw"]
    by_arg = {json.loads(member)["args"][0]: member.decode() for member, _ in entries}
    same_bytes_but_ids(by_arg[10], theirs)


def test_bulk_with_one_time_per_job(config, redis):
    ats = [time.time() + 100, time.time() + 200]
    wurk.Client().push_bulk({"class": OkJob, "args": [[1], [2]], "at": ats})
    scores = {json.loads(m)["args"][0]: s for m, s in redis.zrange("schedule", 0, -1, withscores=True)}
    assert scores == {1: ats[0], 2: ats[1]}


def test_a_python_job_is_named_by_its_import_path(config, redis):
    class_name = wurk.client.payload.class_name(PythonNamed)
    assert class_name == f"{__name__}.PythonNamed"
    PythonNamed.perform_async()
    assert json.loads(only(redis, "queue:default"))["class"] == class_name
    assert config.jobs.resolve(class_name) is PythonNamed


class PythonNamed(wurk.Job):
    def perform(self):
        pass


def test_json_edge_cases_match_rubys_generator(config, redis):
    OkJob.perform_async("line\nbreak\ttab\x01ctl", "\u2028", 2**70, 1e20, 0.1, -0.0, "/<>&")
    stored = only(redis, "queue:default")
    assert '"args":["line\\nbreak\\ttab\\u0001ctl","\u2028",1180591620717411303424,1e+20,0.1,-0.0,"/<>&"]' in stored


def test_a_scheduled_push_through_set_has_args_before_class(config, redis):
    """Sidekiq builds a class-level ``perform_in`` as class then args, and
    every push through ``set`` as args then class (the capture's
    ``job-enqueued-by-scheduler.json`` was ``set(queue: …).perform_in``)."""
    OkJob.set(queue="elsewhere").perform_in(3, "through set")
    OkJob.set(queue="elsewhere").perform_at(time.time() + 3, "through set, at")
    OkJob.set(queue="elsewhere", wait=3).perform_async("through set, wait")
    OkJob.perform_in(3, "class-level")
    OkJob.perform_at(time.time() + 3, "class-level, at")
    orders = {json.loads(m)["args"][0]: list(json.loads(m)) for m in redis.zrange("schedule", 0, -1)}
    through_set = fixture("job-enqueued-by-scheduler.json")["key_order"][:-1]  # no enqueued_at while scheduled
    class_level = fixture("schedule-perform_in.json")["key_order"]
    assert orders == {
        "through set": through_set,
        "through set, at": through_set,
        "through set, wait": through_set,
        "class-level": class_level,
        "class-level, at": class_level,
    }
