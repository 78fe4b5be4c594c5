"""A real worker fed arbitrary bytes from its queue.

One worker process serves the whole test; each Hypothesis example pushes a
batch onto its queue — payloads that are not UTF-8, not JSON, JSON of the
wrong shape, Sidekiq fields of the wrong type, several megabytes, unknown
classes, jobs that fail — interleaved with good jobs, and then judges from
outside, once the queue and the worker's private lists are empty:

* every good job ran exactly once, and nothing else ran;
* a payload that is not a JSON object with a ``class`` and ``args`` is in the
  dead set byte for byte; one whose other fields are malformed is in it as a
  Sidekiq dead entry whose error names the field;
* a well-formed job whose class is unknown, or that fails, is booked by the
  retry layer: in the retry or the dead set, once;
* the worker is alive, and no processor thread died.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis as redis_py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import values
from tests.fuzz.profiles import PROFILE, TIMEOUT
from tests.helpers import Subprocess, WorkerPool

pytestmark = pytest.mark.timeout(TIMEOUT)

QUEUE = "fuzz"
ECHO = "tests.fuzz.fuzz_app.Echo"
FAILS = "tests.fuzz.fuzz_app.Fails"
UNREADABLE = "wurk.client.fields.UnreadableJobError"

#: Examples per run: each one waits for the worker, so fewer than the profile's.
EXAMPLES = {"ci": 12, "long": 300}[PROFILE]


@dataclass
class Batch:
    """What one example pushes, and what each payload must come to."""

    payloads: list[bytes] = field(default_factory=list)
    runs: set[str] = field(default_factory=set)  # jids that must run exactly once
    raw_dead: set[bytes] = field(default_factory=set)  # dead byte for byte
    entry_dead: dict[str, str] = field(default_factory=dict)  # marker -> the malformed field
    booked: set[str] = field(default_factory=set)  # jids in retry or dead, once
    failing: set[str] = field(default_factory=set)  # jids of Fails: run once, then booked


def jid() -> str:
    return os.urandom(12).hex()


def job(klass: str = ECHO, args: list[Any] | None = None, **fields: Any) -> dict[str, Any]:
    now = int(time.time() * 1000)
    body = {"class": klass, "args": [] if args is None else args, "queue": QUEUE, "retry": True}
    return {**body, "jid": jid(), "created_at": now, "enqueued_at": now, **fields}


def encode(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")


# -- what a payload is --------------------------------------------------------------------------------------


def template(marker: str) -> bytes:
    """A good job's JSON with ``@@`` where a piece of bad JSON goes, inside ``args``."""
    return encode(job(args=[marker, "@@"])).replace(b'"@@"', b"@@")


