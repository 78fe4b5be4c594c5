"""Connection pools and the transient-failure rules, provoked on real servers."""

from __future__ import annotations

import time

import pytest
import redis as redis_py

import wurk_web
from tests.helpers import new_server, tls_mode, wait_for
from wurk.errors import RedisConnectionError
from wurk.redis.connection import PoolTimeoutError, RedisPool, mask_url
from wurk.redis.servers import free_port


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


def test_mask_url_hides_the_password_of_a_malformed_url_too():
    # Malformed URLs are the ones that end up in error messages.
    assert mask_url("user:pw@host:6380") == "user:***@host:6380"
    assert mask_url("redis://:pw@host:port/0") == "redis://:***@host:port/0"
    assert mask_url("localhost:6379") == "localhost:6379"


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
        pool.disconnect()
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
        pool.disconnect()
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
    pool.disconnect()


def test_unknown_keys_are_forwarded_to_the_client(redis_url):
    pool = RedisPool({"url": redis_url, "client_name": "wurk-test", "size": 99}, size=3, name="fwd")
    assert pool.execute(lambda conn: conn.client_getname()) in ("wurk-test", b"wurk-test")
    assert pool.size == 3
    pool.disconnect()


def test_sizes_follow_the_guides(config):
    assert config.redis_pool.size == 10  # max(5 + 5, 10)
    config.concurrency = 12
    config.reset_redis_pools()
    assert config.redis_pool.size == 17
    assert config.default_capsule.fetch_redis_pool.size == 13  # a connection per thread, one for the claims
    assert wurk_web.redis_pool(config).size == 5
    config.redis = {"size": 4}
    assert config.redis_pool.size == 4
    assert config.default_capsule.fetch_redis_pool.size == 13


def test_username_and_password_reach_an_acl_protected_server(redis, redis_url):
    redis.acl_setuser("worker", enabled=True, passwords=["+w0rk"], keys=["*"], commands=["+@all"])
    by_url = RedisPool({"url": redis_url.replace("://", "://worker:w0rk@", 1)}, size=1, name="acl-url")
    assert by_url.execute(lambda conn: conn.acl_whoami()) in ("worker", b"worker")
    by_keys = RedisPool({"url": redis_url, "username": "worker", "password": "w0rk"}, size=1, name="acl-keys")
    assert by_keys.execute(lambda conn: conn.acl_whoami()) in ("worker", b"worker")
    wrong = RedisPool({"url": redis_url, "username": "worker", "password": "nope"}, size=1, name="acl-bad")
    with pytest.raises(redis_py.exceptions.AuthenticationError):
        wrong.execute(lambda conn: conn.ping())
    for pool in (by_url, by_keys, wrong):
        pool.disconnect()


