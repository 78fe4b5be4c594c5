"""Regression guards on the worker's hot path: counts, not times.

A change that costs a no-op job one more Redis command or a few more Python
calls is invisible in a test's wall clock and costs every user on every
job. These tests count both, on the real worker, and fail when a count
passes its committed ceiling (listed in ``docs/performance.md``).

**When a ceiling is passed.** If the change did not mean to add work per job,
the failure found a regression: the message names the count that grew. If it
did (a new guarantee that needs a command, a feature on the hot path), measure
again as each test's docstring says, raise the ceiling in this file to a
little above the new figure, and change the line in ``docs/performance.md``
in the same commit, saying why. When a change lowers a figure, lower the
ceiling with it, so that the gain cannot be lost unnoticed.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WorkerPool, wait_for
from tests.worker.noop_app import AsyncNoop, Noop
from wurk import current
from wurk.client import payload as wire
from wurk.current import current_stopping
from wurk.server.fetch import ReliableFetcher, UnitOfWork
from wurk.server.identity import ProcessIdentity
from wurk.server.interrupts import current_shield
from wurk.server.loop import LoopRunner
from wurk.server.manager import Manager
from wurk.server.processor import ProcessStats, parse_job

APP = "tests.worker.noop_app"
JOBS = 2_000


def payloads(count: int, job_class: str = f"{APP}.Noop") -> list[str]:
    """``count`` Sidekiq-format payloads of ``job_class``, the bytes a client pushes."""
    return [
        wire.dumps(
            {
                "retry": True,
                "queue": "default",
                "class": job_class,
                "args": [number],
                "jid": f"{number:024x}",
                "created_at": 1796027746.766,
                "enqueued_at": 1796027746.766,
            }
        )
        for number in range(count)
    ]


# -- Redis commands per no-op job ---------------------------------------------------


class CountedClient:
    """The test's own commands, sent through one connection and counted by
    name, so that they can be taken out of the server's tally exactly."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self.sent: collections.Counter[str] = collections.Counter()

    def send(self, *args: Any) -> Any:
        self.sent[str(args[0]).lower()] += 1
        return self.redis.execute_command(*args)

    def command_calls(self) -> collections.Counter[str]:
        """The server's calls per command since its start (``INFO commandstats``)."""
        stats = self.send("INFO", "commandstats")
        return collections.Counter(
            {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}
        )


@pytest.fixture
def noop_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, APP, {})
    yield pool
    pool.stop_all()


