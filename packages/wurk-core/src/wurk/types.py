"""The job payload's type: the Sidekiq job hash as it travels through Redis.

A leaf module: it imports nothing from ``wurk``, so any module (a plugin's
too) can name :data:`Payload` without pulling in the client or the worker.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: The job hash, one key per wire field, in the shape Ruby writes it.
#:
#: Always present once a job is pushed: ``class``, ``args``, ``queue``,
#: ``jid``, ``created_at`` and ``retry``; ``enqueued_at`` once it is in a
#: queue (a scheduled job has ``at`` instead). The retry layer adds the
#: ``error_*``, ``failed_at``, ``retried_at`` and ``retry_count`` fields; the
#: others come from job options and plugins. Any other key a caller or a
#: middleware adds (a request id, a tenant) passes through untouched: the type
#: names the keys Wurk reads, not every key a payload may carry, so code that
#: reads or writes a custom key takes the payload as ``Mapping[str, Any]`` or
#: ``dict[str, Any]``. Written in the functional form because ``class`` is a
#: keyword.
Payload = TypedDict(
    "Payload",
    {
        # What every pushed job carries.
        "class": str,
        "args": list[Any],
        "queue": str,
        "jid": str,
        "retry": bool | int,
        "created_at": int,  # epoch milliseconds
        "enqueued_at": int,  # epoch milliseconds
        "at": float,  # epoch seconds; only on a scheduled job
        # Job options.
        "retry_queue": str,
        "retry_for": float,
        "backtrace": bool | int,
        "dead": bool,
        "tags": list[str],
        "expiry": float,
        "encrypt": bool,
        "profile": str,
        "wrapped": str,
        "display_class": str,
        # Written by the retry layer.
        "retry_count": int,
        "failed_at": float,
        "retried_at": float,
        "discarded_at": float,
        "error_message": str,
        "error_class": str,
        "error_backtrace": str,  # base64 of zlib-compressed JSON lines
        # Set by the plugins.
        "bid": str,
        "unique_for": float,
        "unique_until": str,
        "overrated": int,
    },
    total=False,
)

__all__ = ["Payload"]
