"""One job payload read back from Redis, as the Data API hands it out.

A :class:`JobRecord` keeps the payload exactly as Redis returned it and parses
the JSON only when a field is first read, so walking a long queue costs no
JSON work for the jobs nobody looks at. The raw bytes matter: Redis removes a
list or sorted-set member only by exact bytes, and re-serialising a parsed
payload is not guaranteed to reproduce them (key order, float formatting,
escapes written by another language).

Payloads come from Ruby Sidekiq as well as from Wurk, so the readers accept
both timestamp forms (integer milliseconds, float seconds) and unwrap the
wrapper jobs other frameworks enqueue (Ruby ActiveJob, Django tasks) for
display. A payload that is not a JSON object still lists, displays and
deletes; it just has no class and no arguments.
"""

from __future__ import annotations

import binascii
import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from wurk.api._base import RedisAccess, seconds_since, text, time_from_stamp
from wurk.client import payload as wire
from wurk.client.payload import (
    ACTIVE_JOB_WRAPPERS,
    DJANGO_TASK_WRAPPERS,
    ENCRYPTED_PLACEHOLDER,
    is_encrypted,
)
from wurk.redis import keys
from wurk.server.failure import decompress_backtrace

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: ActionMailer's delivery jobs: their first two arguments are mailer and method.
MAILER_JOBS = frozenset({"ActionMailer::DeliveryJob", "ActionMailer::MailDeliveryJob"})
UNKNOWN_CLASS = "unknown"
_AJ_PREFIX = "_aj_"
_AJ_GLOBALID = "_aj_globalid"


def iteration_key(jid: str) -> str:
    """The HASH holding an iterable job's progress (``it-<jid>``)."""
    return f"it-{jid}"


@dataclass(frozen=True)
class IterableState:
    """Progress of an iterable job, as its worker last saved it."""

    jid: str
    executions: int
    cursor: Any
    runtime: float
    cancelled: int | None
    raw: dict[str, str] = field(repr=False)

    @classmethod
    def from_hash(cls, jid: str, raw: Mapping[Any, Any]) -> IterableState:
        fields = {text(name): text(value) for name, value in raw.items()}
        try:
            cursor = json.loads(fields["c"]) if "c" in fields else None
        except ValueError:
            cursor = fields["c"]  # not JSON: show it as written
        cancelled = fields.get("cancelled")
        return cls(
            jid=jid,
            executions=_int(fields.get("ex")),
            cursor=cursor,
            runtime=_float(fields.get("rt")),
            cancelled=_int(cancelled) if cancelled else None,
            raw=fields,
        )


