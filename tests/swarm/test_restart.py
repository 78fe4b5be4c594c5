"""The rolling-restart machine, driven through a scripted fleet and a hand-set clock.

The machine is pure logic over the ``Fleet`` protocol (it never forks or
signals by itself), so a recording double is the whole world it sees: each
test moves the clock, says which children are alive or heartbeating, ticks,
and checks what the machine asked of the fleet. Real forks and signals are
the supervisor's tests.
"""

from __future__ import annotations

import logging

import pytest

from wurk_swarm.restart import BACKOFF_CAP, HEARTBEAT_WAIT, RollingRestart

EXIT_WAIT = 30.0  # a 25 s shutdown timeout plus the 5 s grace


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ScriptedFleet:
    """Children as sets of pids; every call the machine makes is recorded in order."""

    def __init__(self, children: dict[int, int]) -> None:
        self.of_record = dict(children)  # slot -> pid
        self.living = set(children.values())
        self.beating = set(children.values())
        self.calls: list[tuple[object, ...]] = []
        self.next_pid = 500
        self.fork_fails = False

    def spawn(self, slot: int) -> int | None:
        if self.fork_fails:
            self.calls.append(("spawn", slot, None))
            return None
        self.next_pid += 1
        self.living.add(self.next_pid)
        self.calls.append(("spawn", slot, self.next_pid))
        return self.next_pid

    def heartbeating(self, pid: int) -> bool:
        return pid in self.beating

    def alive(self, pid: int) -> bool:
        return pid in self.living

    def terminate(self, pid: int) -> None:
        self.calls.append(("terminate", pid))

    def kill(self, pid: int) -> None:
        self.calls.append(("kill", pid))

    def adopt(self, slot: int, old_pid: int, new_pid: int) -> None:
        assert self.of_record[slot] == old_pid
        self.of_record[slot] = new_pid
        self.calls.append(("adopt", slot, old_pid, new_pid))

    def discard(self, pid: int) -> None:
        self.calls.append(("discard", pid))

    # -- what the children do ------------------------------------------------

    def exits(self, pid: int) -> None:
        """The child exits and the supervisor reaps it."""
        self.living.discard(pid)
        self.beating.discard(pid)

    def heartbeat(self, pid: int) -> None:
        self.beating.add(pid)

    def take_calls(self) -> list[tuple[object, ...]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fleet() -> ScriptedFleet:
    return ScriptedFleet({0: 100, 1: 101, 2: 102})


@pytest.fixture
def machine(fleet: ScriptedFleet, clock: Clock) -> RollingRestart:
    return RollingRestart(fleet, exit_wait=EXIT_WAIT, logger=logging.getLogger("wurk.test.swarm"), clock=clock)


def replace_fully(machine: RollingRestart, fleet: ScriptedFleet, old: int) -> int:
    """Drive one slot through all four phases with a prompt replacement and
    a prompt drain; the replacement's pid."""
    machine.tick()
    new = fleet.next_pid
    fleet.heartbeat(new)
    machine.tick()
    machine.tick()
    fleet.exits(old)
    machine.tick()
    return new


# -- the four phases ----------------------------------------------------------


def test_a_request_goes_through_every_phase_one_per_tick(machine, fleet, caplog):
    caplog.set_level(logging.INFO, "wurk.test.swarm")
    assert not machine.active
    assert machine.request(0, 100, "USR1")
    assert machine.active
    assert fleet.calls == [], "a request alone does nothing until the next tick"

    machine.tick()  # spawn the replacement
    assert fleet.take_calls() == [("spawn", 0, 501)]

    machine.tick()  # await its heartbeat: not yet
    machine.tick()
    assert fleet.take_calls() == []

    fleet.heartbeat(501)
    machine.tick()  # heartbeat seen; the old child is not touched on the same tick
    assert fleet.take_calls() == []

    machine.tick()  # TERM the old child, adopting the replacement
    assert fleet.take_calls() == [("adopt", 0, 100, 501), ("terminate", 100)]
    assert fleet.of_record[0] == 501

    machine.tick()  # await the old child's exit: still draining
    assert fleet.take_calls() == []
    assert machine.active

    fleet.exits(100)
    machine.tick()  # exit confirmed: the slot is done
    assert fleet.take_calls() == []
    assert not machine.active

    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "swarm: restart of slot 0 (USR1): spawned replacement 501 for child 100",
        "swarm: restart of slot 0 (USR1): replacement 501 heartbeating",
        "swarm: restart of slot 0 (USR1): TERM child 100, replaced by 501",
        "swarm: restart of slot 0 (USR1): child 100 exited; slot 0 restarted",
    ]


