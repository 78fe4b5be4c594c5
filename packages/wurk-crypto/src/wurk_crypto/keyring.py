"""The process's encryption keys: the active version and where keys come from.

``wurk_crypto.enable(active_version, resolver)`` is process-wide, as Sidekiq Enterprise's
``Crypto.enable``: every push in the process encrypts with the active
version, and a worker decrypts any version the resolver can produce, which is
what lets old and new versions be in flight during a rotation. A key is asked
of the resolver once per version and process, then cached; enabling again
forgets the cache (a rotated resolver is asked afresh).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wurk_crypto.errors import EncryptionKeyError, EncryptionNotEnabledError

KEY_BYTES = 32  # AES-256

Version = int | str
Resolver = Callable[[Version], bytes]

#: What a resolver raises to say "no such version": the key is missing. Any
#: other exception is an outage (a key service away) and retries normally.
MISSING = (KeyError, IndexError)


@dataclass
class Keyring:
    active_version: Version
    resolver: Resolver
    cache: dict[Version, bytes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def key(self, version: Version) -> bytes:
        """The 32-byte key of ``version``; :class:`EncryptionKeyError` when the
        resolver has none or gives a wrong one. Other resolver errors propagate."""
        with self.lock:
            cached = self.cache.get(version)
        if cached is not None:
            return cached
        try:
            key = self.resolver(version)
        except MISSING as exc:
            raise EncryptionKeyError(f"no encryption key for version {version!r} ({exc!r})") from exc
        if key is None:
            raise EncryptionKeyError(f"no encryption key for version {version!r} (the resolver returned None)")
        if not isinstance(key, bytes | bytearray) or len(key) != KEY_BYTES:
            size = f"{len(key)} bytes" if isinstance(key, bytes | bytearray) else type(key).__name__
            raise EncryptionKeyError(
                f"the encryption key for version {version!r} must be {KEY_BYTES} raw bytes, got {size}"
            )
        with self.lock:
            self.cache[version] = bytes(key)
        return bytes(key)


_lock = threading.Lock()
_keyring: Keyring | None = None


def check_version(version: Any) -> Version:
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise TypeError(f"a key version must be an int or a str, got {version!r}")
    return version


def use(active_version: Version, resolver: Resolver) -> None:
    """Make a fresh keyring (an empty cache) the process's."""
    if not callable(resolver):
        raise TypeError(f"resolver must be callable, as resolver(version) -> 32 bytes, got {resolver!r}")
    global _keyring
    keyring = Keyring(check_version(active_version), resolver)
    with _lock:
        _keyring = keyring


def forget() -> None:
    global _keyring
    with _lock:
        _keyring = None


def present() -> bool:
    return _keyring is not None


def current(job: str) -> Keyring:
    """The process's keyring, or an error naming the job that needed it."""
    keyring = _keyring
    if keyring is None:
        raise EncryptionNotEnabledError(
            f"job {job} sets encrypt, but wurk_crypto.enable(active_version, resolver) was not called in this process"
        )
    return keyring


__all__ = ["KEY_BYTES", "Keyring", "Resolver", "Version", "current", "forget", "present", "use"]
