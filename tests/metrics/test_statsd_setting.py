"""The ``statsd`` setting: a real statsd client per process, seen from a real UDP listener."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import wurk
from tests.helpers import ROOT, WorkerPool, wait_for
from tests.metrics import statsd_app
from wurk.errors import ConfigurationError

APP = statsd_app.__name__
FINE = "tests.metrics.statsd_app.Fine"


class Listener:
    """A UDP socket on a free port, keeping every metric line it receives
    with the source port of its datagram."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data, (_, port) = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            with self._lock:
                self.lines.extend((line, port) for line in data.decode().split("\n") if line)

    def received(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self.lines)

    def names(self) -> list[str]:
        return [line for line, _ in self.received()]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    udp = Listener()
    yield udp
    udp.close()


def config_file(tmp_path: Path, **statsd: object) -> Path:
    path = tmp_path / "wurk.yml"
    path.write_text(yaml.safe_dump({"queues": ["default"], "statsd": statsd}), encoding="utf-8")
    return path


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, APP, {"TEST_POLL_INTERVAL": "0.2"})
    yield pool
    pool.stop_all()


def without_timing(line: str) -> str:
    """A metric line with a timing's value blanked (durations vary)."""
    return re.sub(r":[0-9.]+\|ms", ":_|ms", line)


def test_a_worker_sends_sidekiq_pros_metric_names_to_the_configured_statsd(config, workers, listener, tmp_path):
    settings = config_file(tmp_path, host="127.0.0.1", port=listener.port, prefix="sidekiq")
    statsd_app.Fine.perform_async(1)
    statsd_app.Broken.perform_async(2)
    statsd_app.Fine.perform_async(3)
    workers.start("-c", "1", "-C", str(settings))
    wait_for(lambda: listener.names().count("sidekiq.jobs.count:1|c") == 3, timeout=30)
    wait_for(lambda: len([name for name in listener.names() if "|ms" in name]) == 3, timeout=10)
    names = [without_timing(name) for name in listener.names()]
    pid = workers.started[0].pid
    assert names.count(f"sidekiq.app.booted.{pid}:1|c") == 1
    assert sorted(name for name in names if ".jobs." in name) == sorted(
        ["sidekiq.jobs.count:1|c"] * 3
        + ["sidekiq.jobs.success:1|c"] * 2
        + ["sidekiq.jobs.failure:1|c"]
        + ["sidekiq.jobs.perform:_|ms"] * 3
    )
    assert len({port for _, port in listener.received()}) == 1  # one client in the process


def test_dogstatsd_sends_each_jobs_tags_and_the_settings_own(config, workers, listener, tmp_path):
    settings = config_file(
        tmp_path, host="127.0.0.1", port=listener.port, prefix="sidekiq", dogstatsd=True, tags=["env:test"]
    )
    statsd_app.Fine.perform_async(1)
    workers.start("-c", "1", "-C", str(settings))
    wait_for(lambda: any("jobs.perform" in name for name in listener.names()), timeout=30)
    tags = f"#worker:{FINE},queue:default,env:test"  # the job's tags, then the setting's
    names = [without_timing(name) for name in listener.names() if ".jobs." in name]
    assert sorted(names) == sorted(
        [f"sidekiq.jobs.count:1|c|{tags}", f"sidekiq.jobs.success:1|c|{tags}", f"sidekiq.jobs.perform:_|ms|{tags}"]
    )


