"""The run loop of ``wurk.IterableJob`` in this process, on the real test server."""

from __future__ import annotations

import contextlib
import json
from typing import ClassVar

import pytest

import wurk
from wurk import testing
from wurk.iterable import state
from wurk.iterable.job import SYNC_ONLY
from wurk.server.asyncjobs import is_async_job


class Walk(wurk.IterableJob):
    """Walks ``items``; ``fail_at`` raises there, ``stop_at`` raises
    ``Interrupted`` there, ``cancel_at`` cancels there."""

    log: ClassVar[list] = []

    def build_enumerator(self, items, options, cursor):
        self.log.append(("build", cursor))
        return self.array_enumerator(items, cursor=cursor)

    def each_iteration(self, item, items, options):
        if item == options.get("fail_at"):
            raise RuntimeError(f"item {item} failed")
        if item == options.get("stop_at"):
            raise wurk.Interrupted()
        self.log.append(item)
        if item == options.get("cancel_at"):
            self.cancel()

    def on_start(self):
        self.log.append("on_start")

    def on_resume(self):
        self.log.append("on_resume")

    def on_stop(self):
        self.log.append("on_stop")

    def on_cancel(self):
        self.log.append("on_cancel")

    def on_complete(self):
        self.log.append(("on_complete", self.cursor))


@pytest.fixture(autouse=True)
def fresh_log():
    Walk.log = []


def run(job_class, *args, jid=None):
    job = job_class()
    job.jid = jid
    job.perform(*args)
    return job


JID = "a1" * 12


def test_a_run_without_a_jid_stays_in_memory(config, redis):
    run(Walk, [10, 11, 12], {})
    assert Walk.log == ["on_start", ("build", None), 10, 11, 12, ("on_complete", 2)]
    assert redis.dbsize() == 0


def test_defining_perform_fails_at_class_creation():
    with pytest.raises(TypeError, match="Bad is an IterableJob; override each_iteration instead of perform"):

        class Bad(wurk.IterableJob):
            def perform(self, *args):
                pass


def test_an_async_each_iteration_fails_at_class_creation():
    with pytest.raises(TypeError, match=r"AsyncWalk\.each_iteration is async"):

        class AsyncWalk(wurk.IterableJob):
            async def each_iteration(self, item):
                pass


@pytest.mark.parametrize("name", SYNC_ONLY)
def test_every_iteration_method_is_refused_as_a_coroutine_or_an_async_generator(name):
    # So no iterable job reaches the event loop: its perform stays the plain
    # def that walks on a processor thread.
    async def coroutine(self, *args, **kwargs):
        pass

    async def generator(self, *args, **kwargs):
        yield

    for method in (coroutine, generator):
        with pytest.raises(TypeError, match=rf"AsyncWalk\.{name} is async"):
            type("AsyncWalk", (wurk.IterableJob,), {name: method})
    assert not is_async_job(type("PlainWalk", (wurk.IterableJob,), {}))


def test_a_missing_method_says_which():
    class Half(wurk.IterableJob):
        def build_enumerator(self, cursor):
            return [(1, 0)]

    with pytest.raises(NotImplementedError, match="Half must implement each_iteration"):
        run(Half)


def test_pairs_are_checked():
    class Flat(wurk.IterableJob):
        def build_enumerator(self, cursor):
            return [1, 2]

        def each_iteration(self, item):
            pass

    with pytest.raises(TypeError, match=r"Flat \(no jid\): build_enumerator must yield \(item, cursor\) pairs, got 1"):
        run(Flat)


def test_none_from_build_enumerator_skips_the_run(config, redis):
    class Nothing(wurk.IterableJob):
        def build_enumerator(self, cursor):
            return None

        def each_iteration(self, item):
            raise AssertionError("never")

        def on_complete(self):
            raise AssertionError("never")

    run(Nothing, jid=JID)


def test_around_iteration_as_a_generator_or_a_context_manager():
    seen = []

    class Generator(Walk):
        def around_iteration(self):
            seen.append("enter")
            try:
                yield
            finally:
                seen.append("exit")

    class Managed(Walk):
        @contextlib.contextmanager
        def around_iteration(self):
            seen.append("enter")
            yield
            seen.append("exit")

    for job_class in (Generator, Managed):
        seen.clear()
        Walk.log = []
        run(job_class, [1, 2], {})
        assert seen == ["enter", "exit", "enter", "exit"]
        assert Walk.log[2:4] == [1, 2]
    seen.clear()
    with pytest.raises(RuntimeError, match="item 2 failed"):
        run(Generator, [1, 2], {"fail_at": 2})
    assert seen == ["enter", "exit", "enter", "exit"]  # the hook saw the error go by


def test_a_cursor_that_json_cannot_keep_fails_at_the_checkpoint_naming_the_job(config, redis):
    class Odd(wurk.IterableJob):
        def build_enumerator(self, cursor):
            return [("a", {1: "int keys come back as str"})]

        def each_iteration(self, item):
            pass

    with pytest.raises(wurk.CursorError, match=rf"Odd \(jid {JID}\): the cursor .* does not survive a JSON round trip"):
        run(Odd, jid=JID)

    class Opaque(Odd):
        def build_enumerator(self, cursor):
            return [("a", object())]

    with pytest.raises(wurk.CursorError, match=r"Opaque \(no jid\): the cursor .* cannot be saved as JSON"):
        run(Opaque)


