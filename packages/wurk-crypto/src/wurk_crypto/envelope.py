"""The encrypted form of one argument, as it sits in Redis.

::

    {"__wurk_enc__": true, "v": 2, "iv": "<b64, 12 bytes>", "ct": "<b64>", "tag": "<b64, 16 bytes>"}

The plaintext is the argument's compact JSON, sealed with AES-256-GCM under
the key of version ``v`` and a fresh random 96-bit IV for every push (GCM is
broken by reusing an IV under one key, and random IVs keep that out of
reach for far more pushes than a key should live). The tag authenticates the
ciphertext: a changed byte fails decryption instead of yielding garbage. The
envelope is a JSON object, so a reader without the key still sees a valid
Sidekiq payload, and core masks it by its shape wherever arguments are shown.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from wurk.client.payload import ENCRYPTED_MARK, is_encrypted
from wurk_crypto.errors import DecryptionError
from wurk_crypto.keyring import Version

IV_BYTES = 12
TAG_BYTES = 16


def is_envelope(value: Any) -> bool:
    """Whether ``value`` is already an envelope (never encrypted twice)."""
    return is_encrypted(value)


def seal(value: Any, version: Version, key: bytes) -> dict[str, Any]:
    """``value`` encrypted under ``key`` (of ``version``) with a fresh IV."""
    plaintext = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    iv = os.urandom(IV_BYTES)
    sealed = AESGCM(key).encrypt(iv, plaintext, None)
    ciphertext, tag = sealed[:-TAG_BYTES], sealed[-TAG_BYTES:]
    return {ENCRYPTED_MARK: True, "v": version, "iv": _b64(iv), "ct": _b64(ciphertext), "tag": _b64(tag)}


def version_of(envelope: Any) -> Version:
    """The key version an envelope names, or :class:`DecryptionError`."""
    if not is_envelope(envelope):
        raise DecryptionError("malformed envelope: the encrypted argument is not an envelope object")
    version = envelope.get("v")
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise DecryptionError(f"malformed envelope: key version {version!r} is not an int or a str")
    return version


def open_(envelope: dict[str, Any], key: bytes) -> Any:
    """The argument inside ``envelope``; :class:`DecryptionError` when it was
    altered, sealed under another key, or is not a well-formed envelope."""
    iv = _unb64(envelope, "iv", IV_BYTES)
    tag = _unb64(envelope, "tag", TAG_BYTES)
    ciphertext = _unb64(envelope, "ct", None)
    try:
        plaintext = AESGCM(key).decrypt(iv, ciphertext + tag, None)
    except InvalidTag:
        raise DecryptionError("authentication failed: the ciphertext was altered or sealed under another key") from None
    try:
        return json.loads(plaintext.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DecryptionError(f"malformed envelope: the plaintext is not JSON ({exc})") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(envelope: dict[str, Any], field: str, size: int | None) -> bytes:
    value = envelope.get(field)
    if not isinstance(value, str):
        raise DecryptionError(f"malformed envelope: {field!r} is missing or not a string")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DecryptionError(f"malformed envelope: {field!r} is not base64") from None
    if size is not None and len(data) != size:
        raise DecryptionError(f"malformed envelope: {field!r} must be {size} bytes, got {len(data)}")
    return data


__all__ = ["IV_BYTES", "TAG_BYTES", "is_envelope", "open_", "seal", "version_of"]
