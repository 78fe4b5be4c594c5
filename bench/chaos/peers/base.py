"""What the driver needs to know about one library under test.

A peer says how to start one of its worker processes, which Python runs its
producer, which faults make sense for it, how many started-but-unacknowledged
jobs one of its processes can hold (the in-flight bound that duplicates are
measured against), how long its own recovery may take (the settle time), and
which of its documented reliability settings are in force, so the report can
say under which settings each number was measured.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from wurk.testing.faults import Matcher

BENCH = Path(__file__).resolve().parents[2]
REPO = BENCH.parent
PEERS_VENV = BENCH / ".venv-peers"

ALL_FAULTS = ("kill", "swarm-child", "swarm-parent", "redis-stop", "redis-restart", "cut", "lost-reply", "exit")


@dataclass
class WorkerSpec:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


class Peer:
    """Defaults for a Python library; each peer module overrides what differs."""

    name = ""
    lib = ""
    #: Independent worker processes started per scenario.
    processes = 2
    #: Threads (or pool processes) per worker process.
    concurrency = 5
    faults: tuple[str, ...] = ("kill", "redis-restart", "cut", "lost-reply", "exit")
    #: Seconds after the window closes to wait for every accepted job to run.
    settle = 180.0
    #: The library's documented settings for at-least-once delivery, as set here.
    settings: dict[str, str] = {}  # noqa: RUF012 - read-only class data

    def held_per_process(self) -> int:
        """Jobs one process can have started and not yet acknowledged."""
        return self.concurrency

    def python(self) -> str:
        return str(PEERS_VENV / "bin" / "python")

    def worker(self, index: int) -> WorkerSpec:
        raise NotImplementedError

    def available(self) -> str | None:
        """Why this peer cannot run here, or None."""
        if not (PEERS_VENV / "bin" / "python").exists():
            return f"{PEERS_VENV} is missing (see bench/README.md, Chaos)"
        return None

    def version(self) -> str:
        return ""

    def lost_reply_matchers(self, broker_url: str) -> list[tuple[str, Matcher]]:
        """Commands worth aiming a lost reply at, beyond any command and any script."""
        return []

    def script_names(self) -> dict[str, str]:
        """Readable names of the library's scripts by SHA, for the lost-reply tally."""
        return {}

    def prepare(self) -> None:
        """Set up what the workers need outside the broker (once per scenario)."""

    def release(self) -> None:
        """Undo :meth:`prepare`."""


def peer_version(dist: str) -> str:
    import subprocess

    out = subprocess.run(
        [str(PEERS_VENV / "bin" / "python"), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def own_python() -> str:
    return sys.executable
