"""The dashboard's threat model (docs/security.md), held route by route.

The routes are read from the application itself, so a page, JSON route or
static directory added later (by the dashboard or a plugin) is covered
without touching these tests: it must pass the authorization hook, refuse a
forged or read-only change, change nothing on GET and carry the security
headers, or a test here fails.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import wurk
import wurk_web
from wurk.api import DeadSet, RetrySet, ScheduledSet
from wurk.redis import keys

from .conftest import failed_job
from .live import client_for, serving

#: Path parameters are filled with this; any value reaches the handler.
PROBE = "probe"


def starlette_of(app: Any) -> Starlette:
    """The routing application inside the dashboard's wrappers."""
    while not isinstance(app, Starlette):
        app = app.app
    return app


def static_file(mount: Mount) -> str:
    """A file that exists under a static mount, as a URL path."""
    assert isinstance(mount.app, StaticFiles)
    directory = Path(str(mount.app.directory))
    first = sorted(path for path in directory.rglob("*") if path.is_file())[0]
    return f"{mount.path}/{first.relative_to(directory).as_posix()}"


def every_route(app: Any) -> list[tuple[str, str]]:
    """``(method, path)`` for every route the application serves, its
    parameters filled in; one existing file per static directory."""
    found: list[tuple[str, str]] = []
    for route in starlette_of(app).routes:
        if isinstance(route, Route):
            path = re.sub(r"\{[^}]+\}", PROBE, route.path)
            if path == "/api/stream":
                path += "?events=1"  # one snapshot, then the end
            found += [(method, path) for method in sorted(route.methods or ()) if method != "HEAD"]
        elif isinstance(route, Mount):
            found.append(("GET", static_file(route)))
        else:
            raise AssertionError(f"a route of a kind these tests do not know: {route!r}")
    return found


def changes(routes: list[tuple[str, str]]) -> list[str]:
    return [path for method, path in routes if method != "GET"]


#: The one key a read may write: the once-a-minute lock of the process
#: list's clean-up of dead workers' entries, which every reader of the list
#: runs (as Sidekiq's does); it changes no job and no setting.
HOUSEKEEPING = {b"process_cleanup"}


def snapshot(redis) -> dict[bytes, bytes]:
    """Every key and its serialized value: equal snapshots, nothing changed."""
    return {key: redis.dump(key) for key in redis.scan_iter(count=1000) if key not in HOUSEKEEPING}


def seed(config: wurk.Config, redis) -> None:
    """Something under every kind of key the dashboard reads."""
    from wurk_batches import Batch
    from wurk_cron import Manager
    from wurk_limiter import Limiter

    client = wurk.Client(config)
    client.push({"class": "app.jobs.Hello", "args": ["Ada"], "queue": "default"})
    RetrySet().schedule(1_800_000_000.0, failed_job("retry1"))
    DeadSet().schedule(1_800_000_100.0, failed_job("dead1"))
    ScheduledSet().schedule(time.time() + 3600, {"class": "app.jobs.Later", "args": [1], "jid": "later1"})
    batch = Batch()
    batch.description = "Nightly"
    with batch.jobs():
        client.push({"class": "app.jobs.Row", "args": [1], "queue": "default"})
    Limiter.window("partner-api", 3, 3600).within_limit(lambda: None)
    Manager(config).register("*/5 * * * *", "app.jobs.Nightly")


@pytest.fixture
def routes(config) -> list[tuple[str, str]]:
    found = every_route(wurk_web.create_app(config))
    paths = {path for _, path in found}
    # The enumeration must see every kind of route, the plugins' included.
    for expected in ("/", "/api/queues", "/api/stream?events=1", "/favicon.ico", "/api/batches", "/api/cron"):
        assert expected in paths, expected
    assert any(path.startswith("/static/wurk/") for path in paths)
    assert any(path.startswith("/api/limiters/") for path in changes(found))
    return found


def send(client, method: str, path: str):
    if method == "GET":
        return client.get(path)
    return client.request(method, path, json={})


def test_every_route_asks_the_authorization_hook_first(config, redis, routes):
    asked: list[tuple[str, str]] = []

    def nobody(request, method: str, path: str) -> bool:
        asked.append((method, path))
        return False

    seed(config, redis)
    before = snapshot(redis)
    with client_for(wurk_web.create_app(config, authorization=nobody)) as client:
        for method, path in routes:
            answer = send(client, method, path)
            assert answer.status_code == 403, (method, path, answer.status_code)
            assert answer.json() == {"error": "not authorized"}
    assert sorted(set(asked)) == sorted({(method, path.split("?")[0]) for method, path in routes})
    assert snapshot(redis) == before


def test_a_get_never_changes_anything(config, redis, routes, web):
    seed(config, redis)
    before = snapshot(redis)
    for method, path in routes:
        if method == "GET":
            answer = web.get(path)
            assert answer.status_code < 500, (path, answer.status_code)
    assert snapshot(redis) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
    ],
    ids=["cross-site", "same-site", "foreign-origin", "null-origin"],
)
def test_every_change_refuses_a_forged_request(config, redis, routes, web, headers):
    seed(config, redis)
    before = snapshot(redis)
    for path in changes(routes):
        answer = web.post(path, json={"ids": ["x"], "keys": ["x"], "identity": "x"}, headers=headers)
        assert answer.status_code == 403, (path, answer.status_code)
        assert "cross-site" in answer.json()["error"]
    assert snapshot(redis) == before


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"])
def test_every_change_refuses_what_a_cross_site_form_can_send(config, redis, routes, web, content_type):
    seed(config, redis)
    before = snapshot(redis)
    for path in changes(routes):
        answer = web.post(path, content=b'{"ids": ["x"]}', headers={"Content-Type": content_type})
        assert answer.status_code == 415, (path, answer.status_code)
    assert snapshot(redis) == before


