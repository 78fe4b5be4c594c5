"""wurk.testing, point by point after the guides' "Testing jobs" page: the
three modes, block versus process-wide form, the fake store and its helpers,
scheduled jobs, what inline execution does and does not do, and async jobs.

Everything runs against the real test server: where a mode must *not* touch
Redis, the test looks at Redis and finds it empty.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

import wurk
from wurk import testing
from wurk.testing import EmptyQueueError, TestModeAlreadySetError

events: list[Any] = []
THIS = __name__


# -- jobs (module level: a job's wire name is its importable path) -------------


class OrderJob(wurk.Job):
    def perform(self, order_id):
        events.append(("order", order_id))
        return order_id * 10


class CriticalJob(wurk.Job, queue="critical"):
    def perform(self, value):
        events.append(("critical", value))


class ReminderJob(wurk.Job):
    def perform(self, lead_id):
        events.append(("reminder", lead_id))


class WhereJob(wurk.Job):
    def perform(self):
        events.append(("where", threading.get_ident()))


class CountdownJob(wurk.Job):
    """Pushes its successor while it runs, until zero."""

    def perform(self, n):
        events.append(("countdown", n))
        if n > 0:
            CountdownJob.perform_async(n - 1)


class ParentJob(wurk.Job):
    def perform(self, n):
        events.append(("parent", n))
        ChildJob.perform_async(n)


class ChildJob(wurk.Job):
    def perform(self, n):
        events.append(("child", n))


class IdentityJob(wurk.Job):
    def perform(self):
        events.append(("identity", self.jid, getattr(self, "bid", None)))


class StampReaderJob(wurk.Job):
    def perform(self, value):
        events.append(("stamp-reader", value))


class FailingJob(wurk.Job, retry=3):
    def perform(self, message):
        raise ValueError(message)

    @classmethod
    def retry_in(cls, count, exc, job):
        events.append(("retry_in", count))
        return 1

    @classmethod
    def retries_exhausted(cls, job, exc):
        events.append(("retries_exhausted", job["jid"]))


class ExecuteJob(wurk.Job):
    def perform(self, value):
        events.append(("perform", value))
        return value

    @classmethod
    def execute_job(cls, instance, args):
        events.append(("execute_job", type(instance).__name__, args))
        return super().execute_job(instance, args)


class LegacyNamedJob(wurk.Job):
    wire_name = "LegacyNamed"

    def perform(self, value):
        events.append(("legacy", value))


class LockProbeJob(wurk.Job):
    """While it runs, another thread reads and writes the fake store."""

    def perform(self):
        def other_thread():
            with testing.fake():
                OrderJob.perform_async(99)
            events.append(("store-size-seen", len(testing.queues)))

        helper = threading.Thread(target=other_thread)
        helper.start()
        helper.join(timeout=60)  # a store lock held by the drain would hang it
        events.append(("helper-finished", not helper.is_alive()))


class AsyncJob(wurk.Job):
    async def perform(self, value):
        await asyncio.sleep(0)
        events.append(("async", value))
        return value + 1


class AsyncParentJob(wurk.Job):
    async def perform(self, value):
        await asyncio.sleep(0)
        events.append(("async-parent", value))
        AsyncJob.perform_async(value)  # pushed from inside a running event loop


class AsyncFailingJob(wurk.Job):
    async def perform(self, message):
        await asyncio.sleep(0)
        raise KeyError(message)


@wurk.job(queue="mail")
async def send_welcome(user_id):
    await asyncio.sleep(0)
    events.append(("welcome", user_id))
    return f"welcomed {user_id}"


@wurk.job
def plain_function(value):
    events.append(("plain", value))
    return value


# -- middleware ----------------------------------------------------------------


class StampMiddleware(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        job["stamp"] = "from-client-middleware"
        return call_next()


class HaltMiddleware(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if job["args"] == ["halt"]:
            return False
        return call_next()


class RecordingServerMiddleware(wurk.ServerMiddleware):
    def call(self, job_instance, job, queue, call_next):
        events.append(("server-mw", type(job_instance).__name__, queue, job.get("stamp"), self.config is not None))
        return call_next()


class SkippingServerMiddleware(wurk.ServerMiddleware):
    def call(self, job_instance, job, queue, call_next):
        events.append(("skipped", job["args"]))


# -- fixtures and helpers ------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean(config: wurk.Config) -> Iterator[wurk.Config]:
    """Every test here has the real-server config; the record and the testing
    chain are reset around it (the config fixture resets mode and store)."""
    events.clear()
    saved = testing.server_middleware.entries
    yield config
    events.clear()
    testing.server_middleware.clear()
    for entry in saved:
        testing.server_middleware.add(entry.klass, *entry.args, **entry.kwargs)


def mode_in_new_thread() -> str:
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(testing.mode()))
    thread.start()
    thread.join()
    return seen[0]


def redis_queue(redis, queue: str = "default") -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in redis.lrange(f"queue:{queue}", 0, -1)]


def wire(job_class: type) -> str:
    return f"{THIS}.{job_class.__qualname__}"


# -- 1. the three modes -----------------------------------------------------------------


def test_disable_is_the_default_and_pushes_to_redis(redis):
    assert testing.mode() == "disable"
    jid = OrderJob.perform_async(1)
    [payload] = redis_queue(redis)
    assert payload["jid"] == jid
    assert payload["class"] == wire(OrderJob)
    assert events == []
    assert testing.queues.jobs() == []


def test_fake_collects_the_payload_and_runs_nothing(redis):
    testing.fake()
    jid = OrderJob.perform_async(1)
    assert events == []
    assert [job["jid"] for job in OrderJob.jobs] == [jid]
    assert redis.dbsize() == 0


def test_inline_runs_the_job_at_once_in_the_calling_thread(redis):
    testing.inline()
    WhereJob.perform_async()
    assert events == [("where", threading.get_ident())]
    assert testing.queues.jobs() == []
    assert redis.dbsize() == 0


@pytest.mark.parametrize(
    ("setter", "expected"),
    [
        (testing.disable, (False, True, False, False)),
        (testing.fake, (True, False, True, False)),
        (testing.inline, (True, False, False, True)),
    ],
)
def test_predicates(setter, expected):
    setter()
    assert (testing.enabled(), testing.disabled(), testing.is_fake(), testing.is_inline()) == expected
    assert testing.mode() == setter.__name__
    with setter():
        assert (testing.enabled(), testing.disabled(), testing.is_fake(), testing.is_inline()) == expected


def test_a_plain_call_sets_the_mode_for_the_whole_process():
    setting = testing.fake()
    assert repr(setting) == "<wurk.testing mode fake>"
    assert testing.mode() == "fake"
    assert mode_in_new_thread() == "fake"
    testing.inline()
    assert mode_in_new_thread() == "inline"
    testing.disable()
    assert mode_in_new_thread() == "disable"


def test_a_block_sets_the_mode_for_this_thread_and_this_block_only():
    with testing.inline() as setting:
        assert setting.mode == "inline"
        assert testing.mode() == "inline"
        assert mode_in_new_thread() == "disable"
    assert testing.mode() == "disable"


def test_a_block_leaves_the_process_wide_mode_as_it_found_it():
    testing.fake()
    with testing.inline():
        assert testing.is_inline()
        assert mode_in_new_thread() == "fake"
    assert testing.is_fake()
    assert mode_in_new_thread() == "fake"


def test_the_spec_block_example_runs_the_job_right_there_then_falls_back():
    testing.fake()
    with testing.inline():
        OrderJob.perform_async(7)
        assert events == [("order", 7)]
    OrderJob.perform_async(8)
    assert events == [("order", 7)]
    assert [job["args"] for job in OrderJob.jobs] == [[8]]


def test_a_blocks_mode_wins_over_the_global_one_in_its_own_thread_only():
    testing.fake()
    entered, pushed_from_main, done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def worker():
        with testing.inline():
            entered.set()
            pushed_from_main.wait()
            seen["mode"] = testing.mode()
            OrderJob.perform_async(2)  # runs right here
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait()
    assert testing.mode() == "fake"
    OrderJob.perform_async(1)  # collected while the other thread is inline
    pushed_from_main.set()
    thread.join()
    assert done.is_set()
    assert seen["mode"] == "inline"
    assert events == [("order", 2)]
    assert [job["args"] for job in OrderJob.jobs] == [[1]]


def test_a_setter_called_inside_a_block_changes_the_global_mode_only():
    with testing.fake():
        testing.inline()
        assert testing.is_fake()
        assert mode_in_new_thread() == "inline"
    assert testing.is_inline()


@pytest.mark.parametrize("outer", testing.MODES)
@pytest.mark.parametrize("inner", testing.MODES)
def test_nesting_blocks_raises_and_changes_nothing(outer, inner):
    testing.fake()
    with getattr(testing, outer)():
        with pytest.raises(TestModeAlreadySetError, match="already set"), getattr(testing, inner)():
            pytest.fail("the inner block must not run")
        assert testing.mode() == outer
    assert testing.mode() == "fake"
    assert mode_in_new_thread() == "fake"


def test_the_nesting_error_is_a_wurk_error():
    assert issubclass(TestModeAlreadySetError, wurk.WurkError)


def test_a_block_after_a_refused_nested_one_still_works():
    with testing.fake(), pytest.raises(TestModeAlreadySetError):
        testing.inline().__enter__()
    with testing.inline():
        OrderJob.perform_async(3)
    assert events == [("order", 3)]


def test_a_blocks_mode_reaches_asyncio_tasks_started_inside_it():
    async def main():
        await asyncio.gather(asyncio.to_thread(lambda: None), asyncio.sleep(0))
        return await asyncio.create_task(_push_order(5))

    with testing.inline():
        assert asyncio.run(main()) is not None
    assert events == [("order", 5)]


async def _push_order(order_id):
    return OrderJob.perform_async(order_id)


def test_disable_inside_a_fake_suite_reaches_redis(redis):
    testing.fake()
    with testing.disable():
        ReminderJob.perform_async(1)
    ReminderJob.perform_async(2)
    assert [job["args"] for job in redis_queue(redis)] == [[1]]
    assert [job["args"] for job in ReminderJob.jobs] == [[2]]


# -- 2. the fake store ---------------------------------------------------------------------


def test_a_fake_payload_is_the_wire_hash():
    testing.fake()
    before = int(time.time() * 1000)
    jid = OrderJob.perform_async(1)
    [job] = OrderJob.jobs
    assert job["class"] == wire(OrderJob)
    assert job["queue"] == "default"
    assert job["args"] == [1]
    assert job["jid"] == jid
    assert re.fullmatch(r"[0-9a-f]{24}", jid)
    assert isinstance(job["enqueued_at"], int)
    assert job["enqueued_at"] >= before
    assert job["enqueued_at"] >= job["created_at"]
    assert job["retry"] is True
    assert "at" not in job


def test_fake_payloads_are_copies_as_a_worker_would_read_them():
    testing.fake()
    argument = {"items": [1, 2]}
    OrderJob.perform_async(argument)
    argument["items"].append(3)
    assert OrderJob.jobs[0]["args"] == [{"items": [1, 2]}]


def test_complex_arguments_off_are_collected_as_their_string(config):
    config["on_complex_arguments"] = False
    testing.fake()
    when = datetime(2030, 1, 2, 3, 4, 5)
    OrderJob.perform_async(when)
    assert OrderJob.jobs[0]["args"] == [str(when)]


def test_perform_async_returns_a_jid_and_perform_bulk_the_jids():
    testing.fake()
    jid = OrderJob.perform_async(1)
    jids = OrderJob.perform_bulk([[2], [3], [4]])
    assert len(jids) == 3
    assert all(re.fullmatch(r"[0-9a-f]{24}", j) for j in jids)
    assert [job["jid"] for job in OrderJob.jobs] == [jid, *jids]
    assert [job["args"] for job in OrderJob.jobs] == [[1], [2], [3], [4]]


def test_the_spec_example():
    with testing.fake():
        OrderJob.perform_async(1)
        OrderJob.perform_async(2)
    assert len(OrderJob.jobs) == 2
    assert [job["args"][0] for job in OrderJob.jobs] == [1, 2]
    assert OrderJob.drain() == 2
    assert OrderJob.jobs == []
    assert events == [("order", 1), ("order", 2)]


def test_every_push_path_is_honoured(redis):
    testing.fake()
    OrderJob.perform_async(1)
    OrderJob.perform_in(60, 2)
    OrderJob.perform_bulk([[3]])
    wurk.Client().push({"class": OrderJob, "args": [4]})
    wurk.Client().push_bulk({"class": OrderJob, "args": [[5], [6]]})
    OrderJob.client_push({"args": [7], "queue": "low"})
    assert [job["args"][0] for job in OrderJob.jobs] == [1, 2, 3, 4, 5, 6, 7]
    assert redis.dbsize() == 0


def test_a_foreign_class_name_is_collected_under_that_name():
    testing.fake()
    wurk.Client().push({"class": "RubyJob", "args": [1], "queue": "ruby"})
    assert [job["args"] for job in testing.queues.jobs_by_class()["RubyJob"]] == [[1]]
    assert testing.queues["ruby"][0]["class"] == "RubyJob"


# per-class helpers


def test_jobs_lists_the_class_payloads_across_every_queue_in_push_order():
    testing.fake()
    OrderJob.perform_async(1)
    OrderJob.set(queue="low").perform_async(2)
    CriticalJob.perform_async(0)
    OrderJob.perform_async(3)
    assert [job["args"][0] for job in OrderJob.jobs] == [1, 2, 3]
    assert [job["queue"] for job in OrderJob.jobs] == ["default", "low", "default"]
    assert OrderJob.jobs[-1]["args"] == [3]


def test_jobs_is_a_fresh_list_and_calling_it_gives_the_same_list():
    testing.fake()
    OrderJob.perform_async(1)
    listed = OrderJob.jobs
    assert listed() is listed
    listed.clear()
    assert len(OrderJob.jobs) == 1


def test_clear_removes_this_class_only():
    testing.fake()
    OrderJob.perform_async(1)
    OrderJob.set(queue="low").perform_async(2)
    CriticalJob.perform_async(3)
    OrderJob.clear()
    assert OrderJob.jobs == []
    assert [job["args"] for job in CriticalJob.jobs] == [[3]]


def test_drain_runs_and_removes_this_class_only_and_returns_the_count():
    testing.fake()
    OrderJob.perform_async(1)
    CriticalJob.perform_async(2)
    OrderJob.set(queue="low").perform_async(3)
    assert OrderJob.drain() == 2
    assert events == [("order", 1), ("order", 3)]
    assert OrderJob.jobs == []
    assert len(CriticalJob.jobs) == 1
    assert OrderJob.drain() == 0


def test_drain_also_runs_jobs_pushed_while_draining():
    testing.fake()
    CountdownJob.perform_async(3)
    assert CountdownJob.drain() == 4
    assert events == [("countdown", 3), ("countdown", 2), ("countdown", 1), ("countdown", 0)]
    assert CountdownJob.jobs == []


def test_perform_one_runs_the_oldest_job_and_returns_its_value():
    testing.fake()
    OrderJob.perform_async(1)
    OrderJob.perform_async(2)
    assert OrderJob.perform_one() == 10
    assert events == [("order", 1)]
    assert [job["args"] for job in OrderJob.jobs] == [[2]]


def test_perform_one_with_nothing_to_run_raises_empty_queue_error():
    testing.fake()
    CriticalJob.perform_async(1)
    with pytest.raises(EmptyQueueError, match="OrderJob"):
        OrderJob.perform_one()
    assert issubclass(EmptyQueueError, LookupError)
    assert len(CriticalJob.jobs) == 1


def test_process_job_runs_one_payload_through_the_testing_chain():
    testing.server_middleware.add(RecordingServerMiddleware)
    job = {"class": wire(OrderJob), "args": [4], "jid": "a" * 24, "queue": "orders"}
    assert OrderJob.process_job(job) == 40
    assert events == [("server-mw", "OrderJob", "orders", None, True), ("order", 4)]
    assert job == {"class": wire(OrderJob), "args": [4], "jid": "a" * 24, "queue": "orders"}


def test_execute_job_is_the_innermost_call():
    testing.server_middleware.add(RecordingServerMiddleware)
    testing.fake()
    ExecuteJob.perform_async("x")
    assert ExecuteJob.perform_one() == "x"
    assert events == [
        ("server-mw", "ExecuteJob", "default", None, True),
        ("execute_job", "ExecuteJob", ["x"]),
        ("perform", "x"),
    ]


def test_queue_name_is_the_configured_queue(config):
    assert OrderJob.queue_name() == "default"
    assert CriticalJob.queue_name() == "critical"
    config.default_job_options = {**config.default_job_options, "queue": "elsewhere"}
    assert OrderJob.queue_name() == "elsewhere"
    assert CriticalJob.queue_name() == "critical"


def test_a_function_job_has_the_same_helpers():
    testing.fake()
    plain_function.perform_async(1)
    send_welcome.perform_async(2)
    assert [job["args"] for job in plain_function.jobs] == [[1]]
    assert send_welcome.jobs[0]["queue"] == "mail"
    assert plain_function.drain() == 1
    assert testing.drain(send_welcome) == 1
    assert events == [("plain", 1), ("welcome", 2)]
    plain_function.perform_async(3)
    assert plain_function.perform_one() == 3
    assert plain_function(4) == 4  # still the plain function when called


# cross-class helpers


def test_jobs_on_the_base_class_is_every_payload_flattened():
    testing.fake()
    OrderJob.perform_async(1)
    CriticalJob.perform_async(2)
    OrderJob.set(queue="low").perform_async(3)
    assert [(job["class"], job["args"]) for job in wurk.Job.jobs] == [
        (wire(OrderJob), [1]),
        (wire(CriticalJob), [2]),
        (wire(OrderJob), [3]),
    ]
    assert wurk.Job.jobs == testing.jobs() == testing.queues.jobs()


def test_clear_all_empties_the_store():
    testing.fake()
    OrderJob.perform_async(1)
    CriticalJob.perform_async(2)
    wurk.Job.clear_all()
    assert wurk.Job.jobs == []
    assert len(testing.queues) == 0


def test_drain_all_runs_everything_until_the_store_is_empty():
    testing.fake()
    ParentJob.perform_async(1)
    OrderJob.perform_async(2)
    ParentJob.perform_async(3)
    assert wurk.Job.drain_all() == 5
    assert events == [("parent", 1), ("order", 2), ("parent", 3), ("child", 1), ("child", 3)]
    assert wurk.Job.jobs == []


def test_drain_all_resolves_renamed_classes():
    testing.fake()
    LegacyNamedJob.perform_async(1)
    assert LegacyNamedJob.jobs[0]["class"] == "LegacyNamed"
    assert testing.drain_all() == 1
    assert events == [("legacy", 1)]


def test_the_store_lock_is_not_held_while_a_job_runs():
    testing.fake()
    LockProbeJob.perform_async()
    assert LockProbeJob.drain() == 1
    assert ("helper-finished", True) in events
    assert ("store-size-seen", 1) in events
    assert [job["args"] for job in OrderJob.jobs] == [[99]]


# the store itself


def test_a_queue_list_is_live():
    testing.fake()
    OrderJob.perform_async(1)
    CriticalJob.perform_async(2)
    default = testing.queues["default"]
    assert [job["args"] for job in default] == [[1]]
    default.clear()
    assert OrderJob.jobs == []
    assert len(CriticalJob.jobs) == 1
    assert testing.queues["nothing-here"] == []


def test_jobs_by_queue_is_the_live_mapping_and_jobs_by_class_groups_by_name():
    testing.fake()
    OrderJob.perform_async(1)
    CriticalJob.perform_async(2)
    OrderJob.perform_async(3)
    by_queue = testing.queues.jobs_by_queue()
    assert {queue: [job["args"] for job in jobs] for queue, jobs in by_queue.items()} == {
        "default": [[1], [3]],
        "critical": [[2]],
    }
    by_queue["critical"].clear()
    assert CriticalJob.jobs == []
    by_class = testing.queues.jobs_by_class()
    assert {name: [job["args"] for job in jobs] for name, jobs in by_class.items()} == {wire(OrderJob): [[1], [3]]}


def test_a_payload_pushed_by_hand_is_collected_and_drained():
    job = {"class": wire(OrderJob), "args": [6], "jid": "b" * 24, "queue": "default"}
    testing.queues.push("default", OrderJob, job)
    testing.queues.push("default", wire(OrderJob), {"args": [7], "jid": "c" * 24, "queue": "default"})
    assert [j["args"] for j in OrderJob.jobs] == [[6], [7]]
    assert testing.queues.jobs()[1]["class"] == wire(OrderJob)
    assert OrderJob.drain() == 2
    assert events == [("order", 6), ("order", 7)]


def test_delete_for_and_clear_for():
    testing.fake()
    keep = OrderJob.perform_async(1)
    drop = OrderJob.perform_async(2)
    OrderJob.set(queue="low").perform_async(3)
    CriticalJob.set(queue="low").perform_async(4)
    testing.queues.delete_for(drop, "default", OrderJob)
    assert [job["jid"] for job in testing.queues["default"]] == [keep]
    testing.queues.clear_for("low", wire(OrderJob))
    assert [job["args"] for job in testing.queues["low"]] == [[4]]
    assert [job["args"] for job in OrderJob.jobs] == [[1]]


def test_clear_all_on_the_store_empties_lists_handed_out_before():
    testing.fake()
    OrderJob.perform_async(1)
    default = testing.queues["default"]
    testing.queues.clear_all()
    assert default == []
    assert testing.queues.jobs_by_queue() == {}
    assert testing.queues.jobs() == []


# -- 5. scheduled jobs ---------------------------------------------------------------------


def test_a_scheduled_job_in_the_fake_store_carries_at_and_no_enqueued_at(redis):
    with testing.fake():
        ReminderJob.perform_in(3600, 42)
        ReminderJob.perform_async(43)
    scheduled, immediate = ReminderJob.jobs
    assert scheduled["at"] == pytest.approx(time.time() + 3600, abs=60)
    assert "enqueued_at" not in scheduled
    assert "at" not in immediate
    assert "enqueued_at" in immediate
    assert testing.queues["default"] == [scheduled, immediate]  # no separate scheduled set
    assert redis.zcard("schedule") == 0  # Redis sees nothing of it


@pytest.mark.parametrize(
    "push",
    [
        lambda: ReminderJob.perform_in(timedelta(hours=1), 1),
        lambda: ReminderJob.perform_at(datetime.now() + timedelta(hours=1), 1),
        lambda: ReminderJob.perform_at(time.time() + 3600, 1),
        lambda: ReminderJob.set(wait=3600).perform_async(1),
        lambda: ReminderJob.set(wait_until=datetime.now() + timedelta(hours=1)).perform_async(1),
        lambda: ReminderJob.set(wait=3600).perform_bulk([[1]]),
    ],
    ids=["perform_in", "perform_at-datetime", "perform_at-epoch", "set-wait", "set-wait_until", "bulk"],
)
def test_every_way_of_scheduling_carries_at_in_fake_mode(push):
    testing.fake()
    push()
    [job] = ReminderJob.jobs
    assert job["at"] == pytest.approx(time.time() + 3600, abs=60)
    assert "enqueued_at" not in job


def test_drain_perform_one_and_drain_all_run_scheduled_jobs_right_away():
    testing.fake()
    ReminderJob.perform_in(3600, 1)
    ReminderJob.perform_in(7200, 2)
    ReminderJob.perform_in(timedelta(days=3), 3)
    assert ReminderJob.perform_one() is None
    assert ReminderJob.drain() == 2
    OrderJob.perform_in(3600, 4)
    ReminderJob.perform_in(3600, 5)
    assert testing.drain_all() == 2
    assert events == [("reminder", 1), ("reminder", 2), ("reminder", 3), ("order", 4), ("reminder", 5)]


def test_inline_runs_a_scheduled_job_immediately(redis):
    testing.inline()
    ReminderJob.perform_in(3600, 1)
    ReminderJob.perform_at(datetime.now() + timedelta(days=1), 2)
    ReminderJob.set(wait=3600).perform_async(3)
    assert events == [("reminder", 1), ("reminder", 2), ("reminder", 3)]
    assert redis.dbsize() == 0


@pytest.mark.parametrize("wait", [0, -5, timedelta(0)])
def test_set_wait_zero_is_an_ordinary_push_in_every_mode(redis, wait):
    with testing.fake():
        ReminderJob.set(wait=wait).perform_async(1)
        ReminderJob.perform_in(wait, 2)
    for job in ReminderJob.jobs:
        assert "at" not in job
        assert "enqueued_at" in job
    with testing.inline():
        ReminderJob.set(wait=wait).perform_async(3)
    assert events == [("reminder", 3)]
    ReminderJob.set(wait=wait).perform_async(4)
    assert [job["args"] for job in redis_queue(redis)] == [[4]]
    assert redis.zcard("schedule") == 0


def test_with_the_mode_disabled_a_scheduled_job_is_parked_in_redis(redis):
    testing.fake()
    with testing.disable():
        jid = ReminderJob.perform_in(3600, 42)
    [(member, score)] = redis.zrange("schedule", 0, -1, withscores=True)
    entry = json.loads(member)
    assert entry["jid"] == jid
    assert entry["class"] == wire(ReminderJob)
    assert entry["args"] == [42]
    assert score == pytest.approx(time.time() + 3600, abs=60)
    assert ReminderJob.jobs == []


# -- 6. what inline execution does and does not do -------------------------------------------


class HandsTheBid(wurk.ServerMiddleware):
    """What a batch feature's server middleware does: core sets ``jid`` alone."""

    def call(self, job_instance, job, queue, call_next):
        if job.get("bid"):
            job_instance.bid = job["bid"]
        return call_next()