#: Pieces that make a job's JSON unreadable, put where an argument would be.
UNREADABLE_PIECES = (
    st.sampled_from(
        [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999", b'"\\ud800"', b'"\\udfff x"', b'"\xff"', b'"\xc3"']
    )
    | st.integers(2_000, 60_000).map(lambda depth: b"[" * depth + b"]" * depth)
    | st.integers(4_400, 9_000).map(lambda digits: b"7" * digits)
)


@st.composite
def unreadable(draw: st.DrawFn) -> bytes:
    """A payload that is not a JSON object with a ``class`` string and an ``args`` array."""
    kind = draw(st.sampled_from(["piece", "binary", "text", "json", "shape", "bom", "huge"]))
    if kind == "piece":
        return template("x").replace(b"@@", draw(UNREADABLE_PIECES))
    if kind == "binary":
        data = draw(st.binary(max_size=80))
    elif kind == "text":
        data = draw(st.text(max_size=80)).encode("utf-8")
    elif kind == "json":
        data = encode(draw(values.json_values.filter(lambda v: not isinstance(v, dict))))
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + encode(job())
    elif kind == "huge":
        data = b'{"class":"' + b"x" * draw(st.integers(1, 4)) * 1_000_000
    else:
        payload = job()
        broken = draw(st.sampled_from(["class", "args"]))
        if draw(st.booleans()):
            del payload[broken]
        else:
            payload[broken] = draw(values.json_values.filter(lambda v: not isinstance(v, str | list) or v == ""))
            if broken == "args" and isinstance(payload[broken], list):
                payload[broken] = {}
        data = encode(payload)
    try:
        parsed = values.strict_loads(data)
    except (ValueError, RecursionError):
        return data
    readable = isinstance(parsed, dict) and isinstance(parsed.get("class"), str) and parsed["class"]
    return data if not (readable and isinstance(parsed.get("args"), list)) else b"not json " + data


#: For each Sidekiq field a worker reads, values of the wrong type or range.
MALFORMED = {
    "jid": [5, None, "", [], {"a": 1}, True],
    "queue": [5, None, "", ["q"]],
    "retry": ["yes", "5", {}, [], -1, 1.5],
    "retry_count": [2**60, -(2**60), "3", 1.5, None, True],
    "retry_queue": [5, "", {}],
    "retry_for": ["10", [], True],
    "backtrace": ["all", -3, 2.5],
    "dead": ["no", 0, 1],
    "created_at": ["now", None, True, {}],
    "enqueued_at": ["2026-01-01", None, [], False],
    "failed_at": ["x", None],
    "retried_at": ["x", {}],
    "at": ["tomorrow", None, True],
    "expiry": ["soon", []],
    "bid": [5, "", None, ["b"]],
    "tags": ["urgent", [1], [None], {"a": "b"}],
}
malformed = st.sampled_from(sorted(MALFORMED)).flatmap(
    lambda name: st.tuples(st.just(name), st.sampled_from(MALFORMED[name]))
)

#: Optional fields of a good job, each with a value of the right type.
GOOD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "retry": st.booleans() | st.integers(0, 30),
        "retry_count": st.integers(-3, 5),
        "tags": st.lists(values.texts.filter(values.text_ok), max_size=3),
        "created_at": st.floats(1e9, 2e9) | st.integers(10**12, 2 * 10**12),
        "enqueued_at": st.floats(1e9, 2e9),
        "backtrace": st.booleans() | st.integers(1, 5),
        "dead": st.booleans(),
        "custom": values.json_values,
        "wrapped": values.texts.filter(values.text_ok),
    },
)
good_args = st.lists(values.json_values.filter(values.native), max_size=4) | st.integers(1, 3).map(
    lambda megabytes: ["y" * megabytes * 1_000_000]
)


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    batch = Batch()
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["good", "unreadable", "malformed", "unknown", "fails", "deep"]))
        if kind == "good":
            payload = job(args=draw(good_args), **draw(GOOD_FIELDS))
            batch.runs.add(payload["jid"])
            batch.payloads.append(encode(payload))
        elif kind == "deep":
            # Deep, but within what a worker reads: it runs like any other job.
            payload = job(args=values.nested(draw(st.integers(2, 90))))
            batch.runs.add(payload["jid"])
            batch.payloads.append(encode(payload))
        elif kind == "unreadable":
            data = draw(unreadable())
            if data not in batch.raw_dead:
                batch.raw_dead.add(data)
                batch.payloads.append(data)
        elif kind == "malformed":
            name, value = draw(malformed)
            marker = jid()
            batch.entry_dead[marker] = name
            batch.payloads.append(encode({**job(args=[marker]), name: value}))
        else:
            retry = draw(st.sampled_from([True, 0, 1, 25]))
            klass = FAILS if kind == "fails" else "Missing" + draw(values.texts.filter(values.text_ok))
            payload = job(klass, draw(st.lists(values.json_values, max_size=2)), retry=retry)
            if draw(st.booleans()):
                payload["retry_count"] = draw(st.integers(-4, 3))
            batch.booked.add(payload["jid"])
            if kind == "fails":
                batch.failing.add(payload["jid"])
            batch.payloads.append(encode(payload))
    # Good jobs around it all: before the first payload and after the last.
    for position in (0, len(batch.payloads) + 1):
        payload = job(args=["around"])
        batch.runs.add(payload["jid"])
        batch.payloads.insert(position, encode(payload))
    return batch


# -- the worker and the judging ------------------------------------------------------------------------


@pytest.fixture
def worker(config, redis_url, tmp_path) -> Iterator[tuple[Subprocess, WorkerPool]]:
    pool = WorkerPool(redis_url, tmp_path, "tests.fuzz.fuzz_app", {"TEST_POLL_INTERVAL": "0.5"})
    process = pool.start("-q", QUEUE, "-c", "4")
    yield process, pool
    pool.stop_all()


