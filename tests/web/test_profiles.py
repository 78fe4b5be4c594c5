"""The Profiles pages and their JSON routes, on profiles the real profiler stored."""

from __future__ import annotations

import gzip
import json
import marshal
import pstats
import re
import time
from urllib.parse import quote

import wurk_web
from tests.web.live import client_for
from wurk.server import profiler

HOSTILE = "<script>window.__pwned = 1</script>"


def fibonacci(n: int) -> int:
    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)


def store(config, token: str, jid: str, klass: str = "app.jobs.Crunch") -> str:
    job = {"class": klass, "jid": jid, "profile": token, "args": []}
    profiler.profile_job(config, job, lambda: fibonacci(12))
    return f"{token}-{jid}"


def ruby_profile(redis, jid: str) -> str:
    data = gzip.compress(json.dumps({"meta": {"product": "Vernier"}}).encode())
    key = f"carol-{jid}"
    redis.zadd("profiles", {key: time.time() + 60})
    fields = {"started_at": int(time.time()), "token": "carol", "type": "HardJob", "jid": jid}
    redis.hset(key, mapping={**fields, "filename": "x.json.gz", "elapsed": 0.5, "data": data, "size": len(data)})
    return key


def test_the_api_lists_shows_downloads_and_deletes(config, redis, web):
    key = store(config, "alice", "a" * 24)
    ruby = ruby_profile(redis, "r" * 24)
    listed = web.get("/api/profiles").json()
    assert [row["key"] for row in listed["profiles"]] == [key, ruby]
    assert listed["cursor"] is None
    row = listed["profiles"][0]
    assert (row["jid"], row["type"], row["token"], row["python"]) == ("a" * 24, "app.jobs.Crunch", "alice", True)
    assert row["size"] == len(redis.hget(key, "data"))
    assert len(web.get("/api/profiles/entry", params={"key": key, "top": 2}).json()["functions"]) == 2
    detail = web.get("/api/profiles/entry", params={"key": key}).json()
    [fib] = [f for f in detail["functions"] if f["function"].endswith("(fibonacci)")]
    assert fib["calls"] == 465  # 2 * F(13) - 1
    assert web.get("/api/profiles/entry", params={"key": ruby}).json()["functions"] is None

    download = web.get("/api/profiles/data", params={"key": key})
    assert download.status_code == 200
    assert download.headers["content-disposition"] == f'attachment; filename="alice-{"a" * 24}.prof"'
    table = marshal.loads(download.content)  # the client undid the gzip, as a browser does
    assert pstats.Stats(profiler._Loaded(table)).total_calls > 465  # type: ignore[attr-defined, arg-type]
    assert web.get("/api/profiles/data", params={"key": ruby}).headers["content-type"] == "application/json"

    deleted = web.post("/api/profiles/delete", json={"keys": [key, "nobody-x00000000000000000000000"]})
    assert deleted.json() == {"deleted": 1}
    assert redis.exists(key) == 0
    assert redis.zrange("profiles", 0, -1) == [ruby.encode()]


def test_errors_name_the_problem(config, redis, web):
    assert web.get("/api/profiles/entry").status_code == 400
    missing = web.get("/api/profiles/entry", params={"key": "nobody-100000000000000000000000"})
    assert missing.status_code == 404
    assert "nobody-100000000000000000000000" in missing.json()["error"]
    assert web.get("/api/profiles", params={"cursor": "later"}).status_code == 400
    assert web.post("/api/profiles/delete", json={"keys": []}).status_code == 400
    # Only a listed profile is served: another hash with a data field is not.
    redis.hset("secret-thing", mapping={"jid": "x", "started_at": 1, "data": "private"})
    assert web.get("/api/profiles/data", params={"key": "secret-thing"}).status_code == 404