def test_inline_assigns_the_jid_and_the_server_chain_the_rest():
    testing.inline()
    jid = IdentityJob.perform_async()
    bid_jid = IdentityJob.set(bid="b-123").perform_async()
    assert events == [("identity", jid, None), ("identity", bid_jid, None)]  # core knows no batch
    testing.server_middleware.add(HandsTheBid)
    try:
        handed = IdentityJob.set(bid="b-456").perform_async()
    finally:
        testing.server_middleware.remove(HandsTheBid)
    assert events[-1] == ("identity", handed, "b-456")


def test_the_testing_server_chain_is_separate_and_empty_by_default(config):
    assert testing.server_middleware.empty()
    config.server_middleware.add(RecordingServerMiddleware)
    testing.inline()
    OrderJob.perform_async(1)
    assert events == [("order", 1)]


def test_middleware_added_to_the_testing_chain_runs_inline_and_when_draining():
    testing.server_middleware.add(RecordingServerMiddleware)
    with testing.inline():
        OrderJob.perform_async(1)
    with testing.fake():
        CriticalJob.perform_async(2)
    CriticalJob.drain()
    assert events == [
        ("server-mw", "OrderJob", "default", None, True),
        ("order", 1),
        ("server-mw", "CriticalJob", "critical", None, True),
        ("critical", 2),
    ]


