"""The dashboard's Cron pages: real loops on the test server, listed and acted
on through a live dashboard; the assertions are on Redis."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

import wurk
import wurk_cron
import wurk_web
from tests.web.live import client_for, client_without
from wurk_cron import Manager

XSS = "<script>window.__pwned = 1</script>"
ENVELOPE = {"__wurk_enc__": True, "v": 1, "ct": "c2VjcmV0IHBsYWludGV4dA=="}


@pytest.fixture
def web(config: wurk.Config) -> Iterator[httpx.Client]:
    with client_for(wurk_web.create_app(config)) as client:
        yield client


def loops_by_class(web: httpx.Client) -> dict[str, dict]:
    return {row["class"]: row for row in web.get("/api/cron").json()["loops"]}


def test_the_list_shows_each_loop_as_the_registry_holds_it(config, redis, web):
    manager = Manager(config)
    report = manager.register("*/5 * * * *", "app.jobs.Report", queue="low", args=[XSS, ENVELOPE])
    nightly = manager.register("0 4 * * *", "app.jobs.Nightly", tz="Asia/Tokyo", paused=True)
    redis.hset(f"loops:{report.lid}", mapping={"lf": "1800000000", "nf": "1800000300"})
    page = web.get("/api/cron").json()
    assert page["size"] == redis.scard("periodic") == 2
    assert page["cursor"] is None
    rows = loops_by_class(web)
    row = rows["app.jobs.Report"]
    assert (row["lid"], row["schedule"], row["queue"], row["paused"]) == (report.lid, "*/5 * * * *", "low", False)
    assert (row["last_fired_at"], row["next_fire_at"]) == (1_800_000_000, 1_800_000_300)
    assert row["args"] == [XSS, "[encrypted data]"]
    assert ENVELOPE["ct"] not in web.get("/api/cron").text
    tokyo = rows["app.jobs.Nightly"]
    assert (tokyo["lid"], tokyo["tz"], tokyo["paused"]) == (nightly.lid, "Asia/Tokyo", True)
    assert tokyo["next_fire_at"] is None


def test_a_loop_never_ticked_shows_its_next_slot(config, web):
    Manager(config).register("* * * * *", "app.jobs.Every")
    row = loops_by_class(web)["app.jobs.Every"]
    assert time.time() < row["next_fire_at"] <= time.time() + 61


def test_pause_unpause_and_enqueue_now_change_redis_as_the_package_does(config, redis, web):
    loop = Manager(config).register("0 * * * *", "app.jobs.Hourly", queue="reports", args=[1])
    redis.hset(f"loops:{loop.lid}", mapping={"lf": "1800000000", "nf": "1800003600"})
    assert web.post(f"/api/cron/{loop.lid}/pause", json={}).json() == {"lid": loop.lid, "paused": True}
    assert redis.hget(f"loops:{loop.lid}", "paused") == b"1"
    assert loops_by_class(web)["app.jobs.Hourly"]["next_fire_at"] is None
    assert web.post(f"/api/cron/{loop.lid}/unpause", json={}).json()["paused"] is False
    assert redis.hget(f"loops:{loop.lid}", "paused") == b"0"
    resumed = int(redis.hget(f"loops:{loop.lid}", "nf"))
    assert resumed > time.time()  # the slot passed while paused is not fired late
    answer = web.post(f"/api/cron/{loop.lid}/enqueue", json={}).json()
    assert answer["enqueued"] is True
    (raw,) = redis.lrange("queue:reports", 0, -1)
    job = json.loads(raw)
    assert (job["class"], job["args"], job["jid"]) == ("app.jobs.Hourly", [1], answer["jid"])
    assert int(redis.hget(f"loops:{loop.lid}", "nf")) == resumed  # the schedule did not move
    assert redis.llen(f"loop-history:{loop.lid}") == 0
    for action in ("pause", "unpause", "enqueue"):
        assert web.post(f"/api/cron/nosuchloop/{action}", json={}).status_code == 404


def test_history_and_detail(config, web):
    loop = Manager(config).register("0 0 * * *", "app.jobs.Daily")
    jid = wurk_cron.fire(loop.lid, config=config)
    history = web.get(f"/api/cron/{loop.lid}/history").json()["history"]
    assert [fire["jid"] for fire in history] == [jid]
    detail = web.get(f"/api/cron/{loop.lid}").json()
    assert detail["history"] == history
    assert detail["last_fired_at"] == history[0]["fired_at"]
    assert web.get("/api/cron/nosuchloop").status_code == 404


def test_pages_escape_the_lid_and_a_class_with_markup_stays_data(config, redis, web):
    Manager(config).register("* * * * *", f"app.jobs.{XSS}")
    assert f"app.jobs.{XSS}" in loops_by_class(web)
    page = web.get("/cron/%3Cscript%3E")
    assert "<script>" not in page.text.replace('<script src="', "")
    assert 'data-param-lid="&lt;script&gt;"' in page.text
    assert '<script src="static/cron/cron.js" defer></script>' in web.get("/cron").text


def test_actions_are_refused_cross_site_and_in_read_only_mode(config, redis, web):
    loop = Manager(config).register("0 * * * *", "app.jobs.Guarded")
    cross = web.post(f"/api/cron/{loop.lid}/pause", json={}, headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    with client_for(wurk_web.create_app(config, read_only=True)) as client:
        assert client.get("/api/cron").status_code == 200
        for action in ("pause", "enqueue"):
            assert client.post(f"/api/cron/{loop.lid}/{action}", json={}).status_code == 403
    assert redis.hget(f"loops:{loop.lid}", "paused") == b"0"
    assert redis.llen("queue:default") == 0


def test_without_the_plugin_there_is_no_cron_page(redis_url, monkeypatch):
    with client_without("cron", redis_url, monkeypatch) as client:
        assert client.get("/cron").status_code == 404
        assert client.get("/api/cron").status_code == 404
        assert '<a href="cron">' not in client.get("/").text
