"""The dashboard's Batches pages: real batches on the test server, read through
a live dashboard; the numbers asserted are the ones Redis holds."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

import wurk
import wurk_web
from tests.batches.jobs import Done, Row
from tests.web.live import client_for, client_without
from wurk.api import RetrySet
from wurk_batches import Batch, Status
from wurk_batches.books import Books

XSS = "<script>window.__pwned = 1</script>"
ENVELOPE = {"__wurk_enc__": True, "v": 1, "ct": "c2VjcmV0IHBsYWludGV4dA=="}


@pytest.fixture
def web(config: wurk.Config) -> Iterator[httpx.Client]:
    with client_for(wurk_web.create_app(config)) as client:
        yield client


def batch_of(count: int, description: str | None = None, **options) -> tuple[Batch, list[str]]:
    batch = Batch()
    batch.description = description
    batch.on("success", Done, {"card": ENVELOPE, "note": XSS})
    batch.on("complete", "tests.batches.jobs.Done#finished")
    with batch.jobs():
        jids = [Row.perform_async(n) for n in range(count)]
    return batch, jids


def fail_one(config: wurk.Config, bid: str, jid: str, redis) -> None:
    """What the retry layer leaves when a batch's job raises: its payload in
    ``retry`` with the error, and the batch's failure booked."""
    raw = next(raw for raw in redis.lrange("queue:default", 0, -1) if json.loads(raw)["jid"] == jid)
    job = {**json.loads(raw), "error_class": "ValueError", "error_message": f"bad row {XSS}", "retry_count": 0}
    RetrySet().schedule(1_800_000_000.0, job)
    Books.of(config).ack_failure(bid, jid)


def test_the_list_pages_newest_first_with_the_numbers_redis_holds(config, redis, web):
    made = [batch_of(2, f"import {n}")[0] for n in range(5)]
    for n, batch in enumerate(made):  # distinct creation times, oldest first
        redis.zadd("batches", {batch.bid: 1_800_000_000.0 + n})
    first = web.get("/api/batches", params={"limit": 2}).json()
    assert first["size"] == redis.zcard("batches") == 5
    assert [row["bid"] for row in first["batches"]] == [made[4].bid, made[3].bid]
    row = first["batches"][0]
    assert (row["total"], row["pending"], row["failures"], row["done"]) == (2, 2, 0, 0)
    assert row["description"] == "import 4"
    assert row["complete"] is False
    rest: list[str] = []
    cursor = first["cursor"]
    while cursor:
        page = web.get("/api/batches", params={"limit": 2, "cursor": cursor}).json()
        rest += [row["bid"] for row in page["batches"]]
        cursor = page["cursor"]
    assert rest == [made[2].bid, made[1].bid, made[0].bid]
    assert web.get("/api/batches", params={"cursor": "nonsense"}).status_code == 400


def test_an_expired_batch_still_listed_says_so(config, redis, web):
    batch, _jids = batch_of(1)
    redis.delete(f"b-{batch.bid}")
    (row,) = web.get("/api/batches").json()["batches"]
    assert (row["bid"], row["exists"]) == (batch.bid, False)
    assert web.get(f"/api/batches/{batch.bid}").status_code == 404


def test_the_detail_shows_progress_failures_with_errors_callbacks_and_family(config, redis, web):
    parent = Batch()
    parent.description = f"nightly {XSS}"
    with parent.jobs():
        Row.perform_async(0)
        child, child_jids = batch_of(3, "child")
    fail_one(config, child.bid, child_jids[1], redis)
    Books.of(config).ack_success(child.bid, child_jids[0])
    detail = web.get(f"/api/batches/{child.bid}").json()
    status = Status(child.bid)
    assert (detail["total"], detail["pending"], detail["failures"]) == (status.total, status.pending, 1)
    assert (detail["total"], detail["pending"], detail["done"]) == (3, 2, 1)
    assert detail["parent_bid"] == parent.bid
    assert detail["failed_jids"] == {"size": 1, "sample": [child_jids[1]], "more": False}
    assert detail["jids"]["size"] == redis.scard(f"b-{child.bid}-jids") == 2
    assert sorted(detail["jids"]["sample"]) == sorted(child_jids[1:])
    (failing,) = detail["failed_jobs"]
    assert (failing["kind"], failing["jid"], failing["error_class"]) == ("retries", child_jids[1], "ValueError")
    assert failing["error_message"] == f"bad row {XSS}"  # as data: the page writes it as text
    assert web.get("/api/sets/retries/entry", params={"id": failing["id"]}).status_code == 200
    assert detail["callbacks"]["success"] == [
        {"target": "tests.batches.jobs.Done", "options": {"card": "[encrypted data]", "note": XSS}}
    ]
    assert detail["callbacks"]["complete"][0]["target"] == "tests.batches.jobs.Done#finished"
    body = web.get(f"/api/batches/{child.bid}").text
    assert ENVELOPE["ct"] not in body
    assert "__wurk_enc__" not in body
    family = web.get(f"/api/batches/{parent.bid}").json()
    assert family["children"]["size"] == 1
    assert [row["bid"] for row in family["children"]["batches"]] == [child.bid]
    assert family["description"] == f"nightly {XSS}"


def test_the_dead_list_reads_the_dead_batches(config, redis, web):
    batch, jids = batch_of(1)
    Books.of(config).ack_death(batch.bid, jids[0])
    assert redis.zcard("dead-batches") == 1
    dead = web.get("/api/batches", params={"dead": "1"}).json()
    assert dead["dead"] is True
    assert dead["dead_size"] == 1
    (row,) = dead["batches"]
    assert row["bid"] == batch.bid
    assert row["death_at"] is not None
    assert web.get(f"/api/batches/{batch.bid}").json()["dead_jids"]["sample"] == jids


def test_the_pages_escape_the_bid_and_load_their_script(config, web):
    page = web.get("/batches/%3Cscript%3Ex")
    assert page.status_code == 200
    assert "<script>x" not in page.text
    assert 'data-param-bid="&lt;script&gt;x"' in page.text
    assert '<script src="static/batches/batches.js" defer></script>' in page.text
    assert web.get("/static/batches/batches.js").status_code == 200
    assert '<a href="batches">Batches</a>' in web.get("/").text
    assert "/api/batches/{bid}" in web.get("/api/openapi.json").json()["paths"]


def test_without_the_plugin_there_are_no_batch_pages(redis_url, monkeypatch):
    with client_without("batches", redis_url, monkeypatch) as client:
        assert client.get("/batches").status_code == 404
        assert client.get("/api/batches").status_code == 404
        assert "Batches" not in client.get("/").text
