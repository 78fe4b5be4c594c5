"""What a real Wurk worker writes when jobs fail, die, are promoted and are
counted, compared byte for byte with what Ruby Sidekiq 8.1.7 wrote.

The fixtures (``tests/fixtures/sidekiq-8.1.7``) and the captured command log
come from one Sidekiq worker running the classes that ``wire_app`` defines
under the same wire names. Each comparison takes the fixture's exact bytes and
replaces only the values that must differ between two runs, each named with
the reason, after checking its type and unit; everything else (keys, their
order, every other value, the JSON encoding) must be identical.
"""

from __future__ import annotations

import base64
import json
import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.command_log import Command, Recorder, captured, runs
from tests.helpers import WorkerPool, wait_for
from tests.worker.wire_app import CriticalJob, DeadNowJob, FailJob, NoRetryJob, OkJob, TaggedJob
from wurk.metrics.tracking import bucket_index

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sidekiq-8.1.7"
#: The default promoter (pop, then push through the client), the reliable one's
#: single script, and the reliable one through the client middleware chain.
SCHEDULERS = ["default", "reliable", "reliable-chained"]

#: Wall-clock values: they are checked to be integer epoch milliseconds of this run.
TIMES = ("created_at", "enqueued_at", "failed_at", "retried_at")
#: The language's own exception class: Ruby's ArgumentError and KeyError are
#: Python's ValueError and LookupError here (see wire_app).
ERROR_CLASSES = {"ArgumentError": "ValueError", "KeyError": "LookupError"}
#: Ruby's backtrace line `file:line:in 'method'` (Ruby 3.3 opens with a backtick).
BACKTRACE_LINE = re.compile(r"^.+:\d+:in [`'].+'$")


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def wire_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.wire_app", {})
    yield pool
    pool.stop_all()


def replace_value(raw: str, key: str, theirs: Any, ours: Any) -> str:
    """``raw`` with its one top-level ``"key":<theirs>`` now ``"key":<ours>``."""
    old = f'"{key}":{json.dumps(theirs, separators=(",", ":"), ensure_ascii=False)}'
    new = f'"{key}":{json.dumps(ours, separators=(",", ":"), ensure_ascii=False)}'
    assert raw.count(old) == 1, (old, raw)
    return raw.replace(old, new)


def decoded_backtrace(value: str) -> list[str]:
    compressed = base64.b64decode(value, validate=True)
    assert compressed[:2] == bytes.fromhex("789c"), "a zlib stream, as Sidekiq's"
    lines = json.loads(zlib.decompress(compressed))
    assert isinstance(lines, list)
    return lines


def expected_bytes(name: str, ours: str, started_ms: int) -> str:
    """The fixture's raw JSON with only the values that must differ taken from ``ours``."""
    data = fixture(name)
    theirs, mine = data["parsed"], json.loads(ours)
    assert list(mine) == data["key_order"]
    raw = data["member_raw"] if "member_raw" in data else data["raw"]
    # The jid is random per job.
    assert re.fullmatch(r"[0-9a-f]{24}", mine["jid"])
    raw = replace_value(raw, "jid", theirs["jid"], mine["jid"])
    # Times are this run's: integer epoch milliseconds (never a float, which
    # Sidekiq 8 would read as seconds), from this test's own run.
    for key in TIMES:
        if key in theirs:
            assert type(mine[key]) is int, (key, mine[key])
            assert started_ms - 1000 <= mine[key] <= int(time.time() * 1000) + 1000, (key, mine[key])
            raw = replace_value(raw, key, theirs[key], mine[key])
    if "error_class" in theirs:
        assert mine["error_class"] == ERROR_CLASSES[theirs["error_class"]]
        raw = replace_value(raw, "error_class", theirs["error_class"], mine["error_class"])
    # Backtrace lines name each language's own files: the same encoding, the
    # same number of lines (the class's `backtrace: 5`), innermost first.
    if "error_backtrace" in theirs:
        lines = decoded_backtrace(mine["error_backtrace"])
        assert len(lines) == len(data["error_backtrace_decoding"]["decoded"]) == 5
        assert all(BACKTRACE_LINE.match(line) for line in lines), lines
        assert lines[0].split(":")[0].endswith("tests/worker/wire_app.py"), lines[0]
        assert lines[0].endswith(":in 'perform'")
        raw = replace_value(raw, "error_backtrace", theirs["error_backtrace"], mine["error_backtrace"])
    return raw


