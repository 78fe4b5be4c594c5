"""Fixtures for the Ruby Sidekiq interop tests.

They need a Debian chroot with Ruby Sidekiq and the Web UI installed, built by
``tools/interop/setup-ruby-sidekiq.sh``, and named by ``WURK_INTEROP_CHROOT``.
Without it every test here is skipped.

Each test gets its own private server on a free loopback port and an
:class:`Interop` harness that starts Ruby workers, the Web UI, Python workers
and one-off Ruby scripts against it. The chroot shares the host's network, so
``127.0.0.1`` is the same on both sides. Every process the harness starts is
stopped by its pid when the test ends, and then the server is stopped.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis as redis_py

import wurk
from tests.helpers import ROOT, new_server, wait_for
from wurk.redis.servers import ServerProcess, free_port

CHROOT_ENV = "WURK_INTEROP_CHROOT"
APP_DIR = "/opt/interop"
RESULT_PREFIX = "INTEROP-RESULT "
SETUP_HINT = "build one with tools/interop/setup-ruby-sidekiq.sh"


def _chroot_problem(path: Path) -> str | None:
    if not path.is_dir():
        return f"{CHROOT_ENV}={path} is not a directory ({SETUP_HINT})"
    for needed in ("usr/bin/ruby", "usr/bin/sidekiq", "usr/bin/rackup", "opt/interop/app.rb", "opt/interop/config.ru"):
        if not (path / needed).exists():
            return f"the chroot {path} has no /{needed} ({SETUP_HINT})"
    if os.geteuid() != 0:
        return "the interop tests run programs through chroot, which needs root"
    return None


@pytest.fixture(scope="session")
def interop_chroot() -> Iterator[Path]:
    """The ready chroot, with /proc mounted for the duration of the session."""
    value = os.environ.get(CHROOT_ENV)
    if not value:
        pytest.skip(f"{CHROOT_ENV} is not set; point it at a chroot with Ruby Sidekiq ({SETUP_HINT})")
    path = Path(value)
    problem = _chroot_problem(path)
    if problem:
        pytest.skip(problem)
    proc = path / "proc"
    mounted = False
    if subprocess.run(["mountpoint", "-q", str(proc)], check=False).returncode != 0:
        subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
        mounted = True
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", str(proc)], check=False)


class Interop:
    """One test's private server plus the Ruby and Python processes around it."""

    def __init__(self, chroot: Path, server: ServerProcess, logs: Path) -> None:
        self.chroot = chroot
        self.server = server
        self.url = server.url
        self.logs = logs
        self.redis = redis_py.Redis.from_url(self.url, decode_responses=True)
        self._children: list[subprocess.Popen[bytes]] = []
        #: Each child's log file, by pid.
        self.log_paths: dict[int, Path] = {}
        self.config = wurk.Config()
        self.config.redis = {"url": self.url}
        self.client = wurk.Client(self.config)

    # -- processes -------------------------------------------------------------------

    def _in_chroot(self, *argv: str, env: Mapping[str, str] | None = None) -> list[str]:
        assignments = [f"{key}={value}" for key, value in {"REDIS_URL": self.url, **(env or {})}.items()]
        # chroot and env both exec, so the child's pid is the Ruby program's own.
        return ["chroot", str(self.chroot), "/usr/bin/env", "-C", APP_DIR, *assignments, *argv]

    def _spawn(
        self, argv: Sequence[str], name: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        path = self.logs / f"{name}-{len(self._children)}.log"
        log = path.open("wb")
        try:
            child = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )
        finally:
            log.close()
        self._children.append(child)
        self.log_paths[child.pid] = path
        return child

    def start_ruby_worker(
        self, *, concurrency: int = 2, queues: Sequence[str] = ("default",), tag: str = "ruby-interop"
    ) -> subprocess.Popen[bytes]:
        argv = ["sidekiq", "-r", "./app.rb", "-c", str(concurrency), "-g", tag, "-t", "3"]
        for queue in queues:
            argv += ["-q", queue]
        child = self._spawn(self._in_chroot(*argv, env={"INTEROP_POLL": "1"}), "ruby-worker")
        self.wait_for_process(child.pid)
        return child

    def start_python_worker(
        self, *, concurrency: int = 2, queues: Sequence[str] = ("default",), tag: str = "py-interop"
    ) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "wurk.cli", "-r", "tests.interop.interop_app", "-c", str(concurrency)]
        argv += ["-g", tag, "-t", "3"]
        for queue in queues:
            argv += ["-q", queue]
        env = {**os.environ, "REDIS_URL": self.url, "INTEROP_HEARTBEAT": "1", "INTEROP_POLL": "1"}
        child = self._spawn(argv, "python-worker", cwd=ROOT, env=env)
        self.wait_for_process(child.pid)
        return child

    def start_web(self) -> int:
        """The Sidekiq Web UI under rackup; returns its port once it answers."""
        port = free_port()
        child = self._spawn(
            self._in_chroot("rackup", "-s", "webrick", "-o", "127.0.0.1", "-p", str(port), "config.ru"), "web"
        )

        def answering() -> bool:
            if child.poll() is not None:
                raise AssertionError(f"rackup exited with {child.returncode}; see {self.logs}")
            try:
                return self.get(port, "/")[0] == 200
            except OSError:
                return False

        wait_for(answering, timeout=60, interval=0.2)
        return port

    def ruby(self, script: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> Any:
        """Run ``ruby -e script`` in the chroot; returns the JSON it printed after RESULT_PREFIX."""
        done = subprocess.run(
            self._in_chroot("ruby", "-e", script, env=env), capture_output=True, timeout=timeout, check=False
        )
        out = done.stdout.decode("utf-8", "replace")
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 0, f"ruby failed ({done.returncode}):\n{out}\n{err}"
        for line in out.split("\n"):  # not splitlines(): Ruby leaves U+2028 unescaped in JSON
            if line.startswith(RESULT_PREFIX):
                return json.loads(line[len(RESULT_PREFIX) :])
        return None

    def stop(self, child: subprocess.Popen[bytes], timeout: float = 15) -> int:
        """SIGTERM to that pid, then SIGKILL to it after ``timeout``."""
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return child.returncode

    def close(self) -> None:
        for child in reversed(self._children):
            self.stop(child)
        self._children.clear()
        self.redis.close()
        self.config.reset_redis_pools()

    # -- observations ------------------------------------------------------------

    def process_hash(self, pid: int) -> dict[str, str] | None:
        """The heartbeat hash (with ``identity`` added) of the worker with that pid."""
        for identity in self.redis.smembers("processes"):
            fields = self.redis.hgetall(identity)
            if fields.get("info") and json.loads(fields["info"]).get("pid") == pid:
                return {**fields, "identity": identity}
        return None

    def wait_for_process(self, pid: int, timeout: float = 60) -> dict[str, str]:
        child = next(c for c in self._children if c.pid == pid)

        def registered() -> dict[str, str] | None:
            if child.poll() is not None:
                raise AssertionError(f"worker {pid} exited with {child.returncode}; see {self.logs}")
            return self.process_hash(pid)

        return wait_for(registered, timeout=timeout, interval=0.1)  # type: ignore[return-value]

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.redis.lrange("interop:results", 0, -1)]

    def wait_for_results(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        wait_for(lambda: self.redis.llen("interop:results") >= count, timeout=timeout, interval=0.1)
        return self.results()

    @staticmethod
    def get(port: int, path: str) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            conn.close()


@pytest.fixture
def interop(interop_chroot: Path, tmp_path: Path) -> Iterator[Interop]:
    server = new_server().start()
    try:
        harness = Interop(interop_chroot, server, tmp_path)
        previous = wurk.set_default_config(harness.config)
        try:
            yield harness
        finally:
            wurk.set_default_config(previous)
            harness.close()
    finally:
        server.stop()
