"""Wire compatibility with a real Ruby Sidekiq 8 worker, its API and its Web UI.

Ruby runs from the Debian chroot named by ``WURK_INTEROP_CHROOT`` (see
``tools/interop/setup-ruby-sidekiq.sh``); each test has its own private server.
Run with::

    WURK_INTEROP_CHROOT=/srv/forky .venv/bin/python -m pytest -m interop tests/interop
"""

from __future__ import annotations

import json
import re
import signal
import time
from typing import Any

import pytest

from tests.helpers import wait_for, wait_until_fetching_ended
from tests.interop import interop_app
from tests.interop.conftest import RESULT_PREFIX, Interop
from tests.interop.interop_app import PyDie, PyEcho, PyFail, PySlow, RubyEcho, RubyFail
from wurk.server.retry import decompress_backtrace

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

# Argument lists that stress the JSON both sides write: non-ASCII and control
# characters, HTML-looking text, deep nesting, integers past 2**53 and 2**64,
# and floats whose shortest forms differ between the two JSON libraries.
ECHO_ARGS: list[list[Any]] = [
    [],
    [1, "two"],
    ["héllo ✓ </script> & <b>", "日本語", "emoji 🎉", "ctl \n\t\u0001 \u2028 \x7f", ""],
    [{"nested": {"list": [None, True, False, 1.5, {"deep": [[], {}]}]}, "k": "v", "ключ": "значение"}],
    [2**64 + 1, -(2**63), 2**53 + 1, 0, -1, 10**30],
    [0.1, 1.0, -2.5, 1e20, 1.5e-7, 1796027747.0882053, 3.141592653589793, -0.0],
    [None, True, False, [None], {"": None}],
]


def canonical(value: Any) -> str:
    """A comparison form that tells 1 from 1.0 but ignores key order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def ruby_script(body: str) -> str:
    return 'require "sidekiq"\nrequire "sidekiq/api"\nrequire "json"\n' + body


def emit(expression: str) -> str:
    return f"puts {RESULT_PREFIX!r} + JSON.generate({expression})\n"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- a. Python pushes, Ruby runs -------------------------------------------------------------


def test_ruby_runs_jobs_pushed_by_python(interop: Interop) -> None:
    before = now_ms()
    expected: dict[str, list[Any]] = {}
    for args in ECHO_ARGS:
        jid = interop.client.push({"class": "InteropEcho", "args": args})
        expected[jid] = args
    expected[RubyEcho.perform_async("through", "wire_name")] = ["through", "wire_name"]
    bulk = [["bulk", n] for n in range(3)]
    for jid, args in zip(interop.client.push_bulk({"class": "InteropEcho", "args": bulk}), bulk, strict=True):
        expected[jid] = args
    scheduled_jid = RubyEcho.perform_in(1, "scheduled", {"at": "soon"})
    expected[scheduled_jid] = ["scheduled", {"at": "soon"}]

    # What Python wrote: integer-millisecond stamps, 24-hex jids, the Ruby class name.
    raw = interop.redis.lrange("queue:default", 0, -1)
    assert len(raw) == len(expected) - 1
    for payload in map(json.loads, raw):
        assert payload["class"] == "InteropEcho"
        assert re.fullmatch(r"[0-9a-f]{24}", payload["jid"])
        for stamp in ("created_at", "enqueued_at"):
            assert type(payload[stamp]) is int
            assert before <= payload[stamp] <= now_ms()
    assert interop.redis.smembers("queues") == {"default"}
    assert interop.redis.zcard("schedule") == 1

    # Ruby's API reads the waiting jobs with the right times.
    waiting = interop.ruby(ruby_script(RUBY_READS_QUEUES + emit("report")))
    assert waiting["size"] == len(expected) - 1
    assert waiting["latency"] < 60
    for jid, args, created_at, enqueued_at in waiting["jobs"]:
        assert canonical(args) == canonical(expected[jid])
        assert abs(created_at - time.time()) < 60
        assert abs(enqueued_at - time.time()) < 60
    [(at_jid, at, at_args)] = waiting["scheduled"]
    assert at_jid == scheduled_jid
    assert time.time() - 5 < at < time.time() + 5
    assert canonical(at_args) == canonical(expected[scheduled_jid])

    interop.start_ruby_worker()
    results = interop.wait_for_results(len(expected), timeout=45)

    assert len(results) == len(expected), "every job runs exactly once"
    by_jid = {entry["jid"]: entry for entry in results}
    assert set(by_jid) == set(expected)
    for jid, args in expected.items():
        entry = by_jid[jid]
        assert entry["runner"] == "ruby"
        assert entry["class"] == "InteropEcho"
        assert entry["sidekiq"].startswith("8.")
        assert canonical(entry["args"]) == canonical(args), jid
    assert interop.redis.llen("queue:default") == 0
    assert interop.redis.zcard("schedule") == 0


RUBY_READS_QUEUES = """
queue = Sidekiq::Queue.new("default")
report = {
  "size" => queue.size,
  "latency" => queue.latency,
  "jobs" => queue.map { |j| [j.jid, j.args, j.created_at.to_f, j.enqueued_at.to_f] },
  "scheduled" => Sidekiq::ScheduledSet.new.map { |e| [e.jid, e.at.to_f, e.args] }
}
"""


# -- b. Ruby pushes, Python runs -------------------------------------------------------------------

RUBY_CASES: dict[str, Any] = {
    "client_push": [1, "two", {"three": 3, "nested": [None, True, 1.5]}, "héllo ✓ </script>", 2**64 + 1],
    "dotted_name": ["reached by its import path"],
    "perform_async": ["async", 10**20, -0.5, {"ключ": ["значение"]}],
    "set_options": ["set", {"a": {"b": {"c": [1, 2, 3]}}}],
    "perform_in": ["in two seconds"],
    "perform_at": ["at a time", 3],
    "perform_bulk": [["bulk", 1], ["bulk", 2], ["bulk", 3]],
}

RUBY_PUSHES = """
class PyEcho
  include Sidekiq::Job
