"""Retries, Scheduled and Dead: stable pages, filter, detail, and every action, asserted on Redis."""

from __future__ import annotations

import json

import pytest

from wurk.api import DeadSet, RetrySet, ScheduledSet
from wurk.redis import keys
from wurk.server.retry import compress_backtrace

from .conftest import failed_job, jid_of

BASE = 1_800_000_000.0


def fill(job_set, count: int, **extra) -> list[str]:
    jids = [jid_of(n) for n in range(count)]
    for n, jid in enumerate(jids):
        job_set.schedule(BASE + n, failed_job(jid, **extra))
    return jids


def ids(page: dict) -> list[str]:
    return [entry["jid"] for entry in page["entries"]]


def test_pages_run_newest_first_and_a_cursor_survives_new_entries(config, web):
    retries = RetrySet()
    jids = fill(retries, 7)
    first = web.get("/api/sets/retries", params={"limit": 3}).json()
    assert ids(first) == [jids[6], jids[5], jids[4]]
    assert first["size"] == 7
    retries.schedule(BASE + 100, failed_job("newer"))  # above the cursor: the next page does not move
    second = web.get("/api/sets/retries", params={"limit": 3, "cursor": first["cursor"]}).json()
    assert ids(second) == [jids[3], jids[2], jids[1]]
    third = web.get("/api/sets/retries", params={"limit": 3, "cursor": second["cursor"]}).json()
    assert ids(third) == [jids[0]]
    assert third["cursor"] is None