def only_member(redis, key: str, jid: str | None = None) -> tuple[str, float]:
    entries = [
        (member.decode(), score)
        for member, score in redis.zrange(key, 0, -1, withscores=True)
        if jid is None or json.loads(member)["jid"] == jid
    ]
    assert len(entries) == 1, entries
    return entries[0]


def member_where(redis, key: str, jid: str, **fields: Any) -> tuple[str, float] | None:
    for member, score in redis.zrange(key, 0, -1, withscores=True):
        item = json.loads(member)
        if item["jid"] == jid and all(item.get(name) == value for name, value in fields.items()):
            return member.decode(), score
    return None


def make_due(redis, key: str, member: str) -> None:
    """Bring a member's time forward to now, so the scheduler promotes it at its next poll."""
    assert redis.zadd(key, {member: time.time() - 1}, xx=True, ch=True) == 1


def promoter_seen(commands: list[Command], pushes: list[Command]) -> str:
    """Which promoter made ``pushes`` (the LPUSHes of promoted jobs), from the
    commands the server ran. The default promoter pushes as the client does
    (a fenced pipeline) and is told by the receipts its fenced pop leaves
    (``wurk:popped:*``); the reliable one moves the job inside its script,
    and through the client middleware is told by its promotion lock."""
    assert pushes
    if any((c.key or "").startswith("wurk:popped:") for c in commands if c.name == "set"):
        assert all(push.client != "lua" for push in pushes)
        return "default"
    assert all(push.client == "lua" for push in pushes)
    locked = any((c.key or "").startswith("promote-lock:") for c in commands if c.name == "set")
    return "reliable-chained" if locked else "reliable"


def float_text(value: bytes) -> float:
    """A score as sent: Ruby's Float#to_s and Python's repr, shortest round trip."""
    text = value.decode()
    assert re.fullmatch(r"\d+\.\d+", text), text
    assert repr(float(text)) == text
    return float(text)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_retry_and_dead_entries_are_sidekiqs_bytes(wire_workers, redis, redis_url, server, scheduler):
    """FailJob (``retry: 2, backtrace: 5``) fails three times through a real
    worker and the scheduler: the retry entry after the first and the second
    failure, then the dead entry, each against the capture; and DeadNowJob
    (``retry: 0``) straight to the dead set."""
    started_ms = int(time.time() * 1000)
    recorder = Recorder(server.url)  # MONITOR needs an administrator
    fail_jid = FailJob.perform_async("will fail")
    dead_now_jid = DeadNowJob.perform_async("dead now")
    wire_workers.start("-c", "1", env={"WIRE_SCHEDULER": scheduler})

    first = wait_for(lambda: member_where(redis, "retry", fail_jid, retry_count=0), timeout=60)
    member, score = first
    assert member == expected_bytes("retry-entry", member, started_ms)
    assert redis.ttl("retry") == -1  # the set never expires
    failed_at = json.loads(member)["failed_at"] / 1000
    assert failed_at + 15 <= score < failed_at + 25  # 0**4 + 15 s, plus up to 10 s of jitter

    dead_now, dead_score = wait_for(lambda: member_where(redis, "dead", dead_now_jid), timeout=60)
    assert dead_now == expected_bytes("dead-entry-retry-0", dead_now, started_ms)
    assert abs(dead_score - json.loads(dead_now)["failed_at"] / 1000) < 5

    make_due(redis, "retry", member)
    second, score = wait_for(lambda: member_where(redis, "retry", fail_jid, retry_count=1), timeout=60)
    assert second == expected_bytes("retry-entry-second-failure", second, started_ms)
    retried_at = json.loads(second)["retried_at"] / 1000
    assert retried_at + 16 <= score < retried_at + 36  # 1**4 + 15 s, plus up to 20 s of jitter

    make_due(redis, "retry", second)
    died, dead_score = wait_for(lambda: member_where(redis, "dead", fail_jid), timeout=60)
    assert died == expected_bytes("dead-entry-exhausted", died, started_ms)
    assert redis.zcard("retry") == 0
    assert redis.ttl("dead") == -1

    ours = recorder.stop()
    theirs = captured()
    # The retry writes: one ZADD each, outside MULTI, with the score as a plain float.
    retry_writes = [c for c in ours if c.name == "zadd" and c.key == "retry" and c.client != "lua"]
    retry_writes = [c for c in retry_writes if len(c.args) == 4 and json.loads(c.args[3])["jid"] == fail_jid]
    assert [json.loads(c.args[3])["retry_count"] for c in retry_writes] == [0, 1]
    assert [c.args[3].decode() for c in retry_writes] == [member, second]
    for command in retry_writes:
        float_text(command.args[2])
    # Every move from `retry` back to the queue leaves the payload as it was
    # but for a fresh enqueued_at, in place: what Sidekiq's scheduler does.
    pushed = [c for c in ours if c.name == "lpush" and c.key == "queue:default"]
    pushed = [c for c in pushed if json.loads(c.args[2]).get("retry_count") is not None]
    assert promoter_seen(ours, pushed) == scheduler
    promoted = [c.args[2].decode() for c in pushed]
    assert len(promoted) == 2
    for before, after in zip((member, second), promoted, strict=True):
        item = json.loads(after)
        assert type(item["enqueued_at"]) is int
        assert after == replace_value(before, "enqueued_at", json.loads(before)["enqueued_at"], item["enqueued_at"])
    # The dead set: the ZADD and both trims in one MULTI, as Sidekiq sends them.
    assert dead_set_inserts(ours) == dead_set_inserts(theirs)