end

cases = JSON.parse(ENV.fetch("INTEROP_CASES"))
jids = {}
jids["client_push"] = Sidekiq::Client.push("class" => "PyEcho", "args" => cases["client_push"])
jids["dotted_name"] = Sidekiq::Client.push(
  "class" => "tests.interop.interop_app.PyEcho", "args" => cases["dotted_name"]
)
jids["perform_async"] = PyEcho.perform_async(*cases["perform_async"])
jids["set_options"] = PyEcho.set(queue: "default", retry: 1).perform_async(*cases["set_options"])
jids["perform_in"] = PyEcho.perform_in(2, *cases["perform_in"])
jids["perform_at"] = PyEcho.perform_at(Time.now + 3, *cases["perform_at"])
PyEcho.perform_bulk(cases["perform_bulk"]).each_with_index { |jid, i| jids["perform_bulk_#{i}"] = jid }
"""


def test_python_runs_jobs_pushed_by_ruby(interop: Interop) -> None:
    jids = interop.ruby(
        ruby_script(RUBY_PUSHES + emit("jids")), env={"INTEROP_CASES": json.dumps(RUBY_CASES, ensure_ascii=False)}
    )
    expected = {name: args for name, args in RUBY_CASES.items() if name != "perform_bulk"}
    for index, args in enumerate(RUBY_CASES["perform_bulk"]):
        expected[f"perform_bulk_{index}"] = args
    assert set(jids) == set(expected)

    # Ruby's scheduled jobs wait in "schedule", scored in float seconds.
    scheduled = {
        json.loads(member)["jid"]: score for member, score in interop.redis.zrange("schedule", 0, -1, withscores=True)
    }
    assert set(scheduled) == {jids["perform_in"], jids["perform_at"]}
    assert all(time.time() < score < time.time() + 10 for score in scheduled.values())
    assert interop.redis.llen("queue:default") == len(expected) - 2
    for payload in map(json.loads, interop.redis.lrange("queue:default", 0, -1)):
        assert type(payload["created_at"]) is int
        assert type(payload["enqueued_at"]) is int

    interop.start_python_worker()
    results = interop.wait_for_results(len(expected), timeout=30)

    by_jid = {entry["jid"]: entry for entry in results}
    assert len(results) == len(expected), "every job runs exactly once"
    for name, args in expected.items():
        entry = by_jid[jids[name]]
        assert entry["runner"] == "python", name
        assert entry["class"] == "PyEcho", name
        assert canonical(entry["args"]) == canonical(args), name
    for jid, score in scheduled.items():
        assert by_jid[jid]["ran_at"] >= score - 0.01, "a scheduled job ran before it was due"
    assert interop.redis.zcard("schedule") == 0
    assert interop.redis.llen("queue:default") == 0


# -- c. failures, both ways --------------------------------------------------------------------------


def test_ruby_books_failures_of_python_pushed_jobs(interop: Interop) -> None:
    # Pushed before the Ruby worker starts, so the exact payloads can be read back.
    with_options = RubyFail.perform_async("with", {"ruby": "options"})  # retry: 2, backtrace: 10
    plain = interop.client.push({"class": "FailJob", "args": ["plain"]})  # the payload's retry: true wins
    # A pusher fills in retry: true for a class it does not know (Ruby's client does the
    # same for a String class), and the payload wins over the Ruby class's own option.
    interop.client.push({"class": "NoRetryJob", "args": [1], "retry": False})
    pushed = {json.loads(raw)["jid"]: json.loads(raw) for raw in interop.redis.lrange("queue:default", 0, -1)}
    started_ms = now_ms()

    interop.start_ruby_worker()
    wait_for(lambda: interop.redis.zcard("retry") == 2, timeout=30, interval=0.1)
    entries = {
        json.loads(member)["jid"]: (json.loads(member), score)
        for member, score in interop.redis.zrange("retry", 0, -1, withscores=True)
    }
    assert set(entries) == {with_options, plain}

    for jid in (with_options, plain):
        entry, score = entries[jid]
        original = pushed[jid]
        # Ruby keeps every field Python wrote, in place, and appends its own.
        assert list(entry)[: len(original)] == list(original)
        assert {key: entry[key] for key in original} == original
        assert entry["error_class"] == "ArgumentError"
        assert entry["error_message"].startswith("FailJob refuses")
        assert entry["retry_count"] == 0
        assert type(entry["failed_at"]) is int
        assert started_ms <= entry["failed_at"] <= now_ms()
        assert "retried_at" not in entry
        assert time.time() + 10 < score < time.time() + 60
    first = entries[with_options][0]
    assert first["retry"] == 2
    trace = decompress_backtrace(first["error_backtrace"])
    assert 1 <= len(trace) <= 10
    assert trace[0].startswith("/opt/interop/app.rb:")
    assert entries[plain][0]["retry"] is True
    assert "error_backtrace" not in entries[plain][0]

    # NoRetryJob is only counted: stat:failed holds all three failures after Ruby's next beat.
    wait_for(lambda: interop.redis.get("stat:failed") == "3", timeout=20, interval=0.2)
    assert interop.redis.get("stat:processed") == "3"
    assert interop.redis.zcard("dead") == 0


RUBY_READS_FAILURES = """
def described(entry)
  {
    "jid" => entry.jid, "klass" => entry.klass, "display_class" => entry.display_class,
    "args" => entry.args, "display_args" => entry.display_args, "queue" => entry.queue,
    "error_class" => entry["error_class"], "error_message" => entry["error_message"],
    "retry_count" => entry["retry_count"], "error_backtrace" => entry.error_backtrace,
    "failed_at" => entry.failed_at.to_f, "created_at" => entry.created_at.to_f,
    "enqueued_at" => entry.enqueued_at.to_f, "score" => entry.score, "at" => entry.at.to_f,
    "value" => entry.value
  }
