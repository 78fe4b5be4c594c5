"""The dashboard's Limiters page: real limiters on the test server, read and
reset through a live dashboard; the assertions are on Redis."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

import wurk
import wurk_web
from tests.limiter.conftest import CAPACITY, MAKERS, call_kwargs
from tests.web.live import client_for, client_without
from wurk_limiter import Limiter


@pytest.fixture
def web(config: wurk.Config) -> Iterator[httpx.Client]:
    with client_for(wurk_web.create_app(config)) as client:
        yield client


def rows_by_name(web: httpx.Client, **params) -> dict[str, dict]:
    return {row["name"]: row for row in web.get("/api/limiters", params={"limit": 200, **params}).json()["limiters"]}


def test_every_type_is_listed_with_its_usage_as_status_reads_it(config, web, kind):
    limiter = MAKERS[kind](f"api-{kind}")
    with limiter.within_limit(**call_kwargs(kind)):
        row = rows_by_name(web)[f"api-{kind}"]
        status = limiter.status()
    assert row["type"] == kind
    assert row["error"] is None
    assert row["limit"] == status["limit"] == CAPACITY
    assert row["used"] == pytest.approx(status["used"], abs=0.01)
    assert row["available"] is status["available"]
    assert row["options"] == limiter.options | {"backoff": None}
    assert (row["counters"] is not None) is (kind == "concurrent")


def test_a_limiter_is_listed_once_it_has_been_used(config, web):
    limiter = Limiter.window("unused-yet", 5, 60)
    assert "unused-yet" not in rows_by_name(web)  # built: nothing written
    limiter.within_limit(lambda: None)
    assert rows_by_name(web)["unused-yet"]["type"] == "window"


def test_the_concurrent_counters_and_an_exhausted_limiter(config, web):
    seats = Limiter.concurrent("seats", 1, wait_timeout=0)
    with seats.within_limit():
        row = rows_by_name(web)["seats"]
        assert (row["used"], row["limit"], row["available"]) == (1, 1, False)
        assert row["reset_at"] is not None
        assert row["counters"]["immediate"] == 1


def test_reset_clears_the_state_and_keeps_the_limiter(config, redis, web):
    for kind in ("concurrent", "bucket", "window"):
        limiter = MAKERS[kind](f"r-{kind}")
        for _ in range(CAPACITY):
            limiter.within_limit(lambda: None)
    assert redis.exists("lmtr-w:r-window", "lmtr-stats:r-concurrent") == 2
    assert list(redis.scan_iter(match="lmtr-b:r-bucket:*"))
    for name in ("r-concurrent", "r-bucket", "r-window"):
        answer = web.post(f"/api/limiters/{name}/reset", json={})
        assert answer.status_code == 200, answer.text
        assert answer.json()["used"] == 0
    assert redis.exists("lmtr-w:r-window", "lmtr-cs:r-concurrent", "lmtr-stats:r-concurrent") == 0
    assert list(redis.scan_iter(match="lmtr-b:r-bucket:*")) == []  # every period, the current one too
    assert redis.smembers("lmtr-list") == {b"r-concurrent", b"r-bucket", b"r-window"}
    assert redis.hget("lmtr:r-window", "type") == b"window"
    assert web.post("/api/limiters/nobody/reset", json={}).status_code == 404


def test_pages_walk_the_whole_registry_and_filter_by_name(config, web):
    names = {f"tenant-{n:02d}" for n in range(30)} | {"stripe"}
    for name in names:
        Limiter.window(name, 5, 60).status()  # used once: registered
    seen: set[str] = set()
    cursor = None
    for _ in range(40):
        page = web.get("/api/limiters", params={"limit": 7, **({"cursor": cursor} if cursor else {})}).json()
        assert page["size"] == len(names)
        seen |= {row["name"] for row in page["limiters"]}
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == names
    assert set(rows_by_name(web, substr="strip")) == {"stripe"}
    assert set(rows_by_name(web, substr="tenant-1")) == {f"tenant-1{n}" for n in range(10)}


def test_a_name_without_metadata_or_with_markup_is_shown_as_data(config, redis, web):
    redis.sadd("lmtr-list", "<script>window.__pwned=1</script>")
    redis.hset("lmtr:broken", mapping={"type": "rainbow", "options": "{}"})
    redis.sadd("lmtr-list", "broken")
    rows = rows_by_name(web)
    assert "expired" in rows["<script>window.__pwned=1</script>"]["error"]
    assert "unknown limiter type" in rows["broken"]["error"]
    page = web.get("/limiters").text
    assert "__pwned" not in page
    assert '<script src="static/limiters/limiters.js" defer></script>' in page


def test_reset_is_refused_cross_site_and_in_read_only_mode(config, redis, web):
    limiter = Limiter.window("guarded", 5, 60)
    limiter.within_limit(lambda: None)
    cross = web.post("/api/limiters/guarded/reset", json={}, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    with client_for(wurk_web.create_app(config, read_only=True)) as client:
        assert client.get("/api/limiters").status_code == 200
        assert client.post("/api/limiters/guarded/reset", json={}).status_code == 403
    assert redis.zcard("lmtr-w:guarded") == 1


def test_without_the_plugin_there_is_no_limiters_page(redis_url, monkeypatch):
    with client_without("limiter", redis_url, monkeypatch) as client:
        assert client.get("/limiters").status_code == 404
        assert client.post("/api/limiters/x/reset", json={}).status_code in (404, 405)
        assert "Limiters" not in client.get("/").text


def test_the_authorization_hook_gates_the_reset(config, redis):
    limiter = Limiter.window("gated", 5, 60)
    limiter.within_limit(lambda: None)

    def readers_only(request, method: str, path: str) -> bool:
        return method == "GET"

    with client_for(wurk_web.create_app(config, authorization=readers_only)) as client:
        assert client.get("/api/limiters").status_code == 200
        assert client.post("/api/limiters/gated/reset", json={}).status_code == 403
    assert redis.zcard("lmtr-w:gated") == 1
