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
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal

from wurk.errors import WurkError

#: Intervals below this are relative ("in N seconds"); above, absolute epochs.
RELATIVE_LIMIT = 1_000_000_000

#: A queue name the Sidekiq Web UI (and Wurk's dashboard) can address.
QUEUE_NAME = re.compile(r"[A-Za-z0-9_:.\-]+")

ComplexMode = Literal["raise", "warn", False]


class InvalidJobError(WurkError, ValueError):
    """A job failed validation; nothing was pushed."""


class ComplexArgumentError(InvalidJobError, TypeError):
    """A job argument is not JSON-native and ``on_complex_arguments`` is ``raise``."""


_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ascii_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def dumps(payload: Mapping[str, Any]) -> str:
    """The payload's wire JSON."""
    return _encoder.encode(payload)


def dumps_any(payload: Mapping[str, Any]) -> str:
    """Wire JSON of a payload read back from Redis, writable whatever its
    strings hold: one that holds a lone surrogate (which JSON can only carry
    escaped) is written with every non-ASCII character escaped."""
    text = _encoder.encode(payload)
    return text if is_text(text) else _ascii_encoder.encode(payload)


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
    text: str = raw  # redis-py gives str when it decodes replies
    return text


def new_jid() -> str:
    """24 lowercase hex characters from 12 random bytes."""
    return os.urandom(12).hex()


def new_jids(count: int) -> list[str]:
    """``count`` jids from one read of the random source."""
    pool = os.urandom(12 * count).hex()
    return [pool[index : index + 24] for index in range(0, 24 * count, 24)]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


#: The deepest ``args`` may nest: Ruby's JSON parser refuses a document more
#: than 100 levels deep (its default ``max_nesting``), and the payload object
#: around ``args`` is one of them.
MAX_ARGS_DEPTH = 99

#: Integers Python's ``json`` can write and read back (4,300 digits unless the
#: interpreter's limit was changed).
INT_LIMIT = 10 ** (sys.get_int_max_str_digits() or 1_000_000)

_SCALARS = frozenset({bool, type(None)})