end

report = {
  "retry_jids" => Sidekiq::RetrySet.new.map(&:jid),
  "dead_jids" => Sidekiq::DeadSet.new.map(&:jid),
  "retry" => Sidekiq::RetrySet.new.map { |e| described(e) },
  "dead" => Sidekiq::DeadSet.new.map { |e| described(e) },
  "stats" => Sidekiq::Stats.new.then { |s| [s.retry_size, s.dead_size] }
}
"""


def test_ruby_api_reads_python_retry_and_dead_entries(interop: Interop) -> None:
    interop.start_python_worker()
    failing = PyFail.perform_async("a", {"n": 1})
    dying = PyDie.perform_async("b")
    wait_for(lambda: interop.redis.zcard("retry") == 1 and interop.redis.zcard("dead") == 1, timeout=20)
    [(retry_raw, retry_score)] = interop.redis.zrange("retry", 0, -1, withscores=True)
    [(dead_raw, dead_score)] = interop.redis.zrange("dead", 0, -1, withscores=True)

    report = interop.ruby(ruby_script(RUBY_READS_FAILURES + emit("report")))

    assert report["retry_jids"] == [failing]
    assert report["dead_jids"] == [dying]
    assert report["stats"] == [1, 1]
    cases = (
        (report["retry"][0], retry_raw, retry_score, "PyFail", "ValueError", ["a", {"n": 1}]),
        (report["dead"][0], dead_raw, dead_score, "PyDie", "KeyError", ["b"]),
    )
    for seen, raw, score, name, error_class, args in cases:
        written = json.loads(raw)
        assert seen["value"] == raw, "Ruby sees the exact member Python wrote"
        assert seen["klass"] == seen["display_class"] == f"tests.interop.interop_app.{name}"
        assert seen["args"] == seen["display_args"] == args
        assert seen["queue"] == "default"
        assert seen["error_class"] == error_class
        assert seen["error_message"] == written["error_message"]
        assert seen["retry_count"] == 0
        # Ruby decodes the compressed backtrace Python wrote.
        assert seen["error_backtrace"] == decompress_backtrace(written["error_backtrace"])
        assert seen["error_backtrace"][0].startswith(f"{interop_app.__file__}:")
        # Integer milliseconds are read as milliseconds (a float would be taken as seconds).
        for stamp in ("failed_at", "created_at", "enqueued_at"):
            assert seen[stamp] == pytest.approx(written[stamp] / 1000, abs=0.002), stamp
            assert abs(seen[stamp] - time.time()) < 60, stamp
        assert seen["score"] == pytest.approx(score)
    assert len(report["dead"][0]["error_backtrace"]) <= 4  # PyDie's backtrace: 4

    # Ruby's "retry now" hands the job back; Python runs it and books the second failure.
    interop.ruby(
        ruby_script('Sidekiq::RetrySet.new.find_job(ENV.fetch("JID")).retry\n' + emit("true")), env={"JID": failing}
    )

    def retried() -> dict[str, Any] | None:
        for member in interop.redis.zrange("retry", 0, -1):
            entry = json.loads(member)
            if entry["jid"] == failing and "retried_at" in entry:
                return entry
        return None

    again = wait_for(retried, timeout=20)
    assert again["retry_count"] == 0  # type: ignore[index]
    assert type(again["retried_at"]) is int  # type: ignore[index]

    # Ruby deletes a Python-written dead entry by its exact member.
    interop.ruby(
        ruby_script('Sidekiq::DeadSet.new.find_job(ENV.fetch("JID")).delete\n' + emit("true")), env={"JID": dying}
    )
    assert interop.redis.zcard("dead") == 0


# -- d. the Web UI and the process API with a Python worker ------------------------------------

PAGES = ["/", "/busy", "/queues", "/queues/default", "/retries", "/scheduled", "/morgue", "/metrics", "/stats"]


def process_row(html: str, identity: str) -> str:
    """The Busy page's table row for one process."""
    at = html.index(f'value="{identity}"')
    return html[html.rindex("<tr>", 0, at) : html.index("</tr>", at)]


