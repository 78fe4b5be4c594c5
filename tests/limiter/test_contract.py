"""The contract every Redis-backed limiter type keeps: registration, keys and
TTLs as the guides' table, admission up to capacity then ``OverLimit``,
introspection, reset and delete, sync and async use."""

from __future__ import annotations

import asyncio
import hashlib
from contextlib import ExitStack

import pytest

from wurk_limiter import Limiter, OverLimit

from .conftest import CAPACITY, MAKERS, STATE_KEY, call_kwargs


def make(kind: str, name: str = "api", **kw: object) -> Limiter:
    return MAKERS[kind](name, wait_timeout=0, **kw)


def state_key(redis, kind: str, name: str) -> bytes:
    pattern, _ = STATE_KEY[kind]
    if pattern is not None:
        return pattern.format(name=name).encode()
    (key,) = redis.keys(f"lmtr-b:{name}:*")
    return key


def hold(stack: ExitStack, limiter: Limiter, kind: str, times: int) -> list:
    return [stack.enter_context(limiter.within_limit(**call_kwargs(kind))) for _ in range(times)]


def test_fingerprint_is_sha256_of_type_name_and_options(config, redis, kind):
    limiter = make(kind, "shop-7")
    limiter.status()  # the first use registers it (tests/limiter/test_lazy_registration.py)
    body = f"{kind}|shop-7|{redis.hget('lmtr:shop-7', 'options').decode()}"
    assert limiter.fingerprint == hashlib.sha256(body.encode()).hexdigest()
    assert redis.hget("lmtr:shop-7", "fingerprint").decode() == limiter.fingerprint
    assert make(kind, "shop-8").fingerprint != limiter.fingerprint


def test_register_false_writes_nothing(config, redis, kind):
    limiter = make(kind, "quiet", register=False)
    status = limiter.status()
    assert status["used"] == 0
    assert status["available"] is True
    assert redis.keys("*") == []


def test_admits_up_to_capacity_then_raises_over_limit(config, redis, kind):
    limiter = make(kind)
    with ExitStack() as stack:
        handles = hold(stack, limiter, kind, CAPACITY)
        with pytest.raises(OverLimit) as refused, limiter.within_limit(**call_kwargs(kind)):
            pytest.fail("the block must not run over the limit")
    seconds, micros = redis.time()
    assert all(abs(handle.admitted_at - (seconds + micros / 1e6)) < 60 for handle in handles)
    assert str(refused.value) == f"limit 'api' ({kind}) reached"
    assert refused.value.limiter is limiter
    assert refused.value.job is None


def test_state_key_type_and_ttl_refreshed_on_use(config, redis, kind):
    limiter = make(kind, "tenant:42")
    with limiter.within_limit(**call_kwargs(kind)):
        key = state_key(redis, kind, "tenant:42")
        assert redis.type(key) == STATE_KEY[kind][1]
    redis.expire(key, 100)
    redis.expire("lmtr:tenant:42", 100)
    with limiter.within_limit(**call_kwargs(kind)):  # inside: a released slot leaves an empty ZSET
        assert redis.ttl(key) > 86_400 * 89
    assert redis.ttl("lmtr:tenant:42") > 86_400 * 89


def test_a_custom_ttl_is_what_the_keys_carry(config, redis, kind):
    limiter = make(kind, "short", ttl=2 * 86_400)
    with limiter.within_limit(**call_kwargs(kind)):
        key = state_key(redis, kind, "short")
        assert 2 * 86_400 - 5 <= redis.ttl(key) <= 2 * 86_400
    assert 2 * 86_400 - 5 <= redis.ttl("lmtr:short") <= 2 * 86_400


def test_status_answers_the_same_shape(config, redis, kind):
    limiter = make(kind)
    with ExitStack() as stack:
        hold(stack, limiter, kind, 1)
        status = limiter.status()
        assert {"used", "limit", "reset_at", "available"} <= set(status)
        assert status["used"] == pytest.approx(1, abs=0.01)
        assert limiter.size == pytest.approx(1, abs=0.01)
        assert status["limit"] == CAPACITY
        assert status["available"] is True
        hold(stack, limiter, kind, 1)
        assert limiter.status()["available"] is False


def test_reset_clears_state_and_keeps_the_registration(config, redis, kind):
    limiter = make(kind)
    with ExitStack() as stack:
        hold(stack, limiter, kind, CAPACITY)
        limiter.reset()
        assert limiter.status()["used"] == 0
        hold(stack, limiter, kind, 1)  # room again
    assert redis.sismember("lmtr-list", "api")
    assert redis.exists("lmtr:api")


def test_delete_removes_state_metadata_and_listing(config, redis, kind):
    limiter = make(kind)
    with limiter.within_limit(**call_kwargs(kind)):
        pass
    limiter.delete()
    # What is left is the calling thread's write fence (wurk.redis.fence), which is
    # no limiter's and expires on its own.
    assert [key for key in redis.keys("*") if not key.startswith(b"wurk:fence:")] == []
    assert Limiter.names() == []


def test_callable_form_returns_the_block_result(config, kind):
    limiter = make(kind)
    if kind == "points":
        assert limiter.within_limit(lambda handle: handle.charged * 10, estimate=1) == 10
    else:
        assert limiter.within_limit(lambda: "done") == "done"


def test_async_with_and_async_callable(config, kind):
    limiter = make(kind)

    async def block(*handle: object) -> str:
        await asyncio.sleep(0)
        return "ran"

    async def main() -> tuple:
        async with limiter.within_limit(**call_kwargs(kind)) as handle:
            admitted = handle.admitted_at
        result = await limiter.within_limit(block, **call_kwargs(kind))
        with pytest.raises(OverLimit):
            async with limiter.within_limit(**call_kwargs(kind)):
                pytest.fail("over the limit")
        return admitted, result

    if kind == "concurrent":  # slots are released: hold them to exhaust it
        with ExitStack() as stack:
            hold(stack, limiter, kind, CAPACITY - 1)

            async def held() -> tuple:
                async with limiter.within_limit():
                    with pytest.raises(OverLimit):
                        async with limiter.within_limit():
                            pytest.fail("over the limit")
                return 1.0, "ran"

            assert asyncio.run(held())[1] == "ran"
        return
    admitted, result = asyncio.run(main())
    assert admitted > 0
    assert result == "ran"
