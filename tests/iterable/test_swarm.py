"""A rolling restart (``USR1`` to a ``wurkswarm`` parent) interrupts an
iterable job like a ``TERM`` does: the old child checkpoints at the next
iteration boundary, and its replacement resumes the walk."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from tests.helpers import ROOT, Subprocess, wait_for
from tests.iterable.conftest import FAST, calls, events, seen
from tests.iterable.iterable_app import Walk

ITEMS = 60_000


@pytest.fixture
def swarm(config, redis_url, tmp_path) -> Iterator[Subprocess]:
    command = [sys.executable, "-m", "wurk_swarm", "-r", "tests.iterable.iterable_app", "-c", "1", "-t", "5"]
    env = {**FAST, "REDIS_URL": redis_url, "WURK_COUNT": "1", "PYTHONPATH": str(ROOT)}
    parent = Subprocess(command, env=env, cwd=ROOT, log=tmp_path / "swarm.log")
    yield parent
    try:
        os.killpg(parent.pid, signal.SIGKILL)  # the parent and any child it forked
    except ProcessLookupError:
        pass
    parent.proc.wait(10)


def test_a_rolling_restart_hands_the_walk_to_the_replacement_child(swarm, redis):
    jid = Walk.perform_async(ITEMS, 0.0001)
    wait_for(lambda: calls(redis) > 5000, timeout=60)
    swarm.signal(signal.SIGUSR1)
    wait_for(lambda: "on_resume" in events(redis), timeout=60)
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    assert events(redis) == ["on_start", "on_stop", "on_resume", "on_complete"]
    assert seen(redis) == ITEMS
    assert calls(redis) == ITEMS  # the old child stopped between two items: nothing ran twice
    assert not redis.exists(f"it-{jid}")
    swarm.signal(signal.SIGTERM)
    assert swarm.wait(30) == 0