def private_lists(redis: redis_py.Redis) -> int:
    return sum(redis.llen(key) for key in redis.scan_iter(match=f"queue:{QUEUE}|*"))


def settled(redis: redis_py.Redis, batch: Batch) -> bool:
    """Everything pushed has come out the other end."""
    if redis.llen(f"queue:{QUEUE}") or private_lists(redis):
        return False
    ran = {key.decode() for key in redis.hkeys("executions")}
    dead = redis.zrange("dead", 0, -1)
    booked = {jid_of(loose(member)) for member in [*redis.zrange("retry", 0, -1), *dead]}
    markers = {marker for parsed in map(loose, dead) for marker in entry_markers(parsed)}
    return (
        batch.runs | batch.failing <= ran
        and batch.raw_dead <= set(dead)
        and set(batch.entry_dead) <= markers
        and batch.booked <= booked
    )


def loose(member: bytes) -> Any:
    try:
        return json.loads(member)
    except (ValueError, RecursionError):
        return None


def jid_of(entry: Any) -> str | None:
    jid_ = entry.get("jid") if isinstance(entry, dict) else None
    return jid_ if isinstance(jid_, str) else None


def entry_markers(parsed: Any) -> list[str]:
    if isinstance(parsed, dict) and parsed.get("error_class") == UNREADABLE and parsed.get("args"):
        return [str(parsed["args"][0])]
    return []


def describe(redis: redis_py.Redis, batch: Batch, log: str) -> str:
    ran = {key.decode() for key in redis.hkeys("executions")}
    return (
        f"queue {redis.llen(f'queue:{QUEUE}')}, private {private_lists(redis)}, "
        f"never ran {batch.runs - ran}, dead {redis.zcard('dead')}, retry {redis.zcard('retry')}\n{log[-3000:]}"
    )


def judge(redis: redis_py.Redis, batch: Batch, process: Subprocess, log: str) -> None:
    executions = {key.decode(): int(count) for key, count in redis.hgetall("executions").items()}
    assert executions == dict.fromkeys(batch.runs | batch.failing, 1), "a job ran twice, never, or when it should not"
    dead = redis.zrange("dead", 0, -1)
    entries = [loose(member) for member in dead]
    for member in batch.raw_dead:
        assert member in dead
    for marker, name in batch.entry_dead.items():
        [entry] = [parsed for parsed in entries if marker in entry_markers(parsed)]
        assert repr(name) in entry["error_message"], entry["error_message"]
        assert isinstance(entry["failed_at"], int)
    retried = [json.loads(member) for member in redis.zrange("retry", 0, -1)]
    booked = [jid_of(entry) for entry in [*retried, *entries]]
    for jid_ in batch.booked:
        assert booked.count(jid_) == 1, f"{jid_} booked {booked.count(jid_)} times"
    booked_dead = sum(1 for entry in entries if jid_of(entry) in batch.booked)
    expected_dead = len(batch.raw_dead) + len(batch.entry_dead) + booked_dead
    assert len(dead) == expected_dead, f"unexpected dead entries: {[member[:200] for member in dead]}"
    assert process.proc.poll() is None, "the worker died"
    assert "context=processor" not in log, "a processor thread died"


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=batches())
def test_worker_survives_any_payload(worker, redis, batch):
    process, pool = worker
    redis.delete("dead", "retry", "executions")
    pipe = redis.pipeline(transaction=False)
    pipe.sadd("queues", QUEUE)
    for payload in batch.payloads:
        pipe.lpush(f"queue:{QUEUE}", payload)
    pipe.execute()
    log_path = pool.logs / "worker-0.log"
    deadline = time.monotonic() + 60
    while not settled(redis, batch):
        if time.monotonic() > deadline or process.proc.poll() is not None:
            log = log_path.read_text("utf-8", "replace")
            pytest.fail(f"the worker did not get through the batch: {describe(redis, batch, log)}")
        time.sleep(0.05)
    judge(redis, batch, process, log_path.read_text("utf-8", "replace"))