def test_tick_without_requests_does_nothing(machine, fleet):
    for _ in range(5):
        machine.tick()
    assert fleet.calls == []
    assert not machine.active


# -- the two timeouts -------------------------------------------------------------


def test_no_heartbeat_within_the_wait_warns_and_retires_the_old_child_anyway(machine, fleet, clock, caplog):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.take_calls()

    clock.advance(HEARTBEAT_WAIT - 0.1)
    machine.tick()
    machine.tick()
    assert fleet.take_calls() == [], "the old child keeps its slot until the wait is over"

    clock.advance(0.1)
    machine.tick()  # timed out
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "swarm: restart of slot 0 (USR1): replacement 501 sent no heartbeat within 30s; retiring child 100 anyway"
    ]
    machine.tick()
    assert fleet.take_calls() == [("adopt", 0, 100, 501), ("terminate", 100)]


def test_the_heartbeat_wait_is_configurable(fleet, clock):
    machine = RollingRestart(fleet, exit_wait=EXIT_WAIT, heartbeat_wait=2.0, logger=logging.getLogger("t"), clock=clock)
    machine.request(0, 100, "USR1")
    machine.tick()
    clock.advance(2.0)
    machine.tick()
    machine.tick()
    assert ("terminate", 100) in fleet.calls


def test_an_old_child_past_the_exit_wait_is_killed_once_then_awaited(machine, fleet, clock, caplog):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.heartbeat(501)
    machine.tick()
    machine.tick()
    fleet.take_calls()  # spawn, adopt, terminate

    clock.advance(EXIT_WAIT - 0.1)
    machine.tick()
    assert fleet.take_calls() == []
    assert machine.owns(100)

    clock.advance(0.1)
    machine.tick()
    assert fleet.take_calls() == [("kill", 100)]
    assert "swarm: restart of slot 0 (USR1): child 100 still running after 30s; KILL" in caplog.messages

    clock.advance(60)
    for _ in range(3):
        machine.tick()
    assert fleet.take_calls() == [], "KILL is sent once; then the machine waits for the reaper"
    assert machine.active
    assert machine.owns(100)

    fleet.exits(100)
    machine.tick()
    assert not machine.active


# -- a replacement that fails -------------------------------------------------------


def test_a_replacement_dying_before_its_heartbeat_keeps_the_old_child_and_retries(machine, fleet, clock, caplog):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.exits(501)  # crashed while booting
    machine.tick()
    assert fleet.take_calls() == [("spawn", 0, 501), ("discard", 501)]
    assert fleet.of_record[0] == 100, "the old child keeps its slot"
    assert (
        "swarm: restart of slot 0 (USR1): replacement 501 died before taking over; keeping child 100, retrying in 1s"
        in caplog.messages
    )
    assert machine.active
    assert not machine.owns(501)
    assert not machine.owns(100)

    clock.advance(0.9)
    machine.tick()
    assert fleet.take_calls() == [], "backing off"
    clock.advance(0.1)
    machine.tick()
    assert fleet.take_calls() == [("spawn", 0, 502)]

    fleet.heartbeat(502)
    machine.tick()
    machine.tick()
    fleet.exits(100)
    machine.tick()
    assert fleet.of_record[0] == 502
    assert not machine.active


