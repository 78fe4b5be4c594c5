"""The dashboard of several shards (docs/shards.md) on two real servers:
``/shard/<name>/`` shows and changes that shard, every page and route alike,
under the same host, cross-site and read-only rules."""

from __future__ import annotations

import json
import re

import pytest

import wurk
import wurk_web
from tests.web.conftest import failed_job, jid_of
from tests.web.live import client_for
from wurk.api import DeadSet, RetrySet
from wurk_web import mount


class Mail(wurk.Job, queue="mail"):
    def perform(self, *args):
        pass


@pytest.fixture
def sharded(config, shard_url):
    config["shards"] = {"east": shard_url, "west": shard_url}
    return config


@pytest.fixture
def web(sharded):
    with client_for(wurk_web.create_app(sharded, poll_seconds=0.05)) as client:
        yield client


@pytest.fixture
def filled(sharded, redis, east):
    """Two jobs and a retry on the main server; five jobs and three dead ones on east."""
    Mail.perform_bulk([[n] for n in range(2)])
    RetrySet().schedule(2_000_000_000, failed_job(jid_of(100)))
    Mail.set(pool="east").perform_bulk([[n] for n in range(5)])
    east_dead = DeadSet(pool="east")
    for number in range(3):
        east_dead.kill(failed_job(jid_of(number)), notify_failure=False)
    return sharded


def test_each_shard_shows_its_own_numbers(filled, web):
    main = web.get("/api/stats").json()
    east = web.get("/shard/east/api/stats").json()
    assert (main["enqueued"], main["retries"], main["dead"]) == (2, 1, 0)
    assert (east["enqueued"], east["retries"], east["dead"]) == (5, 0, 3)
    assert web.get("/api/queues").json()["queues"][0]["size"] == 2
    assert web.get("/shard/east/api/queues").json()["queues"][0]["size"] == 5
    assert len(web.get("/shard/east/api/sets/dead").json()["entries"]) == 3
    assert web.get("/api/sets/dead").json()["entries"] == []
    assert len(web.get("/shard/east/api/queues/mail").json()["jobs"]) == 5
    streamed = web.get("/shard/east/api/stream", params={"events": 1}).text
    data = json.loads(re.search(r"^data: (.*)$", streamed, re.MULTILINE).group(1))
    assert data["enqueued"] == 5


def test_a_shard_page_links_within_its_shard_and_offers_the_others(filled, web):
    page = web.get("/shard/east/queues")
    assert page.status_code == 200
    text = page.text
    assert '<base href="/shard/east/">' in text  # every relative link and call stays on east
    assert "<title>Queues · east · Wurk</title>" in text
    assert '<a href="/queues">default</a>' in text
    assert '<a href="/shard/east/queues" aria-current="true">east</a>' in text
    assert '<a href="/shard/west/queues">west</a>' in text
    main_page = web.get("/queues").text
    assert '<base href="/">' in main_page
    assert '<a href="/queues" aria-current="true">default</a>' in main_page
    assert web.get("/shard/east/static/wurk/app.js").status_code == 200


def test_actions_act_on_the_selected_shard(filled, web, redis, east):
    DeadSet().kill(failed_job(jid_of(0)), notify_failure=False)  # the same jid on the main server
    ids = {entry["jid"]: entry["id"] for entry in web.get("/shard/east/api/sets/dead").json()["entries"]}
    deleted = web.post("/shard/east/api/sets/dead/delete", json={"ids": [ids[jid_of(0)]]}).json()
    assert deleted["done"] == 1
    assert east.zcard("dead") == 2
    assert redis.zcard("dead") == 1  # the main server's copy is untouched
    retried = web.post("/shard/east/api/sets/dead/retry", json={"ids": [ids[jid_of(1)]]}).json()
    assert retried["done"] == 1
    assert east.llen("queue:default") == 1
    assert redis.llen("queue:default") == 0
    assert web.post("/shard/east/api/queues/mail/pause", json={}).status_code == 200
    assert east.sismember("paused", "mail")
    assert not redis.sismember("paused", "mail")


def test_a_plugins_page_follows_the_shard(filled, web, redis, east):
    from wurk_batches import Batch

    with wurk.via("east"):
        batch = Batch()
        batch.description = "on east"
        with batch.jobs():
            Mail.perform_async("batched")
    assert [row["bid"] for row in web.get("/shard/east/api/batches").json()["batches"]] == [batch.bid]
    assert web.get("/api/batches").json()["batches"] == []
    assert web.get(f"/shard/east/api/batches/{batch.bid}").json()["description"] == "on east"


def test_an_unknown_shard_is_a_404_naming_the_shards_and_a_bare_prefix_is_redirected(filled, web):
    answer = web.get("/shard/eats/api/stats")
    assert answer.status_code == 404
    assert answer.json() == {"error": "no shard 'eats' (configured shards: east, west)"}
    assert answer.headers["x-frame-options"] == "DENY"  # the Guard's headers, as on every answer
    bare = web.get("/shard/east")
    assert bare.status_code == 307
    assert bare.headers["location"] == "/shard/east/"


def test_the_guard_rules_hold_on_shard_paths(filled, east):
    app = wurk_web.create_app(filled, allowed_hosts=["127.0.0.1"])
    with client_for(app) as web:
        forged = web.post("/shard/east/api/queues/mail/clear", json={}, headers={"sec-fetch-site": "cross-site"})
        assert forged.status_code == 403
        form = web.post("/shard/east/api/queues/mail/clear", content=b"x=1", headers={"content-type": "text/plain"})
        assert form.status_code == 415
        rebound = web.get("/shard/east/api/stats", headers={"host": "evil.example"})
        assert rebound.status_code == 400
    assert east.llen("queue:mail") == 5
    with client_for(wurk_web.create_app(filled, read_only=True)) as read_only:
        assert read_only.post("/shard/east/api/queues/mail/clear", json={}).status_code == 403
    assert east.llen("queue:mail") == 5
    seen = []

    def authorize(request, method, path):
        seen.append(path)
        return not path.startswith("/shard/west/")

    with client_for(wurk_web.create_app(filled, authorization=authorize)) as web:
        assert web.get("/shard/east/api/stats").status_code == 200
        assert web.get("/shard/west/api/stats").status_code == 403
    assert seen == ["/shard/east/api/stats", "/shard/west/api/stats"]


def test_shards_under_a_mount_point(filled):
    async def fallback(scope, receive, send):
        raise AssertionError("not for the dashboard")

    app = mount.asgi("/wurk", wurk_web.create_app(filled), fallback)
    with client_for(app) as web:
        assert web.get("/wurk/shard/east/api/stats").json()["enqueued"] == 5
        page = web.get("/wurk/shard/east/retries").text
        assert '<base href="/wurk/shard/east/">' in page
        assert '<a href="/wurk/retries">default</a>' in page
        assert web.get("/wurk/shard/east").headers["location"] == "/wurk/shard/east/"
