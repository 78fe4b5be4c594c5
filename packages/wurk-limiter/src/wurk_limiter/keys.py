"""Every Redis key the limiters use, in one screen.

The names are the guides' "Naming and Redis keys" table, byte for byte, so a
Ruby process and the dashboard read the same limiters. ``<name>`` is the
limiter's name as given (no braces are added: ``lmtr:stripe``).

| Key | Type | Contents |
| --- | --- | --- |
| ``lmtr:<name>`` | HASH | metadata: ``type``, ``options`` (JSON), ``fingerprint`` |
| ``lmtr-list`` | SET | every registered limiter name |
| ``lmtr-cs:<name>`` | ZSET | concurrent: held slots, score = expiry epoch |
| ``lmtr-stats:<name>`` | HASH | concurrent: metric counters |
| ``lmtr-b:<name>:<epoch>`` | STRING | bucket: counter for one period (epoch = now // period) |
| ``lmtr-w:<name>`` | ZSET | window: one entry per charge, score = epoch |
| ``lmtr-l:<name>`` | HASH | leaky: ``level``, ``last`` |
| ``lmtr-p:<name>`` | HASH | points: ``points``, ``last`` |
"""

from __future__ import annotations

#: Every registered limiter's name: what the dashboard lists.
REGISTRY = "lmtr-list"


def meta(name: str) -> str:
    return f"lmtr:{name}"


def slots(name: str) -> str:
    return f"lmtr-cs:{name}"


def stats(name: str) -> str:
    return f"lmtr-stats:{name}"


def bucket_prefix(name: str) -> str:
    """What every period's counter of bucket ``name`` starts with."""
    return f"lmtr-b:{name}:"


def bucket(name: str, epoch: int) -> str:
    return f"{bucket_prefix(name)}{epoch}"


def window(name: str) -> str:
    return f"lmtr-w:{name}"


def leaky(name: str) -> str:
    return f"lmtr-l:{name}"


def points(name: str) -> str:
    return f"lmtr-p:{name}"
