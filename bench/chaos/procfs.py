"""Processes by pid, read from /proc: a family tree, and kills that never hit a reused pid.

The driver kills worker trees many times a minute; a pid read a moment ago
may belong to someone else by the time the signal goes out. Each
:class:`Proc` remembers its process's start time, and a signal is sent only
while the pid still has it. Linux only, like the faults themselves.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; everything after its ")" is space-separated.
    return raw[raw.rindex(")") + 2 :].split()


@dataclass(frozen=True)
class Proc:
    pid: int
    started: int  # clock ticks since boot, field 22 of /proc/<pid>/stat

    @classmethod
    def of(cls, pid: int) -> Proc | None:
        fields = _stat(pid)
        return cls(pid, int(fields[19])) if fields else None

    def alive(self) -> bool:
        fields = _stat(self.pid)
        return fields is not None and int(fields[19]) == self.started and fields[0] not in ("Z", "X")

    def signal(self, signum: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def children(self) -> list[Proc]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                fields = _stat(int(entry))
                if fields and int(fields[1]) == self.pid:
                    child = Proc(int(entry), int(fields[19]))
                    found.append(child)
        return found

    def tree(self) -> list[Proc]:
        """This process and every descendant, parent first."""
        family = [self]
        for child in self.children():
            family += child.tree()
        return family


def tree(pid: int) -> list[Proc]:
    root = Proc.of(pid)
    return root.tree() if root else []
