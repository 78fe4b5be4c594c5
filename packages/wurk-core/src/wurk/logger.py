"""Logging: Wurk's line formats and the per-job log context.

Wurk logs through the standard :mod:`logging` module under the ``wurk`` logger,
so applications route it like any other library. What Wurk adds is a context
(``jid``, ``bid``, ``tags``, ``class``…) kept in a :class:`contextvars.ContextVar`,
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

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

LOGGER_NAME = "wurk"

_context: ContextVar[Mapping[str, Any]] = ContextVar("wurk_log_context", default=MappingProxyType({}))


def current_context() -> Mapping[str, Any]:
    """The log context of the running job (empty outside one)."""
    return _context.get()


@contextlib.contextmanager
def with_context(**values: Any) -> Iterator[None]:
    """Add ``values`` to the log context for the duration of the block."""
    merged = {**_context.get(), **{key: value for key, value in values.items() if value is not None}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


_tids: dict[int, str] = {}


def tid() -> str:
    """A short, stable, per-thread id (base 36), as Sidekiq prints and stores it."""
    ident = threading.get_ident()
    found = _tids.get(ident)
    if found is None:
        number = (ident ^ os.getpid()) & 0xFFFFFFFFFF
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"
        text = ""
        while True:
            number, rest = divmod(number, 36)
            text = digits[rest] + text
            if not number:
                break
        found = _tids[ident] = text
    return found


def _iso_utc(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _context_text() -> str:
    parts = []
    for key, value in _context.get().items():
        if isinstance(value, list | tuple):
            value = ",".join(str(item) for item in value)
        parts.append(f"{key}={value}")
    return " ".join(parts)


def _message(record: logging.LogRecord) -> str:
    message = record.getMessage()
    if record.exc_info:
        message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
    return message


class Pretty(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = _context_text()
        head = f"{record.levelname} {_iso_utc(record.created)} pid={record.process} tid={tid()}"
        return f"{head}{' ' + context if context else ''}: {_message(record)}"


class WithoutTimestamp(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = _context_text()
        head = f"{record.levelname} pid={record.process} tid={tid()}"
        return f"{head}{' ' + context if context else ''}: {_message(record)}"


class JSON(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": _iso_utc(record.created),
            "pid": record.process,
            "tid": tid(),
            "lvl": record.levelname,
            "msg": _message(record),
        }
        context = _context.get()
        if context:
            line["ctx"] = dict(context)
        return json.dumps(line, ensure_ascii=False, default=str)


class ReopenableStreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that can reopen its file, for ``SIGUSR2`` log rotation."""

    def __init__(self, stream: Any = None, path: str | None = None) -> None:
        self.path = path
        super().__init__(open(path, "a", encoding="utf-8") if path else (stream or sys.stdout))  # noqa: SIM115

    def reopen(self) -> None:
        if not self.path:
            return
        self.acquire()
        try:
            old = self.stream
            self.stream = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            old.close()
        finally:
            self.release()


def default_formatter() -> logging.Formatter:
    return WithoutTimestamp() if os.environ.get("DYNO") else Pretty()


def build_logger(path: str | None = None, *, level: int | None = None) -> logging.Logger:
    """The ``wurk`` logger with one handler of Wurk's own (idempotent).

    DEBUG when ``DEBUG_INVOCATION=1`` is set, else INFO, unless ``level`` is given.
    """
    logger = logging.getLogger(LOGGER_NAME)
    ours = [handler for handler in logger.handlers if isinstance(handler, ReopenableStreamHandler)]
    if not ours:
        handler = ReopenableStreamHandler(path=path)
        handler.setFormatter(default_formatter())
        logger.addHandler(handler)
        logger.propagate = False
    if level is None:
        level = logging.DEBUG if os.environ.get("DEBUG_INVOCATION") == "1" else logging.INFO
    logger.setLevel(level)
    return logger


def reopen(logger: logging.Logger) -> None:
    """Reopen every file handler of ``logger`` (``SIGUSR2``)."""
    for handler in logger.handlers:
        if isinstance(handler, ReopenableStreamHandler):
            handler.reopen()
