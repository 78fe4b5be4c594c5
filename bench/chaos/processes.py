"""Worker processes under supervision: started, watched, killed on request, restarted.

The driver stands in for a process supervisor (systemd, Kubernetes): a
worker process that exits, killed by a fault or crashed by a job, is started
again at once, as production would. Every process started here is tracked
by pid and stopped by pid at the end; nothing is ever killed by name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from chaos.peers.base import BENCH, WorkerSpec
from chaos.procfs import tree


def kill_tree(pid: int) -> list[int]:
    """SIGKILL ``pid`` and its descendants at once (a container or machine lost); the pids hit."""
    family = tree(pid)
    for each in family:
        each.kill()
    return [each.pid for each in family]


class WorkerSet:
    """``count`` worker processes of one peer, each restarted when it exits."""

    def __init__(self, spec: Callable[[int], WorkerSpec], count: int, env: dict[str, str], logs: Path) -> None:
        self.spec = spec
        self.count = count
        self.env = env
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * count
        self.started = 0
        self.exits: list[tuple[float, int, int]] = []  # (when noticed, pid, return code)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused: set[int] = set()
        self._watcher = threading.Thread(target=self._watch, name="chaos-supervisor", daemon=True)

    def start(self) -> WorkerSet:
        for index in range(self.count):
            self._spawn(index)
        self._watcher.start()
        return self

    def _spawn(self, index: int) -> None:
        spec = self.spec(index)
        fill = {"broker": self.env["CHAOS_BROKER_URL"], "ledger": self.env["CHAOS_LEDGER_URL"]}
        fill["nonce"] = secrets.token_hex(3)
        argv = [part.format(**fill) if "{" in part and "%" not in part else part for part in spec.argv]
        env = {**os.environ, **self.env, **spec.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), env.get("PYTHONPATH", "")]))
        with (self.logs / f"worker-{index}.log").open("ab") as log:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[index] = proc
        self.started += 1

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                for index, proc in enumerate(self.procs):
                    if proc is None or index in self._paused or proc.poll() is None:
                        continue
                    self.exits.append((time.time(), proc.pid, proc.returncode))
                    self._spawn(index)

    def pids(self) -> list[int]:
        with self._lock:
            return [proc.pid for proc in self.procs if proc is not None and proc.poll() is None]

    def kill(self, index: int) -> list[int]:
        """SIGKILL worker ``index``'s whole process tree; the supervisor restarts it."""
        with self._lock:
            proc = self.procs[index]
            return kill_tree(proc.pid) if proc is not None else []

    def hold(self, index: int) -> subprocess.Popen[bytes] | None:
        """Stop restarting worker ``index`` (the caller deals with it); its process."""
        with self._lock:
            self._paused.add(index)
            return self.procs[index]

    def release(self, index: int) -> None:
        """Start worker ``index`` again and supervise it as before."""
        with self._lock:
            self._spawn(index)
            self._paused.discard(index)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM every worker (a graceful stop), then SIGKILL what is left of each tree."""
        self._stop.set()
        self._watcher.join()
        with self._lock:
            procs = [proc for proc in self.procs if proc is not None]
        families = {proc.pid: tree(proc.pid) for proc in procs}
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
        for family in families.values():
            for each in family:
                each.kill()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
