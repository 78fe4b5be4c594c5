"""``wurk web`` while Redis is away: a 503 that says why, one log line an
outage, and pages that work again once Redis answers. A real ``wurk web``
process on a port where no server listens, then a real server on that port."""

from __future__ import annotations

import html
import sys
from pathlib import Path

import httpx

from tests.helpers import Subprocess, new_server, url_for, wait_for
from wurk.redis.connection import mask_url
from wurk.redis.servers import free_port

WURK = str(Path(sys.executable).parent / "wurk")
HINT = "Start one with `wurk server`, or set REDIS_URL."


def answering(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=10)
    except httpx.HTTPError:
        return None


def test_pages_answer_503_naming_the_server_and_work_again_when_it_is_back(tmp_path):
    redis_port, web_port = free_port(), free_port()
    url = url_for(redis_port, userinfo=":s3cret")
    base = f"http://127.0.0.1:{web_port}"
    log = tmp_path / "web.log"
    web = Subprocess([WURK, "web", "--port", str(web_port)], log=log, env={"REDIS_URL": url})
    server = None
    try:
        wait_for(lambda: answering(f"{base}/static/wurk/app.css"), timeout=60)
        said = f"cannot reach Redis at {mask_url(url)} (connection refused). {HINT}"

        page = httpx.get(f"{base}/queues", timeout=10)
        assert page.status_code == 503
        assert page.headers["retry-after"] == "5"
        assert html.escape(said) in page.text  # a URL's query has & in it
        assert "works again as soon as Redis answers" in page.text
        assert "s3cret" not in page.text

        data = httpx.get(f"{base}/api/stats", timeout=10)
        assert data.status_code == 503
        assert data.json() == {"error": said}
        stream = httpx.get(f"{base}/api/stream?events=1", timeout=10)
        assert f'"error": "{said}"' in stream.text
        for _ in range(3):  # every request fails, and none adds a line
            assert httpx.get(f"{base}/", timeout=10).status_code == 503
            assert httpx.get(f"{base}/api/queues", timeout=10).status_code == 503

        server = new_server(port=redis_port).start()  # Redis comes back; its password is not asked for
        back = httpx.get(f"{base}/queues", timeout=10)
        assert back.status_code == 200
        assert httpx.get(f"{base}/api/stats", timeout=10).json()["processed"] == 0
        wait_for(lambda: "Redis is reachable again" in log.read_text(), timeout=10)
    finally:
        web.stop()
        if server is not None:
            server.stop()
    output = web.output()
    assert "Traceback" not in output
    assert "Internal Server Error" not in output
    assert "s3cret" not in output
    outage_lines = [line for line in output.splitlines() if "Redis unreachable" in line]
    assert len(outage_lines) == 1, output  # one line for the whole outage, not one a request
    assert said in outage_lines[0]
    assert "context=dashboard" in outage_lines[0]


def test_a_bad_url_is_refused_before_serving(tmp_path):
    web = Subprocess([WURK, "web", "--port", str(free_port())], env={"REDIS_URL": "http://localhost:6379"})
    assert web.wait(60) == 2
    output = web.output()
    assert output.strip() == (
        "wurk: Redis URL 'http://localhost:6379' has scheme http://; use one of redis://, rediss://, unix://, redis+sentinel://."
    )
