"""The transaction-aware client: writes wait for the commit, jids do not."""

from __future__ import annotations

import json

import pytest

import wurk
from wurk.client.payload import InvalidJobError
from wurk.client.transactional import transactional_push


class OrderJob(wurk.Job):
    def perform(self, order_id):
        pass


class Transaction:
    """A stand-in for a database transaction's commit hook (Django's on_commit
    has the same shape): callbacks run on commit, vanish on rollback, and run
    at once when no transaction is open."""

    def __init__(self):
        self.open = False
        self.callbacks = []

    def on_commit(self, callback):
        if self.open:
            self.callbacks.append(callback)
        else:
            callback()

    def commit(self):
        self.open = False
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()

    def rollback(self):
        self.open = False
        self.callbacks = []


def queued(redis):
    return [json.loads(item) for item in reversed(redis.lrange("queue:default", 0, -1))]


def test_the_push_waits_for_the_commit_and_keeps_its_jid(config, redis):
    tx = Transaction()
    transactional_push(config, tx.on_commit)
    tx.open = True
    jid = OrderJob.perform_async(1)
    assert len(jid) == 24
    assert redis.llen("queue:default") == 0
    tx.commit()
    assert [(job["jid"], job["args"]) for job in queued(redis)] == [(jid, [1])]


def test_a_rollback_drops_the_push(config, redis):
    tx = Transaction()
    transactional_push(config, tx.on_commit)
    tx.open = True
    OrderJob.perform_async(2)
    tx.rollback()
    assert redis.llen("queue:default") == 0


def test_outside_a_transaction_it_pushes_at_once(config, redis):
    tx = Transaction()
    transactional_push(config, tx.on_commit)
    jid = OrderJob.perform_in(60, 3)
    assert redis.zcard("schedule") == 1
    assert json.loads(redis.zrange("schedule", 0, -1)[0])["jid"] == jid


def test_bulk_and_opted_out_pushes_are_never_deferred(config, redis):
    # Pushes whose writer is not replayable are not deferred either: see
    # tests/worker/test_push_writers.py.
    tx = Transaction()
    transactional_push(config, tx.on_commit)
    tx.open = True
    OrderJob.perform_bulk([[4], [5]])
    wurk.Client().push({"class": OrderJob, "args": [6]})
    OrderJob.set(client_class=wurk.Client).perform_async(7)
    assert [job["args"] for job in queued(redis)] == [[4], [5], [6], [7]]
    assert tx.callbacks == []


def test_bad_input_fails_inside_the_transaction(config, redis):
    tx = Transaction()
    transactional_push(config, tx.on_commit)
    tx.open = True
    with pytest.raises(InvalidJobError):
        wurk.client.transactional.TransactionAwareClient(config, defer=tx.on_commit).push(
            {"class": OrderJob, "args": "x"}
        )
    with pytest.raises(InvalidJobError, match="not native JSON"):
        OrderJob.perform_async(object())
    assert tx.callbacks == []
