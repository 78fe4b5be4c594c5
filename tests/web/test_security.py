"""Authorization, read-only mode, cross-site refusal, escaping and redaction."""

from __future__ import annotations

import wurk
import wurk_web
from wurk.api import Queue
from wurk.redis import keys

from .conftest import failed_job
from .live import client_for

ENVELOPE = {"__wurk_enc__": True, "v": 1, "ct": "c2VjcmV0IHBsYWludGV4dA=="}


def push_one(config: wurk.Config, *args: object) -> str:
    jid = wurk.Client(config).push({"class": "app.jobs.Hello", "args": list(args), "queue": "default"})
    assert jid
    return jid


def test_a_cross_site_post_is_refused_and_changes_nothing(config, redis, web):
    push_one(config, 1)
    refused = web.post("/api/queues/default/pause", json={}, headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    assert "cross-site" in refused.json()["error"]
    same_site = web.post("/api/queues/default/clear", json={}, headers={"Sec-Fetch-Site": "same-site"})
    assert same_site.status_code == 403
    evil_origin = web.post("/api/queues/default/clear", json={}, headers={"Origin": "https://evil.example"})
    assert evil_origin.status_code == 403
    assert redis.smembers(keys.PAUSED) == set()
    assert redis.llen(keys.queue("default")) == 1


def test_a_same_origin_post_goes_through(config, redis, web):
    origin = str(web.base_url).rstrip("/")
    answer = web.post("/api/queues/default/pause", json={}, headers={"Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 200
    assert web.post("/api/queues/default/unpause", json={}, headers={"Origin": origin}).status_code == 200
    assert redis.smembers(keys.PAUSED) == set()


def test_a_form_post_is_refused_even_without_browser_headers(config, redis, web):
    answer = web.post("/api/queues/default/pause", data={"x": "1"})
    assert answer.status_code == 415
    assert redis.smembers(keys.PAUSED) == set()


def test_trusted_origins_may_send_changes(config, redis):
    app = wurk_web.create_app(config, trusted_origins=["https://admin.example"])
    with client_for(app) as client:
        headers = {"Origin": "https://admin.example", "Sec-Fetch-Site": "cross-site"}
        assert client.post("/api/queues/default/pause", json={}, headers=headers).status_code == 200
    assert redis.smembers(keys.PAUSED) == {b"default"}


def test_read_only_refuses_every_change_and_marks_the_page(config, redis):
    push_one(config, 1)
    with client_for(wurk_web.create_app(config, read_only=True)) as client:
        assert client.get("/api/queues").status_code == 200
        for path in (
            "/api/queues/default/pause",
            "/api/queues/default/clear",
            "/api/sets/dead/delete/all",
            "/api/sets/scheduled/add_to_queue/all",
        ):
            answer = client.post(path, json={})
            assert answer.status_code == 403
            assert "read-only" in answer.json()["error"]
        page = client.get("/queues").text
        assert 'data-read-only="1"' in page
        assert "Read-only" in page
    assert redis.llen(keys.queue("default")) == 1
    assert redis.smembers(keys.PAUSED) == set()


def test_read_only_follows_the_environment_and_the_setting(config, monkeypatch):
    from wurk_web.app import read_only_mode

    monkeypatch.setenv("WURK_WEB_READ_ONLY", "1")
    assert read_only_mode(config, None) is True
    config["web_read_only"] = "off"
    assert read_only_mode(config, None) is False
    monkeypatch.setenv("WURK_WEB_READ_ONLY", "0")
    config["web_read_only"] = None
    assert read_only_mode(config, None) is False
    assert read_only_mode(config, True) is True


def test_authorization_is_asked_for_every_request(config, redis):
    asked: list[tuple[str, str]] = []

    def authorization(request, method: str, path: str) -> bool:
        asked.append((method, path))
        return method == "GET" or request.headers.get("x-role") == "admin"

    with client_for(wurk_web.create_app(config, authorization=authorization)) as client:
        assert client.get("/api/queues").status_code == 200
        assert client.post("/api/queues/default/pause", json={}).status_code == 403
        assert redis.smembers(keys.PAUSED) == set()
        assert client.post("/api/queues/default/pause", json={}, headers={"x-role": "admin"}).status_code == 200
    assert redis.smembers(keys.PAUSED) == {b"default"}
    assert asked[:2] == [("GET", "/api/queues"), ("POST", "/api/queues/default/pause")]


def test_an_async_authorization_that_says_no_is_a_403(config):
    async def nobody(request, method: str, path: str) -> bool:
        return False

    with client_for(wurk_web.create_app(config, authorization=nobody)) as client:
        assert client.get("/").status_code == 403
        assert client.get("/api/stats").status_code == 403


def test_middleware_wraps_the_application(config):
    def tagging(app):
        async def wrapped(scope, receive, send):
            async def tagged(message):
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), (b"x-seen-by", b"tagging")]
                await send(message)

            await app(scope, receive, tagged)

        return wrapped

    with client_for(wurk_web.create_app(config, middleware=[tagging])) as client:
        assert client.get("/api/stats").headers["x-seen-by"] == "tagging"


def test_markup_in_arguments_is_data_never_markup(config, web):
    push_one(config, "<script>alert(1)</script>", "<img src=x onerror=alert(2)>")
    page = web.get("/queues/default")
    assert "<script>alert" not in page.text  # the page is a shell; jobs arrive as JSON
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    jobs = web.get("/api/queues/default")
    assert jobs.headers["content-type"] == "application/json"
    assert jobs.headers["x-content-type-options"] == "nosniff"
    assert jobs.json()["jobs"][0]["args"] == ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>"]


def test_a_queue_name_with_markup_is_escaped_in_the_page(config, web):
    page = web.get('/queues/%3Cb%20title="x"%3Ex').text
    assert '<b title="x">' not in page
    assert 'data-param-name="&lt;b title=&quot;x&quot;&gt;x"' in page


def test_encrypted_arguments_never_reach_the_browser(config, redis, web):
    Queue("default")  # the queue exists once a job is pushed
    wurk.Client(config).push({"class": "app.jobs.Pay", "args": [1, {"card": ENVELOPE}, ENVELOPE], "queue": "default"})
    from wurk.api import RetrySet

    RetrySet().schedule(1_800_000_000.0, failed_job("enc1", args=[ENVELOPE], encrypt=True))
    listing = web.get("/api/queues/default").text
    entry_id = web.get("/api/sets/retries").json()["entries"][0]["id"]
    detail = web.get("/api/sets/retries/entry", params={"id": entry_id}).text
    search = web.get("/api/search", params={"q": "app.jobs"}).text
    for body in (listing, detail, search):
        assert ENVELOPE["ct"] not in body
        assert "__wurk_enc__" not in body
        assert "[encrypted data]" in body
    assert web.get("/api/queues/default").json()["jobs"][0]["args"] == [
        1,
        {"card": "[encrypted data]"},
        "[encrypted data]",
    ]