def dead_set_inserts(commands: list[Command]) -> list[list[tuple[str, ...]]]:
    """Each MULTI that adds to ``dead``, its scores and member reduced to their
    shape: the score is now (float seconds), the age trim 180 days before it."""
    transactions: dict[str, list[Command]] = {}
    found = []
    for command in commands:
        if command.name == "multi":
            transactions[command.client] = []
        elif command.name == "exec":
            body = transactions.pop(command.client, [])
            if body and body[0].name == "zadd" and body[0].key == "dead":
                found.append(body)
        elif command.client in transactions:
            transactions[command.client].append(command)
    shapes = []
    for zadd, by_score, by_rank in found:
        now = float_text(zadd.args[2])
        assert float_text(by_score.args[3]) == pytest.approx(now - 15_552_000, abs=1e-6)
        assert json.loads(zadd.args[3])["retry_count"] in (0, 2)
        shapes.append([zadd.text()[:2], by_score.text()[:3], by_rank.text()])
    return shapes


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_promoted_scheduled_job_is_sidekiqs_bytes(wire_workers, redis, redis_url, server, scheduler):
    """``OkJob.set(queue: "elsewhere").perform_in(3, …)``, promoted by the
    worker's scheduler into a queue nobody listens to, as in the capture."""
    started_ms = int(time.time() * 1000)
    jid = OkJob.set(queue="elsewhere").perform_in(3, "scheduled into a queue nobody listens to")
    member, _ = only_member(redis, "schedule")
    assert "enqueued_at" not in json.loads(member)
    make_due(redis, "schedule", member)  # no need to wait the 3 s
    recorder = Recorder(server.url)  # MONITOR needs an administrator
    wire_workers.start("-c", "1", env={"WIRE_SCHEDULER": scheduler})
    wait_for(lambda: redis.llen("queue:elsewhere") == 1, timeout=60)
    ours = recorder.stop()
    assert promoter_seen(ours, [c for c in ours if c.name == "lpush" and c.key == "queue:elsewhere"]) == scheduler
    [promoted] = [item.decode() for item in redis.lrange("queue:elsewhere", 0, -1)]
    assert json.loads(promoted)["jid"] == jid
    assert promoted == expected_bytes("job-enqueued-by-scheduler", promoted, started_ms)
    assert json.loads(promoted)["enqueued_at"] >= json.loads(promoted)["created_at"]
    assert redis.zcard("schedule") == 0
    assert b"elsewhere" in redis.smembers("queues")
    assert redis.ttl("queue:elsewhere") == -1


def metric_flushes(commands: list[Command]) -> list[list[Command]]:
    return runs(commands, lambda command: (command.key or "").startswith(("h|", "j|")))


