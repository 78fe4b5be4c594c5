"""The two halves of a unique job: the lock on push, the release on run.

:class:`UniqueClient` takes ``unique:<digest>`` for a job with ``unique_for``
and halts the push of a duplicate (``perform_async`` answers ``None``).
:class:`UniqueServer` frees the lock before ``perform`` (``unique_until:
"start"``) or after it returned (``"success"``, the default); a raising job
keeps its lock through its retries. :func:`wurk_unique.enable`
installs both, and both stand aside again after ``disable()``.

:func:`coerce_unique_for` and :func:`coerce_unique_until` check the options
on every push, enabled or not, so a ``timedelta`` still reaches Redis as
seconds and a bad value is refused before anything is written.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from wurk.client.middleware import ClientMiddleware, ServerMiddleware
from wurk.server.retry import booked_payload
from wurk_unique import lock, switch


def encryption_enabled() -> bool:
    """Whether wurk-crypto encrypts in this process. Asked of the module only
    if something imported it: enabling encryption imports it, so a process
    where it was never imported cannot be encrypting."""
    crypto = sys.modules.get("wurk_crypto")
    probe = getattr(crypto, "enabled", None)
    return bool(probe()) if callable(probe) else False


def coerce_unique_for(value: Any, job: Mapping[str, Any]) -> Any:
    """``unique_for`` as whole seconds (``False``/``None`` kept), refused when
    it is not a duration or is combined with ``encrypt`` while encryption is
    enabled: each push would get fresh ciphertext, so no lock would ever match."""
    name = str(job.get("class"))
    ttl = lock.ttl_of(value, name)
    if ttl is None:
        return value
    if job.get("encrypt") and encryption_enabled():
        raise lock.ConfigurationError(
            f"job {name}: unique_for and encrypt cannot be combined (encryption makes every push "
            "unique, so the lock would never match); nothing was pushed"
        )
    return ttl


def coerce_unique_until(value: Any, job: Mapping[str, Any]) -> Any:
    """``"start"``, or ``"success"`` for anything else."""
    return lock.until_of(value)


class UniqueClient(ClientMiddleware):
    stateless = True

    def call(
        self, job_class: str, job: dict[str, Any], queue: str, redis_pool: Any, call_next: Callable[[], Any]
    ) -> Any:
        raw = job.get("unique_for")
        if raw is None or raw is False or not switch.is_on():
            return call_next()
        # Already whole seconds from a push; a promoted payload (perhaps
        # written by Ruby) is checked here.
        ttl = lock.ttl_of(raw, job_class)
        if ttl is None:
            return call_next()
        config = lock.root_config(self.config)
        key = lock.key_for(job, None, config)
        jid = str(job["jid"])
        holder = lock.acquire(config, redis_pool, key, jid, lock.scheduled_ttl(ttl, job.get("at")))
        if holder != jid:
            config.logger.info("wurk_unique: duplicate %s dropped (jid=%s blocked by jid=%s)", job_class, jid, holder)
            return None
        return call_next()


class UniqueServer(ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        release = self._release(job_instance, job)
        if release is None:
            return call_next()
        result = call_next()
        release()
        return result

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        release = self._release(job_instance, job)
        if release is None:
            return await call_next()
        result = await call_next()
        release()
        return result

    def _release(self, job_instance: Any, job: dict[str, Any]) -> Callable[[], None] | None:
        """What lets the job's lock go once it succeeded; ``None`` when there
        is nothing left to do after it (not unique, or unlocked at start, here)."""
        if not job.get("unique_for") or not switch.is_on():
            return None
        config = lock.root_config(self.config)
        # Keyed on the payload as enqueued, which is what the push hashed,
        # whatever an outer middleware did to ``job`` since.
        key = lock.key_for(booked_payload(job), type(job_instance), config)
        pool = config.redis_pool

        def release() -> None:
            lock.release_quietly(config, pool, key, job.get("jid"))

        if lock.until_of(job.get("unique_until")) == "start":
            release()
            return None
        return release


__all__ = ["UniqueClient", "UniqueServer", "coerce_unique_for", "coerce_unique_until", "encryption_enabled"]
