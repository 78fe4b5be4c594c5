"""ProcessSet, Process, WorkSet and Work against a real server and real workers."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

import wurk
from tests.helpers import ROOT, WorkerPool, wait_for, wait_until_fetching_ended, with_db
from tests.worker.worker_app import Record, Slow
from wurk.api.processes import Process, ProcessSet, Work, WorkSet
from wurk.errors import EmbeddedProcessError

FIXTURES = ROOT / "tests" / "fixtures" / "sidekiq-8.1.7"
FAST = {"TEST_POLL_INTERVAL": "0.2", "TEST_HEARTBEAT_INTERVAL": "0.5"}


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.worker_app", FAST)
    yield pool
    pool.stop_all()


def write_sidekiq_process(redis, *, embedded: bool = False, quiet: str = "false") -> str:
    """The heartbeat hash Ruby Sidekiq 8.1.7 wrote, as captured."""
    captured = fixture("process-info-hash.json")
    fields = dict(captured["fields_raw"], quiet=quiet)
    if embedded:
        info = json.loads(fields["info"])
        info["embedded"] = True
        fields["info"] = json.dumps(info)
    identity = captured["redis_key"]
    redis.sadd("processes", identity)
    redis.hset(identity, mapping=fields)
    redis.expire(identity, 60)
    return identity


def only_identity(redis) -> str:
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    return redis.smembers("processes").pop().decode()


# -- ProcessSet and Process over Sidekiq's own heartbeat ------------------------------


def test_a_sidekiq_heartbeat_reads_as_a_typed_process(config, redis):
    identity = write_sidekiq_process(redis)
    [process] = list(ProcessSet())
    assert isinstance(process, Process)
    assert process.identity == process.id == identity
    assert (process["concurrency"], process["busy"], process["rss"], process["rtt_us"]) == (2, 2, 34560, 281)
    assert process["beat"] == 1796027757.094629
    assert process["quiet"] is False
    assert process.stopping is False
    assert process["hostname"] == "vm"
    assert process["started_at"] == 1796027747.0882053
    assert process.tag == "fxtag"
    assert process.labels == ["fx-label"]
    assert process.queues == ["critical", "default"]
    assert process.weights == {"critical": 0, "default": 0}
    assert process.capsules == {
        "default": {"concurrency": 2, "mode": "strict", "weights": {"critical": 0, "default": 0}}
    }
    assert process.version == "8.1.7"
    assert process.embedded is False
    assert process.get("missing") is None
    assert "info" not in process  # the JSON is merged in, not kept as a string
    assert dict(process)["identity"] == identity


def test_pre_8_processes_fall_back_to_the_legacy_queues_field(config, redis):
    info = {
        "hostname": "old",
        "pid": 1,
        "identity": "old:1:0123456789ab",
        "queues": ["a", "b"],
        "weights": [{"a": 2, "b": 1}],
    }
    redis.sadd("processes", "old:1:0123456789ab")
    redis.hset("old:1:0123456789ab", mapping={"info": json.dumps(info), "busy": "0", "beat": "1.5", "quiet": "true"})
    process = ProcessSet.get("old:1:0123456789ab")
    assert process.queues == ["a", "b"]
    assert process.weights == {"a": 2, "b": 1}
    assert process.concurrency == 0  # no field: counts as zero, as the Web UI does
    assert process.stopping is True


def test_lapsed_members_are_skipped_but_counted_by_size(config, redis):
    live = write_sidekiq_process(redis)
    redis.sadd("processes", "gone:1:000000000000")  # its hash expired long ago
    processes = ProcessSet(clean=False)
    assert processes.size == 2
    assert [process.identity for process in processes] == [live]
    assert ProcessSet.get("gone:1:000000000000") is None
    assert ProcessSet.get("never:1:000000000000") is None
    with pytest.raises(KeyError):
        processes["gone:1:000000000000"]
    assert processes[live].identity == live


def test_iteration_is_sorted_by_identity_and_sums_live_processes(config, redis):
    for identity, concurrency, rss in (
        ("b:2:0123456789ab", 3, 100),
        ("a:1:0123456789ab", 5, 200),
        ("c:3:0123456789ab", 7, 300),
    ):
        info = {"hostname": identity[0], "identity": identity}
        redis.sadd("processes", identity)
        redis.hset(identity, mapping={"info": json.dumps(info), "concurrency": concurrency, "rss": rss})
    redis.sadd("processes", "dead:9:0123456789ab")
    processes = ProcessSet(clean=False)
    assert [process.identity for process in processes] == ["a:1:0123456789ab", "b:2:0123456789ab", "c:3:0123456789ab"]
    assert processes.total_concurrency == 15
    assert processes.total_rss_in_kb == processes.total_rss == 600


def test_cleanup_runs_at_most_once_a_minute_cluster_wide(config, redis):
    write_sidekiq_process(redis)
    redis.sadd("processes", "gone:1:aaaaaaaaaaaa")
    assert ProcessSet().size == 1  # constructing one pruned the lapsed member
    captured = fixture("process-cleanup-key.json")["entry"]
    assert redis.get("process_cleanup").decode() == captured["value"]
    assert 50 <= redis.ttl("process_cleanup") <= 60
    redis.sadd("processes", "gone:2:bbbbbbbbbbbb")
    assert ProcessSet().size == 2  # within the minute: no second cleanup, anywhere
    assert ProcessSet(clean=False).cleanup() == 0
    redis.delete("process_cleanup")  # the minute is over
    assert ProcessSet(clean=False).cleanup() == 1
    assert ProcessSet(clean=False).size == 1


def test_leader_is_read_from_dear_leader(config, redis):
    identity = write_sidekiq_process(redis)
    assert ProcessSet().leader == ""
    assert ProcessSet.get(identity).leader is False
    redis.set("dear-leader", identity)
    assert ProcessSet().leader == identity
    assert ProcessSet.get(identity).leader is True


def test_lookup_uses_the_configuration_it_is_called_through(config, redis, redis_url):
    identity = write_sidekiq_process(redis)
    other = wurk.Config()
    other.redis = {"url": with_db(redis_url, 5)}  # an empty database
    try:
        assert ProcessSet(clean=False, config=other).get(identity) is None
        assert ProcessSet.get(identity, config=other) is None
        assert ProcessSet(clean=False).get(identity).identity == identity
    finally:
        other.reset_redis_pools()


# -- signals ---------------------------------------------------------------------------


def test_signals_are_sent_as_sidekiq_sends_them(config, redis):
    identity = write_sidekiq_process(redis)
    key = f"{identity}-signals"
    captured = fixture("signals-list.json")
    process = ProcessSet.get(identity)
    process.quiet()
    assert [value.decode() for value in redis.lrange(key, 0, -1)] == captured["after_quiet_api_call"]["value"]
    assert redis.ttl(key) == captured["after_quiet_api_call"]["ttl_s"]
    redis.delete(key)
    process.stop()
    assert [value.decode() for value in redis.lrange(key, 0, -1)] == captured["after_stop_api_call"]["value"]
    process.dump_threads()
    assert redis.lrange(key, 0, -1) == [b"TTIN", b"TERM"]  # LPUSH: the process pops the oldest first
    assert 55 <= redis.ttl(key) <= 60


def test_an_embedded_process_cannot_be_quieted_or_stopped(config, redis):
    identity = write_sidekiq_process(redis, embedded=True)
    process = ProcessSet.get(identity)
    assert process.embedded is True
    with pytest.raises(EmbeddedProcessError, match="embedded"):
        process.quiet()
    with pytest.raises(EmbeddedProcessError, match="embedded"):
        process.stop()
    assert redis.exists(f"{identity}-signals") == 0
    process.dump_threads()  # harmless, and an embedded Wurk honours it
    assert redis.lrange(f"{identity}-signals", 0, -1) == [b"TTIN"]


def test_a_real_embedded_wurk_is_seen_as_embedded(config, redis):
    config["heartbeat_interval"] = 0.3
    instance = wurk.configure_embed(lambda cfg: cfg.update({"queues": ["default"]}))
    instance.run()
    try:
        identity = instance.launcher.identity.identity
        process = wait_for(lambda: ProcessSet.get(identity), timeout=10)
        assert process.embedded is True
        with pytest.raises(EmbeddedProcessError):
            process.quiet()
    finally:
        instance.stop()


def test_quiet_dump_threads_and_stop_a_real_worker(workers, redis):
    worker = workers.start("-c", "2", "-g", "apitest")
    identity = only_identity(redis)
    process = ProcessSet.get(identity)
    assert process.tag == "apitest"
    assert process.stopping is False
    assert process["concurrency"] == 2
    process.quiet()
    wait_for(lambda: ProcessSet.get(identity).stopping, timeout=10)
    Record.perform_async("not while quiet")
    # The dump asked for through Redis, as the Web UI asks: a dump with no
    # thread left that could fetch is the moment a fetch would have happened.
    wait_until_fetching_ended(worker.log, worker.pid, process.dump_threads)
    assert redis.llen("queue:default") == 1  # a quiet worker fetches nothing
    assert redis.hlen("executions") == 0
    process.stop()
    assert worker.wait(30) == 0
    assert redis.sismember("processes", identity) == 0
    assert redis.llen("queue:default") == 1


# -- WorkSet and Work --------------------------------------------------------------------


def test_the_work_set_shows_what_a_real_worker_is_running(workers, redis):
    jid = Slow.perform_async("busy", 4)
    worker = workers.start("-c", "2")
    identity = only_identity(redis)
    wait_for(lambda: WorkSet().size == 1, timeout=15)
    [work] = wait_for(lambda: list(WorkSet()), timeout=10)
    assert isinstance(work, Work)
    assert work.process_id == identity
    assert work.thread_id
    assert work.queue == "default"
    assert abs(work.run_at.timestamp() - time.time()) < 10
    assert work.run_at.tzinfo is not None
    assert work.payload["jid"] == jid
    assert work.job.jid == jid
    assert work.job.klass == "tests.worker.worker_app.Slow"
    assert work.job.args == ["busy", 4]
    assert WorkSet().find_work_by_jid(jid).thread_id == work.thread_id
    assert WorkSet().find_work("0" * 24) is None
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert list(WorkSet()) == []


def test_the_work_set_reads_sidekiqs_work_hash_and_older_object_payloads(config, redis):
    identity = write_sidekiq_process(redis)
    captured = fixture("work-hash.json")
    redis.hset(f"{identity}:work", mapping=captured["fields_raw"])
    older = {"queue": "low", "payload": {"class": "Legacy", "args": [1], "jid": "c" * 24}, "run_at": 1796027700}
    redis.hset(f"{identity}:work", "zz1", json.dumps(older))
    works = list(WorkSet())
    assert works[0].job.klass == "Legacy"  # oldest run_at first
    assert {work.job.klass for work in works[1:]} == {"SlowJob", "IterJob"}  # both started at one second
    assert works[0].run_at.timestamp() == 1796027700
    assert works[0].payload == older["payload"]
    assert works[0].queue == "low"
    slow = WorkSet().find_work_by_jid("62a27f676fcfbef4cce67ab9")
    assert slow.thread_id == "h23"
    assert slow.value == captured["fields_parsed"]["h23"]["payload"]  # the bytes as fetched
    assert slow.payload == captured["fields_parsed"]["h23"]["payload_parsed"]
    assert WorkSet().size == 2  # the busy field, not the hash length
