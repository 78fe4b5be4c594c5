"""The faults, injected for real during a scenario's window, each leaving a dated event.

Every event says when the fault struck and, for a kill, which processes it
took down. The report uses them to tell an explained duplicate (the job was
in flight in a killed process, or a connection fault happened while it was
in flight) from an unexplained one, and to time the recovery.

* ``kill``: SIGKILL a worker's whole process tree at random moments (a
  container or a machine lost); the supervisor starts a new one.
* ``swarm-child``: SIGKILL one child of a ``wurkswarm``; the parent respawns it.
* ``swarm-parent``: SIGKILL the swarm's parent; its children must notice and
  stop by themselves within 5 s (what is left after 5 s is reported, then
  stopped gracefully); then a new swarm starts.
* ``redis-stop``: SIGSTOP the broker for 1-3 s, then SIGCONT: every
  connection hangs, none breaks.
* ``redis-restart``: stop the broker (SIGTERM: it writes its AOF) and start
  it again on the same port and data: every connection breaks, nothing is lost.
* ``cut``: the proxy resets every open connection every 0.5-2 s.
* ``lost-reply``: every 0.5-2 s the proxy lets the next command through,
  waits for the server's reply (so the command surely ran) and resets the
  client's connection instead of delivering it; the command sent again gets
  through. It aims in turn at any command, at any script call, and at the
  peer's own delicate writes (Wurk's scheduler pop and push).
* ``exit``: no injector: some jobs ``os._exit`` their process (see ``jobs.py``).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from chaos.peers.base import Peer
from chaos.processes import WorkerSet
from chaos.procfs import Proc
from wurk.redis.servers import ServerProcess
from wurk.testing.faults import FaultProxy, Matcher

#: Faults whose workers and producer talk to the broker through the proxy.
PROXIED = frozenset({"cut", "lost-reply"})
#: How long a swarm's children may outlive their SIGKILLed parent.
ORPHAN_LIMIT = 5.0


@dataclass
class FaultEvent:
    kind: str
    start: float
    end: float
    pids: list[int] = field(default_factory=list)
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    """What an injector may act on, and where it leaves its events."""

    peer: Peer
    broker: ServerProcess
    workers: WorkerSet
    proxy: FaultProxy | None
    window: float
    short: bool
    rng: random.Random
    events: list[FaultEvent] = field(default_factory=list)
    observations: dict[str, Any] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def moments(self, count: int) -> list[float]:
        """``count`` random offsets inside the window, in order."""
        return sorted(self.rng.uniform(0.5, self.window - 0.5) for _ in range(count))

    def sleep_until(self, origin: float, offset: float) -> bool:
        """Wait until ``offset`` seconds after ``origin``; False if the window closed first."""
        return not self.stop.wait(max(0.0, origin + offset - time.monotonic()))


def kill_workers(ctx: Context) -> None:
    origin = time.monotonic()
    for offset in ctx.moments(4 if ctx.short else 20):
        if not ctx.sleep_until(origin, offset):
            return
        index = ctx.rng.randrange(ctx.workers.count)
        at = time.time()
        pids = ctx.workers.kill(index)
        ctx.events.append(FaultEvent("kill", at, time.time(), pids, f"worker {index}"))


def kill_swarm_children(ctx: Context) -> None:
    origin = time.monotonic()
    for offset in ctx.moments(3 if ctx.short else 10):
        if not ctx.sleep_until(origin, offset):
            return
        children = _children(ctx.workers.pids()[0]) if ctx.workers.pids() else []
        if not children:
            continue
        child = ctx.rng.choice(children)
        at = time.time()
        child.kill()
        ctx.events.append(FaultEvent("swarm-child", at, time.time(), [child.pid]))


def kill_swarm_parent(ctx: Context) -> None:
    """Kill the parent, time how long its children outlive it, then start a new swarm."""
    origin = time.monotonic()
    outlived: list[float | None] = []
    for offset in ctx.moments(1 if ctx.short else 3):
        if not ctx.sleep_until(origin, offset):
            break
        if not _wait_staffed(ctx, 30):
            continue  # a swarm still forking its children is not the case under test
        parent = ctx.workers.hold(0)
        if parent is None:
            continue
        children = _children(parent.pid)
        at = time.time()
        parent.kill()
        parent.wait()
        gone = _wait_gone(children, ORPHAN_LIMIT + 3)
        outlived.append(gone)
        for child in children:  # what outlived the limit is stopped as a deploy would: TERM first
            child.terminate()
        _wait_gone(children, 15)
        for child in children:
            child.kill()
        ctx.workers.release(0)
        note = "children gone after %s" % (f"{gone:.2f} s" if gone is not None else f"> {ORPHAN_LIMIT + 3:.0f} s")
        ctx.events.append(FaultEvent("swarm-parent", at, time.time(), [parent.pid, *(c.pid for c in children)], note))
    ctx.observations["children_outlived_parent_s"] = outlived
    ctx.observations["children_stopped_within_5s"] = all(g is not None and g <= ORPHAN_LIMIT for g in outlived)


def _wait_staffed(ctx: Context, timeout: float) -> bool:
    """Wait until the swarm's parent has all its children."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not ctx.stop.is_set():
        pids = ctx.workers.pids()
        if pids and len(_children(pids[0])) >= ctx.peer.processes:
            return True
        time.sleep(0.1)
    return False


