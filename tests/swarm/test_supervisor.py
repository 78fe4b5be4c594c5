"""The supervisor's respawn back-off and shutdown pacing, on a hand-set clock (no fork: nothing is due)."""

from __future__ import annotations

import wurk
from wurk_swarm.supervisor import BACKOFF_CAP, KILL_POLL, STABLE_AFTER, TICK, Supervisor, describe_exit
from wurk_swarm.topology import Topology


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_crash_looping_slot_backs_off_doubling_to_the_cap_and_a_long_life_resets_it():
    clock = Clock()
    supervisor = Supervisor(wurk.Config(), Topology.flat(2, ["default"], 1), clock=clock)
    delays = []
    for _ in range(8):
        supervisor._schedule_respawn(0, "child 7 of slot 0 status 1 after 0.1s", lived=0.1)
        delays.append(supervisor._respawn_at[0] - clock.now)
    assert delays == [1, 2, 4, 8, 16, BACKOFF_CAP, BACKOFF_CAP, BACKOFF_CAP]
    supervisor._schedule_respawn(1, "child 8 of slot 1 status 1 after 0.1s", lived=0.1)
    assert supervisor._respawn_at[1] - clock.now == 1  # per slot
    supervisor._schedule_respawn(0, "child 9 of slot 0 killed by SIGKILL after 61s", lived=STABLE_AFTER + 1)
    assert supervisor._respawn_at[0] - clock.now == 1  # an occasional crash is not a loop


def test_the_kill_deadline_is_the_timeout_plus_the_grace():
    config = wurk.Config()
    config["timeout"] = 7
    assert Supervisor(config, Topology.flat(1, ["default"], 1)).exit_wait == 12


def test_the_pause_between_passes_never_runs_past_the_kill_deadline():
    clock = Clock()
    config = wurk.Config()
    config["timeout"] = 7
    supervisor = Supervisor(config, Topology.flat(1, ["default"], 1), clock=clock)
    assert supervisor._pause() == TICK  # running: the ordinary tick
    supervisor.stop()  # no child forked: nothing to relay, only the deadline is set
    assert supervisor._pause() == TICK
    clock.now += 12 - 0.05
    assert abs(supervisor._pause() - 0.05) < 1e-9  # wakes at the deadline, not up to a tick after it
    clock.now += 1
    assert supervisor._pause() == 0
    supervisor._killed = True  # what the deadline pass sets once it has sent KILL
    assert supervisor._pause() == KILL_POLL < TICK  # then reaps at once, and the parent exits


def test_exit_descriptions():
    assert describe_exit(0) == "status 0"
    assert describe_exit(3) == "status 3"
    assert describe_exit(-9) == "killed by SIGKILL"