def test_web_ui_renders_a_python_worker(interop: Interop) -> None:
    worker = interop.start_python_worker(concurrency=3, tag="py-web")
    port = interop.start_web()
    # A known state: 2 failures (1 retry, 1 dead), 1 scheduled, 2 parked, 1 running.
    failing = PyFail.perform_async("for /retries")
    dying = PyDie.perform_async("for /morgue")
    later = PyEcho.perform_in(3600, "for /scheduled")
    for n in range(2):
        interop.client.push({"class": "PyEcho", "queue": "parked", "args": [n]})
    slow = PySlow.perform_async(60)
    wait_for(lambda: interop.redis.lrange("interop:started", 0, -1) == [slow], timeout=15)
    beat = wait_for(
        lambda: (
            (h := interop.process_hash(worker.pid))
            and h["busy"] == "1"
            and interop.redis.get("stat:failed") == "2"
            and h
        ),
        timeout=15,
    )
    identity = beat["identity"]  # type: ignore[index]
    hostname, pid, _nonce = identity.split(":")
    assert int(pid) == worker.pid

    for path in [*PAGES, "/queues/parked", "/stats/queues"]:
        status, _ = interop.get(port, path)
        assert status == 200, path

    _, busy = interop.get(port, "/busy")
    row = process_row(busy, identity)
    assert f"{hostname}:{pid}" in row
    assert "py-web" in row
    numbers = re.findall(r'<td class="num">\s*<span[^>]*>([\d,]+)</span>', row)
    assert len(numbers) == 3, row  # RSS, threads, busy
    assert int(numbers[0].replace(",", "")) > 0
    assert numbers[1:] == ["3", "1"]
    jobs = busy[busy.index("<h2>Jobs</h2>") :]
    job_row = jobs[jobs.rindex("<tr>", 0, jobs.index(slow)) : jobs.index("</tr>", jobs.index(slow))]
    assert identity in job_row
    assert "tests.interop.interop_app.PySlow" in job_row

    # Every entry has a detail page, found by its score and jid.
    for listing, jid in (("/retries", failing), ("/morgue", dying), ("/scheduled", later)):
        _, html = interop.get(port, listing)
        links = set(re.findall(rf"{listing}/([^\"/?]+-{jid})\"", html))
        assert len(links) == 1, (listing, links)
        status, detail = interop.get(port, f"{listing}/{links.pop()}")
        assert status == 200, listing
        assert jid in detail
    _, parked = interop.get(port, "/queues/parked")
    assert "PyEcho" in parked

    _, body = interop.get(port, "/stats")
    stats = json.loads(body)["sidekiq"]
    assert {
        key: stats[key]
        for key in ("processed", "failed", "busy", "processes", "enqueued", "scheduled", "retries", "dead")
    } == {
        "processed": 2,
        "failed": 2,
        "busy": 1,
        "processes": 1,
        "enqueued": 2,
        "scheduled": 1,
        "retries": 1,
        "dead": 1,
    }


