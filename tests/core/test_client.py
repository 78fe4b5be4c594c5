"""The client and the job model against a real server: checks, options, chains, pools."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

import pytest

import wurk
from wurk.client.payload import ComplexArgumentError, InvalidJobError
from wurk.errors import ConfigurationError


class PlainJob(wurk.Job):
    def perform(self, *args):
        return list(args)


class ExpiringJob(wurk.Job, expires_in=timedelta(hours=1)):
    def perform(self):
        pass


class RetryForJob(wurk.Job, retry_for=3600, retry_queue="slow-lane"):
    def perform(self):
        pass


class ChildJob(ExpiringJob, queue="child", retry=3):
    pass


@wurk.job(queue="mail", retry=2)
def send_mail(address):
    return f"sent to {address}"


@wurk.job
async def async_task(value):
    return value * 2


calls: list[str] = []


class Tagger(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        calls.append(f"client:{job['args']}")
        job.setdefault("tagged_by", "Tagger")
        return call_next()


class HaltOdd(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if job["args"] and isinstance(job["args"][0], int) and job["args"][0] % 2:
            return None
        return call_next()


class Around(wurk.ServerMiddleware):
    def call(self, job_instance, job, queue, call_next):
        calls.append(f"server:{job['jid'] == job_instance.jid}")
        return call_next()


def keys(redis):
    return sorted(key.decode() for key in redis.keys("*"))


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"args": [1]}, "no 'class'"),
        ({"class": PlainJob}, "no 'args'"),
        ({"class": PlainJob, "args": "1"}, "args must be a list"),
        ({"class": PlainJob, "args": [], "queue": ""}, "queue must be a non-empty string"),
        ({"class": PlainJob, "args": [], "queue": "has space"}, "may only contain"),
        ({"class": PlainJob, "args": [], "queue": 5}, "queue must be a non-empty string"),
        ({"class": PlainJob, "args": [], "at": "tomorrow"}, "'at' must be epoch seconds"),
        ({"class": PlainJob, "args": [], "tags": "x"}, "tags must be a list"),
        ({"class": PlainJob, "args": [], "retry_for": 2_000_000_000}, "looks like a timestamp"),
        ({"class": PlainJob, "args": [object()]}, r"args\[0\] = <object object"),
        ({"class": PlainJob, "args": [{"when": {1: "x"}}]}, r"args\[0\]\['when'\] has the key 1"),
        ({"class": PlainJob, "args": [[1, (2, 3)]]}, r"args\[0\]\[1\] = \(2, 3\)"),
        ({"class": PlainJob, "args": [float("nan")]}, "not a finite number"),
        ({"class": PlainJob, "args": [], "expires_in": -5}, "expires_in must be > 0"),
    ],
)
def test_bad_input_raises_a_named_error_and_writes_nothing(config, redis, item, message):
    with pytest.raises(InvalidJobError, match=message):
        wurk.Client().push(item)
    assert keys(redis) == []


def test_bulk_with_one_bad_argument_writes_nothing(config, redis):
    with pytest.raises(ComplexArgumentError, match=r"args\[0\] = datetime"):
        PlainJob.perform_bulk([[1], [2], [__import__("datetime").datetime.now()], [4]])
    with pytest.raises(InvalidJobError, match="list of argument lists"):
        PlainJob.perform_bulk([1, 2])
    with pytest.raises(InvalidJobError, match="3 times for 2 jobs"):
        wurk.Client().push_bulk({"class": PlainJob, "args": [[1], [2]], "at": [1e10, 1e10, 1e10]})
    assert keys(redis) == []


class Point:
    def __str__(self):
        return "Point(1, 2)"


def test_complex_arguments_warn_mode_stores_what_json_makes_of_them(config, redis, caplog):
    config["on_complex_arguments"] = "warn"
    caplog.set_level(logging.WARNING, logger="wurk")
    config.logger.propagate = True
    try:
        PlainJob.perform_async(Point(), (1, 2), {3: "three"})
    finally:
        config.logger.propagate = False
    assert "not native JSON: args[0] = <" in caplog.text
    stored = json.loads(redis.lrange("queue:default", 0, -1)[0])
    assert stored["args"] == ["Point(1, 2)", [1, 2], {"3": "three"}]


def test_complex_arguments_off_stores_silently(config, redis, caplog):
    config["on_complex_arguments"] = False
    caplog.set_level(logging.WARNING, logger="wurk")
    PlainJob.perform_bulk([[Point()], [(5,)]])
    assert caplog.text == ""
    stored = [json.loads(item)["args"] for item in reversed(redis.lrange("queue:default", 0, -1))]
    assert stored == [["Point(1, 2)"], [[5]]]
    with pytest.raises(ConfigurationError, match="on_complex_arguments"):
        config["on_complex_arguments"] = "ignore"


def test_class_options_are_checked_at_definition():
    with pytest.raises(ConfigurationError, match="retry must be"):

        class BadRetry(wurk.Job, retry="yes"):
            pass

    with pytest.raises(ConfigurationError, match="may only contain"):

        class BadQueue(wurk.Job, queue="two words"):
            pass

    with pytest.raises(ConfigurationError, match="tags must be a list of strings"):

        class BadTags(wurk.Job, tags="one"):
            pass


def test_options_inherit_and_override():
    assert ChildJob.wurk_options == {"expires_in": timedelta(hours=1), "queue": "child", "retry": 3}
    assert ChildJob.get_options() == {"retry": 3, "queue": "child", "expires_in": timedelta(hours=1)}
    assert ChildJob.queue_name() == "child"


def test_expires_in_is_stamped_from_created_at_or_at(config, redis):
    ExpiringJob.perform_async()
    job = json.loads(redis.lrange("queue:default", 0, -1)[0])
    assert job["expires_in"] == 3600
    assert job["expiry"] == pytest.approx(job["created_at"] / 1000 + 3600)
    at = time.time() + 7200
    ExpiringJob.perform_at(at)
    [(member, _)] = redis.zrange("schedule", 0, -1, withscores=True)
    assert json.loads(member)["expiry"] == pytest.approx(at + 3600)


def test_retry_for_and_retry_queue_travel_in_the_payload(config, redis):
    RetryForJob.perform_async()
    job = json.loads(redis.lrange("queue:default", 0, -1)[0])
    assert job["retry_for"] == 3600
    assert job["retry_queue"] == "slow-lane"


def test_global_default_job_options(config, redis):
    config.default_job_options = {"retry": 7, "queue": "everywhere"}
    PlainJob.perform_async()
    wurk.Client().push({"class": "Foreign", "args": []})
    jobs = [json.loads(item) for item in redis.lrange("queue:everywhere", 0, -1)]
    assert [(job["retry"], job["class"]) for job in jobs] == [(7, "Foreign"), (7, f"{__name__}.PlainJob")]


def test_foreign_class_names_enqueue_for_other_languages(config, redis):
    jid = wurk.Client().push({"class": "HardJob", "args": [1, "x"], "queue": "ruby"})
    job = json.loads(redis.lrange("queue:ruby", 0, -1)[0])
    assert (job["class"], job["jid"], job["args"]) == ("HardJob", jid, [1, "x"])


def test_halting_client_middleware_drops_the_job(config, redis):
    config.client_middleware.add(HaltOdd)
    assert PlainJob.perform_async(1) is None
    assert PlainJob.perform_async(2) is not None
    assert [json.loads(item)["args"] for item in redis.lrange("queue:default", 0, -1)] == [[2]]


def test_a_client_with_its_own_chain_and_pool(config, redis, server):
    import redis as redis_py

    other = config.new_redis_pool(2, "shard")
    calls.clear()
    client = wurk.Client(config, pool=other)
    client.middleware(lambda chain: chain.add(Tagger))
    assert len(config.client_middleware) == 0  # the global chain is untouched
    client.push({"class": PlainJob, "args": [5]})
    assert calls == ["client:[5]"]
    assert json.loads(redis.lrange("queue:default", 0, -1)[0])["tagged_by"] == "Tagger"
    assert isinstance(other.client, redis_py.Redis)


def test_pool_option_shards_the_push_and_is_not_stored(config, redis):
    from tests.helpers import new_server

    shard = new_server().start()
    try:
        pool = wurk.redis.connection.RedisPool({"url": shard.url}, size=2, name="shard")
        jid = PlainJob.set(pool=pool).perform_async("sharded")
        assert redis.llen("queue:default") == 0
        stored = json.loads(pool.client.lrange("queue:default", 0, -1)[0])
        assert stored["jid"] == jid
        assert "pool" not in stored
        pool.disconnect()
    finally:
        shard.stop()


def test_decorated_functions_are_jobs_and_still_functions(config, redis):
    assert send_mail("a@b.c") == "sent to a@b.c"
    jid = send_mail.perform_async("a@b.c")
    job = json.loads(redis.lrange("queue:mail", 0, -1)[0])
    assert job["class"] == f"{__name__}.send_mail"
    assert (job["jid"], job["retry"]) == (jid, 2)
    assert config.jobs.resolve(job["class"]) is send_mail.job_class
    assert async_task.perform_inline(21) == 42


def test_perform_inline_runs_the_real_client_and_server_chains(config, redis):
    calls.clear()
    config.client_middleware.add(Tagger)
    config.server_middleware.add(Around)
    assert PlainJob.perform_inline(1, "two") == [1, "two"]  # args come back through JSON
    assert calls == ["client:[1, 'two']", "server:True"]
    assert keys(redis) == []
    config.client_middleware.add(HaltOdd)
    assert PlainJob.perform_inline(3) is None


def test_retry_hooks_default_to_the_standard_behaviour():
    error = RuntimeError("boom")
    assert PlainJob.retry_in(1, error, {}) is None
    assert PlainJob.retries_exhausted({}, error) is None


def test_jobs_must_be_importable():
    class Local(wurk.Job):
        def perform(self):
            pass

    with pytest.raises(InvalidJobError, match="define it at module level"):
        Local.perform_async()


def test_perform_methods_reject_bad_times(config):
    with pytest.raises(InvalidJobError, match="interval must be"):
        PlainJob.perform_in("soon")
    with pytest.raises(InvalidJobError, match="interval must be"):
        PlainJob.set(wait="later").perform_async()
