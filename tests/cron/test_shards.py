"""Periodic jobs on two shards (docs/shards.md): each shard's workers elect
their own leader, which fires the loops on its own shard, once a minute."""

from __future__ import annotations

import redis as redis_py

from tests.cron.test_workers import ELECTION, T0, history, holder_pid, loop_of
from tests.evidence import EVIDENCE_ENV
from tests.helpers import WorkerPool, wait_for
from tests.worker.conftest import FAST


def test_each_shards_leader_fires_each_loop_once_on_its_own_shard(
    config, redis, redis_url, shard_url, server, tmp_path
):
    east = redis_py.Redis.from_url(shard_url)
    env = {**FAST, **ELECTION, "TEST_CRON_TICK": "0.1", "WURK_SHARDS": f"east={shard_url}", EVIDENCE_ENV: server.url}
    workers = WorkerPool(redis_url, tmp_path, "tests.cron.cron_app", env)
    try:
        redis.set("test:clock", T0)  # the clock both shards' pollers read
        on_main = workers.start("-c", "2")
        on_east = workers.start("-c", "2", "--shard", "east")
        wait_for(lambda: holder_pid(redis) == on_main.pid and holder_pid(east) == on_east.pid, timeout=30)
        wait_for(lambda: redis.scard("periodic") == 2 and east.scard("periodic") == 2, timeout=30)
        main_every, east_every = loop_of(redis, "every"), loop_of(east, "every")
        # Each shard's leader has ticked at 12:00:30 once it marked the next fire, 12:01.
        marked = str(T0 + 30).encode()
        wait_for(
            lambda: (
                redis.hget(f"loops:{main_every}", "nf") == marked and east.hget(f"loops:{east_every}", "nf") == marked
            ),
            timeout=30,
        )
        redis.set("test:clock", T0 + 60)
        wait_for(lambda: len(history(redis, main_every)) == 1 and len(history(east, east_every)) == 1, timeout=30)
        wait_for(lambda: redis.llen("ran") == 2, timeout=30)  # one run of "every" per shard
        ran = sorted(entry.decode().split()[0] for entry in redis.lrange("ran", 0, -1))
        assert ran == ["every", "every"]
        assert history(redis, main_every)[0][0] == history(east, east_every)[0][0] == T0 + 60
    finally:
        workers.stop_all()
        east.close()
