"""Latency benchmark: how soon a job starts after it was pushed, under a steady load.

Run it from the bench virtualenv (see bench/README.md)::

    python bench/latency.py                                # 20/50/80% load, 10 s, 2 runs each
    python bench/latency.py --loads 20,50 --seconds 5 --runs 1
    python bench/latency.py --capacity 8000                # skip the capacity drain

One private server is started on a free loopback port and pinned to one core,
with this harness, which is also the pusher; every worker runs on the other
core. First a noop drain of the reference engine (Ruby Sidekiq when it can run
here, else Wurk) measures a capacity, in jobs/s, exactly as ``drain.py`` does.
Then, for each load (a share of that capacity) and run, each engine in turn
(the order rotating from run to run) gets a fresh worker, a warm-up of 50 jobs,
and ``--seconds`` of steady pushing at that rate: job ``i`` is due at
``t0 + i / rate``, and whatever is due is sent at once.

Wurk and Sidekiq get the same bytes: one ``LPUSH queue:default`` of a Sidekiq
8 payload (integer-millisecond ``created_at`` and ``enqueued_at``) whose first
argument is the pusher's ``time.time()``, to the microsecond, since
``enqueued_at`` has only millisecond resolution. Each job appends its start
time minus that argument, in microseconds, to a file; the harness reads the
file once every pushed job has reported. The Python peer (Huey, the peer that
drains noop jobs fastest in ``drain.py``) is pushed through its own enqueue
call, with the same first argument.

Every engine runs as ``drain.py`` runs it, five threads, with its default job
logging unless ``--nolog``. Results are figures for a human to read, printed as
a table and written to bench/results/latency-<date>.json; nothing asserts on
them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import drain  # noqa: E402  (the workers' module, importable from this directory)

#: Engine name -> the drain.py case whose worker it runs (default logging, and without).
ENGINES = {
    "wurk": ("wurk", "wurk-nolog"),
    "sidekiq": ("sidekiq", "sidekiq-nolog"),
    "huey": ("huey", "huey"),
}
WARM_UP = 50


def _payload(class_name: str, index: int) -> bytes:
    now = time.time()
    millis = int(now * 1000)
    jid = os.urandom(12).hex()
    return (
        f'{{"retry":true,"queue":"default","args":[{now:.6f},{index}],"class":"{class_name}",'
        f'"jid":"{jid}","created_at":{millis},"enqueued_at":{millis}}}'
    ).encode()


class Pusher:
    """Pushes one probe job, the way the engine's users push one."""

    def __init__(self, engine: str, url: str) -> None:
        self.engine = engine
        self.conn = drain._redis(url)
        if engine == "huey":
            from huey import RedisHuey

            app = RedisHuey("drain", url=url)
            # The same task name as the consumer's (drain.py, DRAIN_LIB=huey); only the name travels.
            self.huey_task = app.task(name="drain_latency")(drain.record_latency)
        else:
            from wurk.client.payload import class_name

            self.class_name = "LatencyProbe" if engine == "sidekiq" else class_name(drain.LatencyProbe)
            self.conn.sadd("queues", "default")

    def push(self, indexes: range) -> None:
        if self.engine == "huey":
            for index in indexes:
                self.huey_task(time.time(), index)
            return
        if len(indexes) == 1:
            self.conn.lpush("queue:default", _payload(self.class_name, indexes[0]))
            return
        pipe = self.conn.pipeline(transaction=False)
        for index in indexes:
            pipe.lpush("queue:default", _payload(self.class_name, index))
        pipe.execute()