def voluntary_switches(pid: int) -> int:
    """The voluntary context switches of every thread of process ``pid`` so far."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        total += sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("voluntary_ctxt"))
    return total


def drain_commands(
    noop_workers: WorkerPool,
    redis: Any,
    tmp_path: Any,
    jobs: list[str] | None = None,
    switches: list[int] | None = None,
) -> collections.Counter[str]:
    """The commands the server ran while one worker (``-c 5``, job logging
    off) drained ``jobs`` (:data:`JOBS` no-op jobs by default), the test's own taken out.

    The worker boots on an empty queue first, so its boot is outside the
    window; the window opens before the jobs are pushed (one ``LPUSH``) and
    closes once the queue and the worker's private list are both empty: every
    job claimed and its acknowledgement sent. ``switches``, if given, gets
    the worker's voluntary context switches within the window.
    """
    settings = tmp_path / "nolog.yml"
    settings.write_text("skip_default_job_logging: true\n", encoding="utf-8")
    worker = noop_workers.start("-c", "5", "-C", str(settings))
    client = CountedClient(redis)
    wait_for(lambda: client.send("SCARD", "processes") == 1, timeout=30)  # booted: its first beat is done
    jobs = payloads(JOBS) if jobs is None else jobs
    client.send("PING")  # the connection is open before the window
    before = client.command_calls()
    mine_before = collections.Counter(client.sent)
    switched = voluntary_switches(worker.pid)
    client.send("LPUSH", "queue:default", *jobs)
    wait_for(
        lambda: client.send("LLEN", "queue:default") == 0 and not client.send("KEYS", "queue:default|*"),
        timeout=60,
        interval=0.05,
    )
    after = client.command_calls()
    if switches is not None:
        switches.append(voluntary_switches(worker.pid) - switched)
    mine = client.sent - mine_before
    return after - before - mine


#: Redis commands per no-op job, all of them and the ones of the hot path,
#: commands a Lua script runs included. Measured 1.14 in all, under ``-n 2``:
#: one ``core.fetch`` call (``EVALSHA``) every six to nine jobs (0.11-0.17 a
#: job) with the eight or so commands it runs, whatever the jobs in it: an
#: ``LRANGE``, ``LTRIM`` and ``LPUSH`` claim the batch, an ``LLEN``, ``LRANGE``
#: and ``DEL`` acknowledge the previous one, a ``SCARD`` and a ``SISMEMBER`` look
#: for suspects and a pause. A few acknowledgements go one ``LREM`` each (a
#: claim that came while jobs of the last batch still ran), a waiter's
#: ``BLMOVE`` claims a job now and then; the rest (a new connection, a
#: heartbeat) is under 0.02. Before the batch moves in three commands and
#: leaves in one, the figure was 2.34-2.54, an ``LMOVE`` and an ``LREM`` a job.
#: One more command a job passes the total's ceiling, and its own if it is
#: one of these.
COMMANDS_PER_JOB = 2.0
HOT_COMMANDS_PER_JOB = {"evalsha": 0.3, "lmove": 0.2, "lrem": 0.5}


def test_redis_commands_per_noop_job(noop_workers, redis, tmp_path):
    """Redis commands per no-op job in a real worker's drain of 2,000 jobs.

    To measure again, run this test several times under ``-n 2`` and read the
    figures in its failure message after lowering :data:`COMMANDS_PER_JOB`
    to 0 (``bench/drain.py`` gives the same figure for a longer drain). The
    fetch batches more jobs a call on an idle machine than on a loaded one,
    so commit a ceiling above the worst of several runs. Raise it when a job
    needs a command more on purpose; a ``core.fetch`` that claims fewer jobs
    a call shows as more ``EVALSHA`` a job.
    """
    calls = drain_commands(noop_workers, redis, tmp_path)
    per_job = {name: round(count / JOBS, 4) for name, count in sorted(calls.items())}
    total = sum(calls.values()) / JOBS
    advice = (
        f"Redis commands per no-op job: {total:.3f} in all, {per_job}. If no command a job was meant to be added, "
        "this is a regression on the worker's hot path; if one was, raise the ceiling in this file and in "
        "docs/performance.md, saying why."
    )
    # Every job was acknowledged within the window: the drain waits for the
    # queue to be empty and the private list gone.
    for name, ceiling in HOT_COMMANDS_PER_JOB.items():
        assert per_job.get(name, 0) <= ceiling, f"{name} passes its ceiling {ceiling}. {advice}"
    assert total <= COMMANDS_PER_JOB, f"the total passes its ceiling {COMMANDS_PER_JOB}. {advice}"


#: ``core.fetch`` calls per 5 ms job. Measured 0.23-0.26 on an idle machine
#: (500 jobs, the first few dozen claimed one a call while the worker learns
#: how long its jobs take); one call per job (1.0) was the figure while only
#: jobs under 5 ms were claimed ahead.
SHORT_JOB_JOBS = 500
EVALSHA_PER_SHORT_JOB = 0.6


def test_jobs_of_a_few_milliseconds_are_claimed_ahead(noop_workers, redis, tmp_path):
    """A worker draining 5 ms jobs claims several a round trip, as it does
    no-op jobs: a claim per job would leave each thread waiting on Redis
    between its jobs (5 ms I/O jobs drained about 10% slower that way)."""
    calls = drain_commands(noop_workers, redis, tmp_path, payloads(SHORT_JOB_JOBS, f"{APP}.Wait5"))
    per_job = calls["evalsha"] / SHORT_JOB_JOBS
    assert per_job <= EVALSHA_PER_SHORT_JOB, (
        f"{per_job:.3f} core.fetch calls per 5 ms job, over the ceiling {EVALSHA_PER_SHORT_JOB}: "
        "such jobs are no longer claimed ahead of the threads"
    )


#: Voluntary context switches of the worker per no-op job, every thread of
#: it. Measured 0.31-0.83 in this test (2,000 jobs, alone or beside other
#: tests); 1.44 while every idle thread was woken for each claim's jobs (each
#: woke, found the claiming thread holding the GIL and the jobs gone, and
#: slept again).
SWITCHES_PER_NOOP_JOB = 1.1


def test_idle_threads_are_not_woken_for_nothing(noop_workers, redis, tmp_path):
    """A drain of no-op jobs wakes few threads: the thread that claims runs
    the claimed jobs itself while it holds the GIL, and an idle thread is
    woken only while jobs are left for it, one at a time."""
    switches: list[int] = []
    drain_commands(noop_workers, redis, tmp_path, switches=switches)
    per_job = switches[0] / JOBS
    assert per_job <= SWITCHES_PER_NOOP_JOB, (
        f"{per_job:.2f} voluntary context switches per no-op job, over the ceiling {SWITCHES_PER_NOOP_JOB}: "
        "are idle threads woken for jobs the claiming thread runs itself?"
    )


# -- Python calls per job -----------------------------------------------------------


class CallCount:
    """The function calls this thread makes inside the block, counted with
    ``sys.setprofile``: Python functions (each resumption of a generator or
    coroutine counts as one, as ``cProfile`` counts them) and built-ins."""

    def __init__(self) -> None:
        self.python = 0
        self.builtin = 0

    def _event(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            self.python += 1
        elif event == "c_call":
            self.builtin += 1

    def __enter__(self) -> CallCount:
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


def overhead() -> tuple[int, int]:
    """What an empty block counts (its own ``__exit__`` and ``setprofile``)."""
    with CallCount() as empty:
        pass
    return empty.python, empty.builtin


@pytest.fixture
def manager(config, redis) -> Iterator[Manager]:
    """A manager for five threads on the test server, job logging off, its
    threads not started: the test runs its processors' steps itself."""
    config.concurrency = 5
    config.queues = ["default"]
    config["skip_default_job_logging"] = True
    config["fetch_poll_interval"] = 0.2
    made = Manager(config.default_capsule, ProcessIdentity.current(), ProcessStats(), {}, LoopRunner())
    yield made
    fetcher = made.fetcher
    assert isinstance(fetcher, ReliableFetcher)
    fetcher.flush_acks()
    fetcher.quiet()
    for thread in fetcher.waiters.threads:
        thread.join(5)
    with fetcher.ledger.lock:  # the books add up once every acknowledgement is sent
        try:
            fetcher.ledger.check()
        finally:
            fetcher.ledger.close()
    made.loop.stop()


