"""Durable push: a push returns only once a replica holds the job.

Against a real primary and a real replica (and a primary with none, where
the wait must fail): a push with ``durable_push`` on is on the replica the
moment it returns, in each of its forms (the pipelined push, the large
push's script, a push whose reply was lost, a plugin writer's push), and a
push no replica confirms raises an error naming the job, which is on the
primary once, not pushed again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis as redis_py

import wurk
from tests.helpers import new_server, tls_mode, wait_for
from tests.sentinel.cluster import DATA_PASSWORD, DataNode
from wurk.testing.faults import FaultProxy

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(tls_mode(), reason="the replication pair is plain TCP (WURK_TEST_TLS=1 is for one server)"),
]

DURABLE = {"replicas": 1, "timeout_ms": 2000}


class Durable(wurk.Job):
    def perform(self, n):
        pass


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Iterator[tuple[DataNode, DataNode]]:
    binary, directory = new_server().binary, tmp_path_factory.mktemp("pair")
    primary = DataNode(binary, directory).start()
    replica = DataNode(binary, directory, replica_of=primary.port).start()

    def linked() -> bool:
        info = replica.client().info("replication")
        return info.get("master_link_status") == "up"

    wait_for(linked, timeout=10)
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture
def nodes(pair) -> Iterator[tuple[redis_py.Redis, redis_py.Redis]]:
    primary, replica = pair
    on_primary, on_replica = primary.client(), replica.client()
    on_primary.flushall()
    wait_for(lambda: on_replica.dbsize() == 0)
    yield on_primary, on_replica
    on_primary.close()
    on_replica.close()


def durable_config(url: str, durable: object = DURABLE) -> wurk.Config:
    config = wurk.Config()
    config.redis = {"url": url}
    config["durable_push"] = durable
    return config


def test_a_durable_push_is_on_the_replica_when_it_returns(pair, nodes):
    primary, _ = pair
    _, on_replica = nodes
    config = durable_config(primary.url)
    try:
        client = wurk.Client(config)
        jid = client.push({"class": Durable, "args": [1]})
        # Read at once from the replica: no waiting, the push already did.
        assert [json.loads(raw)["jid"] for raw in on_replica.lrange("queue:default", 0, -1)] == [jid]
        scheduled = client.push({"class": Durable, "args": [2], "at": 4_000_000_000})
        assert on_replica.zcard("schedule") == 1
        assert scheduled in on_replica.zrange("schedule", 0, -1)[0].decode()
    finally:
        config.reset_redis_pools()


def test_a_large_push_and_a_bulk_push_wait_for_the_replica_too(pair, nodes):
    primary, _ = pair
    _, on_replica = nodes
    config = durable_config(primary.url)
    try:
        client = wurk.Client(config)
        big = client.push({"class": Durable, "args": ["x" * 20_000]})  # past the pipelined size: the script
        assert on_replica.llen("queue:default") == 1
        jids = client.push_bulk({"class": Durable, "args": [[n] for n in range(2500)]})
        assert on_replica.llen("queue:default") == 2501
        assert big not in jids
        assert len(set(jids)) == 2500
    finally:
        config.reset_redis_pools()


def test_a_push_whose_reply_is_lost_is_confirmed_without_being_pushed_again(pair, nodes):
    primary, _ = pair
    on_primary, on_replica = nodes
    with FaultProxy(primary.port) as proxy:
        config = durable_config(f"redis://:{DATA_PASSWORD}@127.0.0.1:{proxy.port}/0")
        try:
            proxy.lose_reply(FaultProxy.command(b"WAIT"))  # the push's last reply: it was applied
            jid = wurk.Client(config).push({"class": Durable, "args": [1]})
            assert proxy.lost
            assert proxy.lost[0][0].upper() == b"WAIT"
            assert on_primary.llen("queue:default") == 1  # once, not twice
            assert jid.encode() in on_replica.lindex("queue:default", 0)
        finally:
            config.reset_redis_pools()


def test_a_push_no_replica_confirms_raises_naming_the_job_and_is_not_pushed_twice(nodes, tmp_path):
    lone = DataNode(new_server().binary, tmp_path).start()
    config = durable_config(lone.url, {"replicas": 1, "timeout_ms": 50})
    try:
        client = wurk.Client(config)
        item = {"class": Durable, "args": [1], "jid": "ab" * 12}
        with pytest.raises(wurk.NotReplicatedError) as caught:
            client.push(item)
        message = str(caught.value)
        assert "ab" * 12 in message
        assert "0 of 1 replica(s)" in message
        assert "50 ms" in message
        assert DATA_PASSWORD not in message  # the URL is shown masked
        assert caught.value.jids == ["ab" * 12]
        assert lone.client().llen("queue:default") == 1
    finally:
        config.reset_redis_pools()
        lone.stop()


@pytest.mark.parametrize("off", [None, False])
def test_without_durable_push_nothing_waits(nodes, off, tmp_path):
    lone = DataNode(new_server().binary, tmp_path).start()
    config = durable_config(lone.url, off)
    try:
        wurk.Client(config).push({"class": Durable, "args": [1]})
        assert lone.client().llen("queue:default") == 1
    finally:
        config.reset_redis_pools()
        lone.stop()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yes", "must be a mapping of replicas and timeout_ms"),
        ({"replica": 1}, "unknown keys ['replica']"),
        ({"replicas": 0}, "durable_push.replicas must be a whole number >= 1, got 0"),
        ({"timeout_ms": 0}, "durable_push.timeout_ms must be a whole number >= 1, got 0"),
        ({"timeout_ms": 1.5}, "durable_push.timeout_ms must be a whole number >= 1, got 1.5"),
        ({"replicas": True}, "durable_push.replicas must be a whole number >= 1, got True"),
    ],
)
def test_a_bad_durable_push_setting_is_refused_naming_the_problem(value, message):
    config = wurk.Config()
    with pytest.raises(wurk.ConfigurationError) as caught:
        config["durable_push"] = value
    assert message in str(caught.value)
    assert config["durable_push"] is None


def test_the_durable_push_setting_is_normalised():
    config = wurk.Config()
    assert config["durable_push"] is None
    config["durable_push"] = {"timeout_ms": 250}
    assert config["durable_push"] == {"replicas": 1, "timeout_ms": 250}
    config["durable_push"] = True
    assert config["durable_push"] == {"replicas": 1, "timeout_ms": 1000}
    config["durable_push"] = False  # as YAML's ``durable_push: false`` reads
    assert config["durable_push"] is False


def test_a_plugin_writers_push_waits_for_the_replica_too(pair, nodes, tmp_path):
    from wurk_batches import Batch

    primary, _ = pair
    _, on_replica = nodes
    lone = DataNode(new_server().binary, tmp_path).start()
    config = durable_config(primary.url)
    previous = wurk.set_default_config(config)
    try:
        batch = Batch()
        with batch.jobs():
            jid = Durable.perform_async(1)
        assert json.loads(on_replica.lindex("queue:default", 0))["jid"] == jid
        assert on_replica.exists(f"b-{batch.bid}")

        config.redis = {"url": lone.url}
        config["durable_push"] = {"replicas": 1, "timeout_ms": 50}
        with pytest.raises(wurk.NotReplicatedError, match="0 of 1 replica"), Batch().jobs():
            Durable.perform_async(2)
        assert lone.client().llen("queue:default") == 1
    finally:
        wurk.set_default_config(previous)
        config.reset_redis_pools()
        lone.stop()
