"""A real HTTP server for the dashboard tests: uvicorn on a private port, in a thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from tests.helpers import wait_for


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve the ASGI ``app`` on 127.0.0.1 and a free port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="dashboard-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=10)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def client_for(app: Any) -> Iterator[httpx.Client]:
    """An HTTP client on a live server of ``app``."""
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


@contextmanager
def client_without(plugin: str, redis_url: str, monkeypatch: Any) -> Iterator[httpx.Client]:
    """A client of a live dashboard on ``redis_url`` with ``plugin`` switched off."""
    import wurk
    import wurk_web

    monkeypatch.setenv("WURK_DISABLE_PLUGINS", plugin)
    config = wurk.Config()
    config.redis = {"url": redis_url}
    try:
        with client_for(wurk_web.create_app(config)) as client:
            yield client
    finally:
        config.reset_redis_pools()
