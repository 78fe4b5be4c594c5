"""A cron tick through lost replies, for real (a proxy drops the reply after
the server applied the write): each tick fires exactly once and is recorded
once, whichever of its writes lost its reply."""

from __future__ import annotations

import json

import pytest

from tests.helpers import first_reply_lost
from wurk_cron import LoopSet, Manager
from wurk_cron.poller import Poller

from .conftest import Clock
from .test_poller import MINUTE, T0


@pytest.mark.parametrize("script", ["cron.advance", "core.push", "cron.record"])
def test_each_tick_fires_once_when_a_reply_is_lost(lossy_config, fault_proxy, redis, leader, script):
    clock = Clock(T0)
    poller = Poller(lossy_config, clock=clock)
    loop = Manager(lossy_config).register("* * * * *", "EveryMinute")
    fault_proxy.lose_reply(first_reply_lost(lossy_config, script), times=3)
    for _ in range(3):
        poller.tick()
        clock.advance(MINUTE)
    assert len(fault_proxy.lost) == 3
    jids = [json.loads(raw)["jid"] for raw in reversed(redis.lrange("queue:default", 0, -1))]
    history = LoopSet(lossy_config).fetch(loop.lid).history()
    assert [fired for fired, _ in history] == [int(T0) + 2 * MINUTE, int(T0) + MINUTE, int(T0)]
    assert [jid for _, jid in reversed(history)] == jids