WARM = 20
MEASURED = 200


def claimed(manager: Manager, redis: Any, job_class: type) -> Iterator[tuple[int, UnitOfWork]]:
    """:data:`WARM` then :data:`MEASURED` jobs of ``job_class``, each claimed
    when the previous one has run, with its index.

    The claim is the fetcher's (``retrieve_work``: a Redis round trip now and
    then, as many jobs a claim as the timing gives), so the counts leave it
    out: what they count is a claimed job run to its acknowledgement, which
    is queued to travel with the next claim.
    """
    redis.lpush("queue:default", *payloads(WARM + MEASURED, f"{job_class.__module__}.{job_class.__name__}"))
    for index in range(WARM + MEASURED):
        uow = manager.fetcher.retrieve_work()
        assert uow is not None, "a job claimed from the full queue"
        yield index, uow
    assert redis.llen("queue:default") == 0


def in_worker_context(manager: Manager, measure: Callable[[], Any]) -> Any:
    """Run ``measure`` in a context of its own, marked as a processor thread
    marks its own (the configuration, the stopping flag, the shield)."""
    processor = manager.processors[0]

    def marked() -> Any:
        current_stopping.set(processor.stopping)
        current.mark(manager.config, manager.capsule)
        current_shield.set(processor.shield)
        return measure()

    return contextvars.Context().run(marked)