def _lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _wait_lines(path: Path, count: int, timeout: float, proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _lines(path) >= count:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def run_once(
    engine: str, case_name: str, rate: float, seconds: float, url: str, worker_cores: list[int] | None
) -> dict[str, Any]:
    case = drain.CASES[case_name]
    conn = drain._redis(url)
    conn.flushall()
    if case.chroot:
        import sidekiq_chroot

        tmp_root: str | None = str(sidekiq_chroot.tmp_root())
        inside: Any = sidekiq_chroot.inside
    else:
        tmp_root, inside = None, str
    with tempfile.TemporaryDirectory(prefix="wurk-latency-", dir=tmp_root) as tmp:
        workdir = Path(tmp)
        os.chmod(workdir, 0o777)
        results = workdir / "latency"
        results.touch()
        results.chmod(0o666)
        marks = {"LATENCY_FILE": inside(results)}
        # An outer PYTHONPATH stays behind the bench's own directory (another checkout's packages).
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, **case.env, "REDIS_URL": url, "DRAIN_LIB": case.lib, "PYTHONPATH": path, **marks}
        env.pop("PYTHONSTARTUP", None)
        log_path = workdir / "worker.log"
        pusher = Pusher(engine, url)
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [*drain._pin_prefix(worker_cores), *case.command(workdir, url, marks)],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            # Warm-up: the worker has booted and run a few jobs before the clock starts.
            pusher.push(range(WARM_UP))
            if not _wait_lines(results, WARM_UP, 120, proc):
                tail = " | ".join(log_path.read_text(errors="replace").splitlines()[-6:])
                return {"engine": engine, "failed": f"no warm-up jobs ran; worker log: {tail}"}
            time.sleep(0.5)
            total = int(rate * seconds)
            started = time.monotonic()
            sent = 0
            while sent < total:
                now = time.monotonic()
                due = min(total, int((now - started) * rate) + 1)
                if due > sent:
                    pusher.push(range(sent, due))
                    sent = due
                else:
                    time.sleep(max(0.0, started + sent / rate - time.monotonic()))
            push_seconds = time.monotonic() - started
            done = _wait_lines(results, WARM_UP + total, max(60.0, seconds * 3), proc)
        finally:
            drain._stop(proc)
        values = [int(line) for line in results.read_text().split()][WARM_UP:]
    if not done:
        return {"engine": engine, "failed": f"only {len(values)} of {total} jobs reported"}
    millis = [value / 1000 for value in values]
    return {
        "engine": engine,
        "case": case_name,
        "rate": rate,
        "pushed": total,
        "push_rate": total / push_seconds,
        "p50_ms": percentile(millis, 0.50),
        "p90_ms": percentile(millis, 0.90),
        "p99_ms": percentile(millis, 0.99),
        "max_ms": max(millis),
        "mean_ms": statistics.fmean(millis),
    }


