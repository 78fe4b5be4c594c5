"""Named shards (docs/shards.md): configuration, routing of pushes, the data
API and ``wurk.via``, on two real servers."""

from __future__ import annotations

import json

import pytest

import wurk
from wurk import api
from wurk.config.shards import shards_from_env


class PlainJob(wurk.Job):
    def perform(self, *args):
        pass


class EastJob(wurk.Job, pool="east", queue="reports"):
    def perform(self, *args):
        pass


@pytest.fixture
def sharded(config, shard_url):
    config["shards"] = {"east": shard_url}
    return config


def stored(client, queue="default"):
    return [json.loads(raw) for raw in client.lrange(f"queue:{queue}", 0, -1)]


def test_shards_take_a_url_or_connection_options(config):
    config["shards"] = {"east": "redis://east:6379/0", "west": {"url": "rediss://west:6380/1", "ssl_ca_certs": "ca"}}
    assert config.shards == {
        "east": {"url": "redis://east:6379/0"},
        "west": {"url": "rediss://west:6380/1", "ssl_ca_certs": "ca"},
    }


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ("redis://x", "shards must map shard names"),
        ({"a b": "redis://x"}, "a shard's name is 1 to 64 letters"),
        ({"default": "redis://x"}, "'default' names the main Redis"),
        ({"east": {"ssl_ca_certs": "ca"}}, "shards.east must be a Redis URL or a mapping with a 'url'"),
        ({"east": ""}, "shards.east must be a Redis URL"),
    ],
)
def test_a_wrong_shards_setting_is_refused_in_one_line(config, shards, message):
    with pytest.raises(wurk.ConfigurationError, match=message):
        config["shards"] = shards


@pytest.mark.parametrize(
    "shards",
    [
        "redis://:hunter2@east:6379/0",
        {"east": {"password": "hunter2", "host": "east"}},
        {"redis://:hunter2@east:6379/0": "redis://east"},
    ],
)
def test_a_refused_shards_setting_never_shows_a_password(config, shards):
    with pytest.raises(wurk.ConfigurationError) as refused:
        config["shards"] = shards
    assert "hunter2" not in str(refused.value)
    with pytest.raises(wurk.ConfigurationError) as from_env:
        shards_from_env({"WURK_SHARDS": "redis://:hunter2@east:6379/0"})
    assert "hunter2" not in str(from_env.value)


def test_a_misspelt_shard_name_names_the_configured_ones(sharded):
    sharded["shards"] = {**sharded["shards"], "west": "redis://west:6379/0"}
    with pytest.raises(wurk.ConfigurationError) as refused:
        sharded.shard("eats")
    assert str(refused.value) == "unknown shard 'eats'; did you mean 'east'? (configured shards: east, west)"
    with pytest.raises(wurk.ConfigurationError, match="configured shards: east, west"):
        PlainJob.set(pool="north").perform_async(1)
    config = wurk.Config()
    with pytest.raises(wurk.ConfigurationError, match="no shards are configured"):
        config.shard("east")


def test_wurk_shards_is_read_when_the_setting_is_unset(monkeypatch, shard_url):
    sentinel_url = "redis+sentinel://s1:26379,s2:26379/mymaster"
    monkeypatch.setenv("WURK_SHARDS", f"east={shard_url},west={sentinel_url} north=rediss://n:6380/2")
    assert wurk.Config().shards == {
        "east": {"url": shard_url},
        "west": {"url": sentinel_url},
        "north": {"url": "rediss://n:6380/2"},
    }
    configured = wurk.Config()
    configured["shards"] = {"south": "redis://s:1/0"}  # the setting wins over the environment
    assert list(configured.shards) == ["south"]
    with pytest.raises(wurk.ConfigurationError, match="WURK_SHARDS: 'oops' is not name=redis://"):
        shards_from_env({"WURK_SHARDS": "oops"})


