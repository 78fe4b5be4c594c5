"""A sorted set's member: a job payload, by its exact bytes.

Shared by the sorted sets (:mod:`wurk.api.sorted`) and the dead set's writes
(:mod:`wurk.api.deaths`), which must not import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from wurk.client import payload as wire

Member = bytes | str


def as_member(message: Member | Mapping[str, Any]) -> Member:
    return wire.dumps(message) if isinstance(message, Mapping) else message


def zadd_member(conn: Any, name: str, member: Member, score: float) -> int:
    """``ZADD`` one member with its exact bytes. redis-py's annotations want
    str members; Redis takes bytes as they are, which is the point here."""
    return int(conn.zadd(name, {cast(str, member): score}))


__all__ = ["Member", "as_member", "zadd_member"]
