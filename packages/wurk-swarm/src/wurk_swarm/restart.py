"""The rolling-restart machine: replace swarm children one slot at a time.

``USR1`` to the swarm parent and a memory breach (:mod:`wurk_swarm.memory`)
both end here. Each queued child goes through::

    spawn replacement -> await its first heartbeat -> TERM the old child
    -> await the old child's exit -> next slot

The old child keeps fetching until its replacement has heartbeated, so a slot
is never unstaffed; it then gets an ordinary TERM drain, so no job is dropped.

The machine never blocks and never sleeps: the supervisor calls :meth:`tick`
on its 0.2 s loop and each call advances at most one phase, so a ``TERM`` to
the parent lands within one tick whatever state a restart is in
(:meth:`RollingRestart.abort`). It does no process work itself; it drives the
supervisor through the :class:`Fleet` protocol, which keeps it pure logic.

Who answers for which pid: a replacement not yet adopted, and an old child
once it has been sent TERM, belong to the machine (:meth:`RollingRestart.owns`);
the supervisor must not respawn when they exit. Everything else, including a
child still queued, an old child waiting for its replacement's heartbeat, and
a replacement once adopted, is the supervisor's: if it crashes, the ordinary
respawn path applies.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["BACKOFF_CAP", "HEARTBEAT_WAIT", "Fleet", "RollingRestart"]

#: Seconds a replacement gets to write its first heartbeat before the old child
#: is sent TERM anyway (a slow boot must not stall the whole restart).
HEARTBEAT_WAIT = 30.0

#: Ceiling of the per-slot retry delay after failed replacements (1, 2, 4 … 30 s).
BACKOFF_CAP = 30.0


class Fleet(Protocol):
    """The supervisor's side: the process operations the machine asks for."""

    def spawn(self, slot: int) -> int | None:
        """Fork a replacement child for ``slot`` without making it the slot's
        child of record; its pid, or ``None`` when the fork failed."""
        ...

    def heartbeating(self, pid: int) -> bool:
        """Whether this child has written its first heartbeat."""
        ...

    def alive(self, pid: int) -> bool:
        """Whether this child has not been reaped yet."""
        ...

    def terminate(self, pid: int) -> None:
        """Send SIGTERM."""
        ...

    def kill(self, pid: int) -> None:
        """Send SIGKILL."""
        ...

    def adopt(self, slot: int, old_pid: int, new_pid: int) -> None:
        """Make ``new_pid`` the slot's child of record; ``old_pid`` is draining."""
        ...

    def discard(self, pid: int) -> None:
        """Forget a failed replacement (it is dead, or has just been killed)."""
        ...


class Phase(enum.Enum):
    AWAIT_HEARTBEAT = "await_heartbeat"
    TERM_OLD = "term_old"
    AWAIT_EXIT = "await_exit"


@dataclass
class _Request:
    """A child waiting its turn; ``not_before`` delays a slot after failures."""

    slot: int
    pid: int
    reason: str
    not_before: float = 0.0


@dataclass
class _Cycle:
    """The one slot in flight."""

    request: _Request
    new_pid: int
    phase: Phase
    deadline: float
    killed: bool = False


