"""Who this process is: ``<hostname>:<pid>:<nonce>``.

The identity names the process's heartbeat hash and, with the same parts, its
reliable-fetch private lists (``queue:<q>|<hostname>|<pid>|<nonce>|0``), which
is how the reaper tells whose jobs a list holds. The nonce is 12 random hex
characters, new for every process incarnation (a forked child gets its own).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from wurk import env, keys

#: The nonces of the workers running in this process right now (an embedded
#: worker can share a process with another): the reaper's test for "our pid,
#: so alive" must not take one of them for a dead predecessor.
_live: set[str] = set()
_live_lock = threading.Lock()


def live_nonces() -> frozenset[str]:
    with _live_lock:
        return frozenset(_live)


@dataclass(frozen=True)
class ProcessIdentity:
    hostname: str
    pid: int
    nonce: str

    @classmethod
    def current(cls) -> ProcessIdentity:
        return cls(env.hostname(), os.getpid(), os.urandom(6).hex())

    @property
    def identity(self) -> str:
        return f"{self.hostname}:{self.pid}:{self.nonce}"

    def register(self) -> None:
        """This identity runs a worker in this process from now on."""
        with _live_lock:
            _live.add(self.nonce)

    def unregister(self) -> None:
        with _live_lock:
            _live.discard(self.nonce)

    def private_queue(self, queue: str) -> str:
        return keys.private_queue(queue, self.hostname, self.pid, self.nonce)

    def __str__(self) -> str:
        return self.identity


def parse_private_queue(key: str) -> tuple[str, str, int, str] | None:
    """``queue:<q>|<host>|<pid>|<nonce>|0`` → (queue, host, pid, nonce)."""
    if not key.startswith("queue:"):
        return None
    parts = key[len("queue:") :].split("|")
    if len(parts) != 5:
        return None
    queue, host, pid, nonce, _index = parts
    try:
        return queue, host, int(pid), nonce
    except ValueError:
        return None