def test_a_testing_server_middleware_can_skip_perform():
    testing.server_middleware.add(SkippingServerMiddleware)
    testing.fake()
    OrderJob.perform_async(1)
    assert OrderJob.perform_one() is None
    assert events == [("skipped", [1])]


@pytest.mark.parametrize("mode", testing.MODES)
def test_client_middleware_mutates_the_push_in_every_mode(config, redis, mode):
    config.client_middleware.add(StampMiddleware)
    testing.server_middleware.add(RecordingServerMiddleware)
    with getattr(testing, mode)():
        StampReaderJob.perform_async(1)
    if mode == "disable":
        [payload] = redis_queue(redis)
    elif mode == "fake":
        [payload] = StampReaderJob.jobs
    else:
        assert events == [
            ("server-mw", "StampReaderJob", "default", "from-client-middleware", True),
            ("stamp-reader", 1),
        ]
        return
    assert payload["stamp"] == "from-client-middleware"


@pytest.mark.parametrize("mode", testing.MODES)
def test_client_middleware_halts_the_push_in_every_mode(config, redis, mode):
    config.client_middleware.add(HaltMiddleware)
    with getattr(testing, mode)():
        assert StampReaderJob.perform_async("halt") is None
        assert StampReaderJob.perform_bulk([["halt"], ["go"]])[0] is None
    assert events == ([("stamp-reader", "go")] if mode == "inline" else [])
    assert [job["args"] for job in StampReaderJob.jobs] == ([["go"]] if mode == "fake" else [])
    assert [job["args"] for job in redis_queue(redis)] == ([["go"]] if mode == "disable" else [])