class RollingRestart:
    """Replace queued children one slot at a time, one phase per :meth:`tick`.

    ``exit_wait`` bounds an old child's drain (the shutdown timeout plus the
    swarm's grace); past it the old child is KILLed once and then awaited until
    the supervisor reaps it. ``heartbeat_wait`` bounds a replacement's boot.

    Example (the supervisor's loop)::

        restart = RollingRestart(fleet, exit_wait=timeout + grace, logger=log)
        for slot, pid in children.items():  # on USR1
            restart.request(slot, pid, "USR1")
        restart.tick()  # every 0.2 s
    """

    def __init__(
        self,
        fleet: Fleet,
        *,
        exit_wait: float,
        heartbeat_wait: float = HEARTBEAT_WAIT,
        logger: logging.Logger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fleet = fleet
        self._exit_wait = exit_wait
        self._heartbeat_wait = heartbeat_wait
        self._log = logger
        self._clock = clock
        self._queue: deque[_Request] = deque()
        self._cycle: _Cycle | None = None
        self._failures: dict[int, int] = {}  # slot -> replacements failed in a row
        self._aborted = False

    # -- the supervisor's questions -------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a slot is in flight or waiting (backoff included)."""
        return self._cycle is not None or bool(self._queue)

    def owns(self, pid: int) -> bool:
        """Whether the machine answers for ``pid``'s exit, so the supervisor
        must not respawn for it: a replacement not yet adopted, or an old
        child that has been sent TERM."""
        cycle = self._cycle
        if cycle is None:
            return False
        if cycle.phase is Phase.AWAIT_EXIT:
            return pid == cycle.request.pid
        return pid == cycle.new_pid

    # -- requests ---------------------------------------------------------------

    def request(self, slot: int, pid: int, reason: str) -> bool:
        """Queue ``pid`` (the child of record of ``slot``) for replacement.

        ``False`` when the pid is already queued or in flight (so a memory
        recycle cannot overlap a rolling restart of the same child), or after
        :meth:`abort`: a parent shutting down must not start new children.
        """
        if self._aborted or self._known(pid):
            return False
        self._queue.append(_Request(slot, pid, reason))
        return True

    def _known(self, pid: int) -> bool:
        # The slot's old child is in flight in every phase; the replacement only
        # until it is adopted, after which it may be queued like any child.
        if self.owns(pid) or (self._cycle is not None and pid == self._cycle.request.pid):
            return True
        return any(queued.pid == pid for queued in self._queue)

    def abort(self) -> list[int]:
        """Stop restarting (the parent got TERM) and return the replacement
        pids in flight, for the supervisor to drain as ordinary children.

        An old child already sent TERM is not returned: it is draining and the
        supervisor's own shutdown deadline covers it.
        """
        cycle, self._cycle = self._cycle, None
        self._queue.clear()
        self._aborted = True
        if cycle is None or cycle.phase is Phase.AWAIT_EXIT:
            return []  # after adoption the replacement is already a child of record
        self._log.info("swarm: rolling restart aborted; replacement %d drains with the rest", cycle.new_pid)
        return [cycle.new_pid]

    # -- the state machine ------------------------------------------------------

    def tick(self) -> None:
        """Advance at most one phase of the slot in flight, or start the next
        queued slot that is not backing off."""
        cycle = self._cycle
        if cycle is None:
            self._start()
        elif cycle.phase is Phase.AWAIT_HEARTBEAT:
            self._await_heartbeat(cycle)
        elif cycle.phase is Phase.TERM_OLD:
            self._term_old(cycle)
        else:
            self._await_exit(cycle)

    def _start(self) -> None:
        now = self._clock()
        request = next((queued for queued in self._queue if queued.not_before <= now), None)
        if request is None:
            return
        self._queue.remove(request)
        label = self._label(request)
        if not self._fleet.alive(request.pid):
            # It died while queued and the supervisor has respawned the slot:
            # that fresh fork is what a restart would have produced.
            self._log.info("%s: child %d already gone; nothing to replace", label, request.pid)
            return
        new_pid = self._fleet.spawn(request.slot)
        if new_pid is None:
            self._failed(request, f"{label}: could not fork a replacement for child {request.pid}")
            return
        self._log.info("%s: spawned replacement %d for child %d", label, new_pid, request.pid)
        self._cycle = _Cycle(request, new_pid, Phase.AWAIT_HEARTBEAT, now + self._heartbeat_wait)

    def _await_heartbeat(self, cycle: _Cycle) -> None:
        if self._lost(cycle):
            return
        label = self._label(cycle.request)
        if self._fleet.heartbeating(cycle.new_pid):
            self._log.info("%s: replacement %d heartbeating", label, cycle.new_pid)
            cycle.phase = Phase.TERM_OLD
        elif self._clock() >= cycle.deadline:
            self._log.warning(
                "%s: replacement %d sent no heartbeat within %gs; retiring child %d anyway",
                label,
                cycle.new_pid,
                self._heartbeat_wait,
                cycle.request.pid,
            )
            cycle.phase = Phase.TERM_OLD

    def _term_old(self, cycle: _Cycle) -> None:
        if self._lost(cycle):
            return
        request = cycle.request
        # Adopt first: from here the replacement is the slot's child, so a crash
        # of it while the old one drains takes the supervisor's respawn path.
        self._fleet.adopt(request.slot, request.pid, cycle.new_pid)
        self._fleet.terminate(request.pid)
        self._log.info("%s: TERM child %d, replaced by %d", self._label(request), request.pid, cycle.new_pid)
        cycle.phase = Phase.AWAIT_EXIT
        cycle.deadline = self._clock() + self._exit_wait

    def _await_exit(self, cycle: _Cycle) -> None:
        request = cycle.request
        label = self._label(request)
        if not self._fleet.alive(request.pid):
            self._log.info("%s: child %d exited; slot %d restarted", label, request.pid, request.slot)
            self._failures.pop(request.slot, None)
            self._cycle = None
        elif not cycle.killed and self._clock() >= cycle.deadline:
            self._log.warning("%s: child %d still running after %gs; KILL", label, request.pid, self._exit_wait)
            self._fleet.kill(request.pid)
            cycle.killed = True

    def _lost(self, cycle: _Cycle) -> bool:
        """Before the hand-over, check both children are still there; end the
        cycle and say so when either is not."""
        request = cycle.request
        label = self._label(request)
        if not self._fleet.alive(request.pid):
            # The old child crashed and the supervisor has already respawned
            # the slot, so the replacement would be a second child for it.
            self._log.warning(
                "%s: child %d died before the hand-over; killing surplus replacement %d",
                label,
                request.pid,
                cycle.new_pid,
            )
            if self._fleet.alive(cycle.new_pid):
                self._fleet.kill(cycle.new_pid)
            self._fleet.discard(cycle.new_pid)
            self._cycle = None
            return True
        if not self._fleet.alive(cycle.new_pid):
            self._fleet.discard(cycle.new_pid)
            self._cycle = None
            self._failed(request, f"{label}: replacement {cycle.new_pid} died before taking over")
            return True
        return False

    def _failed(self, request: _Request, what: str) -> None:
        """Keep the old child and retry its slot later, backing off 1, 2, 4 …
        30 s: a crash-looping release then leaves the old workers running
        instead of thrashing forks. The retry goes to the back of the queue so
        the other slots are not held up."""
        failures = self._failures[request.slot] = self._failures.get(request.slot, 0) + 1
        # The exponent is clamped so a release crash-looping for hours cannot
        # overflow the float.
        delay = min(2.0 ** min(failures - 1, 16), BACKOFF_CAP)
        request.not_before = self._clock() + delay
        self._queue.append(request)
        self._log.warning("%s; keeping child %d, retrying in %gs", what, request.pid, delay)

    @staticmethod
    def _label(request: _Request) -> str:
        return f"swarm: restart of slot {request.slot} ({request.reason})"
