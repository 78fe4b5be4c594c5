"""The health check's port sharing, with real worker processes and real sockets.

Several ``wurk`` processes configured with ``share=True`` take turns on one
probe port: the first serves, the others wait and retry, and when the owner
dies (``kill -9``, no goodbye) a survivor serves within the retry period. A
process without sharing refuses to boot on a port in use. A takeover is not
held up by the TIME_WAIT connections the dead owner answered.
"""

from __future__ import annotations

import errno
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import wurk
from tests.helpers import Subprocess, WorkerPool, logged_at, wait_for
from wurk.redis.servers import free_port
from wurk.server.health import SHARE_RETRY, HealthCheck, share_port
from wurk.server.launcher import Launcher

WAITING = "is served by another process"
TOOK_OVER = "health check now serving"


@pytest.fixture
def probed(config, redis_url, tmp_path):
    """Worker processes running ``tests.worker.health_app`` on one probe port."""
    port = free_port()
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.health_app", {"TEST_HEALTH_PORT": str(port)})
    yield pool, port
    pool.stop_all()


def live(port: int) -> int | None:
    """The status ``/live`` answers with, or ``None`` when nobody listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)
    except (urllib.error.URLError, ConnectionError):
        return None


def log_of(worker: Subprocess) -> str:
    assert worker.log is not None
    return Path(worker.log).read_text("utf-8", "replace")


def test_a_survivor_takes_over_the_shared_port_after_a_kill(probed):
    pool, port = probed
    shared = {"TEST_HEALTH_SHARE": "1", "TEST_HEALTH_RETRY": "0.3"}
    owner = pool.start(env=shared)
    wait_for(lambda: live(port) == 200, timeout=20)
    waiting = [pool.start(env=shared), pool.start(env=shared)]
    for worker in waiting:
        wait_for(lambda worker=worker: WAITING in log_of(worker), timeout=20)
        assert "trying every 0.3s" in log_of(worker)
    for _ in range(5):  # answered probes leave TIME_WAIT sockets on the owner's side
        assert probe_until_closed(port).startswith(b"HTTP/1.0 200")

    owner.signal(signal.SIGKILL)
    owner.wait()
    killed = time.time()
    wait_for(lambda: live(port) == 200, timeout=30)

    heir = wait_for(lambda: next((w for w in waiting if TOOK_OVER in log_of(w)), None), timeout=5)
    # From the kill to the heir's own line, so the test's polling is not in
    # the measure: the next retry of 0.3 s takes the port, and the bound, the
    # default period, leaves seconds for a loaded machine to run the heir.
    assert logged_at(log_of(heir), TOOK_OVER) - killed < SHARE_RETRY
    other = next(worker for worker in waiting if worker is not heir)
    assert TOOK_OVER not in log_of(other)
    assert log_of(other).count(WAITING) == 1  # one line while it waits, not one per retry
    # A process still waiting for the port stops as promptly as any other.
    other.signal(signal.SIGTERM)
    assert other.wait(timeout=10) == 0
    assert live(port) == 200


def test_the_default_retry_is_five_seconds(probed):
    pool, port = probed
    owner = pool.start(env={"TEST_HEALTH_SHARE": "1"})
    wait_for(lambda: live(port) == 200, timeout=20)
    heir = pool.start(env={"TEST_HEALTH_SHARE": "1"})
    wait_for(lambda: WAITING in log_of(heir), timeout=20)
    assert f"trying every {SHARE_RETRY}s" in log_of(heir)
    assert SHARE_RETRY == 5

    owner.signal(signal.SIGKILL)
    owner.wait()
    killed = time.time()
    wait_for(lambda: live(port) == 200, timeout=SHARE_RETRY + 30)
    # Within one period of the kill, as the heir's own log tells it, with
    # seconds to spare for a loaded machine.
    assert logged_at(log_of(heir), TOOK_OVER) - killed < SHARE_RETRY + 3


def test_without_sharing_a_port_in_use_fails_the_boot(probed):
    pool, port = probed
    pool.start()
    wait_for(lambda: live(port) == 200, timeout=20)
    second = pool.start()
    assert second.wait(timeout=20) == 2
    output = log_of(second)
    assert f"health check port {port} on 127.0.0.1 is in use" in output
    assert "share=True" in output
    assert live(port) == 200  # the first one is undisturbed


def test_share_port_switches_a_configured_check_to_sharing():
    config = wurk.Config()
    assert share_port(config) is False  # no health check: nothing to share
    assert "health_check_options" not in config
    config.health_check(7433, bind="127.0.0.1", ready_window=12)
    assert share_port(config) is True
    assert config["health_check_options"] == {
        "port": 7433,
        "bind": "127.0.0.1",
        "ready_window": 12,
        "share": True,
        "retry": SHARE_RETRY,
    }
    share_port(config, retry=1.5)
    assert config.dig("health_check_options", "retry") == 1.5


def probe_until_closed(port: int) -> bytes:
    """One ``/live`` probe that reads until the server closes the connection,
    so the server closes first and its side keeps the TIME_WAIT socket (as
    with a kubelet's probe, which asks the server to close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(b"GET /live HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
    return answer


def time_wait_on(port: int) -> bool:
    """Whether a TIME_WAIT socket whose local port is ``port`` exists (Linux's /proc view)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = [line.split() for line in Path(table).read_text().splitlines()[1:]]
        except OSError:
            continue
        # Columns: sl, local address, remote address, state (06 is TIME_WAIT).
        if any(row[1].rsplit(":", 1)[1] == f"{port:04X}" and row[3] == "06" for row in rows):
            return True
    return False


def test_time_wait_connections_do_not_block_a_new_owner(config):
    port = free_port()
    config.health_check(port=port, bind="127.0.0.1")
    first = HealthCheck(Launcher(config).runtime, port=port, bind="127.0.0.1")
    first.start()
    try:
        for _ in range(3):
            assert probe_until_closed(port).startswith(b"HTTP/1.0 200")
    finally:
        first.stop()
    if Path("/proc/net/tcp").exists():
        assert time_wait_on(port), "the answered probes should have left TIME_WAIT sockets"
        # Without SO_REUSEADDR the port would still be refused.
        plain = socket.socket()
        try:
            with pytest.raises(OSError) as refused:
                plain.bind(("127.0.0.1", port))
            assert refused.value.errno == errno.EADDRINUSE
        finally:
            plain.close()
    second = HealthCheck(Launcher(config).runtime, port=port, bind="127.0.0.1")
    assert second.serving
    assert second.port == port
    second.finish()


class CountedCheck(HealthCheck):
    """The real health check, counting its attempts to take the port (the
    first is made at construction)."""

    attempts = 0

    def bind(self) -> bool:
        self.attempts += 1
        return super().bind()


def test_a_shared_check_that_finds_the_port_taken_waits_instead_of_failing(config):
    port = free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        with pytest.raises(wurk.ConfigurationError, match="in use"):
            HealthCheck(Launcher(config).runtime, port=port, bind="127.0.0.1")
        check = CountedCheck(Launcher(config).runtime, port=port, bind="127.0.0.1", share=True, retry=0.1)
        assert not check.serving
        assert check.port == port
        assert check.retry == 0.1
        check.start()
        # Three retries counted, not 0.3 s slept: each found the port taken.
        wait_for(lambda: check.attempts >= 4, timeout=30)
        assert not check.serving
    finally:
        holder.close()
    try:
        wait_for(lambda: check.serving, timeout=5)
        wait_for(lambda: live(port) == 200, timeout=5)
    finally:
        assert check.stop()
    assert live(port) is None


def test_the_default_retry_reaches_the_component(config):
    config.health_check(port=0, bind="127.0.0.1", share=True)
    check = HealthCheck(Launcher(config).runtime, **config["health_check_options"])
    try:
        assert check.retry == SHARE_RETRY == 5.0
        assert check.share
        assert check.serving
    finally:
        check.finish()
