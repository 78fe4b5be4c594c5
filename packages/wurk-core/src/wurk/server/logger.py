"""Logging: Wurk's line formats and the per-job log context.

Wurk logs through the standard :mod:`logging` module under the ``wurk`` logger,
so applications route it like any other library. What Wurk adds is a context
(``jid``, ``tags``, ``class``…) kept in a :class:`contextvars.ContextVar`,
which every formatter below appends to each line. Code deep inside a job logs
with its job's id without passing anything around, and the context follows
``async def`` jobs across awaits.

Three formatters, as in the guides:

* :class:`Pretty` (the default):
  ``INFO 2026-07-20T12:00:00.000Z pid=421 tid=abc1 jid=9f8e7d: start``
* :class:`WithoutTimestamp`, chosen automatically when ``DYNO`` is set
  (Heroku's router already stamps each line);
* :class:`JSON`, one object per line for log aggregators.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import Any, TextIO

from wurk.config.reporting import TRACEBACK_ATTRIBUTE

LOGGER_NAME = "wurk"

_context: ContextVar[Mapping[str, Any]] = ContextVar("wurk_log_context", default=MappingProxyType({}))


def current_context() -> Mapping[str, Any]:
    """The log context of the running job (empty outside one)."""
    return _context.get()


class LogContext:
    """The log context of a block: ``values`` added to the outer context
    while it runs. A class rather than a generator-based context manager,
    since every job enters one."""

    __slots__ = ("_token", "values")

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values
        self._token: Token[Mapping[str, Any]] | None = None

    def __enter__(self) -> None:
        values = {key: value for key, value in self.values.items() if value is not None}
        outer = _context.get()
        merged = {**outer, **values} if outer else values
        # Read-only, so that code holding current_context() cannot change the
        # context of the block it came from (or of the tasks that inherited it).
        self._token = _context.set(MappingProxyType(merged))

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _context.reset(self._token)
            self._token = None


def with_context(**values: Any) -> LogContext:
    """Add ``values`` to the log context for the duration of the block."""
    return LogContext(values)


# Thread-local rather than a dict keyed by thread id: it dies with its thread,
# so a process that starts many short-lived threads does not accumulate ids.
_local = threading.local()


def tid() -> str:
    """A short, stable, per-thread id (base 36), as Sidekiq prints and stores it."""
    found: str | None = getattr(_local, "tid", None)
    if found is None:
        number = (threading.get_ident() ^ os.getpid()) & 0xFFFFFFFFFF
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"
        text = ""
        while True:
            number, rest = divmod(number, 36)
            text = digits[rest] + text
            if not number:
                break
        found = _local.tid = text
    return found


#: The last second formatted, and its text: a worker writes two lines a job,
#: thousands a second, and formatting the date was a tenth of a no-op job's
#: time in a profile with job logging on. One tuple, replaced whole, so a
#: thread never reads one second's number with another's text.
_last_second: tuple[int, str] = (-1, "")

#: Each millisecond's ending, looked up rather than formatted on every line.
_MILLIS = tuple(f".{millis:03d}Z" for millis in range(1000))


def _iso_utc(created: float) -> str:
    global _last_second
    seconds = int(created)
    cached, text = _last_second
    if cached != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, text)
    return text + _MILLIS[int((created - seconds) * 1000)]


def _render(context: Mapping[str, Any]) -> str:
    parts = []
    for key, value in context.items():
        if isinstance(value, list | tuple):
            value = ",".join(str(item) for item in value)
        parts.append(f"{key}={value}")
    return " ".join(parts)


def _after_stamp(pid: int | None) -> str:
    """``pid=… tid=…`` and the context's ``key=value`` pairs: what a thread's
    lines share while one job runs. A job's start and end lines would build
    it twice, so each thread keeps the last one, with the context mapping it
    came from (a block's mapping is never changed, only replaced)."""
    context = _context.get()
    kept: tuple[Mapping[str, Any], int | None, str] | None = getattr(_local, "after_stamp", None)
    if kept is not None and kept[0] is context and kept[1] == pid:
        return kept[2]
    rendered = _render(context)
    text = f"pid={pid} tid={tid()} {rendered}" if rendered else f"pid={pid} tid={tid()}"
    _local.after_stamp = (context, pid, text)
    return text


def _message(record: logging.LogRecord) -> str:
    message = record.getMessage()
    shown = getattr(record, TRACEBACK_ATTRIBUTE, None)
    if shown is not None:  # a failed job's traceback, Wurk's frames folded (wurk.config.reporting)
        message = f"{message}\n{shown}"
    elif record.exc_info:
        message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
    if record.stack_info:
        message = f"{message}\n{record.stack_info}"
    return message


class WurkFormatter(logging.Formatter):
    """A formatter whose line is built from plain values, so the worker's
    per-job lines can skip creating a ``LogRecord`` (see :func:`fast_info`)
    and still come out exactly as every other line."""

    def format(self, record: logging.LogRecord) -> str:
        return self.line(record.levelname, record.created, record.process, _message(record))

    def line(self, level: str, created: float, pid: int | None, message: str) -> str:
        raise NotImplementedError


class Pretty(WurkFormatter):
    def line(self, level: str, created: float, pid: int | None, message: str) -> str:
        return f"{level} {_iso_utc(created)} {_after_stamp(pid)}: {message}"


class WithoutTimestamp(WurkFormatter):
    def line(self, level: str, created: float, pid: int | None, message: str) -> str:
        return f"{level} {_after_stamp(pid)}: {message}"


class JSON(WurkFormatter):
    def line(self, level: str, created: float, pid: int | None, message: str) -> str:
        fields: dict[str, Any] = {"ts": _iso_utc(created), "pid": pid, "tid": tid(), "lvl": level, "msg": message}
        context = _context.get()
        if context:
            fields["ctx"] = dict(context)
        return json.dumps(fields, ensure_ascii=False, default=str)


#: Set by a command whose stdout is data for a script (``--json``): its log
#: lines, which otherwise share stdout, go to stderr.
_data_on_stdout = False


def keep_stdout_for_data() -> None:
    """Send the log lines that would go to stdout to stderr from now on, so
    that a command's ``--json`` output stays parseable whatever it logs."""
    global _data_on_stdout
    _data_on_stdout = True


class ReopenableStreamHandler(logging.StreamHandler[TextIO]):
    """A stream handler that can reopen its file, for ``SIGUSR2`` log rotation.

    Without a ``stream`` or a ``path`` it writes to whatever ``sys.stdout`` is at
    the time of each line, so that a host (or a test) that swaps stdout later
    still receives Wurk's lines instead of a handle to a closed stream.
    """

    def __init__(self, stream: Any = None, path: str | None = None) -> None:
        self.path = path
        super().__init__(open(path, "a", encoding="utf-8") if path else (stream or sys.stdout))  # noqa: SIM115
        self._follows_stdout = stream is None and path is None

    @property
    def stream(self) -> Any:
        if getattr(self, "_follows_stdout", False):
            return sys.stderr if _data_on_stdout else sys.stdout
        return self._stream

    @stream.setter
    def stream(self, value: Any) -> None:
        # An explicit stream (``setStream``, ``reopen``) ends the following.
        self._follows_stdout = False
        self._stream = value

    def reopen(self) -> None:
        """Open ``path`` afresh: after a rotation moved the file away, the
        following lines go to a new file at the configured path."""
        if not self.path:
            return
        self.acquire()
        try:
            old = self.stream
            self.stream = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            old.close()
        finally:
            self.release()

    def close(self) -> None:
        # StreamHandler leaves its stream open (it may be stdout); a file we
        # opened ourselves is ours to close.
        self.acquire()
        try:
            if self.path and not self.stream.closed:
                self.stream.close()
        finally:
            self.release()
        super().close()


def default_formatter() -> logging.Formatter:
    return WithoutTimestamp() if os.environ.get("DYNO") else Pretty()


def build_logger(path: str | None = None, *, level: int | None = None) -> logging.Logger:
    """The ``wurk`` logger with one handler of Wurk's own (idempotent).

    The handler writes to ``path`` (appending) or, without one, to stdout; a
    call with another ``path`` than the current handler's swaps the handler.
    DEBUG when ``DEBUG_INVOCATION=1`` is set, else INFO, unless ``level`` is given.
    """
    logger = logging.getLogger(LOGGER_NAME)
    ours = [handler for handler in logger.handlers if isinstance(handler, ReopenableStreamHandler)]
    if ours and path is not None and any(handler.path != path for handler in ours):
        for handler in ours:
            logger.removeHandler(handler)
            handler.close()
        ours = []
    if not ours:
        handler = ReopenableStreamHandler(path=path)
        handler.setFormatter(default_formatter())
        logger.addHandler(handler)
        logger.propagate = False
    if level is None:
        level = logging.DEBUG if os.environ.get("DEBUG_INVOCATION") == "1" else logging.INFO
    logger.setLevel(level)
    return logger


#: This process's id for the job lines, which would otherwise make a system
#: call (``getpid``) each; a forked child takes its own.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


def fast_info(logger: logging.Logger, message: str) -> bool:
    """Write an INFO line straight to Wurk's own handler, without a ``LogRecord``.

    Only when that is all the line would go through — the ``wurk`` logger with
    just Wurk's handler and formatter, no filters, not propagating — so the
    output is the same as ``logger.info``; returns ``False`` otherwise, and the
    caller logs the usual way. The worker writes two lines per job, and a
    record costs more than a no-op job.
    """
    handlers = logger.handlers
    if len(handlers) != 1 or logger.propagate or logger.filters:
        return False
    handler = handlers[0]
    formatter = handler.formatter
    if type(handler) is not ReopenableStreamHandler or handler.filters or not isinstance(formatter, WurkFormatter):
        return False
    if not logger.isEnabledFor(logging.INFO) or handler.level > logging.INFO:
        return False
    line = formatter.line("INFO", time.time(), _pid, message) + handler.terminator
    # The stream property's choice, without the property call on every line.
    stream = (sys.stderr if _data_on_stdout else sys.stdout) if handler._follows_stdout else handler._stream
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: an in-memory stream
        fd = -1
    if fd < 0:
        handler.acquire()
        try:
            stream.write(line)
            stream.flush()
        finally:
            handler.release()
        return True
    # One write(2) per line, with no lock: the handler's lock, held across the
    # flush's system call, made every other thread that logged meanwhile
    # block on it, and with two lines per job that cost more than the job.
    # A line is one system call, so lines never interleave; anything the
    # stream still buffers (a print from a job) goes out first.
    stream.flush()
    data = line.encode(getattr(stream, "encoding", None) or "utf-8", getattr(stream, "errors", None) or "strict")
    # To a regular file, the line is written without letting go of the GIL:
    # such a write lands in the page cache at once, and each of a job's two
    # lines letting go of the GIL made the other threads interleave with this
    # one, take the jobs it had claimed, and claim fewer jobs at a time; a
    # no-op job cost about a fifth more worker CPU that way. To a pipe, a
    # terminal or a socket, whose reader may be slow, the usual way.
    if _regular_file(stream, fd):
        written = _write_holding_gil(fd, data, len(data))
        if written == len(data):
            return True
        data = data[max(written, 0) :]  # short or failed (EINTR...): the rest the usual way
    while data:
        data = data[os.write(fd, data) :]
    return True


def _load_write() -> Any:
    """C's ``write`` through ctypes' ``PyDLL``, which keeps the GIL (``None``
    where it cannot be loaded: every line then goes the usual way)."""
    try:
        import ctypes

        write = ctypes.PyDLL(None).write
        write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        write.restype = ctypes.c_ssize_t
        return write
    except Exception:
        return None


_write_holding_gil = _load_write()
_regular: dict[tuple[int, int], bool] = {}


def _regular_file(stream: Any, fd: int) -> bool:
    """Whether ``fd`` (``stream``'s) is a regular file, looked up once."""
    key = (id(stream), fd)
    found = _regular.get(key)
    if found is None:
        import stat

        try:
            found = _write_holding_gil is not None and stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            found = False
        _regular[key] = found
    return found


def reopen(logger: logging.Logger) -> None:
    """Reopen every file handler of ``logger`` (``SIGUSR2``)."""
    _regular.clear()
    for handler in logger.handlers:
        if isinstance(handler, ReopenableStreamHandler):
            handler.reopen()