def main(argv: list[str] | None = None) -> int:
    from enqueue import _source_tree, _version, machine_info, start_server

    parser = argparse.ArgumentParser(description="Enqueue-to-start latency under a steady load.")
    parser.add_argument("--engines", default="wurk,sidekiq,huey", help=f"subset of: {', '.join(ENGINES)}")
    parser.add_argument("--loads", default="20,50,80", help="percent of the measured capacity")
    parser.add_argument("--seconds", type=float, default=10.0, help="steady pushing per run")
    parser.add_argument("--runs", type=int, default=2, help="runs per engine and load")
    parser.add_argument(
        "--capacity", type=float, default=0.0, help="jobs/s the loads are shares of (default: measured)"
    )
    parser.add_argument("--capacity-jobs", type=int, default=10_000, help="jobs of the capacity drain")
    parser.add_argument("--nolog", action="store_true", help="job logging off on Wurk and Sidekiq")
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--output", default="", help="JSON path (default bench/results/latency-<date>.json)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    engines = [name for name in args.engines.split(",") if name]
    loads = [float(load) for load in args.loads.split(",") if load]
    unknown = [name for name in engines if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine(s): {', '.join(unknown)}")
    not_run = []
    chosen = {engine: ENGINES[engine][1 if args.nolog else 0] for engine in engines}
    for engine, case_name in list(chosen.items()):
        problem = drain.CASES[case_name].problem()
        if problem:
            not_run.append(f"not run ({engine}): {problem}")
            print(not_run[-1], file=sys.stderr)
            del chosen[engine]
    if not chosen:
        return 2
    source = _source_tree()
    load_before = os.getloadavg()
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        versions = {engine: _version(drain.CASES[case].dist) for engine, case in chosen.items()}
        if any(drain.CASES[case].chroot for case in chosen.values()):
            import sidekiq_chroot

            stack.enter_context(sidekiq_chroot.Chroot())
            versions["sidekiq"] = sidekiq_chroot.version()
        server, server_info = start_server(args.server)
        stack.callback(server.stop)
        pinning = drain.pin("split", server.process.pid)
        worker_cores = pinning.get("worker")
        capacity = args.capacity
        reference = "sidekiq" if "sidekiq" in chosen else next(iter(chosen))
        if not capacity:
            outcome = drain.measure(
                chosen[reference], "noop", args.capacity_jobs, server, server.url, worker_cores, 0, 10.0
            )
            if "jobs_per_s" not in outcome:
                print(f"capacity drain failed: {outcome.get('failed')}", file=sys.stderr)
                return 1
            capacity = outcome["jobs_per_s"]
            print(f"capacity: {reference} drains {capacity:,.0f} noop jobs/s", file=sys.stderr)
        order = list(chosen)
        turn = 0
        for load in loads:
            rate = capacity * load / 100
            for run_no in range(args.runs):
                rotated = order[turn % len(order) :] + order[: turn % len(order)]
                turn += 1
                for engine in rotated:
                    outcome = run_once(engine, chosen[engine], rate, args.seconds, server.url, worker_cores)
                    outcome.update({"load_percent": load, "run": run_no + 1})
                    runs.append(outcome)
                    if "failed" in outcome:
                        shown = f"failed: {outcome['failed']}"
                    else:
                        shown = (
                            f"{outcome['push_rate']:,.0f} jobs/s pushed, p50 {outcome['p50_ms']:.2f} ms, "
                            f"p99 {outcome['p99_ms']:.2f} ms, max {outcome['max_ms']:.1f} ms"
                        )
                    print(f"load {load:.0f}% run {run_no + 1} {engine:<8} {shown}", file=sys.stderr, flush=True)
    table = []
    for load in loads:
        for engine in chosen:
            good = [run for run in runs if run["load_percent"] == load and run["engine"] == engine and "p50_ms" in run]
            if not good:
                table.append({"load_percent": load, "engine": engine, "failed": True})
                continue
            table.append(
                {
                    "load_percent": load,
                    "engine": engine,
                    "rate": good[0]["rate"],
                    "runs": len(good),
                    "p50_ms": [run["p50_ms"] for run in good],
                    "p99_ms": [run["p99_ms"] for run in good],
                    "max_ms": [run["max_ms"] for run in good],
                }
            )
    result = {
        "benchmark": "latency",
        "date": dt.date.today().isoformat(),
        "seconds": args.seconds,
        "capacity": capacity,
        "capacity_of": reference if not args.capacity else "given",
        "logging": "off" if args.nolog else "default",
        "cases": chosen,
        "versions": versions,
        "not_run": not_run,
        "machine": machine_info(load_before),
        "source": source,
        "server": server_info,
        "pinning": pinning,
        "table": table,
        "runs": runs,
    }
    print(
        f"\nLatency {result['date']}: {server_info['kind']} {server_info['version']}, capacity {capacity:,.0f} jobs/s "
        f"({result['capacity_of']}), {args.seconds:g} s per run, job logging {result['logging']}"
    )
    for line in not_run:
        print(line)
    header = f"{'load':>5} {'jobs/s':>7} {'engine':<8} {'p50 ms (each run)':<24} {'p99 ms (each run)':<24} max ms"
    print(header)
    print("-" * len(header))
    for row in table:
        if row.get("failed"):
            print(f"{row['load_percent']:>4.0f}% {'':>7} {row['engine']:<8} failed")
            continue
        p50 = ", ".join(f"{value:.2f}" for value in row["p50_ms"])
        p99 = ", ".join(f"{value:.2f}" for value in row["p99_ms"])
        top = ", ".join(f"{value:.0f}" for value in row["max_ms"])
        print(f"{row['load_percent']:>4.0f}% {row['rate']:>7,.0f} {row['engine']:<8} {p50:<24} {p99:<24} {top}")
    if not args.no_write:
        drain.RESULTS.mkdir(parents=True, exist_ok=True)
        out = Path(args.output) if args.output else drain.RESULTS / f"latency-{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
