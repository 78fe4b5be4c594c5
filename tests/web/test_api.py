"""The JSON API behind the Dashboard, Queues and Busy pages, asserted on Redis."""

from __future__ import annotations

import json
import time

import wurk
from wurk.api import Queue
from wurk.redis import keys

from .conftest import jid_of


def push(config: wurk.Config, queue: str, klass: str, *args: object) -> str:
    jid = wurk.Client(config).push({"class": klass, "args": list(args), "queue": queue})
    assert jid
    return jid


def test_stats_reads_the_counters_redis_holds(config, redis, web):
    redis.set(keys.STAT_PROCESSED, 41)
    redis.set(keys.STAT_FAILED, 3)
    push(config, "default", "app.jobs.Hello", "Ada")
    push(config, "low", "app.jobs.Resize", 1)
    stats = web.get("/api/stats").json()
    assert (stats["processed"], stats["failed"], stats["enqueued"], stats["busy"]) == (41, 3, 2, 0)
    assert stats["latency"] >= 0


def test_history_lists_processed_and_failed_per_day(config, redis, web):
    today = time.strftime("%Y-%m-%d", time.gmtime())
    redis.set(f"stat:processed:{today}", 7)
    history = web.get("/api/stats/history", params={"days": 3}).json()
    assert history["processed"][today] == 7
    assert len(history["failed"]) == 3
    assert web.get("/api/stats/history", params={"days": "x"}).status_code == 400


def test_queues_list_sizes_latency_and_pause_state(config, redis, web):
    for n in range(3):
        push(config, "default", "app.jobs.Hello", n)
    push(config, "mail", "app.jobs.Mail", "x")
    Queue("mail").pause()
    rows = {row["name"]: row for row in web.get("/api/queues").json()["queues"]}
    assert rows["default"]["size"] == 3
    assert rows["default"]["paused"] is False
    assert rows["mail"]["paused"] is True


def test_pause_unpause_and_clear_change_redis_as_the_data_api_does(config, redis, web):
    push(config, "default", "app.jobs.Hello", 1)
    assert web.post("/api/queues/default/pause", json={}).status_code == 200
    assert redis.smembers(keys.PAUSED) == {b"default"}
    assert web.post("/api/queues/default/unpause", json={}).status_code == 200
    assert redis.smembers(keys.PAUSED) == set()
    cleared = web.post("/api/queues/default/clear", json={}).json()
    assert (cleared["cleared"], cleared["message"]) == (1, "Cleared default: deleted 1 job.")
    assert not redis.exists(keys.queue("default"))
    assert not redis.sismember(keys.QUEUES, "default")


def test_a_queue_pages_newest_first_and_deletes_by_jid(config, redis, web):
    jids = [push(config, "default", "app.jobs.Hello", n) for n in range(5)]
    first = web.get("/api/queues/default", params={"limit": 2}).json()
    assert [job["jid"] for job in first["jobs"]] == [jids[4], jids[3]]
    assert first["size"] == 5
    assert first["cursor"] == "2"
    second = web.get("/api/queues/default", params={"limit": 2, "cursor": first["cursor"]}).json()
    assert [job["jid"] for job in second["jobs"]] == [jids[2], jids[1]]
    last = web.get("/api/queues/default", params={"limit": 2, "cursor": "4"}).json()
    assert last["cursor"] is None
    deleted = web.post("/api/queues/default/delete", json={"jids": [jids[0], jids[3]]}).json()
    assert (deleted["deleted"], deleted["message"]) == (2, "Deleted 2 jobs from default.")
    again = web.post("/api/queues/default/delete", json={"jids": [jids[0]]}).json()
    assert again["message"] == "Deleted 0 jobs from default; 1 was gone already."
    left = [json.loads(raw)["jid"] for raw in redis.lrange(keys.queue("default"), 0, -1)]
    assert left == [jids[4], jids[2], jids[1]]
    assert web.post("/api/queues/default/delete", json={"jids": []}).status_code == 400


def heartbeat(redis, identity: str, *, embedded: bool = False, busy: int = 1) -> None:
    """A process's heartbeat and one running job, written as a worker writes them."""
    info = {
        "hostname": "box",
        "pid": 42,
        "tag": "app",
        "started_at": time.time() - 60,
        "concurrency": 5,
        "queues": ["default"],
        "labels": ["blue"],
        "identity": identity,
        "embedded": embedded,
        "version": "8.0",
    }
    redis.sadd(keys.PROCESSES, identity)
    redis.hset(
        identity,
        mapping={
            "info": json.dumps(info),
            "busy": busy,
            "beat": time.time(),
            "quiet": "false",
            "concurrency": 5,
            "rss": 2048,
            "rtt_us": 100,
        },
    )
    redis.expire(identity, 60)
    work = {
        "queue": "default",
        "run_at": int(time.time()) - 5,
        "payload": json.dumps({"class": "app.jobs.Slow", "args": [1], "jid": jid_of(9), "queue": "default"}),
    }
    redis.hset(keys.process_work(identity), "tid-1", json.dumps(work))


def test_busy_lists_processes_and_running_jobs_and_signals_them(config, redis, web):
    heartbeat(redis, "box:42:abc123def456")
    data = web.get("/api/processes").json()
    assert [p["identity"] for p in data["processes"]] == ["box:42:abc123def456"]
    assert data["processes"][0]["busy"] == 1
    assert data["processes"][0]["labels"] == ["blue"]
    (job,) = data["jobs"]
    assert (job["class"], job["process"], job["jid"]) == ("app.jobs.Slow", "box:42:abc123def456", jid_of(9))
    assert data["time"] - job["run_at"] >= 5
    quieted = web.post("/api/processes/quiet", json={"identity": "box:42:abc123def456"})
    assert quieted.status_code == 200
    message = "Asked box:42:abc123def456 to stop fetching jobs; it acts on its next heartbeat."
    assert quieted.json()["message"] == message
    assert web.post("/api/processes/stop", json={"identity": "box:42:abc123def456"}).status_code == 200
    assert redis.lrange(keys.process_signals("box:42:abc123def456"), 0, -1) == [b"TERM", b"TSTP"]
    assert web.post("/api/processes/stop", json={"identity": "gone:1:0123456789ab"}).status_code == 404


def test_an_embedded_process_is_not_signalled(config, redis, web):
    heartbeat(redis, "box:43:emb000000000", embedded=True)
    answer = web.post("/api/processes/quiet", json={"identity": "box:43:emb000000000"})
    assert answer.status_code == 409
    assert not redis.exists(keys.process_signals("box:43:emb000000000"))
