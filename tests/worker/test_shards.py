"""A worker per shard (docs/shards.md): ``wurk --shard NAME`` serves that
shard as its main Redis, elects its own leader there, and nothing else."""

from __future__ import annotations

import json

import pytest
import redis as redis_py
from click.testing import CliRunner

from tests.evidence import EVIDENCE_ENV
from tests.helpers import Subprocess, wait_for
from tests.worker.worker_app import Record
from wurk import api
from wurk.cli.main import build
from wurk.redis import keys


@pytest.fixture
def east(shard_url):
    client = redis_py.Redis.from_url(shard_url)
    yield client
    client.close()


def leader_of(client) -> str | None:
    value = client.get(keys.LEADER)
    return value.decode() if value else None


def test_a_worker_per_shard_runs_its_shards_jobs_and_leads_its_own_keyspace(
    config, workers, redis, east, server, shard_url
):
    config["shards"] = {"east": shard_url}
    Record.set(pool="east").perform_async("east-1")
    Record.set(pool="east").perform_async("east-2")
    Record.perform_async("main-1")
    env = {"WURK_SHARDS": f"east={shard_url}", EVIDENCE_ENV: server.url}
    on_east = workers.start("-c", "2", "--shard", "east", env=env)
    on_main = workers.start("-c", "2", env=env)
    wait_for(lambda: redis.hlen("executions") == 3, timeout=30)
    assert {key.decode() for key in redis.hkeys("executions")} == {"east-1", "east-2", "main-1"}
    # Each shard's processes beat on their own server, and each elects its own leader.
    east_identities = [p.identity for p in api.ProcessSet(pool="east")]
    main_identities = [p.identity for p in api.ProcessSet()]
    assert len(east_identities) == 1
    assert len(main_identities) == 1
    assert str(on_east.pid) in east_identities[0]
    assert str(on_main.pid) in main_identities[0]
    wait_for(lambda: leader_of(east) == east_identities[0] and leader_of(redis) == main_identities[0], timeout=30)
    assert east.llen("queue:default") == 0
    assert "serving shard east at redis" in (workers.logs / "worker-0.log").read_text()


def test_the_shard_may_come_from_the_config_file_and_be_named_with_pool(
    config, workers, redis, east, server, shard_url, tmp_path
):
    settings = tmp_path / "wurk.yml"
    settings.write_text(f"shards:\n  east:\n    url: {shard_url}\n")
    config["shards"] = {"east": shard_url}
    Record.set(pool="east").perform_async("from-file")
    worker = workers.start("-C", str(settings), "--pool", "east", env={EVIDENCE_ENV: server.url})
    wait_for(lambda: redis.hget("executions", "from-file") == b"1", timeout=30)
    assert east.llen("queue:default") == 0
    worker.stop()


def test_a_misspelt_shard_stops_the_worker_in_one_line_naming_the_shards(workers, shard_url):
    worker = workers.start("--shard", "eats", env={"WURK_SHARDS": f"east={shard_url},west={shard_url}"})
    assert worker.wait(30) == 2
    lines = worker.output().strip().splitlines()
    assert lines[-1] == "wurk: unknown shard 'eats'; did you mean 'east'? (configured shards: east, west)"
    assert not any("Traceback" in line for line in lines)


def run(config, *args):
    return CliRunner().invoke(build(config), list(args), obj={"config": config}, catch_exceptions=False)


def test_stats_and_queues_read_the_shard_given_with_pool(config, redis, east, shard_url):
    config["shards"] = {"east": shard_url}
    Record.set(pool="east", queue="mail").perform_bulk([[n] for n in range(3)])
    Record.perform_async("main")
    main_stats = json.loads(run(config, "stats", "--json").output)
    assert main_stats["enqueued"] == 1
    east_stats = json.loads(run(config, "stats", "--pool", "east", "--json").output)
    assert east_stats["enqueued"] == 3
    queues = json.loads(run(config, "queues", "--shard", "east", "--json").output)
    assert [(q["name"], q["size"]) for q in queues] == [("mail", 3)]
    run(config, "pause", "mail", "--pool", "east")
    assert east.sismember("paused", "mail")
    assert not redis.sismember("paused", "mail")


def test_a_command_finds_the_shards_in_the_config_file_and_refuses_a_misspelt_one(config, east, shard_url, tmp_path):
    settings = tmp_path / "wurk.yml"
    settings.write_text(f"production:\n  shards:\n    east: {shard_url}\n")
    east.lpush("queue:mail", json.dumps({"class": "X", "args": [], "jid": "a" * 24, "queue": "mail"}))
    east.sadd("queues", "mail")
    found = run(config, "-C", str(settings), "-e", "production", "queues", "--pool", "east", "--json")
    assert [(q["name"], q["size"]) for q in json.loads(found.output)] == [("mail", 1)]
    refused = CliRunner().invoke(build(config), ["stats", "--pool", "eats"], obj={"config": config})
    assert refused.exit_code == 2
    assert refused.output.strip() == "wurk: unknown shard 'eats'; did you mean 'east'? (configured shards: east)"


def test_wurk_stats_pool_in_a_shell(redis, east, shard_url, redis_url):
    east.incrby("stat:processed", 42)
    command = Subprocess.python(
        "-m",
        "wurk.cli",
        "stats",
        "--pool",
        "east",
        "--json",
        env={"REDIS_URL": redis_url, "WURK_SHARDS": f"east={shard_url}"},
    )
    assert command.wait(30) == 0
    assert json.loads(command.output())["processed"] == 42