def test_the_backoff_doubles_per_failure_up_to_the_cap_and_resets_after_a_success(machine, fleet, clock, caplog):
    machine.request(0, 100, "USR1")
    delays = []
    for _ in range(8):
        machine.tick()  # spawn
        fleet.exits(fleet.next_pid)
        caplog.clear()
        machine.tick()  # noticed: backoff
        (warning,) = caplog.messages
        delays.append(float(warning.rsplit("retrying in ", 1)[1].rstrip("s")))
        clock.advance(delays[-1] - 0.01)
        machine.tick()
        assert fleet.calls[-1][0] == "discard", "not retried before its delay"
        clock.advance(0.01)
    assert delays == [1, 2, 4, 8, 16, BACKOFF_CAP, BACKOFF_CAP, BACKOFF_CAP]

    new = replace_fully(machine, fleet, 100)
    assert fleet.of_record[0] == new

    machine.request(0, new, "memory")
    machine.tick()
    fleet.exits(fleet.next_pid)
    caplog.clear()
    machine.tick()
    assert caplog.messages[-1].endswith("retrying in 1s"), "a success resets the slot's backoff"


def test_a_failed_fork_counts_as_a_failed_replacement(machine, fleet, clock, caplog):
    fleet.fork_fails = True
    machine.request(0, 100, "USR1")
    machine.tick()
    assert fleet.take_calls() == [("spawn", 0, None)]
    assert (
        "swarm: restart of slot 0 (USR1): could not fork a replacement for child 100; keeping child 100, retrying in 1s"
        in caplog.messages
    )
    clock.advance(1)
    machine.tick()
    assert "retrying in 2s" in caplog.messages[-1]

    fleet.fork_fails = False
    clock.advance(2)
    machine.tick()
    assert fleet.take_calls()[-1] == ("spawn", 0, 501)


def test_a_replacement_dying_after_its_heartbeat_but_before_the_term_still_keeps_the_old_child(machine, fleet):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.heartbeat(501)
    machine.tick()  # heartbeat seen
    fleet.exits(501)
    machine.tick()  # would TERM the old child: the replacement is gone
    assert fleet.take_calls() == [("spawn", 0, 501), ("discard", 501)]
    assert fleet.of_record[0] == 100


def test_a_slot_backing_off_does_not_hold_up_the_others(machine, fleet, clock):
    machine.request(0, 100, "USR1")
    machine.request(1, 101, "USR1")
    machine.tick()
    fleet.exits(501)
    machine.tick()  # slot 0 backs off for 1 s, going to the back of the queue
    fleet.take_calls()

    machine.tick()
    assert fleet.take_calls() == [("spawn", 1, 502)], "slot 1 goes ahead while slot 0 waits"
    fleet.heartbeat(502)
    clock.advance(5)  # slot 0's backoff is over, but one slot at a time
    machine.tick()
    machine.tick()
    assert fleet.take_calls() == [("adopt", 1, 101, 502), ("terminate", 101)]
    fleet.exits(101)
    machine.tick()
    machine.tick()
    assert fleet.take_calls() == [("spawn", 0, 503)]


# -- the old child dies on its own -----------------------------------------------


def test_an_old_child_crashing_before_the_hand_over_makes_the_replacement_surplus(machine, fleet, caplog):
    machine.request(0, 100, "USR1")
    machine.tick()
    assert not machine.owns(100), "until TERM, the old child's crash is the supervisor's to respawn"
    fleet.exits(100)  # the supervisor reaps it and respawns the slot itself
    machine.tick()
    assert fleet.take_calls() == [("spawn", 0, 501), ("kill", 501), ("discard", 501)]
    assert "killing surplus replacement 501" in caplog.messages[-1]
    assert not machine.active


def test_a_queued_child_that_has_died_is_skipped(machine, fleet):
    machine.request(0, 100, "USR1")
    machine.request(1, 101, "USR1")
    fleet.exits(100)
    machine.tick()
    assert fleet.calls == []
    machine.tick()
    assert fleet.take_calls() == [("spawn", 1, 501)]


# -- de-duplication ------------------------------------------------------------------


