"""How a failure is written down in a job's payload: the error's class name,
its message and its backtrace, in the forms Sidekiq 8 writes, so the retry
and dead sets of a mixed fleet read the same in Ruby, in Python and in the
Sidekiq Web UI.

:mod:`wurk.server.retry` re-exports these names; plugins import them from there.
"""

from __future__ import annotations

import base64
import json
import traceback
import zlib

MAX_MESSAGE_CHARS = 10_000


def error_class_name(exc: BaseException) -> str:
    kind = type(exc)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def error_message(exc: BaseException) -> str:
    """The message, cut to 10,000 characters, as valid UTF-8. An error whose
    ``str()`` raises still gets booked, with a message saying so."""
    try:
        text = str(exc)[:MAX_MESSAGE_CHARS]
    except Exception as broken:
        text = f"<the message of {type(exc).__qualname__} could not be read: {type(broken).__name__}>"
    return text.encode("utf-8", "replace").decode("utf-8")


def backtrace_lines(exc: BaseException) -> list[str]:
    """The traceback, innermost call first, one ``file:line:in 'function'`` a line."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f"{frame.filename}:{frame.lineno}:in '{frame.name}'" for frame in reversed(frames)]


def compress_backtrace(lines: list[str]) -> str:
    """base64 (no newlines) of a zlib stream of the JSON array of lines."""
    return base64.b64encode(zlib.compress(json.dumps(lines).encode("utf-8"))).decode("ascii")


def decompress_backtrace(data: str) -> list[str]:
    lines: list[str] = json.loads(zlib.decompress(base64.b64decode(data)))
    return lines


__all__ = [
    "MAX_MESSAGE_CHARS",
    "backtrace_lines",
    "compress_backtrace",
    "decompress_backtrace",
    "error_class_name",
    "error_message",
]
