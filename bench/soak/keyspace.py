"""The broker's keyspace, read whole and sorted by what each key is for.

Every key Wurk and its plugins write falls under one of these categories,
each with what the soak expects of it at the end:

* ``work``: a job's or a batch's state in transit (queues, private lists,
  ``schedule``/``retry``/``dead``, unique locks, a batch's hash and sets,
  crash suspects). At the end, with every job finished and every batch's
  linger over, none may be left: one left over is stranded work.
* ``fixed``: a bounded number of keys whatever the number of jobs (the
  process registry, counters, a limiter's metadata, the batch index, the
  leader's lock): present at the end as at any other time.
* ``expiring``: keys of one process or one thread with a short TTL
  (heartbeats, write fences, locks): a process killed or restarted leaves
  its own until the TTL ends it.
* ``retained``: kept on purpose for a documented time, one per event
  (a crash recovery's count, a fired batch callback's marker).
* ``metrics``: the per-minute execution metrics, with their TTLs.

A key that matches no pattern is ``unexplained``. Each pattern says the
longest TTL it may carry; a key past it, or without a TTL where one is
due, is reported.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

HOUR = 3600
DAY = 24 * HOUR


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: str
    category: str
    why: str
    max_ttl: int | None  # None: may carry no TTL at all

    def matches(self, key: str) -> bool:
        return re.fullmatch(self.regex, key) is not None

    def owner(self, key: str) -> int | None:
        """The pid of the process the key belongs to, for a per-process key."""
        found = re.fullmatch(self.regex, key)
        return int(found["pid"]) if found and "pid" in found.groupdict() else None


def patterns(host: str) -> list[Pattern]:
    """The keyspace of Wurk, its plugins and this soak's limiters, most specific first."""
    h = re.escape(host)
    return [
        Pattern(
            "private list",
            r"queue:[^|]+\|.+\|(?P<pid>\d+)\|[0-9a-f]+\|0",
            "work",
            "reliable fetch: a process's claimed jobs",
            None,
        ),
        Pattern("queue", r"queue:[^|]+", "work", "jobs waiting", None),
        Pattern("scheduled / retries / dead", r"schedule|retry|dead", "work", "jobs due later, failed or dead", None),
        Pattern("unique lock", r"unique:[0-9a-f]+", "work", "a unique job's lock, until its success", 300),
        Pattern("crash suspects", r"super_fetch:suspects", "work", "recovered jobs not yet finished", None),
        Pattern(
            "batch callback marker",
            r"b-[A-Za-z0-9_-]+-(success|complete|death)",
            "retained",
            "a fired callback, kept so a batch recreated under its bid does not fire again (Batch.CALLBACK_NOTIFY_TTL)",
            30 * DAY,
        ),
        Pattern(
            "batch",
            r"b-[A-Za-z0-9_-]+(-(jids|failed|died|kids|pkids|cbs))?",
            "work",
            "a batch's hash and sets, until its linger after success",
            30 * DAY,
        ),
        Pattern("batch index", r"batches|dead-batches", "fixed", "every batch's bid, by creation time", None),
        Pattern(
            "recovery count",
            r"super_fetch:recovered:.+",
            "retained",
            "a job recovered from a dead process, counted 72 h for the poison-pill rule",
            72 * HOUR,
        ),
        Pattern(
            "running suspects",
            rf"super_fetch:running:{h}:(?P<pid>\d+):[0-9a-f]+",
            "expiring",
            "a process's young suspects",
            HOUR,
        ),
        Pattern("reaper lock", r"super_fetch:reaper(:full)?", "expiring", "one sweep per interval in the fleet", HOUR),
        Pattern("write fence", r"wurk:fence:.+", "expiring", "a thread's last write number, 10 minutes", 600),
        Pattern("pop receipt", r"wurk:popped:.+", "expiring", "what a scheduler pop took, for a lost reply", 600),
        Pattern(
            "batch removal receipt", r"wurk:batch-removed:.+", "expiring", "a remove_jobs count, for a lost reply", 600
        ),
        Pattern("promote lock", r"promote-lock:.+", "expiring", "one promoter per sorted set", 600),
        Pattern("cleanup lock", r"process_cleanup", "expiring", "one process-set cleanup a minute", 600),
        Pattern("heartbeat", rf"{h}:(?P<pid>\d+):[0-9a-f]+", "expiring", "a process's heartbeat hash, 60 s", 60),
        Pattern("busy jobs", rf"{h}:(?P<pid>\d+):[0-9a-f]+:work", "expiring", "a process's running jobs", 60),
        Pattern("signals", rf"{h}:(?P<pid>\d+):[0-9a-f]+-signals", "expiring", "signals for a process", 60),
        Pattern("leader", r"dear-leader|leader-token", "fixed", "leader election", None),
        Pattern("registries", r"queues|processes|paused", "fixed", "queue and process registries", None),
        Pattern("counters", r"stat:[a-z]+", "fixed", "processed/failed/rescheduled totals", None),
        Pattern(
            "daily counters",
            r"stat:[a-z]+:\d{4}-\d{2}-\d{2}",
            "fixed",
            "processed/failed/rescheduled per day",
            5 * 365 * DAY,
        ),
        Pattern("limiter index", r"lmtr-list", "fixed", "every registered limiter's name", None),
        Pattern(
            "limiter",
            r"lmtr:.+|lmtr-stats:.+|lmtr-w:.+",
            "fixed",
            "a limiter's metadata, counters and window (TTL = the limiter's ttl, refreshed on use)",
            DAY,
        ),
        Pattern("limiter slots", r"lmtr-cs:.+", "work", "held concurrent slots", DAY),
        Pattern(
            "history",
            r"wurk:history|wurk:history:rolled",
            "fixed",
            "the leader's rollup stream (capped by MAXLEN) and its cursor",
            None,
        ),
        Pattern("daily history", r"wurk:history:jobs:\d{8}", "fixed", "per-class day totals", 90 * DAY),
        Pattern(
            "metrics",
            r"j\|\d{6}\|\d+:\d+|h\|.+",
            "metrics",
            "per-minute execution metrics (8 h) and ten-minute ones (3 days)",
            3 * DAY,
        ),
    ]