def test_a_state_hash_written_the_way_sidekiq_writes_it_resumes(config, redis):
    # Sidekiq 8 stores the cursor of the item it was about to run, and starts there.
    redis.hset(f"it-{JID}", mapping={"ex": "1", "c": "3", "rt": "1.5"})
    with pytest.raises(wurk.Interrupted):
        run(Walk, [0, 1, 2, 3, 4, 5, 6], {"stop_at": 5}, jid=JID)
    assert Walk.log == ["on_resume", ("build", 3), 3, 4, "on_stop"]
    saved = {name.decode(): value.decode() for name, value in redis.hgetall(f"it-{JID}").items()}
    # What a Ruby worker reads back with to_i, JSON.parse and to_f.
    assert int(saved["ex"]) == 2
    assert json.loads(saved["c"]) == 5  # item 5 did not finish: the next run starts with it
    assert float(saved["rt"]) >= 1.5
    assert 29 * 86400 < redis.ttl(f"it-{JID}") <= state.STATE_TTL
    Walk.log = []
    run(Walk, [0, 1, 2, 3, 4, 5, 6], {}, jid=JID)
    assert Walk.log == ["on_resume", ("build", 5), 5, 6, ("on_complete", 6)]
    assert not redis.exists(f"it-{JID}")


def test_a_failed_run_leaves_the_last_timed_checkpoint_for_its_retry(config, redis, monkeypatch):
    monkeypatch.setattr(Walk, "STATE_FLUSH_INTERVAL", 0.0)  # a checkpoint after every item
    with pytest.raises(RuntimeError, match="item 4 failed"):
        run(Walk, [1, 2, 3, 4, 5], {"fail_at": 4}, jid=JID)
    saved = redis.hgetall(f"it-{JID}")
    assert json.loads(saved[b"c"]) == 2  # index of item 3, the last one done: a retry runs it again
    assert saved[b"ex"] == b"1"
    Walk.log = []
    run(Walk, [1, 2, 3, 4, 5], {}, jid=JID)
    assert Walk.log == ["on_resume", ("build", 2), 3, 4, 5, ("on_complete", 4)]


def test_a_checkpoint_past_where_the_run_began_clears_the_poison_pill_count(config, redis, monkeypatch):
    monkeypatch.setattr(Walk, "STATE_FLUSH_INTERVAL", 0.0)  # a checkpoint after every item
    counter = f"super_fetch:recovered:{JID}"
    redis.set(counter, 2)
    redis.hset(f"it-{JID}", mapping={"ex": 1, "c": "2", "rt": 0.5})
    # Resumed at index 2 (inclusive), failing at the next item: the checkpoint
    # after index 2 saves the cursor the run began from, no progress.
    with pytest.raises(RuntimeError, match="item 4 failed"):
        run(Walk, [1, 2, 3, 4, 5], {"fail_at": 4}, jid=JID)
    assert Walk.log[-1] == 3
    assert redis.get(counter) == b"2"
    # The same start, getting one item further: progress, the count is gone.
    with pytest.raises(RuntimeError, match="item 5 failed"):
        run(Walk, [1, 2, 3, 4, 5], {"fail_at": 5}, jid=JID)
    assert json.loads(redis.hget(f"it-{JID}", "c")) == 3
    assert not redis.exists(counter)


def test_cancel_from_inside_stops_before_the_next_item(config, redis):
    run(Walk, [1, 2, 3, 4], {"cancel_at": 2}, jid=JID)
    assert Walk.log == ["on_start", ("build", None), 1, 2, "on_cancel", "on_stop", ("on_complete", 1)]
    assert not redis.exists(f"it-{JID}")
    Walk.log = []
    run(Walk, [1, 2, 3, 4], {"cancel_at": 3})  # in memory, the same
    assert Walk.log[-5:] == [2, 3, "on_cancel", "on_stop", ("on_complete", 2)]


def test_a_job_cancelled_before_it_runs_runs_no_iteration(config, redis):
    stamp = wurk.Client().cancel(JID)
    assert wurk.Client().cancel(JID) == stamp  # the first cancellation stands
    assert 0 < redis.ttl(f"it-{JID}") <= state.CANCELLATION_PERIOD
    run(Walk, [1, 2, 3], {}, jid=JID)
    assert Walk.log == ["on_start", ("build", None), "on_cancel", "on_stop", ("on_complete", None)]
    assert not redis.exists(f"it-{JID}")


def test_cancel_needs_a_jid(config):
    with pytest.raises(ValueError, match="cancel needs a job's jid"):
        wurk.Client().cancel("")


class Counted(wurk.IterableJob):
    done: ClassVar[list] = []

    def build_enumerator(self, count, cursor):
        return self.array_enumerator(list(range(count)), cursor=cursor)

    def each_iteration(self, item, count):
        self.done.append(item)


def test_fake_mode_and_drain_run_in_memory(config, redis):
    Counted.done = []
    with testing.fake():
        Counted.perform_async(3)
        assert len(Counted.jobs) == 1
        assert Counted.drain() == 1
    assert Counted.done == [0, 1, 2]
    assert not list(redis.scan_iter("it-*"))


def test_inline_mode_runs_at_once(config, redis):
    Counted.done = []
    with testing.inline():
        Counted.perform_async(2)
    assert Counted.done == [0, 1]
    assert not list(redis.scan_iter("it-*"))


def test_interrupted_is_false_outside_a_worker():
    assert Walk().interrupted() is False
    assert wurk.IterableJob.Interrupted is wurk.Interrupted
    assert wurk.IterableJob.STATE_FLUSH_INTERVAL == 5