def test_entries_sharing_a_score_are_paged_without_loss_or_repeat(config, web):
    dead = DeadSet()
    for n in range(5):
        dead.schedule(BASE, failed_job(jid_of(n)))
    seen: list[str] = []
    cursor = None
    while True:
        page = web.get("/api/sets/dead", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += ids(page)
        cursor = page["cursor"]
        if cursor is None:
            break
    assert sorted(seen) == [jid_of(n) for n in range(5)]
    assert web.get("/api/sets/dead", params={"cursor": "nonsense"}).status_code == 400


def test_filter_finds_entries_by_substring(config, web):
    retries = RetrySet()
    fill(retries, 3)
    retries.schedule(BASE + 10, failed_job("needle", error_message="NoMethodError in Billing"))
    page = web.get("/api/sets/retries", params={"q": "nomethoderror"}).json()
    assert ids(page) == ["needle"]
    assert page["truncated"] is False


def test_detail_shows_the_error_and_the_decoded_backtrace(config, web):
    trace = compress_backtrace(["app/jobs.py:10 in charge", "app/billing.py:3 in call"])
    RetrySet().schedule(BASE, failed_job("j1", error_backtrace=trace))
    entry_id = web.get("/api/sets/retries").json()["entries"][0]["id"]
    detail = web.get("/api/sets/retries/entry", params={"id": entry_id}).json()
    assert detail["backtrace"] == ["app/jobs.py:10 in charge", "app/billing.py:3 in call"]
    assert (detail["error_class"], detail["error_message"]) == ("RuntimeError", "boom")
    assert "error_backtrace" not in detail["payload"]
    assert web.get("/api/sets/retries/entry", params={"id": f"{BASE!r}|nope"}).status_code == 404


def entry_ids(web, kind: str) -> dict[str, str]:
    return {
        entry["jid"]: entry["id"] for entry in web.get(f"/api/sets/{kind}", params={"limit": 200}).json()["entries"]
    }


def test_retry_selected_enqueues_with_one_attempt_given_back(config, redis, web):
    fill(RetrySet(), 3)
    chosen = entry_ids(web, "retries")
    answer = web.post("/api/sets/retries/retry", json={"ids": [chosen[jid_of(0)], chosen[jid_of(2)]]}).json()
    assert (answer["done"], answer["missing"]) == (2, 0)
    assert answer["message"] == "Retried 2 jobs."  # what the page says once the action is done
    assert redis.zcard(keys.RETRY) == 1
    queued = [json.loads(raw) for raw in redis.lrange(keys.queue("default"), 0, -1)]
    assert sorted(job["jid"] for job in queued) == [jid_of(0), jid_of(2)]
    assert {job["retry_count"] for job in queued} == {1}
    again = web.post("/api/sets/retries/retry", json={"ids": [chosen[jid_of(0)]]}).json()
    assert (again["done"], again["missing"]) == (0, 1)
    assert again["message"] == "Retried 0 jobs; 1 was gone already."


def test_kill_moves_retries_to_dead_and_delete_removes(config, redis, web):
    fill(RetrySet(), 3)
    chosen = entry_ids(web, "retries")
    killed = web.post("/api/sets/retries/kill", json={"ids": [chosen[jid_of(1)]]}).json()
    assert (killed["done"], killed["message"]) == (1, "Moved 1 job to the dead set.")
    assert [json.loads(raw)["jid"] for raw in redis.zrange(keys.DEAD, 0, -1)] == [jid_of(1)]
    deleted = web.post("/api/sets/retries/delete", json={"ids": [chosen[jid_of(2)]]}).json()
    assert (deleted["done"], deleted["message"]) == (1, "Deleted 1 job.")
    assert [json.loads(raw)["jid"] for raw in redis.zrange(keys.RETRY, 0, -1)] == [jid_of(0)]


def test_scheduled_add_to_queue_keeps_the_payload(config, redis, web):
    job = {"class": "app.jobs.Later", "args": [1], "jid": "later1", "queue": "mail", "created_at": 1796027746766}
    ScheduledSet().schedule(BASE, job)
    entry_id = entry_ids(web, "scheduled")["later1"]
    assert web.post("/api/sets/scheduled/add_to_queue", json={"ids": [entry_id]}).json()["done"] == 1
    assert redis.zcard(keys.SCHEDULE) == 0
    (raw,) = redis.lrange(keys.queue("mail"), 0, -1)
    assert json.loads(raw)["jid"] == "later1"
    assert web.post("/api/sets/scheduled/kill", json={"ids": [entry_id]}).status_code == 404


@pytest.mark.parametrize(
    ("kind", "action", "key", "left", "queued", "message"),
    [
        ("retries", "retry", keys.RETRY, 0, 4, "Retried 4 jobs."),
        ("retries", "kill", keys.RETRY, 0, 0, "Moved 4 jobs to the dead set."),
        ("dead", "retry", keys.DEAD, 0, 4, "Retried 4 jobs."),
        ("dead", "delete", keys.DEAD, 0, 0, "Deleted 4 jobs."),
        ("scheduled", "delete", keys.SCHEDULE, 0, 0, "Deleted 4 jobs."),
        ("scheduled", "add_to_queue", keys.SCHEDULE, 0, 4, "Added 4 jobs to their queues."),
    ],
)
def test_whole_set_actions(config, redis, web, kind, action, key, left, queued, message):
    holder = {"retries": RetrySet, "dead": DeadSet, "scheduled": ScheduledSet}[kind]()
    fill(holder, 4)
    answer = web.post(f"/api/sets/{kind}/{action}/all", json={}).json()
    assert (answer["done"], answer["message"]) == (4, message)
    assert redis.zcard(key) == left
    assert redis.llen(keys.queue("default")) == queued
    if action == "kill":
        assert redis.zcard(keys.DEAD) == 4


def test_a_payload_that_is_not_json_is_refused_for_retry_but_deleted(config, redis, web):
    redis.zadd(keys.DEAD, {b"not json": BASE})
    entry = web.get("/api/sets/dead").json()["entries"][0]
    assert entry["valid"] is False
    refused = web.post("/api/sets/dead/retry", json={"ids": [entry["id"]]}).json()
    assert (refused["done"], refused["refused"]) == (0, 1)
    assert refused["message"] == "Retried 0 jobs; 1 entry is not a JSON job and stays."
    assert redis.zcard(keys.DEAD) == 1
    assert web.post("/api/sets/dead/delete", json={"ids": [entry["id"]]}).json()["done"] == 1
    assert redis.zcard(keys.DEAD) == 0


def test_add_all_to_queue_keeps_each_payload_and_leaves_what_is_not_a_job(config, redis, web):
    scheduled = ScheduledSet()
    for n in range(60):  # more than one page of the walk
        scheduled.schedule(
            BASE + n, {"class": "app.jobs.Later", "args": [n], "jid": jid_of(n), "queue": "mail", "retry_count": 3}
        )
    redis.zadd(keys.SCHEDULE, {b"not json": BASE})
    answer = web.post("/api/sets/scheduled/add_to_queue/all", json={}).json()
    assert (answer["done"], answer["refused"]) == (60, 1)
    assert answer["message"] == "Added 60 jobs to their queues; 1 entry is not a JSON job and stays."
    assert redis.zrange(keys.SCHEDULE, 0, -1) == [b"not json"]
    queued = [json.loads(raw) for raw in redis.lrange(keys.queue("mail"), 0, -1)]
    assert sorted(job["jid"] for job in queued) == [jid_of(n) for n in range(60)]
    assert {job["retry_count"] for job in queued} == {3}  # unchanged: adding to a queue is not a retry
    assert not any("at" in job for job in queued)
