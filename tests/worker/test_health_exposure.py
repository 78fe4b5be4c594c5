"""What the health-check port shows whoever can reach it (docs/security.md):
the two probes' status and nothing else, no request echoed back, and no
thread held by a connection that never sends its request."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import wurk
from wurk.redis.servers import free_port
from wurk.server import health


@pytest.fixture
def port(config) -> Iterator[int]:
    chosen = free_port()
    config.health_check(port=chosen, bind="127.0.0.1", ready_window=5)
    config["heartbeat_interval"] = 0.3
    instance = wurk.configure_embed()
    instance.run()
    try:
        yield chosen
    finally:
        instance.stop()


def fetch(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_answers_echo_nothing_and_say_nothing_of_the_host(port, redis_url):
    markup = "/<script>alert(1)</script>"
    requests = [("GET", "/live"), ("GET", "/ready"), ("GET", markup), ("POST", "/live"), ("BREW", markup)]
    for method, path in requests:
        status, headers, body = fetch(port, method, path)
        assert status in (200, 404, 405, 501), (method, path, status)
        assert headers["content-type"] == "application/json"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["cache-control"] == "no-store"
        assert "python" not in headers["server"].lower()
        assert b"script" not in body
        assert redis_url.encode() not in body


def test_an_idle_connection_is_closed_and_holds_no_thread(port, monkeypatch):
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(20)]
    try:
        started = time.monotonic()
        for connection in idle:
            assert connection.recv(1) == b""  # closed by the server, not by us
        assert time.monotonic() - started < health.REQUEST_TIMEOUT + 5
        assert threading.active_count() <= before + 2
        assert fetch(port, "GET", "/live")[0] == 200
    finally:
        for connection in idle:
            connection.close()
