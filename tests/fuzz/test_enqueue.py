"""Every public enqueue path, fed arbitrary arguments and options.

Each call either pushes a payload that the worker's own parser accepts and
whose arguments read back as exactly what was given, or refuses with a
:class:`~wurk.errors.WurkError`, ``TypeError`` or ``ValueError`` whose
message names what is wrong — and then nothing at all was written.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterable
from typing import Any

import pytest
import redis as redis_py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wurk
from tests.fuzz import values
from tests.fuzz.fuzz_app import Echo
from tests.fuzz.profiles import TIMEOUT
from wurk.client.transactional import TransactionAwareClient
from wurk.errors import WurkError
from wurk.server.processor import parse_job

pytestmark = pytest.mark.timeout(TIMEOUT)

#: The fixtures hold a server connection and a configuration, both fine to
#: share between examples: each example starts by emptying the keyspace.
shared = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

#: Words one of which a refusal must contain, besides the option names given.
NAMES = ("args", "interval", "time", "at", "queue", "class")


def written(redis: redis_py.Redis) -> list[tuple[bytes, float | None]]:
    """Every payload in a queue or in the schedule, with its score if scheduled."""
    found: list[tuple[bytes, float | None]] = []
    for key in redis.scan_iter(match="queue:*"):
        found += [(raw, None) for raw in redis.lrange(key, 0, -1)]
    found += redis.zrange("schedule", 0, -1, withscores=True)
    return found


def attempt(push: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return push(), None
    except BaseException as exc:  # judged by the caller: only some are allowed
        return None, exc


def assert_refused(exc: BaseException, redis: redis_py.Redis, names: Iterable[str] = ()) -> None:
    """A clean refusal: an error of the allowed kinds naming the problem, and an untouched keyspace."""
    allowed = isinstance(exc, WurkError | TypeError | ValueError) and not isinstance(exc, UnicodeError)
    assert allowed, f"unrelated exception {type(exc).__name__}: {exc}"
    message = str(exc)
    assert any(name in message for name in (*names, *NAMES)), f"the refusal names nothing: {message!r}"
    assert redis.dbsize() == 0, f"refused, yet {redis.keys()} were written"


def assert_pushed(redis: redis_py.Redis, arglists: list[list[Any]], jids: list[Any]) -> list[dict[str, Any]]:
    """Each jid's payload is in Redis once, readable by a worker, with its arguments as given."""
    entries = written(redis)
    jobs = {}
    for raw, score in entries:
        values.strict_loads(raw)
        job = parse_job(raw)
        assert job["jid"] not in jobs, f"jid {job['jid']} written twice"
        jobs[job["jid"]] = job
        if score is not None:
            assert math.isfinite(score), f"scheduled at {score}"
    assert sorted(jobs) == sorted(jids), f"pushed {jids}, found {list(jobs)}"
    for args, jid in zip(arglists, jids, strict=True):
        if values.native(args):
            assert values.same(jobs[jid]["args"], args), (jobs[jid]["args"], args)
    return [jobs[jid] for jid in jids]


@pytest.fixture
def redis_flushed(config, redis):
    def flush() -> redis_py.Redis:
        redis.flushdb()
        return redis

    return flush


def interval_ok(value: Any) -> bool:
    """An interval or time the scheduling calls must take."""
    if isinstance(value, datetime.datetime):
        try:
            return math.isfinite(value.timestamp())
        except (OverflowError, ValueError, OSError):
            return False
    if isinstance(value, datetime.timedelta):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


@shared
@given(args=values.arglists)
def test_perform_async(redis_flushed, args):
    redis = redis_flushed()
    jid, exc = attempt(lambda: Echo.perform_async(*args))
    if values.native(args):
        assert exc is None, f"refused native arguments {args!r}: {exc!r}"
        [job] = assert_pushed(redis, [args], [jid])
        assert job["class"] == "tests.fuzz.fuzz_app.Echo"
    else:
        assert exc is not None, f"pushed non-native arguments {args!r}"
        assert_refused(exc, redis, ["args"])


@shared
@given(args=values.arglists, when=values.times, method=st.sampled_from(["perform_in", "perform_at"]))
def test_perform_in_and_at(redis_flushed, args, when, method):
    redis = redis_flushed()
    jid, exc = attempt(lambda: getattr(Echo, method)(when, *args))
    if exc is not None:
        assert not (values.native(args) and interval_ok(when)), f"refused {when!r} with {args!r}: {exc!r}"
        assert_refused(exc, redis, ["args", "interval", "time"])
        return
    assert values.native(args), f"pushed {args!r}"
    assert interval_ok(when), f"pushed at {when!r}"
    assert_pushed(redis, [args], [jid])


