"""Unique locks through lost replies, for real: a proxy lets the server apply
the lock's script and then resets the client's connection before the reply
reaches it, and the pool sends the call again. A lock taken by the call whose
reply was lost must not make its own job look like a duplicate (the job would
be dropped: lost), and a release sent again must not fail the job (that it
never frees a lock another push took since is the compare-and-delete's own
test, in test_unique.py)."""

from __future__ import annotations

import logging

import pytest

import wurk_unique
from tests.unique.test_unique import Charge
from wurk import api
from wurk.testing.faults import FaultProxy, Matcher
from wurk_unique import UniqueServer

LOGGER = "tests.unique.lost_replies"


def first_reply_lost(config, script: str) -> Matcher:
    """Every call of ``script`` loses its first reply; the call sent again gets through."""
    return FaultProxy.first_sending(FaultProxy.command(b"EVALSHA", config.scripts[script].sha.encode()))


@pytest.fixture
def lossy_unique(unique, lossy_config):
    """Unique jobs on, through the proxy."""
    return lossy_config


def test_a_lock_whose_reply_is_lost_is_recognised_and_the_job_is_pushed(lossy_unique, fault_proxy, redis):
    fault_proxy.lose_reply(first_reply_lost(lossy_unique, "unique.acquire"), times=2)
    jid = Charge.perform_async(1, 1)
    scheduled = Charge.perform_in(3600, 2, 2)
    assert len(fault_proxy.lost) == 2
    assert jid is not None
    assert scheduled is not None
    assert [record.jid for record in api.Queue("default")] == [jid]
    assert [entry.jid for entry in api.ScheduledSet()] == [scheduled]
    assert wurk_unique.locked(Charge, [1, 1]) == jid
    assert wurk_unique.locked(Charge, [2, 2]) == scheduled
    assert Charge.perform_async(1, 1) is None  # a real duplicate is still dropped


def test_a_release_whose_reply_is_lost_releases_once_and_quietly(lossy_unique, fault_proxy, redis, caplog):
    lossy_unique.logger = logging.getLogger(LOGGER)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    jid = Charge.perform_async(3, 3)
    [record] = api.Queue("default")
    middleware = UniqueServer()
    middleware.config = lossy_unique
    fault_proxy.lose_reply(first_reply_lost(lossy_unique, "unique.release"))
    assert middleware.call(Charge(), record.item, "default", lambda: "done") == "done"
    assert len(fault_proxy.lost) == 1
    assert wurk_unique.locked(Charge, [3, 3]) is None
    assert caplog.messages == []
    assert Charge.perform_async(3, 3) not in (None, jid)  # pushable again
