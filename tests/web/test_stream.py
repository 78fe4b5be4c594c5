"""Server-sent events for the live numbers, and the OpenAPI document."""

from __future__ import annotations

import json

from wurk.redis import keys


def events(text: str) -> list[tuple[str, dict]]:
    found = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


def test_the_stream_sends_the_stats_as_events(config, redis, web):
    redis.set(keys.STAT_PROCESSED, 5)
    with web.stream("GET", "/api/stream", params={"events": 2}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.read().decode()
    found = events(body)
    assert [name for name, _ in found] == ["stats", "stats"]
    assert found[0][1]["processed"] == 5
    assert body.startswith("retry: ")


def test_the_openapi_document_lists_every_route(config, web):
    document = web.get("/api/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for path in ("/api/stats", "/api/queues", "/api/queues/{name}/pause", "/api/sets/{kind}", "/api/stream"):
        assert path in paths
    pause = paths["/api/queues/{name}/pause"]["post"]
    assert pause["parameters"][0]["name"] == "name"
    assert pause["summary"].startswith("Stop workers fetching")
    assert "requestBody" in pause
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_every_page_answers(config, web):
    for path in (
        "/",
        "/busy",
        "/queues",
        "/queues/default",
        "/retries",
        "/scheduled",
        "/dead",
        "/metrics",
        "/metrics/app.jobs.Hello",
        "/search",
        "/dead/entry",
    ):
        page = web.get(path)
        assert page.status_code == 200, path
        assert 'data-view="' in page.text
    assert web.get("/static/wurk/app.js").status_code == 200
