"""The supervisor's respawn back-off, on a hand-set clock (no fork: nothing is due)."""

from __future__ import annotations

import wurk
from wurk_swarm.supervisor import BACKOFF_CAP, STABLE_AFTER, Supervisor, describe_exit
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


def test_exit_descriptions():
    assert describe_exit(0) == "status 0"
    assert describe_exit(3) == "status 3"
    assert describe_exit(-9) == "killed by SIGKILL"