def test_a_class_pool_option_routes_every_push_and_is_never_stored(sharded, redis, east):
    jid = EastJob.perform_async(1)
    EastJob.perform_in(60, 2)
    EastJob.perform_bulk([[3], [4]])
    assert redis.dbsize() == 0  # nothing on the main server
    jobs = stored(east, "reports")
    assert [job["args"] for job in reversed(jobs)] == [[1], [3], [4]]
    assert jobs[-1]["jid"] == jid
    assert east.zcard("schedule") == 1
    payloads = [*jobs, json.loads(east.zrange("schedule", 0, -1)[0])]
    assert all("pool" not in job for job in payloads)


def test_set_and_client_take_a_shard_name(sharded, redis, east):
    PlainJob.set(pool="east").perform_async("set")
    wurk.Client(pool="east").push({"class": PlainJob, "args": ["client"]})
    wurk.Client().push({"class": PlainJob, "args": ["item"], "pool": "east"})
    PlainJob.perform_async("main")
    assert sorted(job["args"][0] for job in stored(east)) == ["client", "item", "set"]
    assert [job["args"] for job in stored(redis)] == [["main"]]
    assert all("pool" not in job for job in stored(east))


def test_wurk_shard_is_the_shards_pool(sharded, east):
    pool = wurk.shard("east")
    assert pool is sharded.shard("east")  # one pool per shard, built once
    assert pool.execute(lambda conn: conn.ping())
    assert pool.name == "shard:east"


def test_the_data_api_reads_and_changes_a_shard_by_name(sharded, redis, east):
    PlainJob.set(pool="east", queue="mail").perform_async(1)
    PlainJob.set(pool="east", queue="mail").perform_async(2)
    PlainJob.set(queue="mail").perform_async(3)
    assert api.Queue("mail", pool="east").size == 2
    assert api.Queue("mail").size == 1
    assert api.Stats(pool="east").enqueued == 2
    assert [q.name for q in api.Queue.all(pool="east")] == ["mail"]
    api.Queue("mail", pool="east").clear()
    assert east.llen("queue:mail") == 0
    assert redis.llen("queue:mail") == 1
    with pytest.raises(wurk.ConfigurationError, match="unknown shard 'west'"):
        api.Stats(pool="west")


def test_via_routes_a_block_for_its_configuration_only(sharded, redis, east):
    with wurk.via("east") as pool:
        assert sharded.redis_pool is pool
        PlainJob.perform_async("inside")
        assert api.Queue().size == 1
        other = wurk.Config()
        assert other.redis_pool is not pool  # another configuration is not routed
    PlainJob.perform_async("after")
    assert [job["args"] for job in stored(east)] == [["inside"]]
    assert [job["args"] for job in stored(redis)] == [["after"]]


def test_a_unique_lock_of_a_sharded_push_lives_on_the_shard(sharded, redis, east):
    import wurk_unique

    wurk_unique.enable(config=sharded)
    try:
        first = PlainJob.set(pool="east", unique_for=60).perform_async("once")
        again = PlainJob.set(pool="east", unique_for=60).perform_async("once")
        assert first is not None
        assert again is None
        assert list(east.scan_iter("unique:*"))  # the lock sits beside the job
        assert not list(redis.scan_iter("unique:*"))
        assert PlainJob.set(unique_for=60).perform_async("once") is not None  # another shard, another lock
    finally:
        wurk_unique.disable()


def test_a_testing_mode_takes_a_routed_job_without_a_shard(config):
    with wurk.testing.fake():
        EastJob.perform_async(1)  # no shard configured: the fake queue takes it
        assert [job["args"] for job in EastJob.jobs] == [[1]]
        EastJob.clear()


def test_use_shard_makes_the_shard_the_main_redis(sharded, redis, east):
    sharded.redis = {"ssl_ca_certs": None}  # an option of the main server's that must not carry over
    sharded.use_shard("east")
    assert sharded["shard"] == "east"
    assert "ssl_ca_certs" not in sharded.redis
    PlainJob.perform_async(1)
    assert east.llen("queue:default") == 1
    assert redis.dbsize() == 0
