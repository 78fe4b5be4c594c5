"""JobRecord's readers: timestamps, backtraces, wrappers, masking, iteration state."""

from __future__ import annotations

import base64
import json
import time
import zlib
from datetime import UTC, datetime

from wurk.api import IterableState, JobRecord
from wurk.client import payload as wire
from wurk.server.retry import compress_backtrace


def record(**item):
    return JobRecord(wire.dumps({"class": "A", "args": [], **item}), "default")


def test_millisecond_and_float_second_timestamps_read_as_the_same_instant(config):
    ms = record(created_at=1796027746766, enqueued_at=1796027746766, failed_at=1796027747092)
    assert ms.created_at == datetime(2026, 11, 30, 8, 35, 46, 766000, tzinfo=UTC)
    assert ms.failed_at == datetime(2026, 11, 30, 8, 35, 47, 92000, tzinfo=UTC)
    seconds = record(created_at=1796027746.766, retried_at=1796027747.5)
    assert abs((seconds.created_at - ms.created_at).total_seconds()) < 1e-3
    assert seconds.retried_at == datetime(2026, 11, 30, 8, 35, 47, 500000, tzinfo=UTC)
    assert seconds.enqueued_at is None
    assert record().created_at is None
    assert record(enqueued_at=1796027746766).created_at == ms.created_at  # created_at falls back


def test_latency_uses_enqueued_at_then_created_at_and_never_goes_negative(config):
    now_ms = int(time.time() * 1000)
    assert 9 < record(enqueued_at=now_ms - 10_000, created_at=now_ms - 99_000).latency < 12
    assert 98 < record(created_at=now_ms - 99_000).latency < 101
    assert 19 < record(created_at=time.time() - 20.0).latency < 22
    assert record(enqueued_at=now_ms + 60_000).latency == 0.0
    assert record().latency == 0.0


def test_error_fields_and_backtrace(config):
    lines = ["app.py:3:in 'perform'", "wurk/server/processor.py:90:in 'execute'"]
    failed = record(
        error_class="ValueError", error_message="bad", retry_count=2, error_backtrace=compress_backtrace(lines)
    )
    assert (failed.error_class, failed.error_message, failed.retry_count) == ("ValueError", "bad", 2)
    assert failed.error_backtrace == lines
    assert record().error_backtrace is None
    assert record(error_backtrace="!!! not base64").error_backtrace is None
    not_zlib = base64.b64encode(b"plain bytes").decode()
    assert record(error_backtrace=not_zlib).error_backtrace is None
    not_a_list = base64.b64encode(zlib.compress(b'{"a":1}')).decode()
    assert record(error_backtrace=not_a_list).error_backtrace is None


def test_plain_fields_and_item_access(config):
    job = record(jid="j" * 24, bid="b1", tags=["x", "y"], queue="q", custom={"k": 1})
    assert (job.jid, job.bid, job.tags, job.klass) == ("j" * 24, "b1", ["x", "y"], "A")
    assert job["custom"] == {"k": 1}
    assert job["missing"] is None
    assert job.get("missing", 5) == 5
    assert record().tags == []
    assert record().bid is None
    assert JobRecord(wire.dumps({"class": "A", "args": [], "queue": "low"})).queue == "low"


def test_parsing_is_lazy(config):
    job = JobRecord(b'{"class":"A","args":[1]}', "default")
    assert job._item is None
    assert job.args == [1]
    assert job._item == {"class": "A", "args": [1]}


def test_json_that_is_not_an_object_is_not_a_job(config):
    job = JobRecord(b"[1, 2, 3]", "default")
    assert job.valid is False
    assert job.args == []
    assert job.display_args == ["[1, 2, 3]"]


def test_encrypted_arguments_are_masked_for_display_only(config):
    job = record(args=[1, "secret-ciphertext"], encrypt=True)
    assert job.display_args == [1, "[encrypted data]"]
    assert job.args == [1, "secret-ciphertext"]
    assert record(args=[], encrypt=True).display_args == []
    assert record(args=[1, 2]).display_args == [1, 2]


def active_job(job_class, arguments, **extra):
    """The shape Sidekiq's ActiveJob adapter writes (sidekiq_adapter.rb)."""
    return {
        "retry": True,
        "queue": "default",
        "class": "Sidekiq::ActiveJob::Wrapper",
        "wrapped": job_class,
        "args": [
            {
                "job_class": job_class,
                "job_id": "0f3b7c2e-8a4d-4f6b-9c1e-2d5a7b9c0e1f",
                "provider_job_id": None,
                "queue_name": "default",
                "priority": None,
                "arguments": arguments,
                "executions": 0,
                "exception_executions": {},
                "locale": "en",
                "timezone": "UTC",
                "enqueued_at": "2026-11-30T08:35:46.766000000Z",
                "scheduled_at": None,
            }
        ],
        "jid": "5a545fde8721bd8f55f0f0a2",
        "created_at": 1796027746766,
        "enqueued_at": 1796027746766,
        **extra,
    }


