"""What a person watching a real worker sees: its log when a job fails or
Redis goes away, and how soon ``wurk stats`` and ``wurk processes`` catch up."""

from __future__ import annotations

import json
import re
import signal
import time

import redis as redis_py
from click.testing import CliRunner

from tests.helpers import WorkerPool, new_server, wait_for
from tests.worker.conftest import FAST
from tests.worker.worker_app import Boom, Record
from wurk.cli.main import build
from wurk.server.retry import decompress_backtrace

#: The default 10-second heartbeat instead of the suite's fast one: what is
#: checked here must not wait for the next beat.
WIRE_BEAT = {"TEST_HEARTBEAT_INTERVAL": ""}


def run(config, *args):
    return CliRunner().invoke(build(config), list(args), obj={"config": config}, catch_exceptions=False)


def failure_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "failed: ValueError: boom" in line]


def test_a_failed_job_logs_a_warning_with_its_traceback_in_development(workers, redis):
    worker = workers.start("-c", "1", env={"APP_ENV": "", "RAILS_ENV": "", "RACK_ENV": ""})
    jid = Boom.perform_async(1)
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    worker.stop()
    log = worker.output()
    [line] = failure_lines(log)
    assert line.startswith("WARNING ")
    assert line.endswith(f"tests.worker.worker_app.Boom jid={jid} failed: ValueError: boom 1")
    traceback = log[log.index(line) :].splitlines()[1:8]
    assert traceback[0] == "Traceback (most recent call last):"
    # The job's own frames come first: the processor and the middleware chain
    # around the app's own middleware (worker_app's TenantFromPayload) fold.
    assert re.fullmatch(r"  \[\d+ frames inside Wurk, .* left out; WURK_DEBUG=1 shows them\]", traceback[1])
    assert traceback[2].endswith('worker_app.py", line 32, in call')
    assert "return call_next()" in traceback[3]
    assert re.fullmatch(r"  \[\d+ frames inside Wurk left out\]", traceback[5])
    assert traceback[6].endswith('worker_app.py", line 72, in perform')
    assert 'raise ValueError(f"boom {key}")' in log
    assert "processor.py" not in log
    # Where the error is kept, every frame stays (Boom keeps its 3 innermost).
    [entry] = redis.zrange("retry", 0, -1)
    stored = decompress_backtrace(json.loads(entry)["error_backtrace"])
    assert stored[0].endswith("worker_app.py:72:in 'perform'")
    assert any("wurk/server/processor.py" in frame for frame in stored)


def test_wurk_debug_logs_a_failed_jobs_whole_traceback(workers, redis):
    worker = workers.start("-c", "1", env={"APP_ENV": "", "RAILS_ENV": "", "RACK_ENV": "", "WURK_DEBUG": "1"})
    Boom.perform_async(3)
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    worker.stop()
    log = worker.output()
    [line] = failure_lines(log)
    traceback = log[log.index(line) :]
    assert "wurk/server/processor.py" in traceback
    assert "frames inside Wurk" not in traceback


def test_a_failed_job_logs_no_traceback_in_production(workers, redis):
    worker = workers.start("-c", "1", "-e", "production")
    jid = Boom.perform_async(2)
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    worker.stop()
    log = worker.output()
    [line] = failure_lines(log)
    assert line.startswith("WARNING ")
    assert line.endswith(f"jid={jid} failed: ValueError: boom 2")
    assert "Traceback" not in log


def test_a_redis_outage_is_one_warning_then_one_line_when_it_ends(tmp_path):
    server = new_server().start()
    port = server.port
    pool = WorkerPool(server.url, tmp_path, "tests.worker.worker_app", FAST)
    back = None
    try:
        worker = pool.start("-c", "3")
        client = redis_py.Redis.from_url(server.url)
        wait_for(lambda: client.scard("processes") == 1, timeout=30)
        client.close()
        server.stop()
        # Three fetching threads, the heartbeat, the scheduler and the leader
        # election all fail over and over while the server is away.
        wait_for(lambda: "errors are counted" in worker.log.read_text(), timeout=20)
        time.sleep(4)  # an outage of a few seconds: dozens of failures, one line
        back = new_server(port=port).start()
        wait_for(lambda: "Redis is reachable again" in worker.log.read_text(), timeout=20)
        worker.stop()
        log = worker.output()
    finally:
        pool.stop_all()
        server.stop()
        if back is not None:
            back.stop()
    lines = log.splitlines()
    [first] = [n for n, line in enumerate(lines) if "Redis unreachable" in line]
    [recovered] = [line for line in lines[first:] if "Redis is reachable again" in line]
    reported = [line for line in lines[first:] if line.startswith(("WARNING", "ERROR"))]
    assert reported == [lines[first]]  # every failure after the first was counted, not logged
    errors = int(re.search(r"\((\d+) error\(s\) during the outage\)", recovered).group(1))
    assert errors > 3


def test_finished_jobs_show_in_stats_well_before_the_next_beat(workers, config, redis):
    workers.start("-c", "2", env=WIRE_BEAT)
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)  # the first beat is done
    Record.perform_bulk([[n] for n in range(5)])
    Boom.perform_async("x")
    wait_for(lambda: redis.hlen("executions") == 5 and redis.zcard("retry") == 1, timeout=30)
    # The next beat is ten seconds after the first; the counters must not wait for it.
    stats = wait_for(
        lambda: (data := json.loads(run(config, "stats", "--json").output))["processed"] == 6 and data, timeout=5
    )
    assert stats["failed"] == 1


def test_a_quieted_worker_shows_quiet_well_before_the_next_beat(workers, config, redis):
    worker = workers.start("-c", "2", env=WIRE_BEAT)
    wait_for(lambda: redis.scard("processes") == 1, timeout=30)  # the first beat is done
    [process] = json.loads(run(config, "processes", "--json").output)
    assert process["quiet"] is False
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: json.loads(run(config, "processes", "--json").output)[0]["quiet"], timeout=5)
    assert "quiet" in run(config, "processes").output


def test_a_misspelt_option_in_the_config_file_refuses_the_boot_naming_the_file(workers, redis, tmp_path):
    path = tmp_path / "wurk.yml"
    path.write_text(":concurency: 3\n:timeout: 5\n", encoding="utf-8")
    worker = workers.start("-C", str(path))
    assert worker.wait(30) == 2
    output = worker.output()
    assert output.strip() == f"wurk: {path}: unknown option 'concurency'; did you mean 'concurrency'?"
    assert redis.scard("processes") == 0  # refused before it started: not on the defaults


def test_a_queue_given_as_its_redis_key_is_refused(workers):
    worker = workers.start("-q", "queue:mail")
    assert worker.wait(30) == 2
    output = worker.output()
    assert "'queue:mail'" in output
    assert "without the 'queue:' prefix ('mail')" in output