def test_sentinel_supplies_the_master_address(tmp_path):
    import subprocess

    if tls_mode():
        pytest.skip("Sentinel is not set up for TLS in the TLS test mode (WURK_TEST_TLS=1)")

    from wurk.redis.servers import ServerProcess

    primary = new_server().start()
    sentinel_port = free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(f"port {sentinel_port}\nbind 127.0.0.1\nsentinel monitor main 127.0.0.1 {primary.port} 1\n")
    sentinel = subprocess.Popen([primary.binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL)
    try:
        ServerProcess(primary.binary, port=sentinel_port)._wait_ready(10)  # wait for it to answer PING
        pool = RedisPool(
            {"url": "redis://unused/3", "sentinels": [("127.0.0.1", sentinel_port)], "master_name": "main"},
            size=2,
            name="sentinel",
        )
        pool.execute(lambda conn: conn.set("through", "sentinel"))
        direct = redis_py.Redis(host="127.0.0.1", port=primary.port, db=3)
        assert direct.get("through") == b"sentinel"
        direct.close()
        pool.disconnect()
        with pytest.raises(ValueError, match="master_name"):
            RedisPool({"sentinels": [f"127.0.0.1:{sentinel_port}"]}, size=1, name="incomplete")
    finally:
        sentinel.terminate()
        sentinel.wait(10)
        primary.stop()


def test_a_forked_child_never_shares_the_parents_connections(config, redis):
    import os

    pool = config.redis_pool
    pool.execute(lambda conn: conn.set("owner", "parent"))
    parent_id = pool.execute(lambda conn: conn.client_id())
    pid = os.fork()
    if pid == 0:
        try:
            pool.execute(lambda conn: conn.set(f"child:{os.getpid()}", conn.client_id()))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(redis.get(f"child:{pid}")) != parent_id  # the child opened its own connection
    assert pool.execute(lambda conn: conn.client_id()) == parent_id  # and the parent's is intact
    assert pool.execute(lambda conn: conn.get("owner")) == b"parent"


def test_a_connection_error_in_one_thread_leaves_the_others_connections_alone(config, redis):
    import threading

    pool = config.new_redis_pool(2, "shared")
    got = {}

    def wait_for_job():
        try:
            got["reply"] = pool.client.blpop("queue:shared", 3)  # a direct call, as the fetcher makes
        except Exception as exc:  # what closing its socket under it used to do
            got["error"] = exc

    waiter = threading.Thread(target=wait_for_job)
    waiter.start()
    wait_for(lambda: any(c.get("cmd") == "blpop" for c in redis.client_list()))

    def lose_own_connection(conn):
        if not got.get("killed"):  # first attempt: the server drops this connection mid-command
            got["killed"] = True
            me = conn.client_id()

            def kill():
                wait_for(lambda: any(c["id"] == str(me) and c["cmd"] == "blpop" for c in redis.client_list()))
                redis.client_kill_filter(_id=me)

            threading.Thread(target=kill).start()
        return conn.blpop("queue:other", 0.2)

    assert pool.execute(lose_own_connection) is None  # retried, on a fresh connection
    redis.rpush("queue:shared", "job")
    waiter.join(5)
    assert "error" not in got
    assert got["reply"] == (b"queue:shared", b"job")


def client_ids(redis, name):
    """The ids of the server's clients named ``name``."""
    return sorted(client["id"] for client in redis.client_list() if client.get("name") == name)


def test_a_kept_connection_serves_call_after_call_and_is_dropped_after_an_error(redis_url, redis):
    """The claims' kept connection: one connection for every call, taken
    from the pool once; a call that fails (the server closed it) drops it,
    and the next call takes another and works; released, it is the pool's
    again."""
    pool = RedisPool({"url": redis_url, "client_name": "kept"}, size=2, name="kept")
    kept = pool.kept()
    assert kept.send([("SET", "k", 1), ("INCR", "k")]) == [b"OK", 2]
    first = client_ids(redis, "kept")
    assert len(first) == 1
    for _ in range(20):
        kept.send([("INCR", "k")])
    assert client_ids(redis, "kept") == first, "no new connection while it is kept"
    redis.client_kill_filter(_id=first[0])
    with pytest.raises(redis_py.ConnectionError):
        kept.send([("INCR", "k")])
    assert kept.send([("GET", "k")]) == [b"22"]
    second = client_ids(redis, "kept")
    assert len(second) == 1
    assert second != first
    # The kept connection counts against the pool's size: one is left to others.
    assert pool.client.incr("k") == 23
    kept.release()
    held = [pool.connection_pool.get_connection() for _ in range(2)]  # both are the pool's again
    for connection in held:
        pool.connection_pool.release(connection)


def test_a_kept_connection_in_use_sends_through_the_pool(redis_url, redis):
    """A second thread that finds the kept connection busy (a call under
    way) does not wait for it: its call goes through the pool."""
    import threading

    pool = RedisPool({"url": redis_url, "client_name": "busy"}, size=3, name="busy")
    kept = pool.kept()
    kept.send([("PING",)])
    blocked = threading.Thread(target=kept.send, args=([("BLPOP", "never", 2)],))
    blocked.start()
    wait_for(lambda: any(c.get("cmd") == "blpop" for c in redis.client_list() if c.get("name") == "busy"))
    started = time.monotonic()
    assert kept.send([("PING",)]) == [b"PONG"]
    assert time.monotonic() - started < 1, "the call waited for the busy kept connection"
    assert len(client_ids(redis, "busy")) == 2
    blocked.join(5)
    kept.release()