def _int(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def active_job_arguments(argument: Any) -> Any:
    """ActiveJob's serialised arguments as a person wants to read them: a
    GlobalID stands for its record, and the ``_aj_*`` bookkeeping keys go."""
    if isinstance(argument, list):
        return [active_job_arguments(item) for item in argument]
    if isinstance(argument, dict):
        if len(argument) == 1 and _AJ_GLOBALID in argument:
            return argument[_AJ_GLOBALID]
        return {
            name: active_job_arguments(value)
            for name, value in argument.items()
            if not (isinstance(name, str) and name.startswith(_AJ_PREFIX))
        }
    return argument


class JobRecord(RedisAccess):
    """A job payload from a queue (or, as :class:`~wurk.api.SortedEntry`, from a sorted set).

    ``value`` is the payload exactly as Redis returned it; ``item`` is the
    parsed dict. ``klass`` and ``args`` are the payload verbatim, for program
    logic; ``display_class`` and ``display_args`` unwrap wrapper jobs and mask
    encrypted arguments, for people.
    """

    def __init__(
        self,
        value: bytes | str | Mapping[str, Any],
        queue: str | None = None,
        *,
        config: Config | None = None,
        pool: RedisPool | str | None = None,
    ) -> None:
        super().__init__(config, pool)
        if isinstance(value, Mapping):
            self._item: dict[str, Any] | None = dict(value)
            self._value: bytes | str = wire.dumps(self._item)
        else:
            self._item = None
            self._value = value
        self._queue = queue
        self._valid = True
        self._owner: Any = None  # the Queue being walked, told of deletions

    # -- the payload ----------------------------------------------------------

    @property
    def value(self) -> bytes | str:
        """The payload as stored: what ``delete`` matches on."""
        return self._value

    @property
    def item(self) -> dict[str, Any]:
        """The parsed payload (``{}`` when it is not a JSON object)."""
        if self._item is None:
            try:
                parsed = json.loads(self._value)
            except (ValueError, RecursionError):
                parsed = None
            self._valid = isinstance(parsed, dict)
            self._item = parsed if isinstance(parsed, dict) else {}
        return self._item

    @property
    def valid(self) -> bool:
        """Whether the payload is a JSON object (a job at all)."""
        _ = self.item
        return self._valid

    def __getitem__(self, name: str) -> Any:
        """A raw payload field, ``None`` when absent (as in Ruby)."""
        return self.item.get(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self.item.get(name, default)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.display_class} jid={self.jid!r} queue={self.queue!r}>"

    # -- fields ---------------------------------------------------------------

    @property
    def queue(self) -> str | None:
        """The queue this record was read from, else the payload's ``queue``."""
        if self._queue is not None:
            return self._queue
        queue = self.item.get("queue")
        return queue if isinstance(queue, str) else None

    @property
    def klass(self) -> str | None:
        """The wire class that a worker runs (a wrapper's own class for wrapped jobs)."""
        klass = self.item.get("class")
        return klass if isinstance(klass, str) else None

    @property
    def args(self) -> list[Any]:
        args = self.item.get("args")
        return args if isinstance(args, list) else []

    @property
    def jid(self) -> str | None:
        return self.item.get("jid")

    @property
    def bid(self) -> str | None:
        # Wire-format knowledge, not a feature: Sidekiq's JobRecord reads the
        # payload's ``bid`` field the same way, for every job.
        return self.item.get("bid")

    @property
    def tags(self) -> list[Any]:
        tags = self.item.get("tags")
        return tags if isinstance(tags, list) else []

    @property
    def created_at(self) -> datetime | None:
        stamp = self.item.get("created_at")
        return time_from_stamp(stamp if stamp is not None else self.item.get("enqueued_at"))

    @property
    def enqueued_at(self) -> datetime | None:
        return time_from_stamp(self.item.get("enqueued_at"))

    @property
    def failed_at(self) -> datetime | None:
        return time_from_stamp(self.item.get("failed_at"))

    @property
    def retried_at(self) -> datetime | None:
        return time_from_stamp(self.item.get("retried_at"))

    @property
    def latency(self) -> float:
        """Seconds since the job was enqueued (else created); 0.0 if unknown."""
        return payload_latency(self.item, time.time())

    @property
    def error_class(self) -> str | None:
        return self.item.get("error_class")

    @property
    def error_message(self) -> str | None:
        return self.item.get("error_message")

    @property
    def retry_count(self) -> int | None:
        return self.item.get("retry_count")

    @property
    def error_backtrace(self) -> list[str] | None:
        """The stored traceback lines; ``None`` when absent or unreadable."""
        packed = self.item.get("error_backtrace")
        if not isinstance(packed, str):
            return None
        try:
            lines = decompress_backtrace(packed)
        except (binascii.Error, zlib.error, ValueError, RecursionError):
            return None
        return [str(line) for line in lines] if isinstance(lines, list) else None

    @property
    def iterable_state(self) -> IterableState | None:
        """An iterable job's saved progress (read from Redis on each access)."""
        jid = self.jid
        if not isinstance(jid, str) or not jid:
            return None
        raw = self.run(lambda conn: conn.hgetall(iteration_key(jid)))
        return IterableState.from_hash(jid, raw) if raw else None

    # -- display --------------------------------------------------------------

    @property
    def display_class(self) -> str:
        """The class a person recognises: wrappers unwrapped, mailers as ``Mailer#method``."""
        explicit = self.item.get("display_class")
        if isinstance(explicit, str) and explicit:
            return explicit
        klass = self.klass
        if klass in ACTIVE_JOB_WRAPPERS:
            job_class = self._active_job_class()
            if job_class in MAILER_JOBS:
                mailer = self._active_job_arguments()[:2]
                return "#".join(str(part) for part in mailer)
            return job_class or klass
        task = self._django_task()
        if task is not None:
            return str(self.item.get("wrapped") or task.get("task_path") or klass)
        return klass or UNKNOWN_CLASS

    @property
    def display_args(self) -> list[Any]:
        """The arguments a person wants to see; encrypted ones are masked."""
        if not self.valid:
            return [text(self._value) if isinstance(self._value, bytes) else self._value]
        if any(is_encrypted(arg) for arg in self.args):
            # A wrapper whose data is ciphertext has nothing to unwrap.
            return [ENCRYPTED_PLACEHOLDER if is_encrypted(arg) else arg for arg in self.args]
        return self._unwrapped_args()

    def _unwrapped_args(self) -> list[Any]:
        if self.klass in ACTIVE_JOB_WRAPPERS:
            arguments: list[Any] = active_job_arguments(self._active_job_arguments())
            job_class = self._active_job_class()
            if job_class == "ActionMailer::DeliveryJob":
                return arguments[3:]  # drop mailer, method and delivery method
            if job_class == "ActionMailer::MailDeliveryJob":
                rest = arguments[3:]
                first = rest[0] if rest and isinstance(rest[0], dict) else {}
                return [first.get("params"), first.get("args")]
            return arguments
        task = self._django_task()
        if task is not None:
            task_args = task.get("args")
            shown = list(task_args) if isinstance(task_args, list) else []
            kwargs = task.get("kwargs")
            return [*shown, kwargs] if isinstance(kwargs, dict) and kwargs else shown
        args = list(self.args)
        if self.item.get("encrypt") and args:
            # Wire-format knowledge, as in Sidekiq's API: a payload flagged
            # ``encrypt`` carries ciphertext last, which means nothing to a reader.
            args[-1] = ENCRYPTED_PLACEHOLDER
        return args

    def _active_job(self) -> dict[str, Any]:
        args = self.args
        return args[0] if args and isinstance(args[0], dict) else {}

    def _active_job_class(self) -> str | None:
        wrapped = self.item.get("wrapped")
        if isinstance(wrapped, str) and wrapped:
            return wrapped
        args = self.args
        if args and isinstance(args[0], str):
            return args[0]
        job_class = self._active_job().get("job_class")
        return job_class if isinstance(job_class, str) else None

    def _active_job_arguments(self) -> list[Any]:
        arguments = self._active_job().get("arguments")
        return arguments if isinstance(arguments, list) else []

    def _django_task(self) -> dict[str, Any] | None:
        args = self.args
        task = args[0] if len(args) == 1 and isinstance(args[0], dict) else None
        if self.klass in DJANGO_TASK_WRAPPERS:
            return task or {}
        if task is not None and "task_path" in task and self.item.get("wrapped"):
            return task
        return None

    # -- mutation -------------------------------------------------------------

    def delete(self) -> bool:
        """Remove this payload from its queue (``LREM``, exact bytes); False if gone."""
        queue = self.queue
        if queue is None:
            return False
        value = self._value
        # redis-py's annotations want a str value; the exact bytes are what LREM must match.
        removed = self.run(lambda conn: conn.lrem(keys.queue(queue), 1, cast(str, value)))
        if removed and self._owner is not None:
            self._owner._note_removed(int(removed))
        return bool(removed)


def payload_latency(item: Mapping[str, Any], now: float) -> float:
    """Seconds a payload has waited, from ``enqueued_at``, else ``created_at``."""
    stamp = item.get("enqueued_at")
    if stamp is None:
        stamp = item.get("created_at")
    return seconds_since(stamp, now)


def raw_latency(raw: bytes | str | None, now: float) -> float:
    """The latency of a raw payload (a queue's tail); 0.0 when absent or unreadable."""
    if raw is None:
        return 0.0
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):
        return 0.0
    return payload_latency(item, now) if isinstance(item, dict) else 0.0


__all__ = [
    "IterableState",
    "JobRecord",
    "active_job_arguments",
    "iteration_key",
    "payload_latency",
    "raw_latency",
]
