"""The client outage buffer and the outage log, with the Redis server really
killed and restarted."""

from __future__ import annotations

import json
import logging
import signal

import pytest
import redis as redis_py

import wurk
from tests.helpers import new_server
from wurk.client.outage import BufferOverflowError
from wurk.errors import ConfigurationError, RedisConnectionError


class Order(wurk.Job):
    def perform(self, n):
        pass


@pytest.fixture
def volatile(tmp_path):
    """A server of our own that the test may kill, with every write fsynced."""
    server = new_server(data_dir=tmp_path, persist=True)
    server.start()
    control = redis_py.Redis.from_url(server.url)
    control.config_set("appendfsync", "always")
    yield server
    control.close()
    server.stop()


def restart(server, tmp_path):
    back = new_server(port=server.port, data_dir=tmp_path, persist=True).start()
    redis_py.Redis.from_url(back.url).config_set("appendfsync", "always")
    return back


def stored_args(url):
    client = redis_py.Redis.from_url(url)
    try:
        return [json.loads(item)["args"][0] for item in reversed(client.lrange("queue:default", 0, -1))]
    finally:
        client.close()


def test_without_the_buffer_an_outage_raises(volatile, config):
    config.redis = {"url": volatile.url}
    volatile.process.send_signal(signal.SIGKILL)
    volatile.process.wait()
    with pytest.raises(RedisConnectionError, match=str(volatile.port)):
        Order.perform_async(1)


def test_pushes_during_an_outage_are_buffered_then_replayed_in_order(volatile, config, tmp_path):
    config.redis = {"url": volatile.url}
    buffer = config.reliable_push(buffer_size=100)
    redis_errors = []
    config.on_redis_error(redis_errors.append)
    for n in range(5):
        Order.perform_async(n)

    volatile.kill()  # SIGKILL: the server vanishes between two pushes
    for n in range(5, 9):
        assert Order.perform_async(n) is not None  # the caller still gets its jid
    assert len(buffer) == 4
    assert any(not report["retried"] for report in redis_errors)

    back = restart(volatile, tmp_path)
    try:
        Order.perform_async(9)  # the next push drains first, oldest first
        assert len(buffer) == 0
        assert stored_args(back.url) == list(range(10))
    finally:
        back.stop()


def test_the_background_drainer_replays_when_nobody_pushes(volatile, config, tmp_path):
    config.redis = {"url": volatile.url}
    buffer = config.reliable_push(drain_interval=0.1)
    volatile.kill()
    Order.perform_async("a")
    Order.perform_async("b")
    assert len(buffer) == 2
    back = restart(volatile, tmp_path)
    try:
        from tests.helpers import wait_for

        wait_for(lambda: len(buffer) == 0, timeout=15)
        assert stored_args(back.url) == ["a", "b"]
    finally:
        buffer.stop_drainer()
        back.stop()
    assert not buffer.drainer_running()


def test_overflow_drop_oldest_and_raise(volatile, config, tmp_path):
    config.redis = {"url": volatile.url}
    buffer = config.reliable_push(buffer_size=2)
    volatile.kill()
    for n in range(3):
        Order.perform_async(n)
    assert [job["args"] for job, *_ in buffer._items] == [[1], [2]]

    config.reliable_push(buffer_size=2, overflow="raise")
    with pytest.raises(BufferOverflowError) as caught:
        Order.perform_async(3)
    assert caught.value.payload["args"] == [3]
    back = restart(volatile, tmp_path)
    try:
        buffer.drain()
        assert stored_args(back.url) == [1, 2]
    finally:
        back.stop()


def test_bad_buffer_settings_are_refused(config):
    with pytest.raises(ConfigurationError, match="buffer_size"):
        config.reliable_push(buffer_size=0)
    with pytest.raises(ConfigurationError, match="overflow"):
        config.reliable_push(overflow="spill")


class RecordingStatsd:
    """A statsd client that records instead of sending UDP packets."""

    def __init__(self):
        self.counts = []

    def incr(self, metric):
        self.counts.append(metric)


def test_each_replayed_job_counts_on_statsd(volatile, config, tmp_path):
    statsd = RecordingStatsd()
    config.dogstatsd = lambda: statsd
    config.redis = {"url": volatile.url}
    buffer = config.reliable_push()
    volatile.kill()
    Order.perform_async(1)
    back = restart(volatile, tmp_path)
    try:
        assert buffer.drain()
        assert statsd.counts == ["jobs.recovered.push"]
    finally:
        back.stop()


