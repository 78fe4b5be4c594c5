"""Taking, releasing and probing unique-job locks.

A lock is ``SET unique:<digest> <jid> NX EX <ttl>`` (in the ``unique.acquire``
script, which also answers who holds a lock it could not take); a release is
a compare-and-delete (``unique.release``), so only the jid that owns a lock
ever frees it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from wurk.client import payload as wire
from wurk.errors import ConfigurationError as WurkConfigurationError
from wurk_unique import digest, keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

Until = Literal["success", "start"]

ACQUIRE = "unique.acquire"
RELEASE = "unique.release"


class ConfigurationError(WurkConfigurationError):
    """A job's unique options cannot be honoured: a bad ``unique_for``, or
    ``unique_for`` together with ``encrypt`` while encryption is enabled."""


def ttl_of(value: Any, job: str) -> int | None:
    """``unique_for`` as whole seconds (floats truncated), ``None`` for no lock."""
    if value is None or value is False:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"job {job}: unique_for must be seconds, a timedelta or False, got {value!r}")
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or int(seconds) < 1:
        raise ConfigurationError(f"job {job}: unique_for must be at least 1 second, got {value!r}")
    return int(seconds)


def until_of(value: Any) -> Until:
    """``unique_until``: ``"start"``, or ``"success"`` for anything else."""
    return "start" if value == "start" else "success"


def scheduled_ttl(ttl: int, at: Any, now: float | None = None) -> int:
    """A scheduled job's lock spans its wait too: ``ttl`` plus the delay,
    rounded up. An ``at`` in the past adds nothing."""
    if isinstance(at, bool) or not isinstance(at, int | float):
        return ttl
    delay = float(at) - (time.time() if now is None else now)
    return ttl + math.ceil(delay) if delay > 0 else ttl


def root_config(config: Any) -> Config:
    """The configuration behind a middleware's ``config`` (a capsule holds it),
    or, for a chain built without one, the configuration running this code
    (see :func:`wurk.current_config`)."""
    if config is None:
        from wurk.config.defaults import current_config

        return current_config()
    return getattr(config, "config", None) or config


def acquire(config: Config, pool: RedisPool, key: str, jid: str, ttl: int) -> str | None:
    """Take the lock for ``jid``; the jid that holds it afterwards."""
    holder = pool.execute(lambda conn: config.scripts.call(ACQUIRE, conn, [key], [jid, ttl]))
    return holder.decode() if isinstance(holder, bytes) else holder


def release(config: Config, pool: RedisPool, key: str, jid: str) -> bool:
    """Delete the lock if ``jid`` still owns it; whether it did."""
    return bool(pool.execute(lambda conn: config.scripts.call(RELEASE, conn, [key], [jid])))


def release_quietly(config: Config, pool: RedisPool, key: str, jid: Any) -> None:
    """A release that never fails the job: a lock left behind only costs a
    duplicate being dropped until its TTL runs out."""
    if not isinstance(jid, str):
        return
    try:
        release(config, pool, key, jid)
    except Exception as exc:  # Redis away, a script error: logged, the job goes on
        config.logger.warning("wurk_unique: release failed: %s (%s keeps %s until it expires)", exc, jid, key)


def key_for(job: Mapping[str, Any], job_class: type | None, config: Config) -> str:
    """The lock key of a payload, through the same derivation on every path."""
    if job_class is None:
        job_class = digest.known_class(job.get("class"), config)
    return digest.lock_key_of(job, job_class)


def lock_key(klass: Any, queue: str, args: Iterable[Any]) -> str:
    """The verbatim ``[class, queue, args]`` key, no ``unique_context`` or
    wrapper narrowing applied (what to ``DEL`` to clear a plain job's lock)."""
    return keys.lock(digest.digest(digest.triple(wire.class_name(klass), queue, args)))


def locked(*where: Any, config: Config | None = None) -> str | None:
    """The jid holding the lock of a job, or ``None`` when it is free.

    ``locked(queue, klass, args)``, or ``locked(klass, args)`` for the class's
    own queue (the default job options' queue for a class named by a string).
    The key is derived as a push derives it, ``unique_context`` included.
    """
    if len(where) == 3:
        queue, klass, args = where
    elif len(where) == 2:
        klass, args = where
        queue = None
    else:
        raise TypeError(f"locked(queue, klass, args) or locked(klass, args), got {len(where)} arguments")
    config = root_config(config)
    if queue is None:
        options_of = getattr(klass, "get_options", None)
        options = options_of(config) if callable(options_of) else config.default_job_options
        queue = options.get("queue", "default")
    job = {"class": wire.class_name(klass), "queue": queue, "args": list(args)}
    job_class = klass if isinstance(klass, type) else getattr(klass, "job_class", None)
    key = key_for(job, job_class, config)
    holder = config.redis_pool.execute(lambda conn: conn.get(key))
    return holder.decode() if isinstance(holder, bytes) else holder


__all__ = [
    "ConfigurationError",
    "Until",
    "acquire",
    "key_for",
    "lock_key",
    "locked",
    "release",
    "release_quietly",
    "root_config",
    "scheduled_ttl",
    "ttl_of",
    "until_of",
]