def common_path(counts: list[tuple[int, int]], ceiling: int, what: str) -> int:
    """The calls of the path most warm jobs take, checked against ``ceiling``.

    Nearly every warm job takes one path, call for call. A few may take a
    longer one for a reason of the clock's, not the job's (a thread switch
    that lands inside the block, a flush on a timer), so the figure is the
    path of the many, and those few are only bounded.
    """
    tally = collections.Counter(p + b for p, b in counts)
    figure, jobs = tally.most_common(1)[0]
    report = (
        f"{what}: {sorted(collections.Counter(counts).items())} ((Python, built-in) calls: jobs), ceiling {ceiling}. "
        "If the job's path was not meant to grow, find the new calls (run this test with a cProfile around the "
        "block); if it was, raise the ceiling here and in docs/performance.md, saying why."
    )
    assert jobs >= 0.9 * len(counts), f"most warm jobs take one path. {report}"
    assert figure <= ceiling, report
    return figure


#: Python plus built-in calls for one synchronous no-op job: measured 173
#: (84 + 89) on CPython 3.11.
SYNC_CALLS_PER_JOB = 177

#: The same for an ``async def perform`` no-op job on the event loop, its own
#: path only: measured 121 (64 + 57) on CPython 3.11.
ASYNC_CALLS_PER_JOB = 125


def test_python_calls_per_sync_noop_job(manager, redis):
    """A processor's ``process`` of one claimed no-op job, job logging off:
    every Python and built-in call from the parse to the queued
    acknowledgement, counted with ``sys.setprofile`` on the one thread that
    runs it, so the count is exact, and the same for nearly every job after
    the first few (they fill the caches).

    To measure again: run this test and read the figures in its failure
    message after setting the ceiling to 0. Raise the ceiling when the job's
    path gained calls on purpose (a feature every job needs); a CPython
    upgrade can move the figure by a few calls too, and then the new figure
    is the one to commit.
    """
    processor = manager.processors[0]
    base = overhead()

    def measure() -> list[tuple[int, int]]:
        counts = []
        for index, uow in claimed(manager, redis, Noop):
            with CallCount() as count:
                processor.process(uow)
            if index >= WARM:
                counts.append((count.python - base[0], count.builtin - base[1]))
        return counts

    counts = in_worker_context(manager, measure)
    common_path(counts, SYNC_CALLS_PER_JOB, "sync")
    assert manager.stats.swap()[:2] == (WARM + MEASURED, 0)  # each ran, and succeeded


def test_python_calls_per_async_noop_job(manager, redis):
    """The same for an ``async def perform`` no-op job: ``process_async``,
    the job's whole path on the event loop (log context, the retry guards,
    stats, the middleware chain, ``perform``, the acknowledgement), awaited
    in one coroutine on a loop in this thread. A no-op ``perform`` never
    suspends, so no scheduling of the loop's is counted; the hand-off from a
    processor thread (:meth:`wurk.server.asyncjobs.AsyncJobs.start`) is left
    out, since how many jobs one wake-up of the loop starts depends on timing.

    To measure again and when to raise the ceiling: as for the synchronous
    job above.
    """
    processor = manager.processors[0]
    fetcher = manager.fetcher
    assert isinstance(fetcher, ReliableFetcher)
    base = overhead()

    async def measure() -> list[tuple[int, int]]:
        counts = []
        for index, uow in claimed(manager, redis, AsyncNoop):
            job = parse_job(uow.job)
            jobstr = uow.job if isinstance(uow.job, str) else uow.job.decode()
            fetcher.lend(uow)  # as the hand-off to the loop does
            with CallCount() as count:
                await processor.process_async(uow, job, jobstr, AsyncNoop, f"job-{index}")
            if index >= WARM:
                counts.append((count.python - base[0], count.builtin - base[1]))
        return counts

    counts = in_worker_context(manager, lambda: asyncio.run(measure()))
    common_path(counts, ASYNC_CALLS_PER_JOB, "async")
    assert manager.stats.swap()[:2] == (WARM + MEASURED, 0)  # each ran, and succeeded