@shared
@given(args=values.arglists, options=values.options)
def test_set_perform_async(redis_flushed, args, options):
    redis = redis_flushed()
    jid, exc = attempt(lambda: Echo.set(**options).perform_async(*args))
    if exc is not None:
        assert_refused(exc, redis, list(options))
        return
    assert values.native(args), f"pushed non-native arguments {args!r}"
    [job] = assert_pushed(redis, [args], [jid])
    for name in ("queue", "custom", "bid"):
        if name in options:
            assert values.same(job[name], options[name]), (name, job[name], options[name])


@shared
@given(
    arglists=st.lists(values.arglists, max_size=6),
    batch_size=st.none() | st.integers(-1, 4) | st.sampled_from([1.5, "2", True]),
)
def test_perform_bulk(redis_flushed, arglists, batch_size):
    redis = redis_flushed()
    jids, exc = attempt(lambda: Echo.perform_bulk(arglists, batch_size=batch_size))
    size_ok = batch_size is None or (type(batch_size) is int and batch_size > 0)
    if exc is not None:
        assert not (size_ok and all(values.native(args) for args in arglists)), f"refused {arglists!r}: {exc!r}"
        assert_refused(exc, redis, ["args", "batch_size"])
        return
    assert size_ok, f"pushed with batch_size={batch_size!r}"
    assert all(values.native(args) for args in arglists), f"pushed {arglists!r}"
    assert_pushed(redis, arglists, jids)


job_classes = st.sampled_from([Echo, "tests.fuzz.fuzz_app.Echo", "RubyJob"]) | st.one_of(
    values.texts, st.none(), st.integers(), st.builds(values.Opaque), st.just(lambda: None)
)
items = st.fixed_dictionaries(
    {"class": job_classes, "args": values.arglists | values.option_values},
    optional={"at": values.times, "queue": values.queue_names},
).flatmap(lambda item: values.options.map(lambda extra: {**extra, **item}))


def client_push(path: str, config: wurk.Config, item: dict[str, Any]) -> Any:
    if path == "push":
        return wurk.Client(config).push(item)
    if path == "transactional":
        deferred: list[Callable[[], object]] = []
        jid = TransactionAwareClient(config, defer=deferred.append).push(item)
        for write in deferred:  # the commit: a refusal here would come after the caller moved on
            write()
        return jid
    config.reliable_push()
    try:
        return wurk.Client(config).push(item)
    finally:
        assert len(config.lookup("outage_buffer")) == 0, "a push with Redis up was left in the buffer"


@shared
@given(item=items, path=st.sampled_from(["push", "transactional", "outage_buffer"]))
def test_client_push(redis_flushed, config, item, path):
    redis = redis_flushed()
    jid, exc = attempt(lambda: client_push(path, config, item))
    if exc is not None:
        assert_refused(exc, redis, list(item))
        return
    args = item["args"]
    assert isinstance(args, list | tuple), f"pushed args={args!r}"
    assert values.native(list(args)), f"pushed {args!r}"
    [job] = assert_pushed(redis, [list(args)], [jid])
    assert isinstance(job["queue"], str)
    assert job["queue"]


@shared
@given(item=items, arglists=st.lists(values.arglists, max_size=4) | values.option_values)
def test_client_push_bulk(redis_flushed, config, item, arglists):
    redis = redis_flushed()
    bulk = {**item, "args": arglists}
    if isinstance(item.get("at"), list | tuple):
        bulk["at"] = item["at"]
    jids, exc = attempt(lambda: wurk.Client(config).push_bulk(bulk))
    if exc is not None:
        assert_refused(exc, redis, list(bulk))
        return
    assert all(values.native(list(args)) for args in arglists), f"pushed {arglists!r}"
    assert_pushed(redis, [list(args) for args in arglists], jids)


@shared
@given(args=values.arglists)
def test_lossy_arguments_are_stored_as_json(redis_flushed, config, args):
    """With ``on_complex_arguments`` off, anything storable is stored as the
    JSON the worker will see; only what cannot be stored at all is refused."""
    redis = redis_flushed()
    config["on_complex_arguments"] = False
    jid, exc = attempt(lambda: wurk.Client(config).push({"class": Echo, "args": args}))
    if exc is not None:
        assert not values.native(args), f"refused native arguments {args!r}: {exc!r}"
        assert_refused(exc, redis, ["args"])
        return
    [(raw, _)] = written(redis)
    job = values.strict_loads(raw)
    assert job["jid"] == jid
    assert parse_job(raw) == job
    if values.native(args):
        assert values.same(job["args"], args)