def test_pages_escape_a_hostile_class_and_owner(config, redis, web):
    key = store(config, HOSTILE, "b" * 24, klass=HOSTILE)
    listing = web.get("/profiles")
    assert listing.status_code == 200
    assert HOSTILE not in listing.text
    assert html_escaped(HOSTILE) in listing.text
    assert '<a href="profiles" aria-current="page">Profiles</a>' in listing.text
    assert f'href="profiles/entry?key={quote(key, safe="")}"' in listing.text
    assert "Delete</button>" in listing.text
    detail = web.get("/profiles/entry", params={"key": key})
    assert detail.status_code == 200
    assert HOSTILE not in detail.text
    assert html_escaped(HOSTILE) in detail.text
    assert "(fibonacci)</td>" in detail.text
    assert re.search(r"Top \d+ functions by cumulative time", detail.text)
    api = web.get("/api/profiles").json()["profiles"][0]
    assert (api["type"], api["token"]) == (HOSTILE, HOSTILE)  # JSON carries the text as it is
    assert web.get("/profiles/entry", params={"key": "gone-100000000000000000000000"}).status_code == 404


def test_an_empty_list_says_how_to_profile_a_job(config, web):
    page = web.get("/profiles").text
    assert "No profiles stored" in page
    assert 'set(profile="alice")' in page.replace("&quot;", '"')


def test_read_only_draws_no_delete_and_refuses_it(config, redis):
    key = store(config, "alice", "c" * 24)
    with client_for(wurk_web.create_app(config, read_only=True)) as client:
        assert "Delete</button>" not in client.get("/profiles").text
        assert client.post("/api/profiles/delete", json={"keys": [key]}).status_code == 403
    assert redis.exists(key) == 1


def test_a_cross_site_delete_is_refused(config, redis, web):
    key = store(config, "alice", "d" * 24)
    refused = web.post("/api/profiles/delete", json={"keys": [key]}, headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    assert redis.exists(key) == 1


def test_the_openapi_document_lists_the_profile_routes(config, web):
    paths = web.get("/api/openapi.json").json()["paths"]
    for path in ("/api/profiles", "/api/profiles/entry", "/api/profiles/data"):
        assert "get" in paths[path]
    assert "post" in paths["/api/profiles/delete"]


def html_escaped(text: str) -> str:
    import html

    return html.escape(text)


def planted(redis, jid: str, data: bytes) -> str:
    """A profile in Python's format whose data was written by someone else."""
    key = f"mallory-{jid}"
    redis.zadd("profiles", {key: time.time() + 60})
    fields = {"started_at": int(time.time()), "token": "mallory", "type": "app.jobs.X", "jid": jid, "format": "pstats"}
    redis.hset(key, mapping={**fields, "filename": "x.prof", "elapsed": 0.5, "data": data, "size": len(data)})
    return key


def gzip_bomb(size: int) -> bytes:
    """``size`` zero bytes, gzipped a chunk at a time (never held whole)."""
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1024 * 1024)
    return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()


def test_profile_data_written_by_someone_else_is_refused_not_a_crash(config, redis, web):
    # The dashboard unpacks a profile from Redis: whoever can write Redis
    # chooses those bytes (docs/security.md). Too large once unpacked, or
    # not shaped like a pstats table, the profile is refused with a reason.
    bomb = planted(redis, "b" * 24, gzip_bomb(profiler.MAX_TABLE_BYTES + 1024 * 1024))
    shapeless = planted(redis, "s" * 24, gzip.compress(marshal.dumps({("a.py", 1, "f"): "not a row"})))
    not_a_key = planted(redis, "k" * 24, gzip.compress(marshal.dumps({"key": (1, 1, 0.1, 0.1, {})})))
    truncated = planted(redis, "t" * 24, gzip.compress(marshal.dumps({}))[:-6])
    cases = [(bomb, "larger than"), (shapeless, "pstats table"), (not_a_key, "pstats table"), (truncated, "")]
    for key, reason in cases:
        answer = web.get("/api/profiles/entry", params={"key": key})
        assert answer.status_code == 422, (key, answer.status_code)
        assert "not a Python profile" in answer.json()["error"]
        assert reason in answer.json()["error"]
        page = web.get("/profiles/entry", params={"key": key})
        assert page.status_code == 422, key
