"""Real ``wurk`` worker processes, real signals, a real server: the delivery guarantee."""

from __future__ import annotations

import json
import signal
import time

import wurk
from tests.helpers import wait_for, wait_until_fetching_ended
from tests.worker.worker_app import AsyncRecord, Boom, DeadNow, Killer, NoRetry, Record, Slow, TenantRecord
from wurk.server.retry import decompress_backtrace


def executions(redis) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in redis.hgetall("executions").items()}


def private_lists(redis) -> list[bytes]:
    return [key for key in redis.keys("queue:*") if b"|" in key]


def test_five_thousand_jobs_each_run_exactly_once(workers, redis):
    Record.perform_bulk([[n] for n in range(5000)])
    worker = workers.start("-c", "5")
    wait_for(lambda: redis.hlen("executions") == 5000 and redis.llen("queue:default") == 0, timeout=120)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    counts = executions(redis)
    assert sorted(counts) == sorted(str(n) for n in range(5000))
    assert set(counts.values()) == {1}
    assert int(redis.get("stat:processed")) == 5000
    assert int(redis.get(f"stat:processed:{time.strftime('%Y-%m-%d', time.gmtime())}")) == 5000
    assert private_lists(redis) == []
    assert redis.smembers("processes") == set()


def test_the_start_line_shows_queues_by_weight_before_the_first_job_runs(workers, redis):
    Record.perform_async(1)  # waiting already: the worker's first fetch takes it
    worker = workers.start("-c", "2", "-q", "critical,3", "-q", "default")
    wait_for(lambda: redis.hlen("executions") == 1, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    lines = worker.output().splitlines()
    (start,) = [n for n, line in enumerate(lines) if " starting " in line]
    assert lines[start].endswith(" starting 2 threads on queues critical (weight 3), default (weight 1)")
    first_job = next(n for n, line in enumerate(lines) if "class=tests.worker.worker_app.Record" in line)
    assert start < first_job


def test_ctrl_c_stops_a_worker_started_with_sigint_ignored(workers, redis):
    # A script's `wurk ... &` starts the worker with SIGINT ignored; the worker
    # handles it itself, so Ctrl-C's signal (or a supervisor's INT) still stops it.
    worker = workers.start("-c", "1", sigint=signal.SIG_IGN)
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    worker.signal(signal.SIGINT)
    assert worker.wait(30) == 0
    assert "received INT, shutting down" in worker.output()
    assert redis.smembers("processes") == set()


def test_sigkill_mid_run_loses_nothing(workers, redis):
    for n in range(6):
        Slow.perform_async(n, 1.5)
    first = workers.start("-c", "3")
    wait_for(lambda: redis.llen("started") >= 3, timeout=30)
    assert private_lists(redis), "running jobs sit in the worker's private list"
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = workers.start("-c", "3")
    wait_for(lambda: len(executions(redis)) == 6, timeout=60)
    assert all(count >= 1 for count in executions(redis).values())
    wait_for(lambda: private_lists(redis) == [], timeout=10)
    second.signal(signal.SIGTERM)
    assert second.wait(30) == 0


def test_a_job_recovered_three_times_lands_in_the_dead_set(workers, redis):
    jid = Killer.perform_async("pill")
    for _round in range(3):
        victim = workers.start("-c", "1")
        assert victim.wait(60) == -signal.SIGKILL
    survivor = workers.start("-c", "1")
    wait_for(lambda: redis.zcard("dead") == 1, timeout=30)
    dead = json.loads(redis.zrange("dead", 0, -1)[0])
    assert dead["jid"] == jid
    assert int(redis.get(f"super_fetch:recovered:{jid}")) == 3
    assert 0 < redis.ttl(f"super_fetch:recovered:{jid}") <= 72 * 3600
    assert redis.llen("queue:default") == 0
    assert int(executions(redis)["pill"]) == 3
    # The callbacks run right after the kill: on_poison first, then the recovery callback.
    wait_for(lambda: redis.lrange("recoveries", -1, -1) == [b"poison"])
    [pill] = [json.loads(item) for item in redis.lrange("poisoned", 0, -1)]
    assert pill == {"jid": jid, "klass": "tests.worker.worker_app.Killer", "count": 3, "queue": "default"}
    recoveries = redis.lrange("recoveries", 0, -1)
    # A victim may die (running the job it just recovered) before its callback runs.
    assert recoveries[-1] == b"poison"
    assert set(recoveries[:-1]) <= {b"recovered"}
    # The death handlers run next, in the survivor's reaper, with the reason as the error.
    wait_for(lambda: redis.llen("deaths") >= 1)
    assert [json.loads(item) for item in redis.lrange("deaths", 0, -1)] == [[jid, "RuntimeError"]]
    survivor.signal(signal.SIGTERM)
    assert survivor.wait(30) == 0


def test_term_during_a_long_job_requeues_it_to_be_fetched_next(workers, redis):
    jid = Slow.perform_async("long", 60)
    worker = workers.start("-c", "2", "-t", "2")
    wait_for(lambda: redis.llen("started") == 1, timeout=30)
    Record.perform_async("fresh")  # enqueued after the long one started
    wait_for(lambda: "fresh" in executions(redis), timeout=30)
    Record.set(queue="later").perform_async("waiting")
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert time.monotonic() - started < 2 + 5
    tail = json.loads(redis.lindex("queue:default", -1))
    assert tail["jid"] == jid  # at the tail: the next fetch takes it
    assert private_lists(redis) == []
    second = workers.start("-c", "1")
    wait_for(lambda: redis.llen("started") == 2, timeout=30)
    second.signal(signal.SIGKILL)
    second.wait(10)


def test_a_failing_job_goes_through_retry_to_dead(workers, redis):
    jid = Boom.perform_async("x")
    NoRetry.perform_async("y")
    worker = workers.start("-c", "2")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    [(member, score)] = redis.zrange("retry", 0, -1, withscores=True)
    job = json.loads(member)
    assert list(job)[-5:] == ["error_message", "error_class", "failed_at", "retry_count", "error_backtrace"]
    assert (job["jid"], job["retry_count"], job["error_class"], job["error_message"]) == (
        jid,
        0,
        "ValueError",
        "boom x",
    )
    assert isinstance(job["failed_at"], int)
    assert job["failed_at"] / 1000 + 15 <= score <= job["failed_at"] / 1000 + 15 + 10 + 1
    assert "worker_app.py" in decompress_backtrace(job["error_backtrace"])[0]
    assert len(decompress_backtrace(job["error_backtrace"])) <= 3

    redis.zadd("retry", {member: time.time() - 1}, xx=True)  # make it due now
    wait_for(lambda: retry_counts(redis) == [1], timeout=30)
    member = redis.zrange("retry", 0, -1)[0]
    assert list(json.loads(member))[-1] == "retried_at"
    redis.zadd("retry", {member: time.time() - 1}, xx=True)
    wait_for(lambda: redis.zcard("dead") == 1, timeout=30)
    dead = json.loads(redis.zrange("dead", 0, -1)[0])
    assert (dead["jid"], dead["retry_count"]) == (jid, 2)
    assert redis.zcard("retry") == 0
    # The death handlers run just after the dead-set write.
    wait_for(lambda: [jid, "ValueError"] in [json.loads(d) for d in redis.lrange("deaths", 0, -1)], timeout=10)
    deaths = [json.loads(d) for d in redis.lrange("deaths", 0, -1)]
    assert any(error == "RuntimeError" for _, error in deaths)  # retry=False: death handlers only
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert int(redis.get("stat:failed")) == 4  # three Boom runs and the NoRetry run


def retry_counts(redis) -> list[int]:
    return [json.loads(member)["retry_count"] for member in redis.zrange("retry", 0, -1)]


def test_retry_zero_dies_at_once_and_retry_false_is_stored_nowhere(workers, redis):
    dead_jid = DeadNow.perform_async("now")
    gone_jid = NoRetry.perform_async("gone")
    worker = workers.start("-c", "2")
    wait_for(lambda: redis.llen("deaths") == 2, timeout=30)
    [member] = redis.zrange("dead", 0, -1)
    dead = json.loads(member)
    assert (dead["jid"], dead["retry_count"], dead["error_class"]) == (dead_jid, 0, "KeyError")
    assert gone_jid not in {json.loads(m)["jid"] for m in redis.zrange("retry", 0, -1)}
    assert redis.zcard("retry") == 0
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_malformed_json_goes_to_the_dead_set_and_the_worker_carries_on(workers, redis):
    redis.lpush("queue:default", "{this is not json")
    Record.perform_async("after")
    worker = workers.start("-c", "1")
    wait_for(lambda: "after" in executions(redis), timeout=30)
    assert redis.zrange("dead", 0, -1) == [b"{this is not json"]
    assert redis.llen("deaths") == 0  # no parseable job, no death handlers
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_async_jobs_run_on_the_processs_event_loop(workers, redis):
    AsyncRecord.perform_bulk([[n] for n in range(20)])
    worker = workers.start("-c", "3")
    wait_for(lambda: len(executions(redis)) == 20, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_server_middleware_sets_what_the_job_instance_carries(workers, redis):
    """Core sets only ``jid`` on a job; anything else a feature hands the job
    (a batch its ``bid``) is set by the feature's server middleware."""
    client = wurk.Client()
    client.push({"class": TenantRecord, "args": ["acme"], "tenant": "acme-corp"})
    client.push({"class": TenantRecord, "args": ["none"]})
    worker = workers.start("-c", "2")
    wait_for(lambda: redis.hlen("tenants") == 2, timeout=30)
    assert redis.hgetall("tenants") == {b"acme": b"acme-corp", b"none": b"None"}
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_scheduled_jobs_are_promoted_by_the_poller(workers, redis):
    Record.perform_in(1, "scheduled")
    jid = Record.set(queue="elsewhere").perform_in(0.5, "elsewhere")
    worker = workers.start("-c", "1")
    wait_for(lambda: "scheduled" in executions(redis), timeout=30)
    wait_for(lambda: redis.llen("queue:elsewhere") == 1, timeout=30)
    promoted = json.loads(redis.lindex("queue:elsewhere", 0))
    assert promoted["jid"] == jid
    assert isinstance(promoted["enqueued_at"], int)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_the_reliable_scheduler_promotes_in_one_script(config, redis):
    config.reliable_scheduler()
    from wurk.server.scheduled import Poller

    for n in range(1203):
        redis.zadd("schedule", {json.dumps({"class": "X", "queue": "bulk", "args": [n], "jid": str(n)}): 1.0})
    redis.zadd("retry", {'{"class":"Y","queue":"retries","args":[],"enqueued_at":1}': 2.0})
    redis.zadd("schedule", {'{"class":"Z","args":[]}': time.time() + 3600})
    moved = Poller(config).enq.enqueue_jobs()
    assert moved == 1204
    assert redis.llen("queue:bulk") == 1203
    assert redis.zcard("schedule") == 1
    [retried] = redis.lrange("queue:retries", 0, -1)
    assert retried.startswith(b'{"class":"Y","queue":"retries","args":[],"enqueued_at":')
    assert json.loads(retried)["enqueued_at"] > 1
    assert b'"enqueued_at":' in redis.lindex("queue:bulk", 0)
    assert {b"bulk", b"retries"} <= redis.smembers("queues")


def test_tstp_quiets_and_remote_signals_work(workers, redis):
    worker = workers.start("-c", "1", "-g", "sigtest")
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    identity = redis.smembers("processes").pop().decode()
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: redis.hget(identity, "quiet") == b"true", timeout=10)
    Record.perform_async("ignored while quiet")
    wait_until_fetching_ended(worker.log, worker.pid, lambda: worker.signal(signal.SIGTTIN))
    assert redis.llen("queue:default") == 1
    assert executions(redis) == {}
    redis.lpush(f"{identity}-signals", "TERM")  # what the Web UI's Stop button does
    assert worker.wait(30) == 0
    assert redis.smembers("processes") == set()


def test_process_hash_has_sidekiqs_fields_and_types(workers, redis):
    fixture = json.loads(
        (__import__("pathlib").Path(__file__).parents[1] / "fixtures/sidekiq-8.1.7/process-info-hash.json").read_text()
    )
    worker = workers.start("-c", "2", "-q", "critical", "-q", "default", "-g", "fxtag")
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    identity = redis.smembers("processes").pop().decode()
    fields = {k.decode(): v.decode() for k, v in redis.hgetall(identity).items()}
    assert set(fields) == set(fixture["fields_raw"])
    assert 0 < redis.ttl(identity) <= 60
    for name in ("concurrency", "busy", "rtt_us", "rss"):
        int(fields[name])
    float(fields["beat"])
    assert fields["quiet"] == "false"
    info = json.loads(fields["info"])
    assert set(fixture["info_key_order"]) <= set(info)
    assert [key for key in info if key in fixture["info_key_order"]] == fixture["info_key_order"]
    for key, value in fixture["info_parsed"].items():
        assert type(info[key]) is type(value), key
    assert info["identity"] == identity
    assert info["tag"] == "fxtag"
    assert info["capsules"] == {
        "default": {"concurrency": 2, "mode": "strict", "weights": {"critical": 0, "default": 0}}
    }
    assert info["queues"] == ["critical", "default"]
    _host, pid, nonce = identity.split(":")
    assert int(pid) == worker.pid
    assert len(nonce) == 12
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_two_workers_elect_exactly_one_leader(workers, redis):
    election = {"TEST_LEADER_TTL": "3", "TEST_LEADER_RENEW": "1", "TEST_LEADER_FOLLOWER": "1"}
    first = workers.start("-c", "1", env=election)
    second = workers.start("-c", "1", env=election)
    wait_for(lambda: redis.scard("processes") == 2 and redis.get("dear-leader"), timeout=30)
    leader = redis.get("dear-leader").decode()
    assert leader in {m.decode() for m in redis.smembers("processes")}
    token = int(redis.get("leader-token"))
    by_pid = {first.pid: first, second.pid: second}
    winner = by_pid[int(leader.split(":")[1])]
    loser = second if winner is first else first
    winner.signal(signal.SIGKILL)
    winner.wait(10)
    started = time.monotonic()
    wait_for(lambda: redis.get("dear-leader") not in (None, leader.encode()), timeout=3 + 1 + 5)
    assert time.monotonic() - started <= 3 + 1 + 5
    assert int(redis.get("dear-leader").decode().split(":")[1]) == loser.pid
    # Greater, not exactly one more: on a loaded machine a lease may lapse and be
    # won again before the kill, and each election moves the fence on. The new
    # leader takes its token in a round trip after the lock, and acts as the
    # leader only once it has it: the lock can be seen a moment before.
    wait_for(lambda: int(redis.get("leader-token")) > token, timeout=5)
    loser.signal(signal.SIGTERM)
    assert loser.wait(30) == 0
    assert redis.get("dear-leader") is None  # released on a graceful stop


def test_bad_flags_fail_before_any_thread_starts(workers, redis):
    bad = workers.start("-c", "0")
    assert bad.wait(30) == 2
    assert "concurrency must be > 0" in bad.output()
    bad_queue = workers.start("-q", "low,0")
    assert bad_queue.wait(30) == 2
    assert "weight must be > 0" in bad_queue.output()
    missing = workers.start("-r", "no/such/app.py")
    assert missing.wait(30) == 2


def test_the_worker_runs_jobs_pushed_in_the_foreign_form(workers, redis):
    wurk.Client().push({"class": "tests.worker.worker_app.Record", "args": ["by name"]})
    worker = workers.start("-c", "1")
    wait_for(lambda: "by name" in executions(redis), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_ttin_dumps_threads_and_leader_opt_out(workers, redis):
    worker = workers.start("-c", "1", env={"WURK_LEADER": "false"})
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
    worker.signal(signal.SIGTTIN)
    wait_for(lambda: "thread wurk-heartbeat" in worker.log.read_text(), timeout=10)
    assert redis.get("dear-leader") is None
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert "not campaigning for leadership" in worker.output()


def test_usr2_reopens_a_log_file_after_rotation(workers, redis, tmp_path):
    log = tmp_path / "worker.log"
    app = tmp_path / "logging_app.py"
    app.write_text(
        "import wurk\n"
        "from wurk.server.logger import build_logger\n"
        f"@wurk.configure_server\ndef to_file(config):\n    config.logger = build_logger({str(log)!r})\n"
        "from tests.worker.worker_app import *  # noqa\n"
    )
    worker = workers.start("-r", str(app), "-c", "1")
    wait_for(lambda: log.exists() and "starting" in log.read_text(), timeout=30)
    log.rename(tmp_path / "worker.log.1")  # what logrotate does
    worker.signal(signal.SIGUSR2)
    wait_for(log.exists, timeout=10)
    Record.perform_async("after rotation")
    wait_for(lambda: "after rotation" in executions(redis) and "done" in log.read_text(), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
