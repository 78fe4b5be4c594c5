"""``Batch`` itself, in this process, on a real server: creating and
reopening, its settings and their validation, callbacks, the push path."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import threading

import pytest

import wurk
from tests.batches.jobs import Done, Row
from tests.helpers import wait_for
from wurk.client.transactional import transactional_push
from wurk_batches import Batch, Status
from wurk_batches.books import Books

DAY = 24 * 3600


def payloads(redis, queue="default"):
    return [json.loads(item) for item in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


def test_a_new_batch_has_a_pro_style_bid_and_writes_nothing_before_its_first_block(config, redis):
    batch = Batch()
    assert re.fullmatch(r"[A-Za-z0-9_\-]{14}", batch.bid)
    assert len(base64.urlsafe_b64decode(batch.bid + "==")) == 10
    assert Batch().bid != batch.bid
    batch.description = "Nightly import"
    batch.callback_queue = "critical"
    batch.tags = ["customer:1", 2]
    batch.on("success", Done, {"account": 42})
    assert redis.keys("*") == []
    assert batch.mutable
    with batch.jobs():
        jid = Row.perform_async(1)
    assert not batch.mutable
    status = Status(batch.bid)
    assert (status.description, status.callback_queue, status.tags) == (
        "Nightly import",
        "critical",
        ["customer:1", "2"],
    )
    assert (status.total, status.pending, status.failures) == (1, 1, 0)
    assert redis.zscore("batches", batch.bid) == pytest.approx(status.created_at)
    assert redis.smembers("tags:customer:1") == {batch.bid.encode()}
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}") <= 30 * DAY
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}-jids") <= 30 * DAY
    assert batch.include(jid)
    assert not batch.include("0" * 24)
    [job] = payloads(redis)
    assert (job["jid"], job["bid"]) == (jid, batch.bid)


def test_reopening_restores_what_the_batch_was_created_with(config, redis):
    batch = Batch()
    batch.description, batch.callback_queue, batch.tags = "d", "low", ["a"]
    batch.callback_class = Done
    batch.linger = 60
    with batch.jobs():
        Row.perform_async(1)
    again = Batch(batch.bid)
    assert not again.mutable
    assert (again.description, again.callback_queue, again.tags, again.linger) == ("d", "low", ["a"], 60)
    assert again.callback_class == "tests.batches.jobs.Done"
    with again.jobs():
        Row.perform_async(2)
    assert Status(batch.bid).total == 2
    with pytest.raises(ValueError, match="reopening a batch needs its bid"):
        Batch("  ")


def test_settings_refuse_bad_values_with_a_clear_message(config):
    batch = Batch()
    batch.autoflush = True
    assert batch.autoflush is True
    batch.autoflush = 500
    assert batch.autoflush == 500
    for bad in (0, -1, "5", 1.5):
        with pytest.raises(ValueError, match="autoflush must be True or a positive whole number"):
            batch.autoflush = bad
    with pytest.raises(ValueError, match="linger must be a positive number of seconds"):
        batch.linger = 0
    with pytest.raises(ValueError, match="expires_in must be a positive"):
        batch.expires_in(-5)
    with pytest.raises(ValueError, match="description must be a string"):
        batch.description = 5
    with pytest.raises(ValueError, match="callback_class must be a class or its dotted path"):
        batch.callback_class = "not a class"
    with pytest.raises(wurk.InvalidJobError):
        batch.callback_queue = ""
    assert batch.expires_in(3600) is batch


def test_settings_changed_after_the_first_block_are_not_saved_and_say_so(config, caplog):
    batch = Batch()
    with batch.jobs():
        Row.perform_async(1)
    config.logger.propagate = True
    with caplog.at_level(logging.WARNING, logger=config.logger.name):
        batch.description = "late"
    assert "description is only saved by the first jobs block" in caplog.text
    assert Status(batch.bid).description is None


@pytest.mark.parametrize(
    ("event", "target", "options", "message"),
    [
        ("finish", Done, {}, "unknown batch event 'finish'"),
        ("success", 42, {}, "a callback target must be a class"),
        ("success", "Done", {}, "a callback target must be a class"),
        ("success", "tests.batches.jobs.Done#", {}, "a callback target must be a class"),
        ("success", "tests.batches.jobs.Done#_secret", {}, "is private"),
        ("success", lambda status, options: None, {}, "a callback target must be a class"),
        ("success", Done, ["not", "a", "dict"], "callback options must be a dict"),
        ("success", Done, {"when": object()}, "JSON-serialisable"),
    ],
)
def test_on_refuses_what_it_cannot_run(config, event, target, options, message):
    with pytest.raises(ValueError, match=message):
        Batch().on(event, target, options)


def test_the_four_target_forms_are_stored_as_given(config, redis):
    batch = Batch()
    batch.callback_class = "tests.batches.jobs.Done"
    batch.on("success", Done).on("success", "tests.batches.jobs.Done", {"a": 1})
    batch.on("complete", "tests.batches.jobs.Done#finished").on("death", "#finished")
    with batch.jobs():
        Row.perform_async(1)
    stored = {
        event: json.loads(redis.hget(f"b-{batch.bid}", f"cb-{event}")) for event in ("success", "complete", "death")
    }
    assert stored == {
        "success": [["tests.batches.jobs.Done", {}], ["tests.batches.jobs.Done", {"a": 1}]],
        "complete": [["tests.batches.jobs.Done#finished", {}]],
        "death": [["#finished", {}]],
    }


def test_late_registrations_from_many_threads_all_land(config, redis):
    batch = Batch()
    with batch.jobs():
        Row.perform_async(1)
    reopened = Batch(batch.bid)
    threads = [threading.Thread(target=reopened.on, args=("success", Done, {"n": n, "list": []})) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = json.loads(redis.hget(f"b-{batch.bid}", "cb-success"))
    assert sorted(options["n"] for _target, options in entries) == list(range(20))
    assert all(options["list"] == [] for _target, options in entries)  # an empty list stays a list


def test_late_registration_on_a_gone_batch_raises_and_on_a_fired_event_warns(config, redis, caplog):
    with pytest.raises(ValueError, match="does not exist"):
        Batch("nosuchbatch000").on("success", Done)
    batch = Batch()
    with batch.jobs():
        jid = Row.perform_async(1)
    Books.of(config).ack_success(batch.bid, jid)
    assert redis.exists(f"b-{batch.bid}-success")
    config.logger.propagate = True
    with caplog.at_level(logging.WARNING, logger=config.logger.name):
        Batch(batch.bid).on("success", Done)
    assert "success already fired; the success callback registered now will never run" in caplog.text
    assert redis.hget(f"b-{batch.bid}", "cb-success") is None


def test_adding_to_a_gone_batch_raises(config):
    with pytest.raises(ValueError, match="does not exist"), Batch("nosuchbatch000").jobs():
        pass


def test_scheduled_jobs_are_counted_when_created_and_not_again_when_promoted(config, redis):
    from wurk.server.scheduled import Enq

    batch = Batch()
    with batch.jobs():
        jid = Row.perform_in(0.01, 1)
    assert (Status(batch.bid).total, Status(batch.bid).pending) == (1, 1)
    [member] = redis.zrange("schedule", 0, -1)
    assert json.loads(member)["bid"] == batch.bid
    assert "enqueued_at" not in json.loads(member)
    import time

    time.sleep(0.05)
    assert Enq(config).enqueue_jobs() == 1
    assert [job["jid"] for job in payloads(redis)] == [jid]
    assert (Status(batch.bid).total, Status(batch.bid).pending) == (1, 1)


def test_an_empty_block_enqueues_the_empty_marker_so_callbacks_still_fire(config, redis):
    batch = Batch()
    batch.callback_queue = "callbacks"
    with batch.jobs():
        pass
    [marker] = payloads(redis, "callbacks")
    assert (marker["class"], marker["bid"]) == ("wurk_batches.Empty", batch.bid)
    assert Status(batch.bid).total == 1
    assert batch.include(marker["jid"])


def test_a_bulk_push_inside_a_block_counts_every_job_once(config, redis):
    batch = Batch()
    with batch.jobs():
        jids = Row.perform_bulk([[n] for n in range(2500)])
        Row.client_push({"class": Row, "args": [9], "jid": jids[0]})  # the same jid again: not counted twice
    assert (Status(batch.bid).total, redis.llen("queue:default")) == (2500, 2501)


def test_autoflush_holds_pushes_and_writes_them_n_at_a_time(config, redis):
    batch = Batch()
    batch.autoflush = 2
    with batch.jobs():
        Row.perform_async(1)
        assert redis.llen("queue:default") == 0
        Row.perform_async(2)
        assert redis.llen("queue:default") == 2
        Row.perform_async(3)
        Row.perform_in(3600, 4)  # scheduled: never held
        assert (redis.llen("queue:default"), redis.zcard("schedule")) == (2, 1)
    assert redis.llen("queue:default") == 3
    whole = Batch()
    whole.autoflush = True
    with whole.jobs():
        for n in range(5):
            Row.perform_async(n)
        assert redis.llen("queue:default") == 3
    assert redis.llen("queue:default") == 8
    assert (Status(batch.bid).total, Status(whole.bid).total) == (4, 5)


def test_the_active_batch_belongs_to_this_thread_and_to_tasks_started_inside_the_block(config, redis):
    batch = Batch()
    outside: list[str | None] = []

    async def push(key):
        return Row.perform_async(key)

    async def main():
        before = asyncio.create_task(asyncio.sleep(0))
        with batch.jobs():
            inside = await asyncio.create_task(push("task"))
            thread = threading.Thread(target=lambda: outside.append(Row.perform_async("thread")))
            thread.start()
            thread.join()
        await before
        return inside

    inside = asyncio.run(main())
    by_jid = {job["jid"]: job for job in payloads(redis)}
    assert by_jid[inside]["bid"] == batch.bid
    assert "bid" not in by_jid[outside[0]]
    assert Status(batch.bid).total == 1


def test_a_batch_opened_inside_another_becomes_its_child(config, redis):
    parent = Batch()
    with parent.jobs():
        child = Batch()
        with child.jobs():
            Row.perform_async(1)
        assert child.parent_bid == parent.bid
    assert redis.smembers(f"b-{parent.bid}-kids") == {child.bid.encode()}
    assert redis.smembers(f"b-{parent.bid}-pkids") == {child.bid.encode()}
    assert Status(child.bid).parent_bid == parent.bid
    assert child.parent.bid == parent.bid
    assert Status(parent.bid).total == 0  # a parent holding only a child needs no empty marker
    assert Batch(child.bid).parent_bid == parent.bid


def test_pushes_inside_a_batch_are_never_deferred_to_a_commit(config, redis):
    deferred = []
    transactional_push(config, deferred.append)
    Row.perform_async("outside")
    assert len(deferred) == 1
    assert redis.llen("queue:default") == 0
    batch = Batch()
    with batch.jobs():
        Row.perform_async("inside")
    assert len(deferred) == 1  # pushed at once, counted at once
    assert [job["args"] for job in payloads(redis)] == [["inside"]]
    assert Status(batch.bid).total == 1


def test_remove_jobs_drops_live_jids_and_counts_only_those(config, redis):
    batch = Batch()
    with batch.jobs():
        jids = [Row.perform_async(n) for n in range(3)]
    Books.of(config).ack_failure(batch.bid, jids[0])
    assert batch.remove_jobs(jids[0], jids[1], "0" * 24) == 2
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (1, 1, 0)
    assert not batch.include(jids[0])
    assert batch.include(jids[2])


def test_invalidate_all_reaches_every_descendant(config, redis):
    parent = Batch()
    with parent.jobs():
        Row.perform_async(1)
        child = Batch()
        with child.jobs():
            grandchild = Batch()
            with grandchild.jobs():
                Row.perform_async(2)
    other = Batch()
    with other.jobs():
        Row.perform_async(3)
    assert parent.valid
    parent.invalidate_all()
    assert not parent.valid
    assert not Batch(child.bid).valid
    assert not Batch(grandchild.bid).valid
    assert other.valid
    assert Status(grandchild.bid).invalidated


def test_linger_on_a_reopened_batch_is_written_at_once(config, redis):
    batch = Batch()
    with batch.jobs():
        Row.perform_async(1)
    Batch(batch.bid).linger = 90
    assert redis.hget(f"b-{batch.bid}", "linger") == b"90"
    with pytest.raises(ValueError, match="does not exist"):
        Batch("nosuchbatch000").linger = 5


def test_a_switched_off_plugin_refuses_batches_by_name(redis_url, redis):
    config = wurk.Config(disabled_plugins=["batches"])
    config.redis = {"url": redis_url}
    with pytest.raises(wurk.PluginError, match="wurk-batches plugin"), Batch(config=config).jobs():
        pass


def test_expired_batches_leave_the_index_and_their_tag_sets_as_new_batches_open(config, redis):
    """The ``batches`` index and a tag's set are kept alive by every new
    batch, so they would list every batch ever made; opening a batch drops
    entries whose batch expired, and the index comes back to the live ones."""
    expired = []
    for n in range(6):
        batch = Batch()
        batch.tags = ["nightly"]
        batch.expires_in(1)
        with batch.jobs():
            Row.perform_async(n)
        expired.append(batch.bid)
    wait_for(lambda: not any(redis.exists(f"b-{bid}") for bid in expired), timeout=10)
    assert redis.zcard("batches") == 6

    live = []
    for n in range(4):
        batch = Batch()
        batch.tags = ["nightly"]
        with batch.jobs():
            Row.perform_async(n)
        live.append(batch.bid)
    assert {bid.decode() for bid in redis.zrange("batches", 0, -1)} == set(live)
    # A tag's set is sampled at random: the first open alone dropped at least one.
    assert set(live) <= {bid.decode() for bid in redis.smembers("tags:nightly")}
    assert redis.scard("tags:nightly") < len(expired) + len(live)
