"""The test keys, shared by the test process and the worker application."""

from __future__ import annotations

import hashlib
import json
from typing import Any

KEYS: dict[object, bytes] = {1: bytes(range(32)), 2: bytes(range(100, 132)), 3: b"\x03" * 32}

#: Versions only the pushing side holds: a worker meets them as a missing key.
PUSHER_ONLY = (3,)


def pusher_resolver(version: object) -> bytes:
    return KEYS[version]


def worker_resolver(version: object) -> bytes:
    """What a worker's key source answers: the keys it holds, ``KeyError`` for
    one it does not, and an outage for the version named ``"outage"``."""
    if version == "outage":
        raise ConnectionError("the key service is unreachable")
    if version in PUSHER_ONLY:
        raise KeyError(version)
    return KEYS[version]


def fingerprint(value: Any) -> str:
    """What a test job reports instead of the plaintext it received."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