@dataclass
class Entry:
    key: str
    kind: str
    ttl: int  # -1: none
    size: int  # members of a collection, 1 for a string


def snapshot(client: redis.Redis) -> list[Entry]:
    """Every key of the broker, with its type, TTL and size (a few thousand keys at most, here)."""
    names = sorted(name.decode() for name in client.scan_iter(count=1000))
    entries = []
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        pipe = client.pipeline(transaction=False)
        for name in chunk:
            pipe.type(name)
            pipe.ttl(name)
        replies = pipe.execute()
        kinds = [kind.decode() for kind in replies[0::2]]
        sizes = _sizes(client, chunk, kinds)
        entries += [
            Entry(name, kind, int(ttl), size)
            for name, kind, ttl, size in zip(chunk, kinds, replies[1::2], sizes, strict=True)
        ]
    return entries


SIZERS: dict[str, Callable[[Any, str], Any]] = {
    "list": lambda pipe, key: pipe.llen(key),
    "set": lambda pipe, key: pipe.scard(key),
    "zset": lambda pipe, key: pipe.zcard(key),
    "hash": lambda pipe, key: pipe.hlen(key),
    "stream": lambda pipe, key: pipe.xlen(key),
}


def _sizes(client: redis.Redis, names: list[str], kinds: list[str]) -> list[int]:
    pipe = client.pipeline(transaction=False)
    for name, kind in zip(names, kinds, strict=True):
        SIZERS.get(kind, lambda pipe, key: pipe.exists(key))(pipe, name)
    return [int(size) for size in pipe.execute()]


def summarize(
    entries: list[Entry], host: str | None = None, *, alive: Callable[[int], bool] | None = None
) -> dict[str, Any]:
    """Per pattern: how many keys, their members, their TTL range; and every key that breaks its rule."""
    table = patterns(host or socket.gethostname())
    groups: dict[str, dict[str, Any]] = {}
    problems: list[dict[str, Any]] = []
    for entry in entries:
        pattern = next((p for p in table if p.matches(entry.key)), None)
        name = pattern.name if pattern else "unexplained"
        group = groups.setdefault(
            name,
            {
                "category": pattern.category if pattern else "unexplained",
                "why": pattern.why if pattern else "",
                "keys": 0,
                "members": 0,
                "ttl_min": None,
                "ttl_max": None,
                "no_ttl": 0,
                "of_dead_processes": 0,
                "examples": [],
            },
        )
        group["keys"] += 1
        group["members"] += entry.size
        if entry.ttl < 0:
            group["no_ttl"] += 1
        else:
            group["ttl_min"] = entry.ttl if group["ttl_min"] is None else min(group["ttl_min"], entry.ttl)
            group["ttl_max"] = entry.ttl if group["ttl_max"] is None else max(group["ttl_max"], entry.ttl)
        owner = pattern.owner(entry.key) if pattern else None
        if owner is not None and alive is not None and not alive(owner):
            group["of_dead_processes"] += 1
        if len(group["examples"]) < 3:
            group["examples"].append(entry.key)
        why = _problem(entry, pattern, alive)
        if why:
            problems.append({"key": entry.key, "pattern": name, "ttl": entry.ttl, "size": entry.size, "problem": why})
    return {"dbsize": len(entries), "patterns": groups, "problems": problems, "at": time.time()}


def _problem(entry: Entry, pattern: Pattern | None, alive: Callable[[int], bool] | None) -> str:
    if pattern is None:
        return "matches no known pattern"
    owner = pattern.owner(entry.key)
    if pattern.name == "private list" and alive is not None and owner is not None and not alive(owner):
        return f"stranded: a private list of dead process {owner}"
    if pattern.max_ttl is not None and pattern.category != "work" and entry.ttl < 0:
        return "no TTL where one is due"
    if pattern.max_ttl is not None and entry.ttl > pattern.max_ttl:
        return f"TTL {entry.ttl} s beyond the documented {pattern.max_ttl} s"
    return ""


def work_left(summary: dict[str, Any]) -> dict[str, int]:
    """Keys of the ``work`` category still there, per pattern."""
    return {name: group["keys"] for name, group in summary["patterns"].items() if group["category"] == "work"}


def of_dead_processes(summary: dict[str, Any]) -> int:
    """Keys still there that belong to a process no longer running."""
    return sum(group["of_dead_processes"] for group in summary["patterns"].values())


def growth(start: dict[str, Any], end: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per pattern: keys and members at the start and at the end, where they differ."""
    names = sorted(set(start["patterns"]) | set(end["patterns"]))
    changed = {}
    for name in names:
        before = start["patterns"].get(name, {"keys": 0, "members": 0})
        after = end["patterns"].get(name, {"keys": 0, "members": 0})
        if (before["keys"], before["members"]) != (after["keys"], after["members"]):
            changed[name] = {
                "keys_start": before["keys"],
                "keys_end": after["keys"],
                "members_start": before["members"],
                "members_end": after["members"],
            }
    return changed
