"""Log line formats, the per-job log context, and the file handler's reopen."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from datetime import UTC, datetime

import pytest

import wurk
from wurk.server import logger as wlog

# 2026-07-20T12:00:00.250Z
STAMP = datetime(2026, 7, 20, 12, 0, 0, tzinfo=UTC).timestamp() + 0.25


def ours(logger):
    """Wurk's own handlers (pytest attaches capture handlers of its own to
    non-propagating loggers while a test runs; those are left alone)."""
    return [handler for handler in logger.handlers if isinstance(handler, wlog.ReopenableStreamHandler)]


@pytest.fixture
def wurk_logger(monkeypatch):
    """The ``wurk`` logger without Wurk's handler, restored (ours closed) after."""
    logger = logging.getLogger(wlog.LOGGER_NAME)
    saved, level, propagate = ours(logger), logger.level, logger.propagate
    for handler in saved:
        logger.removeHandler(handler)
    monkeypatch.delenv("DYNO", raising=False)
    monkeypatch.delenv("DEBUG_INVOCATION", raising=False)
    yield logger
    for handler in ours(logger):
        logger.removeHandler(handler)
        handler.close()
    for handler in saved:
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


def record(message="hello", level=logging.INFO, created=STAMP, exc_info=None, args=()):
    rec = logging.LogRecord("wurk", level, __file__, 1, message, args, exc_info)
    rec.created = created
    return rec


# -- Pretty -------------------------------------------------------------------------


def test_pretty_line_shape():
    line = wlog.Pretty().format(record())
    assert line == f"INFO 2026-07-20T12:00:00.250Z pid={os.getpid()} tid={wlog.tid()}: hello"


def test_pretty_line_carries_the_context():
    with wlog.with_context(jid="9f8e7d", tags=["a", "b"]):
        line = wlog.Pretty().format(record("start"))
    assert line.endswith(f"tid={wlog.tid()} jid=9f8e7d tags=a,b: start")


def test_each_line_shows_the_context_it_was_written_in():
    """A thread keeps the text of its last context (a job's two lines share
    it): a line written in another block, an inner one, or after the block
    ended, shows its own context, never the kept one."""
    pretty = wlog.Pretty()
    with wlog.with_context(jid="first"):
        one = pretty.format(record("start"))
        again = pretty.format(record("done"))
        with wlog.with_context(tags=["t"]):
            inner = pretty.format(record("inner"))
        back = pretty.format(record("back"))
    with wlog.with_context(jid="second"):
        other = pretty.format(record("start"))
    outside = pretty.format(record("after"))
    assert one.endswith(" jid=first: start")
    assert again.endswith(" jid=first: done")
    assert inner.endswith(" jid=first tags=t: inner")
    assert back.endswith(" jid=first: back")
    assert other.endswith(" jid=second: start")
    assert outside.endswith(f"tid={wlog.tid()}: after")