def _children(pid: int) -> list[Proc]:
    root = Proc.of(pid)
    return root.children() if root else []


def _wait_gone(procs: list[Proc], timeout: float) -> float | None:
    """Seconds until every process in ``procs`` is gone, or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not any(proc.alive() for proc in procs):
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def stop_redis(ctx: Context) -> None:
    origin = time.monotonic()
    for offset in ctx.moments(2 if ctx.short else 5):
        if not ctx.sleep_until(origin, offset):
            return
        process = ctx.broker.process
        assert process is not None
        pause = ctx.rng.uniform(1.0, 3.0)
        at = time.time()
        os.kill(process.pid, signal.SIGSTOP)
        time.sleep(pause)
        os.kill(process.pid, signal.SIGCONT)
        ctx.events.append(FaultEvent("redis-stop", at, time.time(), note=f"{pause:.2f} s"))


def restart_redis(ctx: Context) -> None:
    origin = time.monotonic()
    for offset in ctx.moments(1 if ctx.short else 3):
        if not ctx.sleep_until(origin, offset):
            return
        at = time.time()
        ctx.broker.stop()  # SIGTERM: the server writes its AOF and exits
        ctx.broker.start()
        ctx.events.append(FaultEvent("redis-restart", at, time.time()))


def cut_connections(ctx: Context) -> None:
    assert ctx.proxy is not None
    while not ctx.stop.wait(ctx.rng.uniform(0.5, 2.0)):
        at = time.time()
        cut = ctx.proxy.cut()
        ctx.events.append(FaultEvent("cut", at, at, note=f"{cut} connections"))


def lose_replies(ctx: Context) -> None:
    assert ctx.proxy is not None
    aims: list[tuple[str, Matcher]] = [
        ("any command", lambda args: True),
        ("any script", lambda args: args[0].upper() in (b"EVALSHA", b"EVAL", b"FCALL")),
        *ctx.peer.lost_reply_matchers(ctx.broker.url),
    ]
    turn = 0
    while not ctx.stop.wait(ctx.rng.uniform(0.5, 2.0)):
        if ctx.proxy.armed():
            continue  # the last one has not struck yet (its command is rare): no pile-up
        ctx.proxy.lose_reply(FaultProxy.first_sending(aims[turn % len(aims)][1]))
        turn += 1
    ctx.proxy.disarm()


def lost_reply_events(proxy: FaultProxy, scripts: dict[str, str]) -> list[FaultEvent]:
    """One event per reply the proxy dropped, named after its command (a script by its name)."""
    return [
        FaultEvent("lost-reply", at, at, note=_name(args, scripts))
        for at, args in zip(proxy.lost_at, proxy.lost, strict=True)
    ]


def _name(args: list[bytes], scripts: dict[str, str]) -> str:
    command = args[0].decode(errors="replace").upper()
    if command == "EVALSHA" and len(args) > 1:
        return scripts.get(args[1].decode(errors="replace"), "EVALSHA")
    return command


INJECTORS = {
    "kill": kill_workers,
    "swarm-child": kill_swarm_children,
    "swarm-parent": kill_swarm_parent,
    "redis-stop": stop_redis,
    "redis-restart": restart_redis,
    "cut": cut_connections,
    "lost-reply": lose_replies,
    "exit": None,
}
