"""Resident memory of the swarm's parent and of each child, sampled every few seconds.

Read from ``/proc/<pid>/smaps_rollup`` (Linux): ``Rss`` is what ``ps`` and
psutil call RSS; ``Private_Clean + Private_Dirty`` (USS) is what the
process holds alone. A forked child's RSS also counts the pages it still
shares with its parent, so USS is the figure where a child's own leak
shows cleanest; both are reported.

The analysis, per process: its first sample, the first sample once it has
been up ``warmup`` seconds (imports settled, pools and caches filled, the
first jobs run), its last sample, its peak, and the slope of a straight
line fitted through its samples after warm-up, in KB per minute. A process
whose RSS grew after warm-up by more than ``max(8 MB, 10 %)`` is flagged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.procfs import Proc

GROWTH_FLAG_KB = 8 * 1024
GROWTH_FLAG_RATIO = 0.10


def read(pid: int) -> tuple[int, int] | None:
    """(RSS, USS) of ``pid`` in KB, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name] = int(parts[0])
    if "Rss" not in fields:
        return None
    return fields["Rss"], fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


@dataclass
class Series:
    pid: int
    role: str  # "parent" or "child"
    started: float  # wall time of its first sample
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (time, rss KB, uss KB)

    def analyze(self, warmup: float) -> dict[str, Any]:
        first = self.samples[0]
        warm_at = self.started + warmup
        warm = next((s for s in self.samples if s[0] >= warm_at), None)
        last = self.samples[-1]
        result: dict[str, Any] = {
            "pid": self.pid,
            "role": self.role,
            "lived_s": round(last[0] - first[0], 1),
            "samples": len(self.samples),
            "rss_kb": {"first": first[1], "after_warmup": warm[1] if warm else None, "end": last[1]},
            "uss_kb": {"first": first[2], "after_warmup": warm[2] if warm else None, "end": last[2]},
            "rss_peak_kb": max(s[1] for s in self.samples),
        }
        if warm is None:
            result["verdict"] = "too short-lived to judge"
            return result
        after = [s for s in self.samples if s[0] >= warm[0]]
        growth = last[1] - warm[1]
        result["rss_growth_after_warmup_kb"] = growth
        result["uss_growth_after_warmup_kb"] = last[2] - warm[2]
        result["rss_slope_kb_per_min"] = round(_slope([(s[0], s[1]) for s in after]) * 60, 1)
        result["uss_slope_kb_per_min"] = round(_slope([(s[0], s[2]) for s in after]) * 60, 1)
        result["judged_over_s"] = round(last[0] - warm[0], 1)
        flagged = growth > max(GROWTH_FLAG_KB, GROWTH_FLAG_RATIO * warm[1])
        result["verdict"] = "GROWS" if flagged else "flat"
        return result


def _slope(points: list[tuple[float, int]]) -> float:
    """Least-squares slope, units per second (0 for fewer than two points)."""
    if len(points) < 2:
        return 0.0
    mean_t = sum(p[0] for p in points) / len(points)
    mean_v = sum(p[1] for p in points) / len(points)
    spread = sum((p[0] - mean_t) ** 2 for p in points)
    return sum((p[0] - mean_t) * (p[1] - mean_v) for p in points) / spread if spread else 0.0


class Sampler:
    """Samples the swarm parent and its children every ``every`` seconds, in a thread."""

    def __init__(self, parent_pid: int, every: float) -> None:
        self.parent_pid = parent_pid
        self.every = every
        self.series: dict[tuple[int, int], Series] = {}  # (pid, start ticks) -> series: pids get reused
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-memory", daemon=True)

    def start(self) -> Sampler:
        self.sample()
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sample()

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        parent = Proc.of(self.parent_pid)
        if parent is None:
            return
        now = time.time()
        for proc, role in [(parent, "parent"), *((child, "child") for child in parent.children())]:
            figures = read(proc.pid)
            if figures is None:
                continue
            series = self.series.setdefault((proc.pid, proc.started), Series(proc.pid, role, now))
            series.samples.append((now, *figures))

    def analyze(self, warmup: float) -> list[dict[str, Any]]:
        ordered = sorted(self.series.values(), key=lambda s: (s.role != "parent", s.started))
        return [series.analyze(warmup) for series in ordered]
