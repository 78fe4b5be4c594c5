"""Judging a scenario from the ledger: accepted, executed, lost, duplicates, recovery.

* **accepted**: pushes that returned. From then on the library owes one run.
* **executed**: accepted jobs with at least one run that reached its end.
* **lost**: accepted jobs that never ran to the end by the deadline (poison
  pills aside: those are meant never to finish).
* **duplicates**: runs beyond the one a job needed (a job that crashed its
  process once needs two). A duplicate is *explained* when the run before it
  was in flight at a fault: a kill or crash took down the very process it
  ran in, after it started; or a connection fault (cut, lost reply, server
  stop or restart) struck between the two runs' starts. The *bound* is what
  the faults could explain at most: for each fault, the jobs the processes
  it hit can hold started and unacknowledged.
* **recovery**: for a kill or crash, the time until every job interrupted in
  the dead process has started again; for a connection fault, the time from
  its end until the next job finished.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from chaos.faults import FaultEvent
from chaos.ledger import Execution, Ledger
from chaos.peers.base import Peer
from chaos.workload import PlannedJob

PROCESS_FAULTS = frozenset({"kill", "swarm-child", "swarm-parent", "exit"})


def crash_events(plan: list[PlannedJob], ledger: Ledger) -> list[FaultEvent]:
    """The crashes the ``exit`` jobs caused, read from their own ledger entries."""
    modes = {job.key: job.mode for job in plan if job.mode}
    events = []
    for key, mode in modes.items():
        for run in ledger.runs.get(key, []):
            if mode == "crash" or run.attempt == 1:
                events.append(FaultEvent("exit", run.start, run.start + DYING, [run.pid], key))
    return events


#: How long a process lives on after a job in it recorded its ``os._exit``.
DYING = 1.0


def _explains(event: FaultEvent, before: Execution, again: Execution) -> bool:
    if event.kind in PROCESS_FAULTS:
        # Nothing starts in a dead process: a run in one that a fault killed was in flight.
        return before.pid in event.pids and before.start <= event.end
    return before.start <= event.end and event.start <= again.start


def _bound(event: FaultEvent, peer: Peer) -> int:
    if event.kind in PROCESS_FAULTS and event.kind != "swarm-parent":
        return peer.held_per_process()
    return peer.processes * peer.held_per_process()


def _recovery(event: FaultEvent, ledger: Ledger, ends: list[float]) -> float | None:
    """Seconds until work resumed after ``event``; None if it never did, NaN if
    nothing was waiting (a kill that caught no job in flight)."""
    if event.kind in PROCESS_FAULTS:
        waits = []
        for runs in ledger.runs.values():
            for index, run in enumerate(runs):
                if run.pid in event.pids and run.start <= event.end and run.end is None:
                    later = runs[index + 1] if index + 1 < len(runs) else None
                    if later is None:
                        return None
                    waits.append(later.start - event.start)
        return max(waits, default=math.nan)
    after = [end for end in ends if end >= event.end]
    return min(after) - event.end if after else math.nan


def analyze(
    peer: Peer,
    fault: str,
    plan: list[PlannedJob],
    accepted: set[str],
    refused: set[str],
    ledger: Ledger,
    events: list[FaultEvent],
    window: tuple[float, float],
) -> dict[str, Any]:
    modes = {job.key: job.mode for job in plan}
    poison = {key for key, mode in modes.items() if mode == "crash"}
    events = sorted(events + crash_events(plan, ledger), key=lambda event: event.start)
    completed = ledger.completed()
    owed = accepted - poison
    lost = sorted(owed - completed)

    duplicates = explained = 0
    unexplained: list[dict[str, Any]] = []
    for key, runs in ledger.runs.items():
        if key in poison or key not in modes:
            continue
        needed = 2 if modes[key] == "crash1" and runs[0].end is None else 1
        for before, again in itertools.pairwise(runs):
            if again.attempt <= needed:
                continue
            duplicates += 1
            if any(_explains(event, before, again) for event in events):
                explained += 1
            elif len(unexplained) < 10:
                unexplained.append({"key": key, "runs": [[r.pid, round(r.start, 3), r.end] for r in runs]})

    ends = sorted(run.end for runs in ledger.runs.values() for run in runs if run.end is not None)
    recoveries: dict[str, list[float]] = defaultdict(list)
    unrecovered = 0
    for event in events:
        if event.kind == "exit" and event.note in poison:
            continue  # a poison pill's crash is judged by its runs, not by its recovery
        waited = _recovery(event, ledger, ends)
        if waited is None:
            unrecovered += 1
        elif not math.isnan(waited):
            recoveries[event.kind].append(waited)
    recover = [value for values in recoveries.values() for value in values]
    return {
        "peer": peer.name,
        "fault": fault,
        "faults_injected": {
            kind: sum(1 for e in events if e.kind == kind) for kind in sorted({e.kind for e in events})
        },
        "planned": len(plan),
        "accepted": len(accepted),
        "refused": len(refused),
        "executed": len(owed & completed),
        "lost": len(lost),
        "lost_keys": lost[:20],
        "ran_though_refused": len(refused & completed),
        "executions": ledger.executions(),
        "duplicates": duplicates,
        "duplicates_explained": explained,
        "duplicates_unexplained": unexplained,
        "in_flight_bound": sum(
            _bound(event, peer) for event in events if event.kind != "exit" or event.note not in poison
        ),
        "recover_median_s": round(statistics.median(recover), 3) if recover else None,
        "recover_max_s": round(max(recover), 3) if recover else None,
        "interrupted_never_rerun": unrecovered,
        "poison_runs": {key: len(ledger.runs.get(key, [])) for key in sorted(poison)},
        "cron": cron_ticks(ledger, window) if peer.name == "wurk" else None,
        "events": [event.as_json() for event in events if event.kind != "lost-reply"][:200],
        "lost_replies": dict(Counter(event.note for event in events if event.kind == "lost-reply").most_common()),
    }


def cron_ticks(ledger: Ledger, window: tuple[float, float]) -> dict[str, int]:
    """Each minute boundary inside the window should have exactly one cron run (one jid)."""
    by_minute: dict[int, set[str]] = defaultdict(set)
    for key, runs in ledger.runs.items():
        if key.startswith("cron-"):
            by_minute[int(runs[0].start // 60)].add(key)
    expected = [m for m in range(int(window[0] // 60) + 1, int(window[1] // 60) + 1) if m * 60 <= window[1] - 5]
    return {
        "expected": len(expected),
        "once": sum(1 for m in expected if len(by_minute.get(m, ())) == 1),
        "twice_or_more": sum(1 for m in by_minute if len(by_minute[m]) > 1),
        "missed": sum(1 for m in expected if not by_minute.get(m)),
    }


COLUMNS = ("peer", "fault", "accepted", "executed", "lost", "dups", "explained", "bound", "recover", "note")


def row(result: dict[str, Any]) -> list[str]:
    recover = result["recover_max_s"]
    notes = []
    if result["poison_runs"]:
        notes.append("poison runs " + "/".join(str(n) for n in result["poison_runs"].values()))
    if result.get("cron") and result["cron"]["expected"]:
        cron = result["cron"]
        notes.append(f"cron {cron['once']}/{cron['expected']} once, {cron['twice_or_more']} twice")
    if result["interrupted_never_rerun"]:
        notes.append(f"{result['interrupted_never_rerun']} kills' jobs never rerun")
    if "children_outlived_parent_s" in result:
        outlived = [f"{s:.1f}" if s is not None else ">8" for s in result["children_outlived_parent_s"]]
        notes.append("children outlived parent by " + ",".join(outlived) + " s")
    if result["refused"]:
        notes.append(f"{result['refused']} pushes refused")
    return [
        result["peer"],
        result["fault"],
        str(result["accepted"]),
        str(result["executed"]),
        str(result["lost"]),
        str(result["duplicates"]),
        str(result["duplicates_explained"]),
        str(result["in_flight_bound"]),
        "-" if recover is None else f"{recover:.2f} s",
        "; ".join(notes),
    ]


def table(results: list[dict[str, Any]]) -> str:
    rows = [list(COLUMNS), *(row(result) for result in results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
