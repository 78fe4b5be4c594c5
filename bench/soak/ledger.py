"""The ledger: a second server, never faulted, where every job records that it finished.

The broker is what the faults attack, and its keyspace is what the soak
checks at the end, so the evidence of what ran lives elsewhere: on a
server of its own that no fault touches and whose keys never mix with
Wurk's. Job ``n`` (0 to N-1, its first argument) sets bit ``n`` of a
bitmap when it finishes; a bit that was set already means a second
finish, counted per job in a hash. One million jobs cost 125 KB of
bitmap, and one round trip per job.

The producer records here too: how far it got, the pushes that raised and
were sent again (a push that raised may have landed all the same, so a
second run of that job is explained), and the deliberate duplicate pushes
of unique jobs that were accepted (the first copy had finished and
released its lock), each a run the job owes on top of its first.

This module is imported by the swarm's children and by the producer; it
needs nothing but redis-py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import redis

URL_ENV = "SOAK_LEDGER_URL"

DONE = "soak:done"  # BITMAP: bit n set once job n finished
AGAIN = "soak:again"  # HASH n -> finishes of job n beyond its first
CALLBACKS = "soak:callbacks"  # BITMAP: bit b set once batch b's success callback finished
CALLBACKS_AGAIN = "soak:callbacks-again"  # HASH b -> callback finishes beyond the first
BAD_SECRET = "soak:bad-secret"  # HASH n -> runs of job n whose decrypted argument was wrong
REFUSED = "soak:refused"  # HASH n -> pushes of job n that raised and were sent again
EXTRA = "soak:extra"  # HASH n -> deliberate duplicate pushes of job n that were accepted
DUP_UNKNOWN = "soak:dup-unknown"  # HASH n -> deliberate duplicate pushes that raised (landed or not)
PRODUCER = "soak:producer"  # HASH: pushed (count so far), done ("1" at the end), elapsed_s

_clients: dict[int, redis.Redis] = {}


def client() -> redis.Redis:
    """One client per process: a forked child must not share its parent's socket."""
    pid = os.getpid()
    found = _clients.get(pid)
    if found is None:
        found = redis.Redis.from_url(os.environ[URL_ENV], socket_timeout=30)
        _clients.clear()
        _clients[pid] = found
    return found


def finished(n: int) -> None:
    """Job ``n`` ran to its end, in this process."""
    ledger = client()
    if ledger.setbit(DONE, n, 1):
        ledger.hincrby(AGAIN, str(n), 1)


def callback_finished(block: int) -> None:
    """The success callback of batch ``block`` ran to its end."""
    ledger = client()
    if ledger.setbit(CALLBACKS, block, 1):
        ledger.hincrby(CALLBACKS_AGAIN, str(block), 1)


def count(key: str, n: int) -> None:
    client().hincrby(key, str(n), 1)


def _missing(bitmap: bytes, size: int) -> list[int]:
    """The offsets below ``size`` whose bit is clear (bit 0 is the high bit of byte 0, as SETBIT has it)."""
    bitmap = bitmap.ljust((size + 7) // 8, b"\0")
    clear = []
    for index, byte in enumerate(bitmap[: (size + 7) // 8]):
        if byte == 0xFF:
            continue
        for bit in range(8):
            offset = index * 8 + bit
            if offset < size and not byte & (0x80 >> bit):
                clear.append(offset)
    return clear


def _counts(ledger: redis.Redis, key: str) -> dict[int, int]:
    return {int(name): int(value) for name, value in ledger.hgetall(key).items()}


@dataclass
class Book:
    """What the ledger holds, read back by the driver."""

    jobs: int
    batches: int
    missing: list[int] = field(default_factory=list)
    again: dict[int, int] = field(default_factory=dict)
    callbacks_missing: list[int] = field(default_factory=list)
    callbacks_again: dict[int, int] = field(default_factory=dict)
    bad_secret: dict[int, int] = field(default_factory=dict)
    refused: dict[int, int] = field(default_factory=dict)
    extra: dict[int, int] = field(default_factory=dict)
    dup_unknown: dict[int, int] = field(default_factory=dict)

    @classmethod
    def read(cls, ledger: redis.Redis, jobs: int, batches: int) -> Book:
        return cls(
            jobs,
            batches,
            _missing(ledger.get(DONE) or b"", jobs),
            _counts(ledger, AGAIN),
            _missing(ledger.get(CALLBACKS) or b"", batches),
            _counts(ledger, CALLBACKS_AGAIN),
            _counts(ledger, BAD_SECRET),
            _counts(ledger, REFUSED),
            _counts(ledger, EXTRA),
            _counts(ledger, DUP_UNKNOWN),
        )

    def duplicates(self) -> dict[str, int]:
        """Finishes beyond what each job owed, split by what explains them.

        A job owes one finish, plus one per deliberate duplicate push that
        was accepted. Beyond that, a finish is explained by a push of that
        job that raised and was sent again (the first may have landed) or
        by a duplicate push whose outcome is unknown; the rest are the
        at-least-once kind: the job ran again after a fault took its
        process or connection before its acknowledgement.
        """
        total = by_refused = at_least_once = 0
        owed_copies_missing = 0
        for n in set(self.again) | set(self.extra):
            beyond = self.again.get(n, 0) - self.extra.get(n, 0)
            if beyond < 0:
                owed_copies_missing += -beyond
                continue
            total += beyond
            explained = min(beyond, self.refused.get(n, 0) + self.dup_unknown.get(n, 0))
            by_refused += explained
            at_least_once += beyond - explained
        return {
            "total": total,
            "after_a_push_that_raised": by_refused,
            "at_least_once_after_a_fault": at_least_once,
            "accepted_copies_never_run": owed_copies_missing,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "finished": self.jobs - len(self.missing),
            "lost": len(self.missing),
            "lost_first": self.missing[:50],
            "duplicates": self.duplicates(),
            "deliberate_duplicate_pushes_accepted": sum(self.extra.values()),
            "pushes_that_raised_and_were_sent_again": sum(self.refused.values()),
            "deliberate_duplicate_pushes_that_raised": sum(self.dup_unknown.values()),
            "wrong_decrypted_arguments": sum(self.bad_secret.values()),
            "batches": self.batches,
            "batch_callbacks_missing": len(self.callbacks_missing),
            "batch_callbacks_missing_first": self.callbacks_missing[:50],
            "batch_callbacks_run_again": sum(self.callbacks_again.values()),
        }