def test_requests_are_de_duplicated_by_pid(machine, fleet):
    assert machine.request(0, 100, "USR1")
    assert not machine.request(0, 100, "memory"), "already queued"
    machine.tick()
    assert not machine.request(0, 100, "memory"), "in flight"
    assert not machine.request(0, 501, "memory"), "the replacement in flight"
    fleet.heartbeat(501)
    machine.tick()
    machine.tick()
    assert not machine.request(0, 100, "memory"), "draining"
    assert machine.request(0, 501, "memory"), "the adopted replacement is a child like any other"
    fleet.exits(100)
    machine.tick()
    machine.tick()
    assert fleet.take_calls()[-1] == ("spawn", 0, 502)


def test_a_child_backing_off_is_still_queued_for_de_duplication(machine, fleet):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.exits(501)
    machine.tick()
    assert not machine.request(0, 100, "memory")


# -- several slots ---------------------------------------------------------------------


def test_slots_are_replaced_one_at_a_time_in_request_order(machine, fleet):
    for slot, pid in [(2, 102), (0, 100), (1, 101)]:
        machine.request(slot, pid, "USR1")
    order = []
    for old in (102, 100, 101):
        machine.tick()
        spawn = fleet.calls[-1]
        order.append(spawn[1])
        assert [c for c in fleet.calls if c[0] == "spawn"].count(spawn) == 1
        new = fleet.next_pid
        assert machine.owns(new)
        fleet.heartbeat(new)
        machine.tick()
        machine.tick()
        assert machine.owns(old)
        assert not machine.owns(new)
        fleet.exits(old)
        machine.tick()
        assert not machine.owns(old)
    assert order == [2, 0, 1]
    assert fleet.of_record == {0: 502, 1: 503, 2: 501}
    spawns_before_exit = [c for c in fleet.calls if c[0] in ("spawn", "terminate")]
    assert spawns_before_exit == [
        ("spawn", 2, 501),
        ("terminate", 102),
        ("spawn", 0, 502),
        ("terminate", 100),
        ("spawn", 1, 503),
        ("terminate", 101),
    ], "never two slots in flight"
    assert not machine.active


# -- owns -----------------------------------------------------------------------------------


def test_owns_follows_the_hand_over(machine, fleet):
    assert not machine.owns(100)
    machine.request(0, 100, "USR1")
    assert not machine.owns(100), "queued children are still the supervisor's"
    machine.tick()
    assert machine.owns(501)
    assert not machine.owns(100)
    fleet.heartbeat(501)
    machine.tick()
    assert machine.owns(501)
    assert not machine.owns(100)
    machine.tick()  # TERM + adopt
    assert machine.owns(100)
    assert not machine.owns(501)
    assert not machine.owns(101)
    fleet.exits(100)
    machine.tick()
    assert not machine.owns(100)
    assert not machine.owns(501)


# -- abort ----------------------------------------------------------------------------------


def test_abort_while_awaiting_the_heartbeat_hands_back_the_replacement(machine, fleet):
    machine.request(0, 100, "USR1")
    machine.request(1, 101, "USR1")
    machine.tick()
    fleet.take_calls()
    assert machine.abort() == [501]
    assert not machine.active
    assert not machine.owns(501)
    assert not machine.owns(100)
    for _ in range(3):
        machine.tick()
    assert fleet.calls == [], "nothing more is spawned, signalled or adopted"
    assert fleet.of_record[0] == 100
    assert not machine.request(2, 102, "memory"), "a parent shutting down starts no replacements"


def test_abort_after_the_hand_over_has_no_replacement_to_hand_back(machine, fleet):
    machine.request(0, 100, "USR1")
    machine.tick()
    fleet.heartbeat(501)
    machine.tick()
    machine.tick()
    assert machine.abort() == [], "501 is already the slot's child of record"
    assert not machine.owns(100), "the draining old child is the supervisor's shutdown's now"


def test_abort_while_backing_off_or_idle_returns_nothing(machine, fleet):
    assert machine.abort() == []
    other = RollingRestart(fleet, exit_wait=EXIT_WAIT, logger=logging.getLogger("t"), clock=lambda: 0.0)
    other.request(0, 100, "USR1")
    other.tick()
    fleet.exits(fleet.next_pid)
    other.tick()
    assert other.active
    assert other.abort() == []
    assert not other.active
