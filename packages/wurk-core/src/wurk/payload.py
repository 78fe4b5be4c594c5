"""The job payload: its JSON encoding, its checks and its normalisation.

A payload is the Sidekiq 8 job hash, byte-compatible with what Ruby writes:

* JSON with no whitespace, non-ASCII kept as raw UTF-8, ``/`` and ``<`` not
  escaped (Python's ``json`` with compact separators and ``ensure_ascii=False``
  produces the same bytes as Ruby's ``JSON.generate`` for job data);
* keys in Ruby's insertion order: the job's options first, then the caller's
  keys, then ``jid`` and ``created_at``, then ``enqueued_at`` at push time;
* ``jid`` is 24 lowercase hex characters; ``created_at`` / ``enqueued_at`` are
  integer epoch **milliseconds**; ``at`` is float epoch seconds.

Everything here runs before a byte is written, so bad input fails with a
message naming the problem and leaves Redis untouched.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Mapping
from typing import Any, Literal

from wurk.errors import WurkError

#: Intervals below this are relative ("in N seconds"); above, absolute epochs.
RELATIVE_LIMIT = 1_000_000_000

#: A queue name the Sidekiq Web UI (and Wurk's dashboard) can address.
QUEUE_NAME = re.compile(r"^[A-Za-z0-9_:.\-]+$")

ComplexMode = Literal["raise", "warn", False]


class InvalidJobError(WurkError, ValueError):
    """A job failed validation; nothing was pushed."""


class ComplexArgumentError(InvalidJobError, TypeError):
    """A job argument is not JSON-native and ``on_complex_arguments`` is ``raise``."""


_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_lossy_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)


def dumps(payload: Mapping[str, Any]) -> str:
    """The payload's wire JSON."""
    return _encoder.encode(payload)


def dumps_lossy(value: Any) -> str:
    """Wire JSON of a payload or its arguments that turns non-JSON values into
    strings (``on_complex_arguments`` off)."""
    return _lossy_encoder.encode(value)


def loads(data: str | bytes) -> Any:
    return json.loads(data)


def exact(raw: Any) -> str | bytes:
    """A payload read from Redis as text, or as the bytes it was when they are
    not UTF-8: it is then given back, acknowledged or killed byte for byte."""
    if isinstance(raw, bytes):
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return raw
    return raw


def new_jid() -> str:
    """24 lowercase hex characters from 12 random bytes."""
    return os.urandom(12).hex()


def new_jids(count: int) -> list[str]:
    """``count`` jids from one read of the random source."""
    pool = os.urandom(12 * count).hex()
    return [pool[index : index + 24] for index in range(0, 24 * count, 24)]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_SCALARS = frozenset({str, int, bool, type(None)})


def is_native(value: Any) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged (the fast check;
    :func:`find_complex` says where it does not)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        for item in value:  # noqa: SIM110 - a loop: all() with a generator costs twice as much here
            if type(item) not in _SCALARS and not is_native(item):
                return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _SCALARS and not is_native(item)):
                return False
        return True
    return False


