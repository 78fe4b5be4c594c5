"""The swarm parent: forks one worker per topology assignment and keeps them staffed.

The parent loaded the application once; every child is a fork of it, so the
children share its memory copy-on-write (``gc.freeze()`` before each fork keeps
the collector from touching, and so copying, the inherited objects). The
parent holds no Redis connection: its pools are closed before every fork, and
a child reports its first heartbeat through a pipe created before the fork.

Everything runs on one thread, at a 0.2 s tick, and never blocks: signals
become names on a queue (as in :mod:`wurk.server.runner`), exits are collected with
``waitpid(pid, WNOHANG)`` for our own pids only (as PID 1 in a container,
reparented grandchildren are not ours to reap), and the rolling-restart
machine (:mod:`wurk_swarm.restart`) advances one phase per tick, so a ``TERM``
always lands within a tick.

A *slot* is an index into the topology's assignments. Each slot has one child
of record; a rolling restart briefly adds a replacement (and then an old child
draining) beside it. Signals:

* ``TERM``/``INT``: abort any restart, relay ``TERM``, wait ``timeout +
  swarm_shutdown_grace`` seconds, ``KILL`` what is left, exit 0;
* ``TSTP``: relay, and remember it (sticky: later forks boot quiet);
* ``USR2``: reopen the parent's logs and relay;
* ``USR1``: queue every child of record for a rolling restart.

The children watch the parent in turn (:func:`wurk_swarm.child.orphaned`): a
parent that dies without draining them (``kill -9``, an out-of-memory kill)
leaves no child running unsupervised: each notices within about half a
second and stops as on ``TERM``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import queue
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wurk.errors import ConfigurationError, PluginError
from wurk.server.logger import reopen
from wurk_swarm.child import REFUSED_EXIT, run_child
from wurk_swarm.memory import MEMORY_CHECK_INTERVAL, MemoryWatch, memory_limit_mb
from wurk_swarm.restart import RollingRestart

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk_swarm.topology import Topology

__all__ = ["HANDLED", "TICK", "Supervisor"]

#: Seconds between two supervision passes.
TICK = 0.2

#: Seconds between two reaping passes once the stragglers of a shutdown have
#: been sent KILL: the parent exits as soon as the kernel has ended them.
KILL_POLL = 0.01

#: The per-slot respawn delay after a crash: 1 s, doubling, capped at 30 s.
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0

#: A child that lived this long before crashing resets its slot's back-off:
#: an occasional crash is not a crash loop.
STABLE_AFTER = 60.0

#: Fallback when the plugin's settings are not registered (plugin switched off).
DEFAULT_GRACE = 5.0

#: The swarm's exit status once a child refused its configuration: ``wurk``'s
#: own for a refused configuration.
REFUSED_STATUS = 2

#: The signals the parent traps; explicit, so it works as PID 1 (which has no
#: default dispositions).
HANDLED = ("TERM", "INT", "TSTP", "USR1", "USR2")


@dataclass
class Child:
    """One forked process that has not been reaped yet."""

    pid: int
    slot: int
    born: float
    #: Read end of the child's heartbeat pipe, until the byte or EOF arrives.
    beat_fd: int | None
    heartbeating: bool = False


class Supervisor:
    """Forks, watches and signals the swarm's children (the restart machine's :class:`Fleet`)."""

    def __init__(self, config: Config, topology: Topology, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.logger: logging.Logger = config.logger
        self.assignments = topology.assignments
        self._clock = clock
        self.children: dict[int, Child] = {}
        #: slot -> the pid answering for it (a rolling restart moves it with ``adopt``).
        self.of_record: dict[int, int] = {}
        self._respawn_at: dict[int, float] = {}
        self._crashes: dict[int, int] = {}
        self._exits: dict[int, tuple[int, float]] = {}  # pid -> (exit code, seconds lived), until acted on
        self.quiet = False
        #: Whether a child refused its configuration, which stops the swarm.
        self.refused = False
        self.deadline: float | None = None
        self._killed = False
        self._names: queue.SimpleQueue[str] = queue.SimpleQueue()
        grace = float(config.get("swarm_shutdown_grace") or DEFAULT_GRACE)
        self.exit_wait = float(config["timeout"]) + grace
        self.restart = RollingRestart(self, exit_wait=self.exit_wait, logger=self.logger, clock=clock)
        interval = float(config.get("swarm_memory_interval") or MEMORY_CHECK_INTERVAL)
        self.memory = MemoryWatch(memory_limit_mb(config), interval=interval, clock=clock)

    # -- running ------------------------------------------------------------------

    def run(self) -> int:
        """Fork the fleet and supervise it until a ``TERM`` has drained it; the exit status."""
        with self._trapped():
            self.logger.info(
                "swarm: starting %d children (timeout %gs, KILL after %gs)",
                len(self.assignments),
                float(self.config["timeout"]),
                self.exit_wait,
            )
            for slot in range(len(self.assignments)):
                self._start(slot)
            while self.deadline is None or self.children:
                self._wait_for_signals(self._pause())
                self.tick()
            self.logger.info("swarm: every child has exited; bye")
        return REFUSED_STATUS if self.refused else 0

    @contextlib.contextmanager
    def _trapped(self) -> Iterator[None]:
        previous = {}
        for name in HANDLED:
            signum = getattr(signal, f"SIG{name}")
            previous[signum] = signal.signal(signum, self._on_signal)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for child in self.children.values():
                self._close_beat(child)

    def _on_signal(self, number: int, frame: object) -> None:
        self._names.put(signal.Signals(number).name[3:])

    def _pause(self) -> float:
        """Seconds until the next pass: a tick, but never past the shutdown's
        KILL deadline, and only a moment once the stragglers have been killed,
        so that the parent exits within ``timeout + grace`` and not a tick or
        two later."""
        if self.deadline is None:
            return TICK
        if self._killed:
            return KILL_POLL
        return max(0.0, min(TICK, self.deadline - self._clock()))

    def _wait_for_signals(self, seconds: float) -> None:
        """Act on every signal that arrives within ``seconds``, then return for the tick."""
        until = self._clock() + seconds
        while (left := until - self._clock()) > 0:
            try:
                name = self._names.get(timeout=left)
            except queue.Empty:
                return
            self.handle(name)

    def handle(self, name: str) -> None:
        """Act on one signal name."""
        if name in ("TERM", "INT"):
            self.stop(name)
        elif name == "TSTP":
            self.quiet = True
            self.logger.info("swarm: quiet; relaying TSTP to %d children (later forks boot quiet)", len(self.children))
            self._relay(signal.SIGTSTP)
        elif name == "USR2":
            reopen(self.logger)
            self._relay(signal.SIGUSR2)
        elif name == "USR1":
            self.rolling_restart()

    def stop(self, name: str = "TERM", *, why: str = "") -> None:
        """Begin the shutdown: no more forks, ``TERM`` to every child, ``KILL`` at
        the deadline. ``why`` replaces "received TERM" in the log line."""
        if self.deadline is not None:
            self.logger.info("swarm: received %s again; already stopping", name)
            return
        self.restart.abort()  # replacements in flight are in self.children: they drain with the rest
        self._respawn_at.clear()
        self.deadline = self._clock() + self.exit_wait
        count = len(self.children)
        self.logger.info(
            "swarm: %s; stopping %d %s (KILL after %gs)",
            why or f"received {name}",
            count,
            "child" if count == 1 else "children",
            self.exit_wait,
        )
        self._relay(signal.SIGTERM)

    def rolling_restart(self) -> None:
        """Queue every child of record for replacement (``USR1``)."""
        if self.deadline is not None:
            self.logger.info("swarm: received USR1 while stopping; ignoring")
            return
        queued = sum(
            self.restart.request(slot, pid, "USR1")
            for slot, pid in sorted(self.of_record.items())
            if pid in self.children
        )
        self.logger.info("swarm: rolling restart of %d children", queued)

    # -- the tick -------------------------------------------------------------------

    def tick(self) -> None:
        """One supervision pass: heartbeats, exits, then restarts, respawns and memory."""
        self._read_beats()
        self._reap()
        if self.deadline is not None:
            self._enforce_deadline()
            return
        self.restart.tick()
        self._staff()
        self._check_memory()

    def _read_beats(self) -> None:
        for child in self.children.values():
            if child.beat_fd is None:
                continue
            try:
                data = os.read(child.beat_fd, 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            child.heartbeating = child.heartbeating or bool(data)
            self._close_beat(child)  # one byte, or EOF: the pipe has said all it will

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (someone called wait()): gone all the same
                done, status = pid, 0
            if done == 0:
                continue
            child = self.children.pop(pid)
            self._close_beat(child)
            code = os.waitstatus_to_exitcode(status)
            lived = self._clock() - child.born
            if self.deadline is not None:
                self.logger.info("swarm: child %d exited (%s)", pid, describe_exit(code))
            elif code == REFUSED_EXIT:
                self.refused = True
                self.stop(why=f"child {pid} refused its configuration (its line above says why)")
            else:
                self._exits[pid] = (code, lived)
                self.logger.debug("swarm: child %d exited (%s) after %.1fs", pid, describe_exit(code), lived)

    def _staff(self) -> None:
        """Give every slot a child: schedule a respawn for a slot whose child of
        record died outside the restart machine, and fork the ones now due."""
        now = self._clock()
        for slot in range(len(self.assignments)):
            pid = self.of_record.get(slot)
            if pid is not None:
                if pid in self.children or self.restart.owns(pid):
                    continue
                del self.of_record[slot]
                code, lived = self._exits.get(pid, (None, 0.0))
                what = "exited" if code is None else describe_exit(code)
                self._schedule_respawn(slot, f"child {pid} of slot {slot} {what} after {lived:.1f}s", lived)
            elif slot in self._respawn_at and now >= self._respawn_at[slot]:
                del self._respawn_at[slot]
                self._start(slot)
        self._exits.clear()  # the exits of replacements and drained children need nothing more

    def _schedule_respawn(self, slot: int, what: str, lived: float = 0.0) -> None:
        if lived >= STABLE_AFTER:
            self._crashes.pop(slot, None)
        crashes = self._crashes[slot] = self._crashes.get(slot, 0) + 1
        delay = min(BACKOFF_BASE * 2.0 ** min(crashes - 1, 16), BACKOFF_CAP)
        self._respawn_at[slot] = self._clock() + delay
        self.logger.warning("swarm: %s; respawning in %gs", what, delay)

    def _enforce_deadline(self) -> None:
        if self._killed or self.deadline is None or self._clock() < self.deadline or not self.children:
            return
        self._killed = True
        for pid in list(self.children):
            self.logger.warning("swarm: child %d still running after %gs; KILL", pid, self.exit_wait)
            self.kill(pid)

    def _check_memory(self) -> None:
        slot_of = {pid: slot for slot, pid in self.of_record.items() if pid in self.children}
        for pid, rss in self.memory.over(slot_of):
            if self.restart.request(slot_of[pid], pid, "memory"):
                self.logger.warning(self.memory.message(pid, rss))

    def _start(self, slot: int) -> None:
        pid = self.spawn(slot)
        if pid is None:
            self._schedule_respawn(slot, f"no child for slot {slot}")
            return
        self.of_record[slot] = pid

    # -- Fleet: what the restart machine asks of the supervisor ----------------------

    def spawn(self, slot: int) -> int | None:
        """Fork a child for ``slot``; its pid, or None when the fork failed."""
        assignment = self.assignments[slot]
        read_fd, write_fd = os.pipe()  # not inheritable (PEP 446): an exec in the child drops it
        os.set_blocking(read_fd, False)
        self.config.reset_redis_pools()  # the child builds its own, sized for its slot
        gc.freeze()  # the inherited objects stay shared: the collector never writes to them
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()  # before the fork: the child compares its getppid() with it
        blocked = {getattr(signal, f"SIG{name}") for name in HANDLED}
        # Blocked across the fork: a signal to the new child before it has its
        # own handlers waits for them instead of landing in the parent's.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(read_fd)
            os.close(write_fd)
            self.logger.error("swarm: could not fork a child for slot %d: %s", slot, exc)
            return None
        if pid == 0:
            self._become_child(slot, read_fd, write_fd, mask, parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_fd)
        self.children[pid] = Child(pid, slot, self._clock(), read_fd)
        self.logger.info(
            "swarm: child %d started for slot %d (queues %s, concurrency %d%s)",
            pid,
            slot,
            ",".join(assignment.queues),
            assignment.concurrency,
            ", quiet" if self.quiet else "",
        )
        return pid

    def heartbeating(self, pid: int) -> bool:
        child = self.children.get(pid)
        return child is not None and child.heartbeating

    def alive(self, pid: int) -> bool:
        return pid in self.children

    def terminate(self, pid: int) -> None:
        self._signal(pid, signal.SIGTERM)

    def kill(self, pid: int) -> None:
        self._signal(pid, signal.SIGKILL)

    def adopt(self, slot: int, old_pid: int, new_pid: int) -> None:
        self.of_record[slot] = new_pid
        self._exits.pop(old_pid, None)

    def discard(self, pid: int) -> None:
        """A failed replacement: it is not a slot's child, so its exit is reaped
        and otherwise ignored; only its pipe is closed now."""
        child = self.children.get(pid)
        if child is not None:
            self._close_beat(child)

    # -- helpers ------------------------------------------------------------------

    def _relay(self, signum: int) -> None:
        for pid in list(self.children):
            self._signal(pid, signum)

    def _signal(self, pid: int, signum: int) -> None:
        # Only pids not yet reaped: a reaped pid may already belong to a stranger.
        if pid not in self.children:
            return
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # exited since the last reap; the next tick collects it
            pass

    @staticmethod
    def _close_beat(child: Child) -> None:
        if child.beat_fd is not None:
            with contextlib.suppress(OSError):
                os.close(child.beat_fd)
            child.beat_fd = None

    def _become_child(self, slot: int, read_fd: int, write_fd: int, mask: Iterable[int], parent: int) -> None:
        """The forked side: run the worker and leave with ``os._exit``, never
        returning into the parent's loop (nor running its ``atexit`` hooks)."""
        code = 1
        try:
            os.close(read_fd)
            for sibling in self.children.values():
                self._close_beat(sibling)
            self.children.clear()
            code = run_child(
                self.config, self.assignments[slot], quiet=self.quiet, beat_fd=write_fd, parent=parent, mask=mask
            )
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except (ConfigurationError, PluginError) as exc:
            # The user's to fix, in one line: a traceback would bury it.
            self.logger.error("swarm child %d: %s", os.getpid(), exc)
            code = REFUSED_EXIT
        except BaseException:
            self.logger.error("swarm child %d crashed:\n%s", os.getpid(), traceback.format_exc().rstrip())
        finally:
            for handler in self.logger.handlers:
                with contextlib.suppress(Exception):
                    handler.flush()
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)


def describe_exit(code: int) -> str:
    """``status 1`` or ``killed by SIGKILL``, from ``waitstatus_to_exitcode``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"status {code}"