def test_a_line_names_the_process_that_wrote_it():
    """A job line carries the writing process's id, read once per process:
    a forked child's lines name the child (the swarm's children log through
    the logger they inherit)."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w", encoding="utf-8")
    handler = wlog.ReopenableStreamHandler(stream=stream)
    logger = _private_logger("forked", handler)
    try:
        assert wlog.fast_info(logger, "parent")
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's exit code is checked below
            os._exit(0 if wlog.fast_info(logger, "child") else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        logger.removeHandler(handler)
        stream.close()
    with os.fdopen(read_end, "rb") as pipe:
        lines = pipe.read().decode().splitlines()
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["parent", "child"]
    assert f" pid={os.getpid()} " in lines[0]
    assert f" pid={child} " in lines[1]


def test_pretty_uses_the_level_name_and_the_arguments():
    line = wlog.Pretty().format(record("took %.1fs", logging.WARNING, args=(1.25,)))
    assert re.fullmatch(r"WARNING \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z pid=\d+ tid=[0-9a-z]+: took 1\.2s", line)


def test_timestamps_are_utc_with_milliseconds():
    assert wlog.Pretty().format(record(created=STAMP + 0.5)).split()[1] == "2026-07-20T12:00:00.750Z"
    assert wlog.Pretty().format(record(created=STAMP - 0.25)).split()[1] == "2026-07-20T12:00:00.000Z"


def test_an_exception_is_appended_with_its_traceback():
    try:
        raise ValueError("bad input")
    except ValueError:
        rec = record("failed", logging.ERROR, exc_info=sys.exc_info())
    text = wlog.Pretty().format(rec)
    first, *rest = text.splitlines()
    assert first.endswith(": failed")
    assert "Traceback (most recent call last):" in rest
    assert rest[-1] == "ValueError: bad input"


# -- WithoutTimestamp --------------------------------------------------------------


def test_without_timestamp_line_shape():
    with wlog.with_context(jid="abc"):
        line = wlog.WithoutTimestamp().format(record())
    assert line == f"INFO pid={os.getpid()} tid={wlog.tid()} jid=abc: hello"


def test_dyno_selects_the_timestamp_less_formatter(monkeypatch):
    monkeypatch.delenv("DYNO", raising=False)
    assert type(wlog.default_formatter()) is wlog.Pretty
    monkeypatch.setenv("DYNO", "worker.1")
    assert type(wlog.default_formatter()) is wlog.WithoutTimestamp


def test_build_logger_on_heroku_logs_without_timestamps(wurk_logger, monkeypatch):
    monkeypatch.setenv("DYNO", "worker.1")
    (handler,) = ours(wlog.build_logger())
    assert type(handler.formatter) is wlog.WithoutTimestamp


# -- JSON ----------------------------------------------------------------------------


def test_json_fields():
    line = json.loads(wlog.JSON().format(record("done", logging.WARNING)))
    assert line == {
        "ts": "2026-07-20T12:00:00.250Z",
        "pid": os.getpid(),
        "tid": wlog.tid(),
        "lvl": "WARNING",
        "msg": "done",
    }


def test_json_context_is_an_object():
    with wlog.with_context(jid="abc", tags=["x", "y"], bid="b-1"):
        line = json.loads(wlog.JSON().format(record()))
    assert line["ctx"] == {"jid": "abc", "tags": ["x", "y"], "bid": "b-1"}


def test_json_is_one_line_even_with_a_traceback():
    try:
        raise KeyError("missing")
    except KeyError:
        text = wlog.JSON().format(record("oops", logging.ERROR, exc_info=sys.exc_info()))
    assert "\n" not in text
    assert "KeyError: 'missing'" in json.loads(text)["msg"]


def test_json_keeps_unicode_and_stringifies_odd_values():
    with wlog.with_context(when=datetime(2026, 1, 1, tzinfo=UTC)):
        line = json.loads(wlog.JSON().format(record("größe ✓")))
    assert line["msg"] == "größe ✓"
    assert line["ctx"]["when"].startswith("2026-01-01")


# -- context -------------------------------------------------------------------------


def test_context_is_empty_outside_a_job():
    assert dict(wlog.current_context()) == {}


def test_with_context_nests_and_resets():
    with wlog.with_context(jid="outer", bid="b1"):
        assert dict(wlog.current_context()) == {"jid": "outer", "bid": "b1"}
        with wlog.with_context(jid="inner", tags=["t"]):
            assert dict(wlog.current_context()) == {"jid": "inner", "bid": "b1", "tags": ["t"]}
        assert dict(wlog.current_context()) == {"jid": "outer", "bid": "b1"}
    assert dict(wlog.current_context()) == {}


def test_with_context_resets_when_the_block_raises():
    with pytest.raises(RuntimeError), wlog.with_context(jid="abc"):
        raise RuntimeError
    assert dict(wlog.current_context()) == {}


def test_none_values_stay_out_of_the_context():
    with wlog.with_context(jid="abc", bid=None):
        assert dict(wlog.current_context()) == {"jid": "abc"}


def test_the_context_cannot_be_mutated_from_outside():
    with wlog.with_context(jid="abc"), pytest.raises(TypeError):
        wlog.current_context()["jid"] = "other"  # type: ignore[index]
    outside = wlog.current_context()
    with pytest.raises(TypeError):
        outside["x"] = 1  # type: ignore[index]


def test_context_follows_asyncio_tasks_and_stays_apart():
    async def job(jid, ready, release):
        with wlog.with_context(jid=jid):
            ready.set()
            await release.wait()  # the other job runs meanwhile
            return wlog.Pretty().format(record())

    async def parent():
        with wlog.with_context(bid="batch"):
            inherited = await asyncio.create_task(asyncio.sleep(0, result=dict(wlog.current_context())))
            events = [asyncio.Event() for _ in range(3)]
            first = asyncio.create_task(job("j1", events[0], events[2]))
            second = asyncio.create_task(job("j2", events[1], events[2]))
            await events[0].wait()
            await events[1].wait()
            events[2].set()
            lines = await asyncio.gather(first, second)
            after = dict(wlog.current_context())
        return inherited, lines, after

    inherited, lines, after = asyncio.run(parent())
    assert inherited == {"bid": "batch"}
    assert lines[0].endswith("bid=batch jid=j1: hello")
    assert lines[1].endswith("bid=batch jid=j2: hello")
    assert after == {"bid": "batch"}  # the tasks' contexts did not leak back


def test_tid_is_stable_per_thread_and_differs_between_threads():
    mine = wlog.tid()
    assert mine == wlog.tid()
    assert re.fullmatch(r"[0-9a-z]+", mine)
    others = []
    thread = threading.Thread(target=lambda: others.extend([wlog.tid(), wlog.tid()]))
    thread.start()
    thread.join()
    assert others[0] == others[1]
    assert others[0] != mine


# -- the handler, levels, rotation ------------------------------------------------


def test_build_logger_defaults_to_stdout_at_info(wurk_logger, capsys):
    logger = wlog.build_logger()
    assert logger is wurk_logger
    assert logger.level == logging.INFO
    assert logger.propagate is False
    logger.info("to stdout")
    logger.debug("not shown")
    out = capsys.readouterr().out
    assert re.search(r"^INFO \S+ pid=\d+ tid=\w+: to stdout$", out, re.MULTILINE)
    assert "not shown" not in out


def test_build_logger_is_idempotent(wurk_logger):
    wlog.build_logger()
    wlog.build_logger()
    assert len(ours(wurk_logger)) == 1


def test_debug_invocation_turns_on_debug(wurk_logger, monkeypatch):
    monkeypatch.setenv("DEBUG_INVOCATION", "1")
    assert wlog.build_logger().level == logging.DEBUG
    monkeypatch.setenv("DEBUG_INVOCATION", "true")  # only "1" counts
    assert wlog.build_logger().level == logging.INFO


def test_an_explicit_level_wins(wurk_logger, monkeypatch):
    monkeypatch.setenv("DEBUG_INVOCATION", "1")
    assert wlog.build_logger(level=logging.WARNING).level == logging.WARNING


def test_build_logger_with_a_path_writes_to_that_file(wurk_logger, tmp_path):
    wlog.build_logger()
    path = tmp_path / "wurk.log"
    logger = wlog.build_logger(str(path))
    (handler,) = ours(logger)
    assert handler.path == str(path)
    logger.warning("into the file")
    handler.flush()
    assert path.read_text().rstrip().endswith(": into the file")


def test_config_logger_is_the_wurk_logger_and_can_be_replaced(wurk_logger):
    config = wurk.Config()
    assert config.logger is wurk_logger
    mine = logging.getLogger("myapp.jobs")
    config.logger = mine
    assert config.logger is mine


def test_reopen_after_the_file_was_moved(tmp_path):
    path = tmp_path / "wurk.log"
    logger = logging.getLogger("wurk.test.rotation")
    logger.propagate = False
    handler = wlog.ReopenableStreamHandler(path=str(path))
    handler.setFormatter(wlog.Pretty())
    logger.addHandler(handler)
    try:
        logger.warning("before rotation")
        path.rename(tmp_path / "wurk.log.1")  # what logrotate does
        logger.warning("still into the moved file")
        wlog.reopen(logger)
        logger.warning("after rotation")
        handler.flush()
    finally:
        logger.removeHandler(handler)
        handler.close()
    rotated = (tmp_path / "wurk.log.1").read_text()
    fresh = path.read_text()
    assert "before rotation" in rotated
    assert "still into the moved file" in rotated
    assert "after rotation" not in rotated
    assert fresh.count("\n") == 1
    assert fresh.rstrip().endswith(": after rotation")


def test_reopen_of_a_stdout_handler_is_harmless(wurk_logger, capsys):
    logger = wlog.build_logger()
    wlog.reopen(logger)
    logger.info("still here")
    assert "still here" in capsys.readouterr().out


def test_close_closes_the_file(tmp_path):
    handler = wlog.ReopenableStreamHandler(path=str(tmp_path / "x.log"))
    stream = handler.stream
    handler.close()
    assert stream.closed


def test_job_lines_from_many_threads_reach_a_file_whole_and_in_order_per_thread(tmp_path):
    """The job logger's lines skip the handler's lock (one write per line):
    written from many threads at once, each arrives whole, none is lost, and
    a job's print made just before stays before its line."""
    import subprocess

    path = tmp_path / "worker.log"
    script = f"""
import threading
from wurk.server import logger as wlog

log = wlog.build_logger({str(path)!r})

def work(n):
    for i in range(500):
        if i == 250:
            log.handlers[0].stream.write("printed by thread %d\\n" % n)
        assert wlog.fast_info(log, "thread %d line %d" % (n, i))

threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    lines = path.read_text("utf-8").splitlines()
    assert len(lines) == 8 * 500 + 8
    for n in range(8):
        mine = [line for line in lines if f"thread {n} " in line or line == f"printed by thread {n}"]
        expected = [f"thread {n} line {i}" for i in range(500)]
        expected.insert(250, f"printed by thread {n}")
        assert [line.rsplit(": ", 1)[-1] if "line" in line else line for line in mine] == expected


def _private_logger(name, handler):
    """A logger of its own whose one handler is ``handler``, at INFO and not
    propagating, as :func:`fast_info` wants it (the ``wurk`` logger may carry
    other tests' handlers or level in a full run)."""
    logger = logging.getLogger(f"wurk.test.{name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    handler.setFormatter(wlog.Pretty())
    logger.addHandler(handler)
    return logger


def _fast_lines(logger, count=200, threads=4):
    """``count`` job lines from each of ``threads`` threads through :func:`fast_info`."""
    failures = []

    def write(number):
        with wlog.with_context(jid=f"{number:024x}"):
            for index in range(count):
                if not wlog.fast_info(logger, f"line {number}-{index}"):
                    failures.append((number, index))

    workers = [threading.Thread(target=write, args=(number,)) for number in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not failures, "fast_info turned lines down"


def test_job_lines_to_a_regular_file_are_whole_and_in_order(tmp_path):
    """Job lines to a regular file are written while the GIL is held (see
    ``fast_info``): each comes out whole, once, in each thread's order, after
    what the stream had buffered."""
    path = tmp_path / "jobs.log"
    handler = wlog.ReopenableStreamHandler(path=str(path))
    logger = _private_logger("regular", handler)
    try:
        assert wlog._regular_file(handler.stream, handler.stream.fileno())
        print("a print first", file=handler.stream)  # buffered in the stream: goes out before the lines
        _fast_lines(logger)
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = path.read_text().splitlines()
    assert lines[0] == "a print first"
    assert len(lines) == 1 + 4 * 200
    for number in range(4):
        mine = [line for line in lines[1:] if f"jid={number:024x}:" in line]
        assert [line.rsplit(": ", 1)[1] for line in mine] == [f"line {number}-{index}" for index in range(200)]


def test_job_lines_to_a_pipe_are_written_the_usual_way():
    """A pipe's reader may be slow: its lines go through ``os.write``, which
    lets the other threads run meanwhile; they come out the same."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w", encoding="utf-8")
    handler = wlog.ReopenableStreamHandler(stream=stream)
    logger = _private_logger("pipe", handler)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(read_end, 65536), b"")))
    reader.start()
    try:
        assert not wlog._regular_file(stream, write_end)
        _fast_lines(logger, count=500)  # more than a pipe's buffer holds: the reader must keep up
    finally:
        logger.removeHandler(handler)
        stream.close()
        reader.join(10)
        os.close(read_end)
    lines = b"".join(chunks).decode().splitlines()
    assert len(lines) == 4 * 500
    assert all(re.search(r"jid=[0-9a-f]{24}: line \d-\d+$", line) for line in lines)
