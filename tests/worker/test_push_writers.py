"""Push writers: every write path routes claimed payloads to the plugin writer
that claims them, registered through the real ``wurk_register_push_writers``
hook, on a real server (killed for the outage tests)."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis as redis_py

import wurk
from tests.helpers import WorkerPool, new_server, wait_for
from tests.worker.writer_app import Booked
from wurk import testing
from wurk.client.outage import NotReplayableError
from wurk.client.transactional import TransactionAwareClient
from wurk.client.writers import PROMOTE, PUSH, PushWriter, PushWriterRegistry, core_commands
from wurk.server.scheduled import Enq, ReliableEnq, _Fence

Payload = dict[str, Any]


class Order(wurk.Job):
    def perform(self, n):
        pass


class LedgerWriter(PushWriter):
    """Writes the payloads that carry its ``field`` as core would, and counts
    them in the same round trip (a feature's push-time bookkeeping, in miniature)."""

    def __init__(self, name: str = "ledger", *, replayable: bool = True, field: str = "ledger") -> None:
        self.name = name
        self.replayable = replayable
        self.field = field
        self.written: list[tuple[str, list[Any]]] = []
        self.intercepted_pushes: list[tuple[str, list[Any]]] = []
        self.fail: Exception | None = None

    def claims(self, payload, origin):
        return self.field in payload

    def write(self, payloads, pool, origin):
        if self.fail is not None:
            raise self.fail
        commands = [*core_commands(payloads), ("INCRBY", f"{self.name}:count", len(payloads))]
        pool.execute(lambda conn: pool.send(commands))
        self.written.append((origin, [payload["args"][0] for payload in payloads]))

    def intercepted(self, payloads, origin):
        self.intercepted_pushes.append((origin, [payload["args"][0] for payload in payloads]))


class WriterPlugin:
    def __init__(self, writer: PushWriter) -> None:
        self.writer = writer

    @wurk.hookimpl
    def wurk_register_push_writers(self, writers, config):
        writers.add(self.writer)


@pytest.fixture
def plug(config) -> Iterator[Callable[..., LedgerWriter]]:
    """Register a :class:`LedgerWriter` through the hook; unregistered after the test."""
    names: list[str] = []

    def register(name: str = "ledger", **kwargs: Any) -> LedgerWriter:
        writer = LedgerWriter(name, **kwargs)
        config.plugins.register(WriterPlugin(writer), name=f"writer-{name}")
        names.append(f"writer-{name}")
        return writer

    yield register
    for name in names:
        config.plugins.unregister(name)


def queued(redis, queue: str = "default") -> list[Payload]:
    return [json.loads(item) for item in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


def due(redis, *payloads: Payload, sorted_set: str = "schedule") -> None:
    """Put payloads in ``sorted_set`` as due a second ago, as a scheduled push would have."""
    redis.zadd(sorted_set, {json.dumps(payload): time.time() - 1 for payload in payloads})


def payload(n: Any, **extra: Any) -> Payload:
    return {"class": f"{__name__}.Order", "args": [n], "queue": "default", "jid": f"jid-{n}", "retry": True, **extra}


class Stamp(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        job["stamped"] = True
        return call_next()


class Yields(wurk.ClientMiddleware):
    """Lets the other thread run between two jobs, so racing promoters interleave."""

    def call(self, job_class, job, queue, redis_pool, call_next):
        time.sleep(0)
        return call_next()


class HaltOdd(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if isinstance(job["args"][0], int) and job["args"][0] % 2:
            return None
        return call_next()


class LedgerEven(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if job["args"][0] % 2 == 0:
            job["ledger"] = "even"
        return call_next()


# -- routing ---------------------------------------------------------------------------


def test_each_payload_goes_to_the_first_writer_that_claims_it_in_push_order():
    registry = PushWriterRegistry()
    assert registry.route([{"n": 1}], PUSH) == [(registry.core, [{"n": 1}])]
    first, second = LedgerWriter("first", field="a"), LedgerWriter("second", field="b")
    registry.add(first)
    registry.add(second)
    jobs = [{"a": 1, "b": 1}, {"n": 2}, {"b": 3}, {"a": 4}, {"n": 5}]
    assert registry.route(jobs, PUSH) == [
        (first, [jobs[0], jobs[3]]),
        (registry.core, [jobs[1], jobs[4]]),
        (second, [jobs[2]]),
    ]
    with pytest.raises(wurk.errors.PluginError, match="already registered"):
        registry.add(LedgerWriter("first"))
    with pytest.raises(wurk.errors.PluginError, match="subclass"):
        registry.add(object())  # type: ignore[arg-type]


def test_client_and_bulk_pushes_reach_the_claiming_writer(config, redis, plug):
    ledger = plug()
    client = wurk.Client()
    client.push({"class": Order, "args": [1], "ledger": "L"})
    Order.perform_async(2)
    client.push_bulk({"class": Order, "args": [[3], [4]], "ledger": "L"})
    client.push({"class": Order, "args": [5], "ledger": "L", "at": time.time() + 60})
    assert ledger.written == [("push", [1]), ("push", [3, 4]), ("push", [5])]
    assert [job["args"][0] for job in queued(redis)] == [1, 2, 3, 4]
    assert all("enqueued_at" in job for job in queued(redis))
    assert redis.zcard("schedule") == 1
    assert int(redis.get("ledger:count")) == 4


def test_a_bulk_push_is_split_by_writer_after_the_middleware(config, redis, plug):
    ledger = plug()
    config.client_middleware.add(LedgerEven)
    Order.perform_bulk([[0], [1], [2], [3]])
    assert ledger.written == [("push", [0, 2])]
    assert sorted(job["args"][0] for job in queued(redis)) == [0, 1, 2, 3]


#: The writer whose ``intercepted`` calls :class:`Checks` records, and what it recorded.
probe: dict[str, Any] = {}


class Checks(wurk.Job):
    """Records, when it runs inline, what the probed writer had been told."""

    def perform(self, n):
        probe["seen"] = list(probe["writer"].intercepted_pushes)


class Transaction:
    """A commit hook like Django's on_commit: callbacks wait for the commit."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], object]] = []

    def on_commit(self, callback):
        self.callbacks.append(callback)

    def commit(self):
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


def test_the_transaction_aware_client_defers_replayable_writers_only(config, redis, plug):
    ledger = plug()
    once = plug("once", replayable=False, field="once")
    tx = Transaction()
    client = TransactionAwareClient(config, defer=tx.on_commit)
    client.push({"class": Order, "args": [1], "ledger": "L"})
    client.push({"class": Order, "args": [2], "once": "O"})
    assert once.written == [("push", [2])]  # at once: its bookkeeping cannot wait
    assert ledger.written == []
    assert len(tx.callbacks) == 1
    tx.commit()
    assert ledger.written == [("push", [1])]
    assert [job["args"][0] for job in queued(redis)] == [2, 1]


def test_testing_modes_tell_the_writer_what_they_intercepted(config, redis, plug):
    ledger = plug()
    with testing.fake():
        wurk.Client().push({"class": Order, "args": [1], "ledger": "L"})
        Order.perform_async(2)
    assert ledger.intercepted_pushes == [("push", [1])]
    assert ledger.written == []
    assert [job["args"] for job in testing.jobs(Order)] == [[1], [2]]
    assert redis.dbsize() == 0

    probe.clear()
    probe["writer"] = ledger
    with testing.inline():
        wurk.Client().push({"class": Checks, "args": [3], "ledger": "L"})
    assert probe["seen"] == [("push", [1]), ("push", [3])]  # told before the job ran


# -- the outage buffer -----------------------------------------------------------------


@pytest.fixture
def volatile(tmp_path):
    """A server of our own that the test may kill, with every write fsynced."""
    server = new_server(data_dir=tmp_path, persist=True)
    server.start()
    redis_py.Redis.from_url(server.url).config_set("appendfsync", "always")
    yield server
    server.stop()


def test_an_outage_buffers_replayable_writers_and_refuses_the_others(volatile, config, plug, tmp_path):
    config.redis = {"url": volatile.url}
    ledger = plug()
    once = plug("once", replayable=False, field="once")
    buffer = config.reliable_push()
    volatile.kill()

    with pytest.raises(NotReplayableError, match="'once'") as refused:
        wurk.Client().push({"class": Order, "args": [0], "once": "O"})
    assert isinstance(refused.value.__cause__, ConnectionError)
    assert len(buffer) == 0
    wurk.Client().push({"class": Order, "args": [1], "ledger": "L"})
    Order.perform_async(2)
    assert len(buffer) == 2
    with pytest.raises(NotReplayableError, match="nothing was pushed"):  # cannot jump the buffered ones
        wurk.Client().push({"class": Order, "args": [3], "once": "O"})
    assert [job["args"] for job, *_ in buffer._items] == [[1], [2]]

    back = new_server(port=volatile.port, data_dir=tmp_path, persist=True).start()
    try:
        assert buffer.drain()
        client = redis_py.Redis.from_url(back.url)
        assert [json.loads(item)["args"][0] for item in reversed(client.lrange("queue:default", 0, -1))] == [1, 2]
        assert int(client.get("ledger:count")) == 1  # replayed through its own writer
        client.close()
    finally:
        back.stop()
    assert ledger.written == [("push", [1])]
    assert once.written == []


# -- the promoters ---------------------------------------------------------------------


@pytest.mark.parametrize("promoter", [Enq, ReliableEnq], ids=["enq", "reliable"])
def test_both_promoters_hand_claimed_jobs_to_the_writer_as_promotions(config, redis, plug, promoter):
    ledger = plug()
    due(redis, payload(1, ledger="L"), payload(2))
    due(redis, payload(3, ledger="L"), sorted_set="retry")
    assert promoter(config).enqueue_jobs() == 3
    assert sorted(ledger.written) == [("promote", [1]), ("promote", [3])]
    assert sorted(job["args"][0] for job in queued(redis)) == [1, 2, 3]
    assert all(isinstance(job["enqueued_at"], int) for job in queued(redis))
    assert redis.zcard("schedule") == redis.zcard("retry") == 0


@pytest.mark.parametrize("promoter", [Enq, ReliableEnq], ids=["enq", "reliable"])
def test_promotion_runs_the_client_middleware(config, redis, promoter):
    config.client_middleware.add(Stamp)
    config.client_middleware.add(HaltOdd)
    due(redis, payload(1), payload(2))
    promoter(config).enqueue_jobs()
    assert [(job["args"], job.get("stamped")) for job in queued(redis)] == [([2], True)]
    assert redis.zcard("schedule") == 0  # the halted one is gone too, not left to loop


def test_the_reliable_promoter_keeps_its_single_script_with_nothing_to_run(config, redis):
    class Watched(ReliableEnq):
        def _promote_chained(self, sorted_set):
            raise AssertionError("no middleware and no writer: the single script must do")

    due(redis, payload(1))
    raw = redis.zrange("schedule", 0, -1)[0].decode()
    assert Watched(config).enqueue_jobs() == 1
    (pushed,) = redis.lrange("queue:default", 0, -1)
    assert re.sub(r',"enqueued_at":\d+', "", pushed.decode()) == raw  # every other byte kept


def test_a_writer_that_takes_no_promotions_leaves_the_single_script_and_sees_none(config, redis, plug):
    writer = plug()
    writer.origins = (PUSH,)

    class Watched(ReliableEnq):
        def _promote_chained(self, sorted_set):
            raise AssertionError("no writer takes promotions: the single script must do")

    due(redis, payload(1, ledger=True))
    assert Watched(config).enqueue_jobs() == 1
    assert Enq(config).client.writers.claimant(payload(2, ledger=True), PROMOTE).name == "core"
    assert writer.written == []
    Order.set(ledger=True).perform_async(3)
    assert writer.written == [(PUSH, [3])]


def test_a_writer_naming_an_unknown_origin_is_refused():
    writer = LedgerWriter()
    writer.origins = ("push", "teleport")
    with pytest.raises(wurk.PluginError, match=r"unknown origins \['teleport'\]"):
        PushWriterRegistry().add(writer)


def test_the_reliable_promoter_keeps_what_it_cannot_chain(config, redis):
    config.client_middleware.add(Stamp)
    reported: list[tuple[BaseException, dict]] = []
    config.error_handlers.append(lambda exc, context, *rest: reported.append((exc, context)))

    class Refuses(wurk.ClientMiddleware):
        def call(self, job_class, job, queue, redis_pool, call_next):
            if job["args"] == ["refused"]:
                raise RuntimeError("not now")
            return call_next()

    config.client_middleware.add(Refuses)
    redis.zadd("schedule", {"not json": time.time() - 2, '{"queue": "odd"}': time.time() - 2})
    redis.zadd("odd", {b"\xff not utf-8": time.time() - 1})
    due(redis, payload("refused"), payload("fine"))
    assert ReliableEnq(config).enqueue_jobs(("schedule", "odd")) == 4
    assert [json.loads(member)["args"] for member in redis.zrange("schedule", 0, -1)] == [["refused"]]
    # What cannot be read goes where the single script would send it, as it is: not lost, not retried forever.
    binary, fine, unreadable = redis.lrange("queue:default", 0, -1)  # LPUSH: the newest first
    assert unreadable == b"not json"
    assert binary == b"\xff not utf-8"  # byte for byte
    assert redis.zcard("odd") == 0
    assert json.loads(fine)["args"] == ["fine"]
    assert json.loads(fine)["stamped"] is True
    assert redis.lrange("queue:odd", 0, -1) == [b'{"queue": "odd"}']
    assert [context["context"] for _, context in reported] == ["scheduler_promote"]


def test_a_failed_writer_puts_the_promoted_job_back(config, redis, plug):
    ledger = plug()
    ledger.fail = RuntimeError("ledger is read-only")
    reported: list[dict] = []
    config.error_handlers.append(lambda exc, context, *rest: reported.append(context))
    due(redis, payload(1, ledger="L"))
    before = redis.zrange("schedule", 0, -1, withscores=True)
    assert ReliableEnq(config).enqueue_jobs() == 0
    assert redis.zrange("schedule", 0, -1, withscores=True) == before
    assert reported == [{"context": "scheduler_promote", "writer": "ledger"}]
    ledger.fail = None
    assert ReliableEnq(config).enqueue_jobs() == 1
    assert ledger.written == [("promote", [1])]


def test_two_reliable_promoters_racing_never_promote_a_job_twice(config, redis, plug):
    ledger = plug()
    config.client_middleware.add(Yields)
    count = 1200
    due(redis, *[payload(n, **({"ledger": "L"} if n % 3 == 0 else {})) for n in range(count)])
    start = threading.Barrier(2)
    moved: list[int] = []

    def promote() -> None:
        start.wait()
        moved.append(ReliableEnq(config).enqueue_jobs(("schedule",)))

    racers = [threading.Thread(target=promote) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=60)
    pushed = [job["args"][0] for job in queued(redis)]
    assert sorted(pushed) == list(range(count))  # each exactly once
    assert sum(moved) == count
    assert sorted(n for _, ns in ledger.written for n in ns) == list(range(0, count, 3))
    assert redis.zcard("schedule") == 0


class TakesALock(wurk.ClientMiddleware):
    """A middleware deciding with a side effect, as unique jobs do: the first
    push of a jid takes its lock, any other halts."""

    def call(self, job_class, job, queue, redis_pool, call_next):
        if not redis_pool.client.set(f"lock:{job['jid']}", "1", nx=True, ex=60):
            return None
        return call_next()


def test_one_process_at_a_time_promotes_through_the_middleware(config, redis):
    config.client_middleware.add(TakesALock)
    due(redis, payload(1))
    redis.set("promote-lock:schedule", "another-promoter", px=30_000)
    assert ReliableEnq(config).enqueue_jobs(("schedule",)) == 0  # its turn is not now
    assert redis.zcard("schedule") == 1
    assert redis.keys("lock:*") == []  # the middleware did not even run
    redis.delete("promote-lock:schedule")
    assert ReliableEnq(config).enqueue_jobs(("schedule",)) == 1
    assert [job["args"] for job in queued(redis)] == [[1]]
    assert redis.get("promote-lock:schedule") is None  # given back after the pass


def test_a_promoter_whose_lease_ran_out_writes_nothing(config, redis):
    """A promoter paused past its lease must not decide a member's fate: the
    one that took the lock over may have chained it differently."""
    config.client_middleware.add(TakesALock)
    due(redis, payload(1))
    late = ReliableEnq(config)
    members = redis.zrangebyscore("schedule", "-inf", "+inf", withscores=True)
    chained = late._chain(members)  # chained while it held the lock ...
    redis.set("promote-lock:schedule", "the-successor", px=30_000)  # ... which then passed on
    fence = _Fence("promote-lock:schedule", "the-paused-one")
    assert late._push_entries("schedule", fence, chained.entries) == -1
    assert redis.zcard("schedule") == 1
    assert queued(redis) == []


# -- a real worker's promoter ----------------------------------------------------------------


@pytest.fixture
def writer_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.writer_app", {})
    yield pool
    pool.stop_all()


@pytest.mark.parametrize("reliable", [False, True], ids=["default-promoter", "reliable-promoter"])
def test_a_workers_promoter_routes_a_due_job_through_the_apps_writer(writer_workers, redis, reliable):
    """The test process has no writer: the scheduled push goes to core's, and
    only the worker's promoter, through the writer its app registered, counts it."""
    Booked.set(ledger="acme").perform_in(0.5, "due")
    Booked.perform_in(0.5, "plain")  # no ledger: core's writer, in the worker too
    assert redis.zcard("schedule") == 2
    worker = writer_workers.start("-c", "1", env={"TEST_RELIABLE_SCHEDULER": "1"} if reliable else {})
    wait_for(lambda: redis.hlen("executions") == 2, timeout=30)
    assert redis.hgetall("ledger:acme") == {b"promote": b"1"}
    assert redis.zcard("schedule") == 0
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
