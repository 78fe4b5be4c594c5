"""Write fences: how a script recognises its own call sent a second time.

When a connection drops between a write and its reply, the pool sends the
write again (:mod:`wurk.redis.connection`). For ``SET`` or ``HSET`` that is
harmless; for an ``LPUSH`` or an ``HINCRBY`` it applies the write twice. A
fenced script takes a *ticket* — a key of its thread and a sequence number
that grows with every write of that thread — and starts with::

    local last = tonumber(redis.call("GET", KEYS[1]) or "0")
    if last >= tonumber(ARGV[1]) then return <what the first call did> end
    redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[2])

A thread writes one fenced command at a time and waits for its reply, so the
sequence numbers stored under one key only grow, and a number at or below
the stored one is a call already applied. The key is unique to the thread
and to the process (a fork or a new thread starts a key of its own, never an
inherited one) and expires :data:`TTL` seconds after the thread's last write:
far longer than the pool's retries take, and one small key per thread that
writes.
"""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.redis.connection import RedisPool

__all__ = ["TTL", "Ticket", "Unsettled", "applied", "retire", "ticket"]

#: Seconds a fence outlives its thread's last write.
TTL = 600


class Ticket(NamedTuple):
    """One fenced write: pass ``key`` in KEYS and ``seq``, ``ttl`` in ARGV.

    ``token`` names the thread's fence, for a script that keeps a receipt of
    what its call did beside it (``keys.pop_receipt``). A tuple, not a
    dataclass: every push takes one, and a tuple costs a third as much."""

    token: str
    seq: int
    ttl: int = TTL

    @property
    def key(self) -> str:
        return keys.fence(self.token)


class _Fence(threading.local):
    token = ""
    pid = 0
    seq = 0


_fence = _Fence()


def ticket() -> Ticket:
    """The next ticket of this thread; take one per logical write and reuse
    it for every attempt at that write."""
    fence = _fence
    pid = os.getpid()
    if fence.pid != pid:  # a new thread, or the copy a fork inherited
        fence.token = secrets.token_hex(10)
        fence.pid = pid
        fence.seq = 0
    fence.seq += 1
    return Ticket(fence.token, fence.seq)


def retire() -> None:
    """After a fenced write gave up with its outcome unknown: later writes of
    this thread take a new fence, so the old one keeps the last number it saw
    and can still tell (:func:`applied`) whether that write went through."""
    _fence.pid = 0


def applied(pool: RedisPool, ticket: Ticket) -> bool:
    """Whether the fenced write of ``ticket`` reached Redis."""
    last = pool.execute(lambda conn: conn.get(ticket.key))
    return last is not None and int(last) >= ticket.seq


@dataclass(frozen=True)
class Unsettled:
    """A fenced write that gave up (Redis unreachable) and may or may not
    have been applied: carried on the error as ``exc.unsettled``, so that a
    later replay (the outage buffer) asks :func:`applied` before writing it
    again."""

    ticket: Ticket
    pool: RedisPool
