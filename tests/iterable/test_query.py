"""Reading iterable jobs' progress: ``IterableJobQuery`` and ``JobRecord.iterable_state``."""

from __future__ import annotations

import pytest

import wurk
from wurk.api import IterableJobQuery, IterableState, Queue
from wurk.iterable import state


class Paused(wurk.IterableJob):
    def build_enumerator(self, cursor):
        return self.array_enumerator(["a", "b", "c"], cursor=cursor)

    def each_iteration(self, item):
        if item == "c":
            raise wurk.Interrupted()


def test_states_come_back_in_the_order_asked_skipping_jids_without_one(config, redis):
    jids = ["1" * 24, "2" * 24, "3" * 24]
    redis.hset(f"it-{jids[2]}", mapping={"ex": "3", "c": '"page-9"', "rt": "4.25"})
    redis.hset(f"it-{jids[0]}", mapping={"ex": "1", "c": "7", "rt": "0.5", "cancelled": "1796027746"})
    query = IterableJobQuery([jids[2], jids[1], jids[0], jids[2]])
    assert [s.jid for s in query] == [jids[2], jids[0]]
    assert len(query) == 2
    assert query[jids[1]] is None
    assert jids[1] not in query
    third = query[jids[2]]
    assert isinstance(third, IterableState)
    assert (third.executions, third.cursor, third.runtime, third.cancelled) == (3, "page-9", 4.25, None)
    assert query[jids[0]].cancelled == 1796027746
    assert IterableJobQuery(jids[2])[jids[2]] == third
    assert list(IterableJobQuery([])) == []
    with pytest.raises(TypeError, match="needs a jid or a list of jids"):
        IterableJobQuery(None)


def test_a_python_checkpoint_reads_back_through_the_data_api(config, redis):
    jid = Paused.perform_async()
    job = Paused()
    job.jid = jid
    with pytest.raises(wurk.Interrupted):
        job.perform()
    [record] = list(Queue("default"))
    saved = record.iterable_state
    assert (saved.jid, saved.executions, saved.cursor, saved.cancelled) == (jid, 1, 2, None)
    assert saved.runtime >= 0
    assert IterableJobQuery([jid])[jid] == saved
    assert redis.ttl(state.iteration_key(jid)) > state.STATE_TTL - 60
    wurk.Client().cancel(jid)
    assert IterableJobQuery([jid])[jid].cancelled is not None
