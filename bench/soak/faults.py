"""The faults, one every ``--fault-every`` seconds, in rotation, each leaving a dated event.

* ``sigkill-child``: SIGKILL a swarm child mid-job; the parent respawns it,
  and the new child's boot sweep gives the dead one's jobs back.
* ``client-kill``: ``CLIENT KILL TYPE normal`` on the broker: every
  connection of every worker and of the producer is cut at once.
* ``sigterm-child``: SIGTERM a swarm child: it drains and exits, the
  parent respawns it.
* ``redis-restart``: stop the broker (SIGTERM: it writes its AOF) and start
  it again on the same port and data.
* ``debug-sleep``: ``DEBUG SLEEP`` stalls the broker for a few seconds;
  every connection hangs, none breaks.

A child fault always strikes the swarm's youngest child, so the eldest
lives through the whole soak and its memory speaks for every job it ran.
"""

from __future__ import annotations

import threading
import time

import redis
from chaos.faults import FaultEvent
from chaos.procfs import Proc

from wurk.redis.servers import ServerProcess

ROTATION = ("sigkill-child", "client-kill", "sigterm-child", "redis-restart", "debug-sleep")
STALL_S = 3


class Injector:
    """Strikes every ``every`` seconds until stopped, in ``ROTATION`` order."""

    def __init__(self, broker: ServerProcess, swarm_pid: int, every: float, kinds: tuple[str, ...] = ROTATION) -> None:
        self.broker = broker
        self.swarm_pid = swarm_pid
        self.every = every
        self.kinds = kinds
        self.events: list[FaultEvent] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-faults", daemon=True)

    def start(self) -> Injector:
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        turn = 0
        while not self.stop.wait(self.every):
            what = self.kinds[turn % len(self.kinds)]
            turn += 1
            at = time.time()
            try:
                pids, note = getattr(self, "_" + what.replace("-", "_"))()
            except Exception as exc:  # a fault that could not strike is an event too, not a crash of the soak
                pids, note = [], f"not injected: {type(exc).__name__}: {exc}"
            self.events.append(FaultEvent(what, at, time.time(), pids, note))

    def youngest_child(self) -> Proc | None:
        parent = Proc.of(self.swarm_pid)
        children = parent.children() if parent else []
        return max(children, key=lambda child: (child.started, child.pid)) if len(children) > 1 else None

    def _sigkill_child(self) -> tuple[list[int], str]:
        child = self.youngest_child()
        if child is None:
            return [], "not injected: the swarm had not two children"
        child.kill()
        return [child.pid], ""

    def _sigterm_child(self) -> tuple[list[int], str]:
        child = self.youngest_child()
        if child is None:
            return [], "not injected: the swarm had not two children"
        child.terminate()
        return [child.pid], ""

    def _client(self, timeout: float = 5.0) -> redis.Redis:
        return redis.Redis.from_url(self.broker.url, socket_timeout=timeout)

    def _client_kill(self) -> tuple[list[int], str]:
        with self._client() as client:
            killed = client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        return [], f"{killed} connections"

    def _redis_restart(self) -> tuple[list[int], str]:
        started = time.monotonic()
        self.broker.stop()  # SIGTERM: the server writes its AOF and exits
        self.broker.start(timeout=60)
        return [], f"down {time.monotonic() - started:.2f} s"

    def _debug_sleep(self) -> tuple[list[int], str]:
        with self._client(STALL_S + 10) as client:
            client.execute_command("DEBUG", "SLEEP", STALL_S)
        return [], f"{STALL_S} s"


class DebugServer(ServerProcess):
    """A broker that takes ``DEBUG`` from loopback (off by default since Redis 7)."""

    def command(self) -> list[str]:
        return [*super().command(), "--enable-debug-command", "local"]
