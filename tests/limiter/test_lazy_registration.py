"""Building a limiter touches no Redis; its first use registers it.

The guides define limiters at module level, so a job module must import with
no server reachable. The registration (``lmtr:<name>`` and ``lmtr-list``) is
written at the first use instead, once per process for each pool, by one
thread however many use it first, and again in a forked child.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest
import redis as redis_py

import wurk
from tests.helpers import Subprocess, with_db
from wurk import current
from wurk_limiter import Limiter
from wurk_limiter.middleware import LimiterMiddleware

from .conftest import MAKERS, call_kwargs


def use(limiter: Limiter, kind: str) -> None:
    with limiter.within_limit(**call_kwargs(kind)):
        pass


@pytest.fixture
def silent_port() -> Iterator[socket.socket]:
    """A port that listens and never answers: a connection to it waits in the
    backlog, where ``accept`` finds it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    yield listener
    listener.close()


def connected(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_building_every_type_makes_no_connection(silent_port, monkeypatch):
    port = silent_port.getsockname()[1]
    nowhere = wurk.Config()
    nowhere.redis = {"url": f"redis://127.0.0.1:{port}/0"}
    previous = wurk.set_default_config(nowhere)  # the default, too, points at the silent port
    try:
        built = [make(f"quiet-{kind}") for kind, make in MAKERS.items()]
        built += [make(f"explicit-{kind}", config=nowhere) for kind, make in MAKERS.items()]
        built.append(Limiter.unlimited())
    finally:
        wurk.set_default_config(previous)
    assert len(built) == 2 * len(MAKERS) + 1
    assert not connected(silent_port)
    # The probe sees a connection when there is one.
    probe = redis_py.Redis(port=port, socket_timeout=0.2)
    with pytest.raises(redis_py.exceptions.TimeoutError):
        probe.ping()
    probe.close()
    assert connected(silent_port)


def test_a_job_module_with_limiters_imports_with_no_server():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    code = "import tests.limiter.lazy_app as app; print('built', len(app.EVERY))"
    child = Subprocess.python("-c", code, env={"REDIS_URL": f"redis://127.0.0.1:{port}/0"})
    assert child.wait(60) == 0, child.output()
    assert "built 5" in child.output()


def test_the_first_use_writes_what_construction_used_to(config, redis, kind):
    limiter = MAKERS[kind]("stripe-1", wait_timeout=0)
    assert redis.keys("*") == []
    assert Limiter.names() == []
    use(limiter, kind)
    meta = redis.hgetall("lmtr:stripe-1")
    assert set(meta) == {b"type", b"options", b"fingerprint"}
    assert meta[b"type"] == kind.encode()
    assert json.loads(meta[b"options"]) == json.loads(json.dumps(limiter.options))
    assert meta[b"fingerprint"].decode() == limiter.fingerprint
    assert 86_400 * 90 - 5 <= redis.ttl("lmtr:stripe-1") <= 86_400 * 90
    assert Limiter.names() == ["stripe-1"]


@pytest.mark.parametrize("first", ["status", "reset"])
def test_reading_or_resetting_is_a_first_use_too(config, redis, first):
    limiter = Limiter.window("reads", 5, 60)
    getattr(limiter, first)()
    assert Limiter.names() == ["reads"]
    assert redis.hget("lmtr:reads", "type") == b"window"


def test_register_false_never_registers(config, redis, kind):
    limiter = MAKERS[kind]("quiet", wait_timeout=0, register=False)
    use(limiter, kind)
    limiter.status()
    assert Limiter.names() == []
    assert not redis.exists("lmtr:quiet")


def sadd_calls(redis) -> int:
    return int(redis.info("commandstats").get("cmdstat_sadd", {}).get("calls", 0))


def test_many_threads_first_use_registers_once_per_pool(config, redis, redis_url):
    limiter = Limiter.concurrent("shared", 50, wait_timeout=5)
    redis.config_resetstat()
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        with limiter.within_limit():
            pass

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sadd_calls(redis) == 1  # one registration, whichever thread wrote it
    with limiter.within_limit():
        pass
    assert sadd_calls(redis) == 1
    other = wurk.Config()
    other.redis = {"url": redis_url}
    previous = wurk.set_default_config(other)  # another configuration, another pool
    try:
        with limiter.within_limit():
            pass
    finally:
        wurk.set_default_config(previous)
        other.reset_redis_pools()
    assert sadd_calls(redis) == 2


def test_delete_forgets_the_registration_and_a_later_use_writes_it_again(config, redis):
    limiter = Limiter.window("again", 5, 60)
    limiter.status()
    limiter.delete()
    assert Limiter.names() == []
    limiter.status()
    assert Limiter.names() == ["again"]


def test_inside_a_job_a_limiter_without_config_uses_the_jobs_configuration(config, redis, redis_url, server):
    """The default configuration is the suite's (db 0); the job runs under one
    on db 1 (``wurk.current_config()``), and the limiter built without
    ``config=`` registers there."""
    running = wurk.Config()
    running.redis = {"url": with_db(redis_url, 1)}
    db1 = redis_py.Redis.from_url(with_db(server.url, 1))  # an administrator, to flush
    try:
        limiter = Limiter.concurrent("per-job", 1)
        middleware = LimiterMiddleware()
        middleware.config = running
        job = {"class": "Charges", "jid": "0" * 24, "args": [], "queue": "default"}
        with current.running(running):  # as the processor marks its thread for the job
            middleware.call(None, job, "default", lambda: limiter.within_limit(lambda: None))
        assert db1.smembers("lmtr-list") == {b"per-job"}
        assert redis.keys("*") == []  # nothing on the default's database
        limiter.status()  # outside the job: the default configuration
        assert redis.smembers("lmtr-list") == {b"per-job"}
    finally:
        db1.flushdb()
        db1.close()
        running.reset_redis_pools()


def test_a_forked_child_registers_again_and_the_parent_only_once(config, redis_url):
    child = Subprocess.python("-m", "tests.limiter.lazy_app", env={"REDIS_URL": redis_url})
    assert child.wait(60) == 0, child.output()
    report = json.loads(child.output().strip().splitlines()[-1])
    assert report == {
        "parent_first_use": True,
        "parent_again": False,
        "child_exit": True,
        "child_registered": True,
    }