def test_each_swarm_child_sends_from_a_client_of_its_own(config, redis, redis_url, listener, tmp_path):
    """The parent builds its client before it forks; each child lets go of the
    copy it inherits and builds its own, so its datagrams leave from a socket
    of its own."""
    settings = config_file(tmp_path, host="127.0.0.1", port=listener.port, prefix="sidekiq")
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "WURK_COUNT": "2",
        "WURK_LEADER": "false",
        "TEST_POLL_INTERVAL": "0.2",
        "PYTHONPATH": str(ROOT),
    }
    with (tmp_path / "swarm.log").open("wb") as log:
        swarm = subprocess.Popen(
            [sys.executable, "-m", "wurk_swarm", "-r", APP, "-c", "1", "-C", str(settings)],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        booted = f"sidekiq.app.booted.{swarm.pid}:1|c"  # the parent, before it forks
        wait_for(lambda: booted in listener.names(), timeout=60)
        [parent_port] = [port for line, port in listener.received() if line == booted]

        def job_ports() -> set[int]:
            return {port for line, port in listener.received() if ".jobs." in line}

        def both_children_sent() -> bool:
            statsd_app.Fine.perform_bulk([[n] for n in range(20)])
            return len(job_ports()) == 2

        # Jobs until metrics came from two sockets: the two children's.
        wait_for(both_children_sent, timeout=60, interval=0.5)
    finally:
        os.killpg(swarm.pid, signal.SIGTERM)
        swarm.wait(30)
    assert parent_port not in job_ports()
    assert not any(line.startswith("sidekiq.app.booted") and port != parent_port for line, port in listener.received())


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("localhost:8125", "statsd must be a mapping of host, port, prefix, dogstatsd and tags"),
        ({"hots": "x"}, r"statsd has unknown keys \['hots'\]"),
        ({"port": 0}, "statsd.port must be a port number from 1 to 65535, got 0"),
        ({"port": "8125"}, "statsd.port must be a port number"),
        ({"host": ""}, "statsd.host must be a host name or address"),
        ({"prefix": ""}, "statsd.prefix must be a non-empty string or null"),
        ({"dogstatsd": "yes"}, "statsd.dogstatsd must be true or false"),
        ({"tags": ["env:prod"]}, r"statsd.tags needs dogstatsd: true"),
        ({"dogstatsd": True, "tags": "env:prod"}, "statsd.tags must be a list of strings"),
    ],
)
def test_a_bad_statsd_setting_is_refused_naming_what_is_wrong(value, message):
    with pytest.raises(ConfigurationError, match=message):
        wurk.Config()["statsd"] = value


def test_the_setting_is_stored_with_every_key_and_builds_a_client_once(listener):
    config = wurk.Config()
    config["statsd"] = {"host": "127.0.0.1", "port": listener.port}
    assert config["statsd"] == {
        "host": "127.0.0.1",
        "port": listener.port,
        "prefix": None,
        "dogstatsd": False,
        "tags": [],
    }
    client = config.statsd
    assert type(client).__name__ == "StatsClient"
    assert config.statsd is client
    try:
        config.statsd_increment("jobs.retried")
        wait_for(lambda: listener.names() == ["jobs.retried:1|c"], timeout=10)
    finally:
        client.close()


def test_a_client_that_cannot_be_built_is_reported_once_and_jobs_go_on():
    config = wurk.Config()
    reported = []
    config.error_handlers.append(lambda exc, context, cfg: reported.append(context["context"]))
    config["statsd"] = {"host": "no-such-host.invalid", "port": 8125}
    assert config.statsd is None
    assert config.statsd is None
    assert reported == ["statsd client: this process sends no statsd metrics"]
    chain = wurk.Chain(config)
    chain.add(wurk.metrics.Statsd)
    assert chain.invoke(None, {"class": "app.Report", "jid": "a" * 24}, "default", final=lambda: "ran") == "ran"


def test_a_dogstatsd_setting_sends_keyword_tags_as_name_value_pairs(listener):
    config = wurk.Config()
    config["statsd"] = {"host": "127.0.0.1", "port": listener.port, "dogstatsd": True, "tags": ["env:test"]}
    try:
        config.statsd_increment("jobs.poison", queue="critical")
        wait_for(lambda: listener.names() == ["jobs.poison:1|c|#queue:critical,env:test"], timeout=10)
    finally:
        config.statsd.close_socket()


def test_a_client_factory_takes_precedence_over_the_setting(listener):
    config = wurk.Config()
    config["statsd"] = {"host": "127.0.0.1", "port": listener.port}
    sent = []

    class Plain:
        def incr(self, metric):
            sent.append(metric)

    config.dogstatsd = Plain
    config.statsd_increment("jobs.retried")
    assert sent == ["jobs.retried"]
    assert isinstance(config.statsd, Plain)  # the setting's client was never built
