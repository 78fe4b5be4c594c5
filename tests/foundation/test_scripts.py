"""The Lua script registry against a real server: lazy load, SHA calls, NOSCRIPT recovery."""

from __future__ import annotations

import itertools

import pytest

from wurk.errors import ScriptError
from wurk.redis.scripts import Script, ScriptRegistry

_calls = itertools.count(1)


def pop_args(sorted_set: str, now: str) -> tuple[list[str], list[object]]:
    """``core.zpopbyscore``'s keys and arguments for a new call (a new sequence number)."""
    return [sorted_set, "wurk:popped:test"], [now, next(_calls), 60]


def script_loads(redis) -> int:
    stats = redis.info("commandstats")
    return int(stats.get("cmdstat_script|load", {}).get("calls", 0))


def test_core_scripts_register_through_the_builtin_plugin(config):
    assert "core.zpopbyscore" in config.scripts.names()


def test_zpopbyscore_pops_only_due_members_one_at_a_time(config, redis):
    redis.zadd("schedule", {"a": 100.0, "b": 200.0, "c": 9e9})
    client = config.redis_pool.client
    call = config.scripts.call
    assert call("core.zpopbyscore", client, *pop_args("schedule", "250.5")) == [b"a", b"100"]
    assert call("core.zpopbyscore", client, *pop_args("schedule", "250.5")) == [b"b", b"200"]
    assert call("core.zpopbyscore", client, *pop_args("schedule", "250.5")) is None
    assert redis.zrange("schedule", 0, -1) == [b"c"]


def test_zpopbyscore_sent_again_returns_what_it_took(config, redis):
    """A pop whose reply was lost is sent again with the same sequence
    number: it must hand back the member it took, not take the next one."""
    redis.zadd("schedule", {"a": 100.0, "b": 200.0})
    client = config.redis_pool.client
    script_keys, args = pop_args("schedule", "250")
    assert config.scripts.call("core.zpopbyscore", client, script_keys, args) == [b"a", b"100"]
    assert config.scripts.call("core.zpopbyscore", client, script_keys, args) == [b"a", b"100"]
    assert redis.zrange("schedule", 0, -1) == [b"b"]
    assert 0 < redis.ttl("wurk:popped:test") <= 60
    assert config.scripts.call("core.zpopbyscore", client, *pop_args("schedule", "250")) == [b"b", b"200"]


def test_scripts_load_once_per_pool_and_survive_script_flush(config, redis):
    client = config.redis_pool.client
    before = script_loads(redis)
    for _ in range(5):
        config.scripts.call("core.zpopbyscore", client, *pop_args("retry", "1"))
    assert script_loads(redis) - before == 1

    redis.script_flush()  # what a restarted or failed-over server looks like
    redis.zadd("retry", {"job": 1.0})
    assert config.scripts.call("core.zpopbyscore", client, *pop_args("retry", "2")) == [b"job", b"1"]
    assert script_loads(redis) - before == 2

    other = config.new_redis_pool(2, "other")
    config.scripts.call("core.zpopbyscore", other.client, *pop_args("retry", "2"))
    assert script_loads(redis) - before == 3


def test_pipeline_calls_load_the_script_first(config, redis):
    redis.zadd("schedule", {"x": 1.0})
    pipe = config.redis_pool.client.pipeline(transaction=False)
    config.scripts.queue("core.zpopbyscore", pipe, *pop_args("schedule", "5"))
    pipe.get("missing")
    assert pipe.execute() == [[b"x", b"1"], None]


def test_a_pipeline_recovers_from_a_lost_script_cache(config, redis):
    client = config.redis_pool.client
    warm = client.pipeline(transaction=False)
    config.scripts.queue("core.zpopbyscore", warm, *pop_args("schedule", "5"))
    config.scripts.execute(warm)  # loaded, and remembered as loaded for this pool
    redis.script_flush()  # what a restarted or failed-over server looks like
    redis.zadd("schedule", {"x": 1.0, "y": 2.0})
    for _ in range(2):  # the call is repeated alone, and the next pipeline loads afresh
        pipe = client.pipeline(transaction=False)
        pipe.set("before", "1")
        config.scripts.queue("core.zpopbyscore", pipe, *pop_args("schedule", "5"))
        pipe.get("before")
        replies = config.scripts.execute(pipe)
        assert replies[0] is True
        assert replies[2] == b"1"
        assert replies[1] in ([b"x", b"1"], [b"y", b"2"])
    assert redis.zcard("schedule") == 0


def test_a_pipeline_still_raises_other_errors(config, redis):
    redis.set("schedule", "not a sorted set")
    pipe = config.redis_pool.client.pipeline(transaction=False)
    config.scripts.queue("core.zpopbyscore", pipe, *pop_args("schedule", "5"))
    with pytest.raises(Exception, match="WRONGTYPE"):
        config.scripts.execute(pipe)


def test_wrong_key_count_is_refused_before_reaching_redis(config, redis):
    with pytest.raises(ScriptError, match="takes 2 keys, got 3"):
        config.scripts.call("core.zpopbyscore", config.redis_pool.client, ["a", "b", "c"], ["1"])


def test_headers_decide_arity_and_are_required():
    variadic = Script.parse("test.many", "-- KEYS[1]: a\n-- KEYS[2..n]: more\nreturn 1\n")
    assert variadic.min_keys == 1
    assert variadic.variadic
    variadic.check_keys(["a", "b", "c"])
    with pytest.raises(ScriptError, match="at least 1"):
        variadic.check_keys([])
    with pytest.raises(ScriptError, match="header"):
        Script.parse("test.bare", "return 1\n")
    with pytest.raises(ScriptError, match="namespaced"):
        Script.parse("bare", "-- KEYS[1]: x\nreturn 1\n")


def test_a_name_cannot_be_reused_for_a_different_script():
    registry = ScriptRegistry()
    registry.register("test.one", "-- no keys\nreturn 1\n")
    registry.register("test.one", "-- no keys\nreturn 1\n")  # same source: fine
    with pytest.raises(ScriptError, match="different source"):
        registry.register("test.one", "-- no keys\nreturn 2\n")
    with pytest.raises(ScriptError, match="no script named"):
        registry["test.two"]