def find_complex(value: Any, path: str = "args") -> str | None:
    """The path of the first value that would not survive a JSON round trip."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return None
    if kind is float:
        return None if math.isfinite(value) else f"{path} = {value!r} (not a finite number)"
    if kind is list:
        for index, item in enumerate(value):
            found = find_complex(item, f"{path}[{index}]")
            if found:
                return found
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{path} has the key {key!r} of type {type(key).__name__} (JSON keys are strings)"
            found = find_complex(item, f"{path}[{key!r}]")
            if found:
                return found
        return None
    return f"{path} = {value!r} of type {kind.__module__}.{kind.__qualname__}"


def verify_args(args: list[Any], mode: ComplexMode, logger: Any = None, job_class: str = "") -> list[Any]:
    """Apply ``on_complex_arguments``; the arguments as they will be stored.

    ``raise`` refuses a non-native argument; ``warn`` logs it and, like
    ``False``, stores what a JSON round trip makes of it (tuples become lists,
    other objects their ``str()``), so the job sees in the worker exactly what
    the payload holds.
    """
    if is_native(args):
        return args
    problem = find_complex(args)
    message = (
        f"job {job_class} has an argument that is not native JSON: {problem}. "
        "Pass only None, bool, int, float, str, list and dict with str keys "
        "(convert dates and objects to strings or ids yourself)"
    )
    if mode == "raise":
        raise ComplexArgumentError(message)
    if mode == "warn" and logger is not None:
        logger.warning(message)
    return loads(dumps_lossy(args))


def to_epoch(value: Any) -> float:
    """A ``datetime`` (naive means local time) or a number of epoch seconds."""
    from datetime import datetime

    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJobError(f"a time must be a datetime or epoch seconds, got {value!r}")
    return float(value)


def to_seconds(value: Any) -> float:
    """A ``timedelta`` or a number of seconds."""
    from datetime import timedelta

    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJobError(f"an interval must be a timedelta or seconds, got {value!r}")
    return float(value)


def schedule_at(interval_or_time: Any, now: float | None = None) -> float | None:
    """The ``at`` for ``perform_in``/``perform_at``: below 1e9 means "from now";
    ``None`` when the time is not in the future (push at once)."""
    from datetime import datetime

    now = time.time() if now is None else now
    if isinstance(interval_or_time, datetime):
        at = interval_or_time.timestamp()
    else:
        seconds = to_seconds(interval_or_time)
        at = seconds if seconds >= RELATIVE_LIMIT else now + seconds
    return at if at > now else None


def validate(item: Mapping[str, Any]) -> None:
    """The client's structural checks on an item before normalisation."""
    if not isinstance(item, Mapping):
        raise InvalidJobError(f"a job must be a dict, got {type(item).__name__}")
    if "class" not in item or not item["class"]:
        raise InvalidJobError(f"job has no 'class': {dict(item)!r}")
    if "args" not in item:
        raise InvalidJobError(f"job {item['class']} has no 'args'")
    if not isinstance(item["args"], list | tuple):
        raise InvalidJobError(f"job {item['class']}: args must be a list, got {type(item['args']).__name__}")
    at = item.get("at")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int | float)):
        raise InvalidJobError(f"job {item['class']}: 'at' must be epoch seconds, got {at!r}")
    tags = item.get("tags")
    if tags is not None and not isinstance(tags, list | tuple):
        raise InvalidJobError(f"job {item['class']}: tags must be a list, got {tags!r}")
    retry_for = item.get("retry_for")
    if retry_for is not None:
        seconds = to_seconds(retry_for)
        if seconds > RELATIVE_LIMIT:
            raise InvalidJobError(
                f"job {item['class']}: retry_for={seconds!r} looks like a timestamp; it is a duration in seconds"
            )


def validate_queue(queue: Any, job_class: str) -> str:
    if not isinstance(queue, str) or not queue:
        raise InvalidJobError(f"job {job_class}: queue must be a non-empty string, got {queue!r}")
    if not QUEUE_NAME.match(queue):
        raise InvalidJobError(
            f"job {job_class}: queue name {queue!r} may only contain letters, digits, '_', ':', '.' and '-'"
        )
    return queue


def class_name(job_class: Any) -> str:
    """The wire ``class`` of a job class, callable or name."""
    if isinstance(job_class, str):
        return job_class
    wire = getattr(job_class, "wire_name", None)
    if isinstance(wire, str):
        return wire
    module = getattr(job_class, "__module__", None)
    qualname = getattr(job_class, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname:
        raise InvalidJobError(
            f"cannot name job class {job_class!r}: a job must be importable, so define it at module level"
        )
    if module == "__main__":
        module = main_module_name()
    return f"{module}.{qualname}"


def main_module_name() -> str:
    """The importable name of ``__main__``: ``pkg.mod`` under ``python -m``,
    else the script's file name, which is how a worker's ``-r app.py`` loads it."""
    import sys
    from pathlib import Path

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    path = getattr(main, "__file__", None)
    return Path(path).stem if path else "__main__"
