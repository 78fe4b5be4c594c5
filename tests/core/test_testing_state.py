"""wurk.testing's state object and the flag the client reads on every push.

``testing.state.active`` must be true whenever a push somewhere could be
intercepted (otherwise that push would reach Redis), and false when testing is
off (otherwise production pays for the context-variable read). Threads, blocks
in sequence, refused nested blocks and the process-wide mode all move it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

import wurk
from wurk import testing
from wurk.testing import TestModeAlreadySetError


class StateJob(wurk.Job):
    def perform(self, value: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def clean(config: wurk.Config) -> wurk.Config:
    """The real-server config; the config fixture puts the mode back to disable."""
    assert not testing.state.active, "a previous test left a testing mode on"
    return config


def queued(redis: Any) -> list[Any]:
    return [json.loads(raw)["args"] for raw in redis.lrange("queue:default", 0, -1)]


def in_thread(target: Callable[[], Any]) -> Any:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(target()))
    thread.start()
    thread.join()
    return result[0]


# -- the module's names are the state's members -------------------------------------


def test_the_public_names_are_the_states_members():
    assert testing.queues is testing.state.queues
    assert testing.server_middleware is testing.state.server_middleware
    assert isinstance(testing.state, testing.TestingState)


# -- testing off ----------------------------------------------------------------------


def test_with_testing_off_a_push_reads_only_the_flag_and_reaches_redis(redis, monkeypatch):
    def refuse(*args: Any) -> None:
        raise AssertionError("the testing path was taken with testing off")

    monkeypatch.setattr(testing.state, "enabled", refuse)
    monkeypatch.setattr(testing, "intercept", refuse)
    StateJob.perform_async(1)
    StateJob.perform_bulk([[2], [3]])
    assert sorted(queued(redis)) == [[1], [2], [3]]


def test_a_disable_block_leaves_the_flag_down(redis):
    with testing.disable():
        assert not testing.state.active
        StateJob.perform_async(1)
    assert queued(redis) == [[1]]


# -- blocks and threads ---------------------------------------------------------------


def test_a_block_is_seen_in_its_thread_and_not_in_another(redis):
    with testing.fake():
        assert testing.state.active
        StateJob.perform_async("here")
        assert in_thread(testing.mode) == "disable"
        in_thread(lambda: StateJob.perform_async("there"))
    assert not testing.state.active
    assert [job["args"] for job in StateJob.jobs] == [["here"]]
    assert queued(redis) == [["there"]]


def test_a_block_in_another_thread_raises_the_flag_but_not_this_threads_mode(redis):
    opened, release = threading.Event(), threading.Event()

    def worker() -> None:
        with testing.fake():
            StateJob.perform_async("worker")
            opened.set()
            release.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert opened.wait(5)
        assert testing.state.active
        assert testing.mode() == "disable"
        StateJob.perform_async("main")
    finally:
        release.set()
        thread.join()
    assert not testing.state.active
    assert queued(redis) == [["main"]]
    assert [job["args"] for job in StateJob.jobs] == [["worker"]]


def test_overlapping_blocks_in_two_threads_keep_the_flag_up_until_the_last_ends():
    first_open, second_open = threading.Event(), threading.Event()
    first_done, release_second = threading.Event(), threading.Event()

    def first() -> None:
        with testing.inline():
            first_open.set()
            second_open.wait(5)
        first_done.set()

    def second() -> None:
        first_open.wait(5)
        with testing.fake():
            second_open.set()
            release_second.wait(5)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    try:
        assert first_done.wait(5)
        assert testing.state.active  # the second block is still open
    finally:
        release_second.set()
        for thread in threads:
            thread.join()
    assert not testing.state.active


def test_sequential_blocks_each_reset_the_flag():
    for setter in (testing.fake, testing.inline, testing.fake):
        with setter():
            assert testing.state.active
        assert not testing.state.active


def test_a_refused_nested_block_leaves_the_outer_one_counted():
    with testing.fake():
        with pytest.raises(TestModeAlreadySetError):
            testing.inline().__enter__()
        assert testing.state.active
        assert testing.is_fake()
    assert not testing.state.active


def test_a_block_left_by_an_exception_resets_the_flag():
    with pytest.raises(ZeroDivisionError), testing.inline():
        raise ZeroDivisionError
    assert not testing.state.active
    assert testing.mode() == "disable"


# -- the process-wide mode --------------------------------------------------------------


def test_the_process_wide_mode_raises_and_lowers_the_flag():
    testing.fake()
    assert testing.state.active
    testing.inline()
    assert testing.state.active
    testing.disable()
    assert not testing.state.active


def test_a_block_inside_a_process_wide_mode_leaves_it_up():
    testing.fake()
    with testing.inline():
        assert testing.state.active
    assert testing.state.active
    assert testing.is_fake()
    testing.disable()
    assert not testing.state.active


def test_disabling_process_wide_inside_a_block_waits_for_the_block():
    testing.fake()
    with testing.inline():
        testing.disable()
        assert testing.state.active
        assert testing.is_inline()
    assert not testing.state.active


def test_the_pytest_fixture_raises_the_flag_for_its_test(wurk_fake):
    assert testing.state.active
    assert testing.is_fake()


# -- contexts copied inside a block -------------------------------------------------------


def test_a_task_that_outlives_its_block_gets_the_process_wide_mode():
    async def main() -> tuple[str, str]:
        release = asyncio.Event()

        async def later() -> str:
            await release.wait()
            return testing.mode()

        with testing.fake():
            task = asyncio.create_task(later())
            inside = await asyncio.create_task(asyncio.sleep(0, result=testing.mode()))
        release.set()
        return inside, await task

    assert asyncio.run(main()) == ("fake", "disable")
    assert not testing.state.active


def test_a_context_copied_inside_a_closed_block_stays_closed_while_others_open():
    with testing.fake():
        copied = contextvars.copy_context()
    opened, release = threading.Event(), threading.Event()

    def other() -> None:
        with testing.inline():
            opened.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert opened.wait(5)
        assert testing.state.active
        assert copied.run(testing.mode) == "disable"
        assert copied.run(reopen) == "fake"  # not refused: the copied block is over
    finally:
        release.set()
        thread.join()


def reopen() -> str:
    with testing.fake():
        return testing.mode()