def test_read_only_refuses_every_change(config, redis, routes):
    seed(config, redis)
    before = snapshot(redis)
    with client_for(wurk_web.create_app(config, read_only=True)) as client:
        for path in changes(routes):
            answer = client.post(path, json={"ids": ["x"]}, headers={"Sec-Fetch-Site": "same-origin"})
            assert answer.status_code == 403, (path, answer.status_code)
            assert "read-only" in answer.json()["error"]
    assert snapshot(redis) == before


def test_every_answer_forbids_framing_and_sniffing(config, redis, routes, web):
    seed(config, redis)
    answers = [send(web, method, path) for method, path in routes]
    answers += [web.get("/no/such/page"), web.get("/static/wurk/nothing.js"), web.post("/api/queues/x/pause")]
    for answer in answers:
        where = (answer.request.method, answer.request.url.path, answer.status_code)
        assert answer.headers["x-frame-options"] == "DENY", where
        assert answer.headers["x-content-type-options"] == "nosniff", where
        policy = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy, where
        assert "script-src 'self'" in policy, where
        assert "unsafe-inline" not in policy, where


# -- static files --------------------------------------------------------------------------

#: Paths that try to leave a static directory, written as an attacker sends
#: them (http.client does not normalize ``..`` as a browser or httpx would).
#: ``../app.py`` would be the dashboard's own source, next to its static folder.
ESCAPES = [
    "/static/wurk/../app.py",
    "/static/wurk/../../wurk_web/app.py",
    "/static/wurk/%2e%2e/app.py",
    "/static/wurk/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    "/static/wurk/..%2fapp.py",
    "/static/wurk/..%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/static/wurk/%2e%2e%2fapp.py",
    "/static/wurk/..%5capp.py",
    "/static/wurk/..\\app.py",
    "/static/wurk//etc/passwd",
    "/static/wurk/%2fetc%2fpasswd",
    "/static/wurk/app.js%00.py",
    "/static/wurk/%252e%252e/app.py",
    "/static/wurk/..;/app.py",
    "/static/profiles/../../app.py",
    "/static/batches/../../wurk_web/app.py",
    "/static/../wurk_web/app.py",
]


def raw_get(url: str, path: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_static_paths_never_leave_their_directory(config):
    with serving(wurk_web.create_app(config)) as url:
        assert raw_get(url, "/static/wurk/app.js")[0] == 200
        for path in ESCAPES:
            status, body = raw_get(url, path)
            assert status in (400, 404), (path, status)
            assert b"create_app" not in body, path
            assert b"root:" not in body, path


def test_a_websocket_never_reaches_a_route(config):
    # The dashboard registers no WebSocket route, so the router closes every
    # handshake, a static directory's path included; the hook is not needed.
    asked: list[str] = []

    def everyone(request, method: str, path: str) -> bool:
        asked.append(path)
        return True

    app = wurk_web.create_app(config, authorization=everyone)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send_message(message: dict[str, Any]) -> None:
        sent.append(message)

    for path in ("/static/wurk/app.js", "/api/stats"):
        sent.clear()
        scope = {"type": "websocket", "path": path, "root_path": "", "headers": [], "query_string": b""}
        asyncio.run(app(scope, receive, send_message))
        assert [message["type"] for message in sent] == ["websocket.close"], path
    assert asked == []


# -- markup in data ------------------------------------------------------------------------

MARKUP = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def test_markup_in_every_page_path_is_escaped(config, routes, web):
    for method, path in routes:
        if method != "GET" or path.startswith(("/api/", "/static/")) or PROBE not in path:
            continue
        page = web.get(path.replace(PROBE, MARKUP.replace("/", "%2F")))
        assert "<img src=x" not in page.text, path
        assert "<script>alert" not in page.text, path


def test_error_answers_carry_markup_as_json_text(config, redis, web):
    wurk.Client(config).push({"class": "app.jobs.Hello", "args": [1], "queue": "default"})
    answer = web.get("/api/sets/retries/entry", params={"id": MARKUP})
    assert answer.status_code in (400, 404)
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-content-type-options"] == "nosniff"
    rows = web.get("/api/queues/default", params={"limit": MARKUP})
    assert rows.status_code == 400
    assert rows.headers["content-type"] == "application/json"


def test_the_live_stream_is_json_in_events(config, redis, web):
    # A queue name the client refuses, written straight into Redis (by
    # another program, or an attacker): the stream still carries it as JSON.
    redis.sadd(keys.QUEUES, MARKUP)
    redis.lpush(keys.queue(MARKUP), json.dumps({"class": MARKUP, "args": [MARKUP], "jid": "abc"}))
    body = web.get("/api/stream", params={"events": "1"}).text
    data = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    assert data
    assert all(json.loads(line) is not None for line in data)


def test_a_search_result_links_to_its_queue_whatever_the_name(config, redis, web):
    # A name written straight into Redis, with the characters that would end
    # a path (``?``, ``#``) or leave it (``/..``) if the link were not encoded.
    name = "a/../../api/queues?x=1#y"
    redis.sadd(keys.QUEUES, name)
    redis.lpush(keys.queue(name), json.dumps({"class": "app.jobs.Hello", "args": ["needle"], "jid": "abc"}))
    [row] = web.get("/api/search", params={"q": "needle"}).json()["results"]
    assert row["page"] == "queues/a%2F..%2F..%2Fapi%2Fqueues%3Fx%3D1%23y"