def test_an_active_job_wrapper_shows_the_real_job_and_its_arguments(config):
    job = JobRecord(wire.dumps(active_job("ImportJob", [42, {"_aj_globalid": "gid://app/User/7"}])), "default")
    assert job.klass == "Sidekiq::ActiveJob::Wrapper"
    assert job.display_class == "ImportJob"
    assert job.display_args == [42, "gid://app/User/7"]
    assert job.args[0]["job_class"] == "ImportJob"


def test_the_older_adapter_class_name_and_a_missing_wrapped_key(config):
    item = active_job("ImportJob", [{"a": 1, "_aj_symbol_keys": ["a"]}])
    item["class"] = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
    del item["wrapped"]
    job = JobRecord(wire.dumps(item), "default")
    assert job.display_class == "ImportJob"
    assert job.display_args == [{"a": 1}]


def test_action_mailer_deliveries_show_mailer_and_method(config):
    delivery = active_job("ActionMailer::DeliveryJob", ["UserMailer", "welcome", "deliver_now", 5, "x"])
    job = JobRecord(wire.dumps(delivery), "mailers")
    assert job.display_class == "UserMailer#welcome"
    assert job.display_args == [5, "x"]
    mail = active_job(
        "ActionMailer::MailDeliveryJob",
        [
            "UserMailer",
            "welcome",
            "deliver_now",
            {"params": {"user": {"_aj_globalid": "gid://app/User/1"}}, "args": [3], "_aj_ruby2_keywords": ["params"]},
        ],
    )
    job = JobRecord(wire.dumps(mail), "mailers")
    assert job.display_class == "UserMailer#welcome"
    assert job.display_args == [{"user": "gid://app/User/1"}, [3]]


def test_an_explicit_display_class_wins(config):
    assert record(display_class="Shown").display_class == "Shown"


def test_a_django_task_shows_the_task_and_its_arguments(config):
    item = {
        "class": "wurk.contrib.django.backend.TaskWrapper",
        "wrapped": "shop.tasks.send_receipt",
        "queue": "default",
        "args": [{"task_path": "shop.tasks.send_receipt", "args": [12], "kwargs": {"resend": True}}],
        "jid": "d" * 24,
    }
    job = JobRecord(wire.dumps(item), "default")
    assert job.display_class == "shop.tasks.send_receipt"
    assert job.display_args == [12, {"resend": True}]
    del item["wrapped"]
    item["args"][0]["kwargs"] = {}
    job = JobRecord(wire.dumps(item), "default")
    assert job.display_class == "shop.tasks.send_receipt"
    assert job.display_args == [12]


def test_iterable_state_is_read_from_the_it_hash(config, redis):
    job = record(jid="e" * 24)
    assert job.iterable_state is None
    redis.hset("it-" + "e" * 24, mapping={"ex": 2, "c": json.dumps({"page": 4}), "rt": "12.5", "cancelled": 1796027746})
    state = job.iterable_state
    assert isinstance(state, IterableState)
    assert (state.executions, state.cursor, state.runtime, state.cancelled) == (2, {"page": 4}, 12.5, 1796027746)
    redis.hset("it-" + "e" * 24, mapping={"c": "not json"})
    redis.hdel("it-" + "e" * 24, "cancelled")
    state = job.iterable_state
    assert state is not None
    assert (state.cursor, state.cancelled) == ("not json", None)
    assert record().iterable_state is None


def test_timestamps_out_of_range_or_of_the_wrong_type_read_as_none(config):
    assert record(created_at=10**20).created_at is None
    assert record(failed_at=1e300).failed_at is None
    assert record(enqueued_at="yesterday").enqueued_at is None
    assert record(retried_at=True).retried_at is None
    assert record(enqueued_at="yesterday").latency == 0.0


def test_an_encryption_envelope_is_masked_by_its_shape_wherever_it_is(config):
    envelope = {"__wurk_enc__": True, "v": 1, "iv": "aXY=", "ct": "Y3Q=", "tag": "dGFn"}
    # No ``encrypt`` flag: the shape alone masks it, in any position.
    assert record(args=[envelope, 2]).display_args == ["[encrypted data]", 2]
    assert record(args=[1, envelope]).display_args == [1, "[encrypted data]"]
    assert record(args=[1, envelope], encrypt=True).args == [1, envelope]  # programs see it verbatim
    # A wrapper whose only argument is ciphertext has nothing to unwrap.
    django = record(**{"class": "wurk.contrib.django.backend.TaskWrapper", "args": [envelope]})
    assert django.display_args == ["[encrypted data]"]
    active_job = record(**{"class": "Sidekiq::ActiveJob::Wrapper", "args": [envelope]})
    assert active_job.display_args == ["[encrypted data]"]
    # A dict that merely looks alike is an argument like any other.
    assert record(args=[{"__wurk_enc__": "yes"}]).display_args == [{"__wurk_enc__": "yes"}]