def test_no_retry_inline_the_exception_reaches_the_caller(config, redis):
    died: list[Any] = []
    config.death_handlers.append(lambda job, exc: died.append(job))
    testing.inline()
    with pytest.raises(ValueError, match="boom"):
        FailingJob.perform_async("boom")
    assert events == []  # neither retry_in nor retries_exhausted
    assert died == []
    assert redis.zcard("retry") == 0
    assert redis.zcard("dead") == 0
    assert redis.dbsize() == 0  # no stats, no process or work entries either


def test_no_retry_when_draining_the_exception_reaches_the_caller(redis):
    testing.fake()
    FailingJob.perform_async("first")
    FailingJob.perform_async("second")
    with pytest.raises(ValueError, match="first"):
        FailingJob.drain()
    assert [job["args"] for job in FailingJob.jobs] == [["second"]]
    with pytest.raises(ValueError, match="second"):
        FailingJob.perform_one()
    assert FailingJob.jobs == []
    assert events == []
    assert redis.dbsize() == 0


def test_perform_bulk_inline_runs_each_job_and_returns_the_jids():
    testing.inline()
    jids = OrderJob.perform_bulk([[1], [2]])
    assert len(jids) == 2
    assert events == [("order", 1), ("order", 2)]


def test_inline_resolves_a_renamed_class():
    testing.inline()
    LegacyNamedJob.perform_async(1)
    assert events == [("legacy", 1)]