def is_text(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8 (no lone surrogates)."""
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def is_native(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` survives a JSON round trip unchanged and can be
    written as UTF-8 (the fast check; :func:`find_complex` says where it does not)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is str:
        return bool(value.isascii() or is_text(value))
    if kind is int:
        return bool(-INT_LIMIT < value < INT_LIMIT)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_ARGS_DEPTH:
        return False
    if kind is list:
        for item in value:
            item_kind = type(item)
            if item_kind is str:
                if not item.isascii() and not is_text(item):
                    return False
            elif item_kind not in _SCALARS and not is_native(item, depth + 1):
                return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not is_text(key):
                return False
            item_kind = type(item)
            if item_kind is str:
                if not item.isascii() and not is_text(item):
                    return False
            elif item_kind not in _SCALARS and not is_native(item, depth + 1):
                return False
        return True
    return False


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters for an error message; never
    raises (an integer over Python's digit limit, a broken ``__repr__``)."""
    if type(value) is int and not -INT_LIMIT < value < INT_LIMIT:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception as exc:
        return f"<{type(value).__qualname__} whose repr raised {type(exc).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def find_complex(value: Any, path: str = "args", depth: int = 0) -> str | None:
    """The path of the first value that would not survive a JSON round trip."""
    kind = type(value)
    if value is None or kind is bool:
        return None
    if kind is str:
        return None if is_text(value) else f"{path} = {short_repr(value)} (a lone surrogate is not UTF-8 text)"
    if kind is int:
        if -INT_LIMIT < value < INT_LIMIT:
            return None
        return f"{path} = {short_repr(value)} (too many digits for JSON)"
    if kind is float:
        return None if math.isfinite(value) else f"{path} = {value!r} (not a finite number)"
    if depth >= MAX_ARGS_DEPTH and kind in (list, dict):
        return f"{path} nests deeper than {MAX_ARGS_DEPTH} levels (or holds itself)"
    if kind is list:
        for index, item in enumerate(value):
            found = find_complex(item, f"{path}[{index}]", depth + 1)
            if found:
                return found
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{path} has the key {short_repr(key)} of type {type(key).__name__} (JSON keys are strings)"
            if not is_text(key):
                return f"{path} has the key {short_repr(key)} (a lone surrogate is not UTF-8 text)"
            found = find_complex(item, f"{path}[{key!r}]", depth + 1)
            if found:
                return found
        return None
    return f"{path} = {short_repr(value)} of type {kind.__module__}.{kind.__qualname__}"


def verify_args(args: list[Any], mode: ComplexMode, logger: Any = None, job_class: str = "") -> list[Any]:
    """Apply ``on_complex_arguments``; the arguments as they will be stored.

    ``raise`` refuses a non-native argument; ``warn`` logs it and, like
    ``False``, stores what :func:`lossy` makes of it (tuples become lists,
    other objects their ``str()``), so the job sees in the worker exactly what
    the payload holds. What cannot be stored in any form (nesting deeper than
    a JSON reader takes, an integer with too many digits) is refused in every mode.
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
    stored: list[Any] = lossy(args, "args", 0, job_class)
    if mode == "warn" and logger is not None:
        logger.warning(message)
    return stored


def lossy(value: Any, path: str = "args", depth: int = 0, job_class: str = "") -> Any:
    """``value`` as JSON-native data: tuples become lists, other keys
    and objects (sets, ``NaN`` and infinities too) their ``str()``, text that is not
    UTF-8 loses its lone surrogates. Raises :class:`ComplexArgumentError` for
    what has no such form."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is str:
        return value if is_text(value) else value.encode("utf-8", "replace").decode()
    if kind is int:
        if not -INT_LIMIT < value < INT_LIMIT:
            raise ComplexArgumentError(f"job {job_class}: {path} = {short_repr(value)} has too many digits for JSON")
        return value
    if kind in (list, tuple, dict) and depth >= MAX_ARGS_DEPTH:
        raise ComplexArgumentError(
            f"job {job_class}: {path} nests deeper than {MAX_ARGS_DEPTH} levels (or holds itself), "
            "which no JSON reader takes"
        )
    if kind in (list, tuple):
        return [lossy(item, f"{path}[{index}]", depth + 1, job_class) for index, item in enumerate(value)]
    if kind is dict:
        return {
            _lossy_key(key): lossy(item, f"{path}[{short_repr(key)}]", depth + 1, job_class)
            for key, item in value.items()
        }
    if kind is float and math.isfinite(value):
        return value
    try:
        text = str(value)
    except Exception as exc:
        raise ComplexArgumentError(f"job {job_class}: {path}: str() of {type(value).__name__} raised {exc!r}") from exc
    return lossy(text, path, depth, job_class)


def _lossy_key(key: Any) -> str:
    """A dict key as JSON writes it (``true``, ``null``, ``1.5``), else its ``str()``."""
    if type(key) is str:
        return key if is_text(key) else key.encode("utf-8", "replace").decode()
    if key is None or type(key) is bool:
        return _encoder.encode(key)
    if type(key) is float and math.isfinite(key):
        return repr(key)
    if type(key) is int and -INT_LIMIT < key < INT_LIMIT:
        return str(key)
    return _lossy_key(short_repr(key, 200) if type(key) is int else str(key))


def _finite(value: Any, what: str) -> float:
    """``value`` as a finite float, or an error naming ``what``."""
    try:
        seconds = float(value)
    except OverflowError:
        raise InvalidJobError(f"{what} must be a finite number of seconds, got {short_repr(value)}") from None
    if not math.isfinite(seconds):
        raise InvalidJobError(f"{what} must be a finite number of seconds, got {value!r}")
    return seconds


def to_epoch(value: Any, what: str = "a time") -> float:
    """A ``datetime`` (naive means local time) or a number of epoch seconds."""
    from datetime import datetime

    if isinstance(value, datetime):
        try:
            return value.timestamp()
        except (OverflowError, ValueError, OSError) as exc:
            raise InvalidJobError(f"{what} {value!r} has no epoch time: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJobError(f"{what} must be a datetime or epoch seconds, got {short_repr(value)}")
    return _finite(value, what)


def epoch_seconds(value: Any, what: str) -> float:
    """An ``at`` as written: a finite number of epoch seconds, nothing else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJobError(f"{what} must be epoch seconds, got {short_repr(value)}")
    return _finite(value, what)


def to_seconds(value: Any, what: str = "an interval") -> float:
    """A ``timedelta`` or a number of seconds."""
    from datetime import timedelta

    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJobError(f"{what} must be a timedelta or seconds, got {short_repr(value)}")
    return _finite(value, what)


def schedule_at(interval_or_time: Any, now: float | None = None) -> float | None:
    """The ``at`` for ``perform_in``/``perform_at``: below 1e9 means "from now";
    ``None`` when the time is not in the future (push at once)."""
    from datetime import datetime

    now = time.time() if now is None else now
    if isinstance(interval_or_time, datetime):
        at = to_epoch(interval_or_time, "the time")
    else:
        seconds = to_seconds(interval_or_time)
        at = seconds if seconds >= RELATIVE_LIMIT else now + seconds
    return at if at > now else None


def validate(item: Mapping[str, Any]) -> None:
    """The client's structural checks on an item before normalisation."""
    if not isinstance(item, Mapping):
        raise InvalidJobError(f"a job must be a dict, got {type(item).__name__}")
    if "class" not in item or not item["class"]:
        raise InvalidJobError(f"job has no 'class': {short_repr(dict(item), 200)}")
    name = label(item["class"])
    if "args" not in item:
        raise InvalidJobError(f"job {name} has no 'args'")
    if not isinstance(item["args"], list | tuple):
        raise InvalidJobError(f"job {name}: args must be a list, got {type(item['args']).__name__}")
    at = item.get("at")
    if at is not None:
        epoch_seconds(at, f"job {name}: 'at'")
    tags = item.get("tags")
    if tags is not None and not isinstance(tags, list | tuple):
        raise InvalidJobError(f"job {name}: tags must be a list, got {short_repr(tags)}")
    retry_for = item.get("retry_for")
    if retry_for is not None:
        seconds = to_seconds(retry_for, f"job {name}: retry_for")
        if seconds > RELATIVE_LIMIT:
            raise InvalidJobError(
                f"job {name}: retry_for={seconds!r} looks like a timestamp; it is a duration in seconds"
            )


def label(job_class: Any) -> str:
    """How an error message names a job class, whatever was passed as one."""
    if isinstance(job_class, str):
        return short_repr(job_class) if not is_text(job_class) or len(job_class) > 200 else job_class
    name = getattr(job_class, "__qualname__", None)
    return name if isinstance(name, str) else short_repr(job_class)


def validate_queue(queue: Any, job_class: str) -> str:
    if not isinstance(queue, str) or not queue:
        raise InvalidJobError(f"job {job_class}: queue must be a non-empty string, got {short_repr(queue)}")
    if not QUEUE_NAME.fullmatch(queue):
        raise InvalidJobError(
            f"job {job_class}: queue name {short_repr(queue)} may only contain letters, digits, '_', ':', '.' and '-'"
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
            f"cannot name job class {short_repr(job_class)}: a job must be importable, so define it at module level"
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


# -- what other code writes into a payload, known by its shape -----------------

#: The wire classes Ruby's ActiveJob adapter enqueues; ``args[0]`` is the
#: serialised ActiveJob (``job_class``, ``arguments``, ...).
ACTIVE_JOB_WRAPPERS = frozenset({"Sidekiq::ActiveJob::Wrapper", "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"})
#: The wire class of a Django ``django.tasks`` task enqueued through Wurk. Its
#: payload carries ``"wrapped": "<task path>"`` and one argument,
#: ``{"task_path": "<task path>", "args": [...], "kwargs": {...}}``.
DJANGO_TASK_WRAPPERS = frozenset({"wurk.contrib.django.backend.TaskWrapper"})

ENCRYPTED_PLACEHOLDER = "[encrypted data]"
#: The key marking an encrypted argument: wurk-crypto replaces the argument by
#: ``{"__wurk_enc__": true, "v": <key version>, "iv": …, "ct": …, "tag": …}``.
#: Core knows the shape, not the plugin, so every display masks ciphertext
#: even where wurk-crypto is not installed or the ``encrypt`` flag was lost.
ENCRYPTED_MARK = "__wurk_enc__"


def is_encrypted(value: Any) -> bool:
    """Whether ``value`` is an encrypted argument's envelope (by its shape, so
    without the key, the plugin or the payload's ``encrypt`` flag)."""
    return isinstance(value, dict) and value.get(ENCRYPTED_MARK) is True
