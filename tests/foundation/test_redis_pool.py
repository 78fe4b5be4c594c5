"""Connection pools and the transient-failure rules, provoked on real servers."""

from __future__ import annotations

import time

import pytest
import redis as redis_py

from tests.helpers import new_server
from wurk.embedded import free_port
from wurk.errors import RedisConnectionError
from wurk.redis_pool import PoolTimeoutError, RedisPool, mask_url


def test_unreachable_server_fails_fast_with_the_url_in_the_message():
    port = free_port()
    url = f"redis://:s3cret@127.0.0.1:{port}/3"
    reports = []
    pool = RedisPool({"url": url}, size=2, name="default-main", error_handlers=[reports.append])
    started = time.monotonic()
    with pytest.raises(RedisConnectionError) as caught:
        pool.execute(lambda conn: conn.ping())
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert f"redis://:***@127.0.0.1:{port}/3" in message
    assert "s3cret" not in message
    assert elapsed < 5, f"took {elapsed:.1f}s: a dead server must not hang the caller"
    assert [(r["attempt"], r["retried"], r["pool"]) for r in reports] == [
        (1, True, "default-main"),
        (2, True, "default-main"),
        (3, False, "default-main"),
    ]


def test_mask_url_keeps_everything_but_the_password():
    assert mask_url("redis://user:pw@host:6380/2") == "redis://user:***@host:6380/2"
    assert mask_url("redis://host:6380/2") == "redis://host:6380/2"


def test_a_blip_is_absorbed_when_the_server_comes_back(tmp_path):
    server = new_server(data_dir=tmp_path, persist=True).start()
    pool = RedisPool({"url": server.url}, size=2, name="blip")
    pool.execute(lambda conn: conn.set("k", "v"))
    port = server.port
    server.kill()

    restarted = new_server(port=port, data_dir=tmp_path, persist=True)
    attempts = []

    def operation(conn):
        attempts.append(1)
        if len(attempts) == 2:
            restarted.start()  # back during the backoff of the first retry
        return conn.get("k")

    try:
        assert pool.execute(operation) == b"v"
        assert len(attempts) >= 2
    finally:
        restarted.stop()


def test_readonly_replica_is_retried_once_then_raises(server):
    primary = new_server().start()
    replica = new_server().start()
    try:
        control = redis_py.Redis.from_url(replica.url)
        control.replicaof("127.0.0.1", primary.port)
        reports = []
        pool = RedisPool({"url": replica.url}, size=2, name="failover", error_handlers=[reports.append])
        with pytest.raises(redis_py.exceptions.ReadOnlyError):
            pool.execute(lambda conn: conn.set("k", "v"))
        assert [(r["attempt"], r["retried"]) for r in reports] == [(1, True), (2, False)]
        control.close()
    finally:
        replica.stop()
        primary.stop()


def test_pool_checkout_timeout_retries_once(redis_url):
    reports = []
    pool = RedisPool({"url": redis_url, "pool_timeout": 0.2}, size=1, name="tiny", error_handlers=[reports.append])
    held = pool.connection_pool.get_connection()
    try:
        with pytest.raises(PoolTimeoutError):
            pool.execute(lambda conn: conn.ping())
    finally:
        pool.connection_pool.release(held)
    assert [(r["attempt"], r["retried"]) for r in reports] == [(1, True), (2, False)]
    assert pool.execute(lambda conn: conn.ping()) is True


def test_unknown_keys_are_forwarded_to_the_client(redis_url):
    pool = RedisPool({"url": redis_url, "client_name": "wurk-test", "size": 99}, size=3, name="fwd")
    assert pool.execute(lambda conn: conn.client_getname()) in ("wurk-test", b"wurk-test")
    assert pool.size == 3


def test_sizes_follow_the_guides(config):
    assert config.redis_pool.size == 10  # max(5 + 5, 10)
    config.concurrency = 12
    config.reset_redis_pools()
    assert config.redis_pool.size == 17
    assert config.default_capsule.fetch_redis_pool.size == 12
    assert config.web_redis_pool.size == 5
    config.redis = {"size": 4}
    assert config.redis_pool.size == 4
    assert config.default_capsule.fetch_redis_pool.size == 12