def test_a_forked_child_starts_with_an_empty_buffer(volatile, config, tmp_path):
    import os

    config.redis = {"url": volatile.url}
    buffer = config.reliable_push()
    volatile.kill()
    Order.perform_async("parent's")
    pid = os.fork()
    if pid == 0:  # the child must not replay the parent's jobs
        os._exit(0 if len(buffer) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(buffer) == 1


# -- the outage log -------------------------------------------------------------------


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []

    def emit(self, record):
        self.lines.append((record.levelno, record.getMessage()))


@pytest.fixture
def lines(config):
    """The configuration's log lines (its own logger, not the shared ``wurk`` one)."""
    logger = logging.getLogger(f"wurk.test.outage.{id(config)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = Lines()
    logger.addHandler(handler)
    config.logger = logger
    yield handler.lines
    logger.removeHandler(handler)


def unreachable(config):
    """The error a worker thread gets when Redis is away (after the pool's retries)."""
    with pytest.raises(RedisConnectionError) as caught:
        config.redis_pool.execute(lambda conn: conn.ping())
    return caught.value


def test_an_outage_is_one_warning_then_a_reminder_with_counts_then_one_line_at_recovery(
    volatile, config, lines, tmp_path
):
    config.redis = {"url": volatile.url}
    config.redis_pool.ping()
    volatile.kill()
    error = unreachable(config)

    for context in ("fetch", "fetch", "fetch", "heartbeat"):  # four threads, each failing
        config.handle_exception(error, {"context": context})
    assert len(lines) == 1
    level, first = lines[0]
    assert level == logging.WARNING
    assert first.startswith("Redis unreachable: RedisConnectionError: cannot reach Redis at ")
    assert "(context=fetch)" in first

    config.outage_log.reminder_interval = 0  # as if the minute had passed
    config.handle_exception(error, {"context": "fetch"})
    assert len(lines) == 2
    level, reminder = lines[1]
    assert level == logging.WARNING
    assert reminder.startswith("Redis still unreachable after ")
    assert "4 error(s) since the last report (fetch=3 heartbeat=1); last: RedisConnectionError" in reminder

    back = restart(volatile, tmp_path)
    try:
        config.redis_pool.ping()
        assert config.outage_log.recovered()
        assert not config.outage_log.recovered()  # once
    finally:
        back.stop()
    assert lines[2][1].startswith("Redis is reachable again after ")
    assert lines[2][1].endswith("(5 error(s) during the outage)")
    assert len(lines) == 3


def test_errors_other_than_an_outage_are_still_logged_each_time(config, lines):
    for _ in range(3):
        config.handle_exception(redis_py.exceptions.ResponseError("WRONGTYPE"), {"context": "scheduler"})
    assert [level for level, _ in lines] == [logging.WARNING] * 3
    assert not config.outage_log.down


def test_an_outage_that_returns_at_once_is_not_announced_again(volatile, config, lines):
    config.redis = {"url": volatile.url}
    config.redis_pool.ping()
    volatile.kill()
    error = unreachable(config)
    config.handle_exception(error, {"context": "fetch"})
    config.outage_log.recovered()
    for _ in range(3):  # a flapping server: counted for the next reminder, not announced again
        config.handle_exception(error, {"context": "fetch"})
    assert [text.split(":")[0].split(" after")[0] for _, text in lines] == [
        "Redis unreachable",
        "Redis is reachable again",
    ]


def test_buffered_pushes_report_the_outage_once_and_the_replay_when_it_ends(volatile, config, lines, tmp_path):
    config.redis = {"url": volatile.url}
    config.reliable_push(buffer_size=100)
    volatile.kill()
    for n in range(2):
        Order.perform_async(n)
    assert len(lines) == 1
    assert lines[0][1].startswith("Redis unreachable: ")
    assert "(context=buffered_push)" in lines[0][1]

    back = restart(volatile, tmp_path)
    try:
        Order.perform_async(2)
        assert stored_args(back.url) == list(range(3))
    finally:
        back.stop()
    assert len(lines) == 2
    assert lines[1][1].startswith("Redis is reachable again after ")
    assert lines[1][1].endswith("; replayed 2 buffered job(s))")


def test_a_buffer_is_reset_in_a_forked_child_without_being_kept_alive(config):
    """One process-wide at-fork reset holds buffers weakly: a dropped buffer
    is not kept forever by a registration of its own."""
    import gc
    import weakref

    from wurk.client.outage import OutageBuffer
    from wurk.config import forking

    buffer = OutageBuffer(config)
    assert buffer in set(forking._others)
    gone = weakref.ref(buffer)
    del buffer
    gc.collect()
    assert gone() is None
