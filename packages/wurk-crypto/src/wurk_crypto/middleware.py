"""Encrypting on push, decrypting around ``perform``.

:class:`EncryptClient` replaces the last argument of an ``encrypt`` job by
its envelope before the payload reaches Redis; earlier arguments stay
readable (ids, for logs and the dashboard). An argument that is already an
envelope (a scheduled or retried job being promoted) is left alone.

:class:`DecryptServer` gives ``perform`` the plaintext and puts the envelope
back once ``perform`` is done, so whatever reads the job afterwards (outcome
listeners, error reports) sees it as enqueued; the retry and dead sets are
booked from the payload as fetched anyway. An argument that cannot be
decrypted sends the job straight to the dead set: a retry would fail alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from wurk.client import payload as wire
from wurk.client.middleware import ClientMiddleware, ServerMiddleware
from wurk.server.retry import Handled, Retrier, booked_payload
from wurk_crypto import envelope, keyring
from wurk_crypto.errors import DecryptionError, EncryptionKeyError

#: The ``error_message`` prefix of a job killed for its ciphertext.
ERROR_PREFIX = "encryption_error: "
METRIC = "jobs.encryption_error"


class EncryptClient(ClientMiddleware):
    stateless = True

    def call(
        self, job_class: str, job: dict[str, Any], queue: str, redis_pool: Any, call_next: Callable[[], Any]
    ) -> Any:
        if not job.get("encrypt"):
            return call_next()
        args = job.get("args")
        if not args or envelope.is_envelope(args[-1]):
            return call_next()
        ring = keyring.current(job_class)
        version = ring.active_version
        sealed = envelope.seal(args[-1], version, ring.key(version))
        job["args"] = [*args[:-1], sealed]
        return call_next()


class DecryptServer(ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        args = self._decrypt(job)
        if args is None:
            return call_next()
        try:
            return call_next()
        finally:
            job["args"] = args

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        args = self._decrypt(job)
        if args is None:
            return await call_next()
        try:
            return await call_next()
        finally:
            job["args"] = args

    def _decrypt(self, job: dict[str, Any]) -> list[Any] | None:
        """Put the plaintext in ``job["args"]``; the sealed arguments to put
        back afterwards, or ``None`` for a job that is not encrypted."""
        args = job.get("args")
        if not args or not (job.get("encrypt") or envelope.is_envelope(args[-1])):
            return None
        # A worker that never enabled encryption is misconfigured, not the
        # job broken: this raises and retries, so a deploy can fix it.
        ring = keyring.current(str(job.get("class")))
        try:
            plaintext = self._open(ring, args[-1])
        except DecryptionError as exc:
            payload = booked_payload(job)
            if payload is job:  # run in-process (perform_inline, a test): no worker books it
                raise
            self._kill(payload, exc)
            raise Handled() from exc
        job["args"] = [*args[:-1], plaintext]
        return args

    @staticmethod
    def _open(ring: keyring.Keyring, sealed: Any) -> Any:
        version = envelope.version_of(sealed)
        try:
            key = ring.key(version)
        except EncryptionKeyError as exc:
            raise DecryptionError(str(exc)) from exc
        return envelope.open_(sealed, key)

    def _kill(self, fetched: dict[str, Any], exc: DecryptionError) -> None:
        """Book the job dead as fetched (its envelope intact), with the
        failure's fields, its death handlers and outcome, and count it."""
        retrier = Retrier(self.config)
        payload = dict(fetched)
        payload["error_class"] = "DecryptionError"
        payload["error_message"] = f"{ERROR_PREFIX}{exc}"
        payload.setdefault("failed_at", wire.now_ms())
        retrier.config.statsd_increment(METRIC)
        retrier.kill(payload, exc, reason="retries_exhausted")


__all__ = ["ERROR_PREFIX", "METRIC", "DecryptServer", "EncryptClient"]
