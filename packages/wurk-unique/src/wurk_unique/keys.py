"""Every Redis key wurk-unique touches, in one place.

One STRING per lock, ``unique:<digest>``, holding the jid that owns it, with
the lock's TTL. The name is Sidekiq Enterprise's, so a lock taken by a Ruby
process is honoured here and the other way round.
"""

from __future__ import annotations

PREFIX = "unique:"


def lock(digest: str) -> str:
    """The lock key of a job whose context hashes to ``digest`` (hex SHA-256)."""
    return f"{PREFIX}{digest}"


__all__ = ["PREFIX", "lock"]
