"""Real ``wurk`` worker processes running :mod:`tests.metrics.metrics_app`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, Subprocess

FAST = {
    "TEST_POLL_INTERVAL": "0.2",
    "TEST_HEARTBEAT_INTERVAL": "0.3",
    "TEST_METRICS_FLUSH_INTERVAL": "0.3",
    "TEST_METRICS_ROLLUP_INTERVAL": "0.3",
}


class Workers:
    def __init__(self, redis_url: str, logs: Path) -> None:
        self.redis_url = redis_url
        self.logs = logs
        self.started: list[Subprocess] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> Subprocess:
        command = [sys.executable, "-m", "wurk.cli", "-r", "tests.metrics.metrics_app", *args]
        log = self.logs / f"worker-{len(self.started)}.log"
        worker = Subprocess(command, env={"REDIS_URL": self.redis_url, **FAST, **(env or {})}, cwd=ROOT, log=log)
        self.started.append(worker)
        return worker


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[Workers]:
    pool = Workers(redis_url, tmp_path)
    yield pool
    for worker in pool.started:
        worker.stop(timeout=15)
