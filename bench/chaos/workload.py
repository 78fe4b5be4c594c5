"""The jobs of one scenario: which keys, how long each takes, when each is pushed.

The plan is drawn from a seeded generator, so two libraries (or two runs)
facing the same fault get the same jobs at the same offsets. Jobs are pushed
over the first 80% of the fault window rather than all up front: the faults
then strike while jobs are being pushed, claimed, run, acknowledged and
promoted from the schedule, not only while a backlog drains.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

#: Share of the jobs pushed with a delay (``perform_in`` and its peers), so
#: the scheduler's promotion runs under the fault too.
SCHEDULED_SHARE = 0.1
#: Jobs that crash their process on their first run only, in the ``exit`` fault.
CRASH_ONCE = 8
#: Jobs that crash their process on every run (poison pills), in the ``exit`` fault.
POISON = 2


@dataclass(frozen=True)
class PlannedJob:
    key: str
    ms: int  # how long the job sleeps
    mode: str  # "" | "crash1" | "crash"
    at: float  # seconds after the window opens that it is pushed
    delay: float  # seconds it waits in the schedule (0: pushed to the queue)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def plan(jobs: int, window: float, *, crashes: bool, seed: int) -> list[PlannedJob]:
    """``jobs`` jobs pushed over ``window`` seconds; ``crashes`` adds the crashing ones."""
    rng = random.Random(seed)
    planned: list[PlannedJob] = []
    span = window * 0.8
    modes = [""] * jobs
    if crashes:
        picks = rng.sample(range(jobs // 10, jobs), CRASH_ONCE + POISON)
        for index in picks[:CRASH_ONCE]:
            modes[index] = "crash1"
        for index in picks[CRASH_ONCE:]:
            modes[index] = "crash"
    for index in range(jobs):
        delay = 0.0
        if rng.random() < SCHEDULED_SHARE and not modes[index]:
            delay = round(rng.uniform(1.0, max(2.0, window * 0.3)), 3)
        at = round(span * index / jobs, 4)
        planned.append(PlannedJob(f"j{index:06d}", rng.randint(10, 150), modes[index], at, delay))
    return planned


def warm_up() -> PlannedJob:
    """The job pushed before the window opens: its run shows the workers are up."""
    return PlannedJob("warm", 0, "", 0.0, 0.0)