RUBY_PROCESS_SET = """
target = Sidekiq::ProcessSet.new.find { |p| p["pid"] == Integer(ENV.fetch("PID")) }
set = Sidekiq::ProcessSet.new
report = {
  "size" => set.size,
  "total_concurrency" => set.total_concurrency,
  "identity" => target.identity,
  "hostname" => target["hostname"],
  "tag" => target.tag,
  "concurrency" => target["concurrency"],
  "busy" => target["busy"],
  "queues" => target.queues,
  "weights" => target.weights,
  "labels" => target.labels,
  "version" => target.version,
  "stopping" => target.stopping?,
  "embedded" => target.embedded?,
  "started_at" => target["started_at"],
  "beat" => target["beat"]
}
case ENV["ACTION"]
when "quiet" then target.quiet!
when "stop" then target.stop!
end
"""


def test_ruby_process_api_sees_and_controls_a_python_worker(interop: Interop) -> None:
    worker = interop.start_python_worker(concurrency=4, queues=("default", "low"), tag="py-api")
    identity = interop.process_hash(worker.pid)["identity"]  # type: ignore[index]
    script = ruby_script(RUBY_PROCESS_SET + emit("report"))

    seen = interop.ruby(script, env={"PID": str(worker.pid)})
    assert seen["size"] == 1
    assert seen["total_concurrency"] == 4
    assert seen["identity"] == identity
    assert seen["hostname"] == identity.split(":")[0]
    assert seen["tag"] == "py-api"
    assert seen["concurrency"] == 4
    assert seen["busy"] == 0
    assert seen["queues"] == ["default", "low"]
    assert seen["weights"] == {"default": 0, "low": 0}
    assert seen["stopping"] is False
    assert seen["embedded"] is False
    assert abs(seen["started_at"] - time.time()) < 60
    assert abs(seen["beat"] - time.time()) < 10

    # Quiet from Ruby: the next heartbeat pops TSTP and the worker stops fetching.
    interop.ruby(script, env={"PID": str(worker.pid), "ACTION": "quiet"})
    wait_for(lambda: interop.redis.hget(identity, "quiet") == "true", timeout=10, interval=0.1)
    assert interop.ruby(script, env={"PID": str(worker.pid)})["stopping"] is True
    PyEcho.perform_async("must wait")
    log = interop.log_paths[worker.pid]
    wait_until_fetching_ended(log, worker.pid, lambda: worker.send_signal(signal.SIGTTIN))
    assert interop.redis.llen("queue:default") == 1
    assert interop.redis.llen("interop:results") == 0
    assert worker.poll() is None

    # Stop from Ruby: the next heartbeat pops TERM and the worker shuts down cleanly.
    interop.ruby(script, env={"PID": str(worker.pid), "ACTION": "stop"})
    assert worker.wait(20) == 0
    assert identity not in interop.redis.smembers("processes")
    assert interop.redis.llen("queue:default") == 1, "the queued job is left for the next worker"


