"""A batch on a shard (docs/shards.md): opened inside ``wurk.via``, its books
and its jobs live on the shard, a worker serving that shard runs the jobs
and fires the callbacks there, and the main server sees none of it."""

from __future__ import annotations

import pytest
import redis as redis_py

import wurk
from tests.batches.batch_app import Recorder, Work
from tests.batches.conftest import callbacks, heard
from tests.evidence import EVIDENCE_ENV
from tests.helpers import wait_for
from wurk_batches import Batch, Status

pytestmark = pytest.mark.slow


def test_a_batch_opened_on_a_shard_runs_and_fires_its_callbacks_there(config, workers, redis, server, shard_url):
    config["shards"] = {"east": shard_url}
    east = redis_py.Redis.from_url(shard_url)
    with wurk.via("east"):
        batch = Batch()
        batch.on("success", Recorder).on("complete", Recorder)
        with batch.jobs():
            Work.perform_bulk([[n] for n in range(50)])
            Work.perform_async("last")
    assert east.llen("queue:default") == 51
    assert east.exists(f"b-{batch.bid}")
    assert redis.dbsize() == 0  # neither the jobs nor the batch's books are on the main server
    env = {"WURK_SHARDS": f"east={shard_url}", EVIDENCE_ENV: server.url}
    worker = workers.start("-c", "4", "--shard", "east", env=env)
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "success"], timeout=60)
    for _event, _bid, _options, _order, seen in callbacks(redis):
        assert seen == {"pending": 0, "jobs_run": 51, "complete": True}
    with wurk.via("east"):
        status = Status(batch.bid)
        assert (status.total, status.pending, status.complete) == (51, 0, True)
    worker.stop()
    assert east.llen("queue:default") == 0  # the callbacks were pushed to the shard and run there
    east.close()
