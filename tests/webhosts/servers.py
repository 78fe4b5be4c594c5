"""Real web servers for the integration tests: uvicorn, gunicorn and Flask's
own, each a subprocess on a free port with its output in a log file."""

from __future__ import annotations

import signal
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx

from tests.helpers import ROOT, Subprocess, wait_for
from wurk.redis.servers import free_port

EXAMPLES = ROOT / "examples"


class WebServer:
    def __init__(self, process: Subprocess, url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log
        self.http = httpx.Client(base_url=url, timeout=30)

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace")

    def lines_with(self, fragment: str) -> list[str]:
        return [line for line in self.text().splitlines() if fragment in line]


@contextmanager
def serving(
    command: Sequence[str],
    port: int,
    log: Path,
    env: dict[str, str],
    cwd: Path = EXAMPLES,
    ready: str = "/pid",
    program: str = sys.executable,
    sigint: signal.Handlers | None = None,
) -> Iterator[WebServer]:
    """Run ``program`` with ``command`` (a server listening on ``port``, Python
    by default) until it answers ``ready`` with a 200; ``sigint`` as for
    :class:`~tests.helpers.Subprocess`."""
    process = Subprocess([program, *command], env=env, cwd=cwd, log=log, sigint=sigint)
    server = WebServer(process, f"http://127.0.0.1:{port}", log)

    def answers() -> bool:
        assert process.proc.poll() is None, f"the server exited:\n{server.text()}"
        try:
            return server.http.get(ready).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(answers, timeout=60, interval=0.1)
        yield server
    finally:
        server.http.close()
        process.stop(timeout=30)


def uwsgi(app: str, log: Path, env: dict[str, str], *extra: str) -> AbstractContextManager[WebServer]:
    """uWSGI with a master and two worker processes (the binary built into
    this virtualenv, running its Python), stopped by TERM."""
    port = free_port()
    command = [
        "--http", f"127.0.0.1:{port}", "--module", app, "--master", "--processes", "2",
        "--enable-threads", "--home", sys.prefix, "--die-on-term", *extra,
        # uWSGI's HTTP router closes each connection after its response:
        # saying so keeps the client from sending the next request on it.
        "--add-header", "Connection: close",
    ]  # fmt: skip
    return serving(command, port, log, env, program=str(Path(sys.executable).parent / "uwsgi"))


def uvicorn(
    app: str, log: Path, env: dict[str, str], cwd: Path = EXAMPLES, ready: str = "/pid"
) -> AbstractContextManager[WebServer]:
    port = free_port()
    return serving(["-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)], port, log, env, cwd, ready)


def gunicorn(app: str, log: Path, env: dict[str, str], *extra: str) -> AbstractContextManager[WebServer]:
    port = free_port()
    command = ["-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}", "--graceful-timeout", "20", *extra, app]
    return serving(command, port, log, env)


def receipts(database: Path) -> list[tuple[int, str | None, int]]:
    """The example apps' receipts table: (order id, item the job saw, pid)."""
    with sqlite3.connect(database) as db:
        try:
            return [tuple(row) for row in db.execute("SELECT order_id, item, pid FROM receipts ORDER BY id")]
        except sqlite3.OperationalError:  # not created yet
            return []


@contextmanager
def in_thread(app: object) -> Iterator[httpx.Client]:
    """Serve the ASGI ``app`` from a thread of this process, its lifespan run
    (started before the first request, finished when the block ends)."""
    import socket
    import threading

    import uvicorn as server_module

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = server_module.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)  # type: ignore[arg-type]
    server = server_module.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="asgi-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not thread.is_alive()