def stat_flushes(commands: list[Command]) -> list[list[Command]]:
    """Runs of writes to ``stat:*`` (this test's own polling reads them too)."""
    return runs(commands, lambda c: c.name in ("incrby", "expire") and (c.key or "").startswith("stat:"))


def test_a_workers_counters_and_metrics_are_the_commands_sidekiq_sent(wire_workers, redis, redis_url, server):
    """The six jobs of the capture's first metrics flush, run by a real worker
    in the order Sidekiq ran them: the ``stat:*`` pipelines and the ``h|`` and
    ``j|`` flush against the captured commands."""
    theirs = captured()
    their_flush = metric_flushes(theirs)[0]
    their_stats = stat_flushes(theirs)[0]
    CriticalJob.perform_async("crit")
    for job, args in ((FailJob, "will fail"), (OkJob, 1), (NoRetryJob, "no retry"), (DeadNowJob, "dead now")):
        job.perform_async(args)
    TaggedJob.perform_async("tagged")
    recorder = Recorder(server.url)  # MONITOR needs an administrator
    worker = wire_workers.start("-c", "1", "-q", "critical", "-q", "default")
    wait_for(lambda: redis.get("stat:processed") == b"6", timeout=60)
    worker.stop(timeout=30)  # the metrics flush at exit
    assert worker.proc.returncode == 0
    ours = recorder.stop()
    stored = redis.zrange("retry", 0, -1) + redis.zrange("dead", 0, -1)
    assert not [member for member in stored if b"NoRetryJob" in member]  # retry: false stores nothing

    # Counters: every flush is Sidekiq's six commands in Sidekiq's order. Wurk
    # flushes them within a second of a job ending rather than once per 10 s
    # beat (wurk.server.heartbeat, docs/interop.md), so the six jobs may span several flushes.
    flushes = stat_flushes(ours)
    assert flushes
    sums = {"stat:processed": 0, "stat:failed": 0}
    for flush in flushes:
        day = flush[1].key.rsplit(":", 1)[1]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", day)
        shape = [c.text()[:2] + ((c.text()[2],) if c.name == "expire" else ()) for c in flush]
        their_day = their_stats[1].key.rsplit(":", 1)[1]
        their_shape = [c.text()[:2] + ((c.text()[2],) if c.name == "expire" else ()) for c in their_stats]
        assert shape == [tuple(part.replace(their_day, day) for part in step) for step in their_shape]
        for command in flush:
            if command.key in sums:
                sums[command.key] += int(command.args[2])
    assert sums == {"stat:processed": 6, "stat:failed": 3}

    # Metrics: one flush, the same commands as the capture's first. Only the
    # time buckets (this run's clock) and the durations (this machine's) differ;
    # each histogram bucket must be the one its class's duration falls in.
    [flush] = metric_flushes(ours)
    minute = flush[-1].key  # j|<YYMMDD>|<H>:<MM>, this run's minute
    assert re.fullmatch(r"j\|\d{6}\|\d{1,2}:\d{2}", minute), minute
    day, hour_minute = minute.split("|")[1:]
    hour, minute_of_hour = hour_minute.split(":")
    their_minute = their_flush[-1].key
    renamed = {their_minute: minute, their_minute[:-1]: minute[:-1]}
    their_day, their_hour_minute = their_minute.split("|")[1:]
    their_at = f"-{int(their_day[4:])}-{their_hour_minute}"  # h|<Class>-<d>-<H>:<M>, none padded
    our_at = f"-{int(day[4:])}-{int(hour)}:{int(minute_of_hour)}"
    durations = {
        c.text()[2].split("|")[0]: int(c.args[3]) for c in flush if c.name == "hincrby" and c.text()[2].endswith("|ms")
    }
    assert all(ms >= 0 for ms in durations.values())
    expected = []
    for command in their_flush:
        text = list(command.text())
        text[1] = renamed.get(text[1]) or text[1].replace(their_at, our_at)
        if command.name == "hincrby" and text[2].endswith("|ms"):
            text[3] = str(durations[text[2].split("|")[0]])
        if command.name == "bitfield":
            klass = text[1][2:].rsplit("-", 2)[0]
            text[6] = f"#{bucket_index(durations[klass])}"
        expected.append(tuple(text))
    assert [c.text() for c in flush] == expected