def test_inline_runs_a_payload_pushed_by_wire_name():
    testing.inline()
    wurk.Client().push({"class": wire(OrderJob), "args": [5]})
    assert events == [("order", 5)]


def test_fake_and_inline_write_nothing_to_redis(redis):
    with testing.fake():
        OrderJob.perform_async(1)
        OrderJob.perform_in(60, 2)
        OrderJob.perform_bulk([[3], [4]])
    with testing.inline():
        OrderJob.perform_async(5)
        OrderJob.perform_in(60, 6)
    OrderJob.drain()
    assert redis.dbsize() == 0


# -- async jobs -----------------------------------------------------------------------------


def test_an_async_job_runs_inline():
    testing.inline()
    AsyncJob.perform_async(1)
    assert events == [("async", 1)]


def test_an_async_function_job_runs_inline():
    with testing.inline():
        send_welcome.perform_async(7)
    assert events == [("welcome", 7)]


def test_async_jobs_drain_and_return_their_value():
    testing.fake()
    AsyncJob.perform_async(1)
    send_welcome.perform_async(2)
    assert AsyncJob.perform_one() == 2
    assert send_welcome.perform_one() == "welcomed 2"
    AsyncJob.perform_async(3)
    assert testing.drain_all() == 1
    assert events == [("async", 1), ("welcome", 2), ("async", 3)]


def test_inline_pushes_from_inside_a_running_event_loop():
    async def main():
        with testing.inline():
            AsyncParentJob.perform_async(1)  # which pushes AsyncJob from its own loop
            OrderJob.perform_async(2)

    asyncio.run(main())
    assert events == [("async-parent", 1), ("async", 1), ("order", 2)]
    assert testing.mode() == "disable"


def test_an_async_jobs_exception_reaches_the_caller_inside_and_outside_a_loop():
    testing.inline()
    with pytest.raises(KeyError, match="outside"):
        AsyncFailingJob.perform_async("outside")

    async def main():
        AsyncFailingJob.perform_async("inside")

    with pytest.raises(KeyError, match="inside"):
        asyncio.run(main())
