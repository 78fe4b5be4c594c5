"""Iterable jobs and poison pills, on real workers killed for real.

A checkpoint that moved the cursor proves the job made progress since its
last crash, so its poison-pill count starts again: a long walk survives any
number of kills of its worker, each landing soon after a start. An item that
ends the process every time makes no progress, so the job is dead after three
crashes, its death handlers run and its ``it-<jid>`` state is gone.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.helpers import wait_for
from tests.iterable.conftest import events, seen
from tests.iterable.iterable_app import ExitsAt, QuickSaves

pytestmark = pytest.mark.timeout(120)

ITEMS = 20_000


def saved_cursor(redis, jid: str) -> int | None:
    raw = redis.hget(f"it-{jid}", "c")
    return None if raw is None else json.loads(raw)


def test_twenty_thousand_items_survive_five_kills_soon_after_each_start(workers, redis):
    jid = QuickSaves.perform_async(ITEMS, 0.0002)
    counter = f"super_fetch:recovered:{jid}"
    for _kill in range(5):
        began = saved_cursor(redis, jid)
        worker = workers.start("-c", "2")

        def progressed(began: int | None = began) -> bool:
            cursor = saved_cursor(redis, jid)
            return cursor is not None and (began is None or cursor > began)

        # Killed within the poison-pill window (10 s) of every start: only the
        # progress saved since the last crash keeps these kills from counting.
        wait_for(progressed, timeout=60, interval=0.02)
        assert not redis.exists(counter)  # the recovery at this boot was counted, and cleared by the checkpoint
        worker.signal(signal.SIGKILL)
        worker.wait(30)
        assert "on_complete" not in events(redis), "the walk must still be running when it is killed"
    last = workers.start("-c", "2")
    wait_for(lambda: "on_complete" in events(redis), timeout=90)
    last.signal(signal.SIGTERM)
    assert last.wait(30) == 0
    assert seen(redis) == ITEMS
    assert events(redis) == ["on_start"] + ["on_resume"] * 5 + ["on_complete"]
    assert not redis.exists(f"it-{jid}")
    assert not redis.exists(counter)
    assert redis.zcard("dead") == 0
    assert redis.llen("deaths") == redis.llen("poisoned") == 0


def test_an_item_that_exits_the_process_makes_the_job_a_poison_pill_and_its_state_goes(workers, redis):
    jid = ExitsAt.perform_async(50, 20)
    for _crash in range(3):
        victim = workers.start("-c", "2")
        assert victim.wait(60) == 3, "item 20 ended the worker"
    assert saved_cursor(redis, jid) == 19  # the first run saved up to the item before
    survivor = workers.start("-c", "2")
    wait_for(lambda: redis.llen("deaths") == 1, timeout=30)
    assert redis.lrange("deaths", 0, -1) == redis.lrange("poisoned", 0, -1) == [jid.encode()]
    assert [json.loads(member)["jid"] for member in redis.zrange("dead", 0, -1)] == [jid]
    assert not redis.exists(f"it-{jid}")
    survivor.signal(signal.SIGTERM)
    assert survivor.wait(30) == 0
    # Each run after the first resumed from the last item saved, and got no further.
    assert [run.decode() for run in redis.lrange("runs", 0, -1)] == [f"{jid}:None", f"{jid}:19", f"{jid}:19"]
    assert seen(redis) == 20
