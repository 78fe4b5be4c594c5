"""The Sidekiq fields core reads, what each must hold, and reading a payload
from a queue.

One set of rules serves both ends: the client refuses to write a payload
that breaks one (:func:`check_payload`), and a worker sends one it reads to
the dead set before running it (:func:`read_job`). A payload that passes can
be run, and its failure written back to the retry or the dead set, whatever
its fields held; one that does not would fail later, while its failure was
being booked, where the job could only be given back to fail again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, cast

from wurk.client.payload import InvalidJobError, dumps, find_complex, is_native, is_text, label, short_repr
from wurk.types import Payload


class UnreadableJobError(ValueError):
    """A payload read from Redis that no worker can run. ``job`` is the
    payload as parsed when it is a JSON object with a ``class`` and ``args``
    whose other fields are malformed, else ``None``."""

    def __init__(self, message: str, job: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.job = job


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond the range of a double")
    return value


_strict_decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def loads_strict(data: str | bytes) -> Any:
    """JSON as Ruby's parser reads it: UTF-8 only, no ``NaN`` or
    ``Infinity``, no number beyond a double, no string holding a lone
    surrogate. Anything else raises a ``ValueError`` saying why, so a worker
    never runs a job whose failure it could not write back."""
    text = data.decode() if isinstance(data, bytes) else data
    try:
        value = _strict_decoder.decode(text)
    except RecursionError:
        raise ValueError("the payload nests too deeply to be read") from None
    if ("\\ud" in text or "\\uD" in text) and not is_text(dumps(value)):
        raise ValueError("the payload holds a lone surrogate, which is not UTF-8 text")
    return value


def _is_name(value: Any) -> bool:
    return type(value) is str and value != "" and is_text(value)


#: Integers a time field may hold: anything a double can take without overflow.
_TIME_LIMIT = 2**63


def _is_number(value: Any) -> bool:
    kind = type(value)
    return (kind is int and -_TIME_LIMIT < value < _TIME_LIMIT) or (kind is float and math.isfinite(value))


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_RETRY_COUNT


def _is_retry_count(value: Any) -> bool:
    """A manual retry from the API lowers the count, as Sidekiq's does, so a
    job retried by hand before its first failure counts -1."""
    return type(value) is int and -MAX_RETRY_COUNT <= value <= MAX_RETRY_COUNT


#: The most retries a payload may count; far more than any backoff reaches,
#: and small enough that the next delay (count to the 4th power) is a float.
MAX_RETRY_COUNT = 2**53

#: The Sidekiq fields core reads, what each must hold, and how to say it. A
#: client refuses to write a payload that breaks one of them; a worker sends
#: one it reads to the dead set (see :func:`read_job`) instead of failing
#: on it later, while booking its failure.
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "jid": (_is_name, "a non-empty string"),
    "queue": (_is_name, "a non-empty string"),
    "retry": (lambda v: v is None or type(v) is bool or _is_count(v), "true, false or a whole number >= 0"),
    "retry_count": (_is_retry_count, f"a whole number from -{MAX_RETRY_COUNT} to {MAX_RETRY_COUNT}"),
    "retry_queue": (lambda v: v is None or _is_name(v), "a non-empty string"),
    "retry_for": (lambda v: v is None or _is_number(v), "a number of seconds"),
    "backtrace": (lambda v: v is None or type(v) is bool or _is_count(v), "true, false or a line count"),
    "dead": (lambda v: v is None or type(v) is bool, "true or false"),
    "created_at": (_is_number, "an epoch time"),
    "enqueued_at": (_is_number, "an epoch time"),
    "failed_at": (_is_number, "an epoch time"),
    "retried_at": (_is_number, "an epoch time"),
    "at": (_is_number, "epoch seconds"),
    "expiry": (lambda v: v is None or _is_number(v), "epoch seconds"),
    "bid": (_is_name, "a non-empty string"),
    "tags": (lambda v: type(v) is list and all(type(tag) is str and is_text(tag) for tag in v), "a list of strings"),
}


#: For the fields of nearly every payload, the type whose usual values need
#: no further look (ASCII text that is not empty, a time-sized integer, a
#: flag), so that a worker checks a common payload without a call per field.
_PLAIN: dict[str, type] = {
    "jid": str,
    "queue": str,
    "bid": str,
    "retry": bool,
    "created_at": int,
    "enqueued_at": int,
}


def check_fields(job: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidJobError` naming the first field of ``job`` that
    :data:`FIELDS` refuses."""
    for name, value in job.items():
        rule = FIELDS.get(name)
        if rule is None:
            continue
        kind = type(value)
        if kind is _PLAIN.get(name) and (
            (kind is str and value and value.isascii())
            or kind is bool
            or (kind is int and -_TIME_LIMIT < value < _TIME_LIMIT)
        ):
            continue
        if not rule[0](value):
            raise InvalidJobError(
                f"job {label(job.get('class'))}: the field {name!r} must be {rule[1]}, got {short_repr(value)}"
            )


def check_payload(job: Mapping[str, Any]) -> None:
    """The client's last check before a payload is written: :func:`check_fields`,
    and every value besides ``args`` (already checked) JSON-native, so that
    the write cannot fail half-way nor store what a worker refuses."""
    check_fields(job)
    for key, value in job.items():
        if type(key) is not str or not is_text(key):
            raise InvalidJobError(
                f"job {label(job.get('class'))}: an option name must be a string, got {short_repr(key)}"
            )
        if key != "args" and not is_native(value):
            raise InvalidJobError(
                f"job {label(job.get('class'))}: the option {key!r} is not native JSON: {find_complex(value, key)}"
            )


def checked_payload(job: dict[str, Any]) -> Payload:
    """``job`` once :func:`check_payload` has passed it: the one place where a
    dict built by the client becomes a :data:`~wurk.types.Payload`, because
    only here is every field known to hold its wire type."""
    check_payload(job)
    return cast("Payload", job)


def read_job(jobstr: str | bytes) -> dict[str, Any]:
    """A payload read from a queue as a job a worker can run, or an
    :class:`UnreadableJobError` saying what is wrong with it."""
    try:
        job = loads_strict(jobstr)  # invalid UTF-8 raises UnicodeDecodeError, a ValueError
    except ValueError as exc:
        raise UnreadableJobError(f"the payload is not JSON a worker can read: {exc}") from None
    if not isinstance(job, dict):
        raise UnreadableJobError(f"a job must be a JSON object, got {type(job).__name__}")
    if not isinstance(job.get("class"), str) or not job["class"]:
        raise UnreadableJobError("a job needs a 'class' string")
    if not isinstance(job.get("args"), list):
        raise UnreadableJobError("a job needs an 'args' array")
    try:
        check_fields(job)
    except InvalidJobError as exc:
        raise UnreadableJobError(str(exc), job) from None
    return job


__all__ = [
    "FIELDS",
    "MAX_RETRY_COUNT",
    "UnreadableJobError",
    "check_fields",
    "check_payload",
    "loads_strict",
    "read_job",
]