# -- e. a mixed fleet ---------------------------------------------------------------------------------

RUBY_BULK = """
require "./app"
jids = InteropCount.perform_bulk(Array.new(Integer(ENV.fetch("COUNT"))) { |i| ["ruby-#{i}", 0.05] })
"""


def test_mixed_fleet_runs_every_job_exactly_once(interop: Interop) -> None:
    ruby_worker = interop.start_ruby_worker(concurrency=2)
    python_worker = interop.start_python_worker(concurrency=2)
    assert interop.redis.scard("processes") == 2
    count = 40
    python_jids = interop.client.push_bulk({"class": "InteropCount", "args": [[f"py-{i}", 0.05] for i in range(count)]})
    ruby_jids = interop.ruby(ruby_script(RUBY_BULK + emit("jids")), env={"COUNT": str(count)})
    pushed = set(python_jids) | set(ruby_jids)
    assert len(pushed) == 2 * count

    interop.wait_for_results(2 * count, timeout=60)
    assert ruby_worker.poll() is None
    assert python_worker.poll() is None
    # The end marker: both workers stopped and gone. A duplicate run, or a job
    # given back to the queue, has shown up by then.
    assert interop.stop(ruby_worker) == 0
    assert interop.stop(python_worker) == 0
    results = interop.results()

    assert len(results) == 2 * count
    assert {entry["jid"] for entry in results} == pushed
    counts = interop.redis.hgetall("interop:counts")
    assert set(counts) == pushed
    assert set(counts.values()) == {"1"}
    runners = {entry["runner"] for entry in results}
    assert runners == {"ruby", "python"}, "both workers took jobs from the shared queue"
    by_runner = {runner: sum(1 for e in results if e["runner"] == runner) for runner in runners}
    assert all(n > 0 for n in by_runner.values())
    assert interop.redis.llen("queue:default") == 0
    assert [key for key in interop.redis.scan_iter("queue:default|*") if interop.redis.llen(key)] == []


# -- known gaps --------------------------------------------------------------------------------------------

RUBY_READS_METRICS = """
require "sidekiq/metrics/query"
result = Sidekiq::Metrics::Query.new.top_jobs(minutes: 5).job_results["tests.interop.interop_app.PyEcho"]
totals = result.totals || {}
report = {"p" => totals["p"].to_i, "f" => totals["f"].to_i}
"""


def test_web_ui_metrics_count_python_executions(interop: Interop) -> None:
    interop.start_python_worker()
    for n in range(3):
        PyEcho.perform_async(n)
    interop.wait_for_results(3)
    # Wurk flushes metrics with a heartbeat, at most every 5 s.
    deadline = time.monotonic() + 15
    while True:
        report = interop.ruby(ruby_script(RUBY_READS_METRICS + emit("report")))
        if report == {"p": 3, "f": 0} or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert report == {"p": 3, "f": 0}
