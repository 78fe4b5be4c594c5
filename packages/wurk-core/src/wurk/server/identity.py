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

from wurk.config import env
from wurk.redis import keys

#: The nonces of the workers running in this process right now (an embedded
#: worker can share a process with another): the reaper's test for "our pid,
#: so alive" must not take one of them for a dead predecessor.
_live: set[str] = set()
_live_lock = threading.Lock()


def live_nonces() -> frozenset[str]:
    with _live_lock:
        return frozenset(_live)


def gone(hostname: str, pid: int, nonce: str, here: str) -> bool:
    """Whether the process ``hostname:pid:nonce`` is certainly dead, as only
    its own host (``here``) can tell: no process with that pid, or this very
    process under another nonce (a restarted container's predecessor, with
    PID 1 again). ``False`` means it may live: another host's process, a pid
    now taken by some other process, or one this user may not signal; those
    are left to their heartbeat or lease."""
    if hostname != here:
        return False
    if pid == os.getpid():
        return nonce not in live_nonces()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def parse_identity(identity: str) -> tuple[str, int, str] | None:
    """``<hostname>:<pid>:<nonce>`` → its parts (the hostname may hold colons)."""
    hostname, _, rest = identity.rpartition(":")
    hostname, _, pid = hostname.rpartition(":")
    if not hostname or not pid.isdigit():
        return None
    return hostname, int(pid), rest


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
