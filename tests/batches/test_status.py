"""Reading batches: ``Status``, ``BatchSet``, ``Batch.DeadSet``, a Ruby
Sidekiq Pro batch's keys, and the progress endpoint."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time

import pytest

from tests.batches.jobs import Row
from wurk_batches import Batch, BatchSet, BatchStatusMiddleware, Status
from wurk_batches.books import Books


def test_a_status_needs_a_bid_and_a_missing_batch_does_not_exist(config):
    for blank in ("", "   ", None):
        with pytest.raises(ValueError, match="a batch status needs a bid"):
            Status(blank)
    missing = Status("nosuchbatch000")
    assert not missing.exists
    assert (missing.total, missing.pending, missing.tags, missing.complete) == (0, 0, [], False)


def test_a_ruby_sidekiq_pro_batchs_keys_read_the_same(config, redis):
    """A batch as Ruby Sidekiq Pro leaves it in Redis (the guides' keys and
    fields): three jobs, one succeeded, one failing, one dead, a child."""
    bid = "vTF1-9QvLPnREQ"
    redis.hset(
        f"b-{bid}",
        mapping={
            "created_at": "1732950000.123456",
            "description": "Nightly import for account 7",
            "callback_queue": "critical",
            "tags": '["account:7","nightly"]',
            "parent_bid": "Pa7rEnT-bid_01",
            "total": "3",
            "pending": "2",
            "failures": "1",
            "death_at": "1732950100.5",
        },
    )
    redis.sadd(f"b-{bid}-jids", "a" * 24, "b" * 24)
    redis.sadd(f"b-{bid}-failed", "a" * 24)
    redis.sadd(f"b-{bid}-died", "c" * 24)
    redis.sadd(f"b-{bid}-kids", "KiDbId0000000A")
    redis.zadd("batches", {bid: 1732950000.123456})
    redis.zadd("dead-batches", {bid: 1732950100.5})
    status = Status(bid)
    assert status.exists
    assert (status.total, status.pending, status.failures) == (3, 2, 1)
    assert status.created_at == pytest.approx(1732950000.123456)
    assert status.death_at == pytest.approx(1732950100.5)
    assert (status.complete_at, status.success_at) == (None, None)
    assert (status.description, status.callback_queue, status.parent_bid) == (
        "Nightly import for account 7",
        "critical",
        "Pa7rEnT-bid_01",
    )
    assert status.tags == ["account:7", "nightly"]
    assert (status.failed_jids(), status.dead_jids(), status.child_count()) == (["a" * 24], ["c" * 24], 1)
    assert not status.complete
    assert not status.invalidated
    assert status.failure_info == []
    assert [entry.bid for entry in BatchSet()] == [bid]
    assert [entry.bid for entry in Batch.DeadSet()] == [bid]
    redis.srem(f"b-{bid}-jids", "a" * 24, "b" * 24)
    assert status.complete  # no flag in the hash: the live recount decides
    redis.hset(f"b-{bid}", "tags", "not json")
    assert status.reload().tags == []


def test_data_is_the_json_the_endpoint_serves(config, redis):
    batch = Batch()
    batch.description = "d"
    batch.tags = ["t"]
    with batch.jobs():
        jid = Row.perform_async(1)
    data = Status(batch.bid).data()
    assert json.loads(json.dumps(data)) == data
    assert {key: data[key] for key in ("bid", "total", "pending", "failures", "complete", "tags")} == {
        "bid": batch.bid,
        "total": 1,
        "pending": 1,
        "failures": 0,
        "complete": False,
        "tags": ["t"],
    }
    Books.of(config).ack_success(batch.bid, jid)
    assert Status(batch.bid).data()["complete"] is True


def test_join_waits_for_completion(config, redis):
    batch = Batch()
    with batch.jobs():
        jid = Row.perform_async(1)
    with pytest.raises(TimeoutError, match="not complete"):
        Status(batch.bid).join(timeout=0.05, interval=0.01)
    acker = threading.Timer(0.1, Books.of(config).ack_success, args=(batch.bid, jid))
    acker.start()
    Status(batch.bid).join(timeout=30, interval=0.01)
    acker.join()
    assert Status(batch.bid).complete


def test_delete_removes_the_batch_and_keeps_its_markers(config, redis):
    batch = Batch()
    batch.on("death", "tests.batches.jobs.Done")
    with batch.jobs():
        jid = Row.perform_async(1)
    Books.of(config).ack_failure(batch.bid, jid)
    Books.of(config).ack_death(batch.bid, jid)
    Status(batch.bid).delete()
    assert sorted(key.decode() for key in redis.keys(f"b-{batch.bid}*")) == [
        f"b-{batch.bid}-complete",
        f"b-{batch.bid}-death",
    ]
    assert redis.zscore("batches", batch.bid) is None
    assert redis.zscore("dead-batches", batch.bid) is None
    assert not Status(batch.bid).exists


def test_batch_set_lists_newest_first_a_page_at_a_time_and_scans_tags(config, redis, monkeypatch):
    bids = []
    for n in range(7):
        batch = Batch()
        batch.tags = ["even"] if n % 2 == 0 else ["odd"]
        with batch.jobs():
            Row.perform_async(n)
        bids.append(batch.bid)
        time.sleep(0.002)  # distinct created_at
    monkeypatch.setattr(BatchSet, "PAGE", 3)
    listed = BatchSet()
    assert len(listed) == listed.size == 7
    assert [status.bid for status in listed] == list(reversed(bids))
    assert sorted(listed.scan_tags("even")) == sorted(bids[0::2])
    assert list(listed.scan_tags("nope")) == []


def test_the_batch_status_endpoint_over_wsgi(config, redis):
    batch = Batch()
    with batch.jobs():
        Row.perform_async(1)

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"the app"]

    wrapped = BatchStatusMiddleware(app)

    def get(path):
        seen = {}
        body = b"".join(
            wrapped(
                {"REQUEST_METHOD": "GET", "PATH_INFO": path, "wsgi.input": io.BytesIO()},
                lambda status, headers: seen.update(status=status, headers=dict(headers)),
            )
        )
        return seen["status"], seen["headers"]["Content-Type"], body

    status, kind, body = get(f"/batch_status/{batch.bid}.json")
    assert (status, kind) == ("200 OK", "application/json")
    assert json.loads(body)["total"] == 1
    assert get("/batch_status/nosuchbatch000.json")[0] == "404 Not Found"
    assert get("/somewhere/else") == ("200 OK", "text/plain", b"the app")


def test_the_batch_status_endpoint_over_asgi(config, redis):
    batch = Batch()
    with batch.jobs():
        Row.perform_async(1)

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"the app"})

    wrapped = BatchStatusMiddleware(app)

    async def get(path):
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request"}

        await wrapped({"type": "http", "method": "GET", "path": path}, receive, send)
        return sent[0]["status"], sent[1]["body"]

    code, body = asyncio.run(get(f"/batch_status/{batch.bid}.json"))
    assert code == 200
    assert json.loads(body)["bid"] == batch.bid
    assert asyncio.run(get("/batch_status/nosuchbatch000.json"))[0] == 404
    assert asyncio.run(get("/")) == (200, b"the app")


def test_a_status_from_a_hash_already_read_matches_one_read_by_bid(config, redis):
    batch = Batch()
    batch.description = "from a pipeline"
    with batch.jobs():
        Row.perform_async(1)
    fields = redis.hgetall(f"b-{batch.bid}")
    built, read = Status.from_hash(batch.bid, fields), Status(batch.bid)
    assert built.data() == read.data()
    assert built.complete_flag is False
