"""Memory-based recycling: which swarm children have grown past the RSS ceiling.

Long-lived worker processes leak (caches that only grow, fragmented heaps), and
the cheapest cure is a fresh fork of the parent. This module only *measures*:
it reads each child's resident set from ``/proc/<pid>/statm`` (no ``ps`` fork,
no extra dependency) and says which children are at or over the limit. The
supervisor hands those to the rolling-restart machine (:mod:`wurk_swarm.restart`),
so a recycle is the same graceful replace-then-drain as ``USR1``.

Where ``/proc`` is missing (macOS, the BSDs) every read is ``None`` and no
child is ever recycled: recycling is Linux-only in practice, and that is a
documented limit rather than an error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from wurk.config import env

__all__ = ["MEMORY_CHECK_INTERVAL", "MemoryWatch", "environment_limit_mb", "memory_limit_mb", "rss_kb"]

#: Seconds between two RSS sweeps of the fleet. Reading statm is cheap, but RSS
#: moves slowly and a recycle takes a whole boot, so checking more often would
#: only add churn.
MEMORY_CHECK_INTERVAL = 10.0


def _page_kb() -> int:
    """The page size in KB. Not assumed to be 4: arm64 kernels often use 16 or 64."""
    try:
        return max(1, os.sysconf("SC_PAGE_SIZE") // 1024)
    except (AttributeError, OSError, ValueError):  # no sysconf, or no such name
        return 4


def rss_kb(pid: int) -> int | None:
    """The resident set of ``pid`` in KB, or ``None`` when it cannot be read.

    ``statm``'s second field is the resident page count. ``None`` covers a
    child that has already been reaped, a platform without ``/proc``, and any
    unexpected content: a measurement that fails must never recycle a child.
    """
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            fields = statm.read().split()
        return int(fields[1]) * _page_kb()
    except (OSError, ValueError, IndexError):
        return None


class _Settings(Protocol):
    """What :func:`memory_limit_mb` needs of a configuration: a ``wurk.Config``
    or any mapping (tests, embedding hosts)."""

    def __contains__(self, key: object, /) -> bool: ...
    def __getitem__(self, key: str, /) -> Any: ...


def _positive_mb(value: Any) -> int | None:
    """A limit in MB, or ``None`` (off) for None, 0, negatives, empty or
    unparseable values: a typo in a memory knob must not stop the swarm booting."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number > 0 else None


def environment_limit_mb(environ: Mapping[str, str] | None = None) -> int | None:
    """``WURK_MAXMEM_MB``, else ``SIDEKIQ_MAXMEM_MB``, as a limit in MB; ``None``
    (off) when unset, unparseable or zero. The ``memory_limit_mb`` setting's
    fallback while it is unassigned."""
    return _positive_mb(env.get("MAXMEM_MB", environ))


def memory_limit_mb(config: _Settings) -> int | None:
    """The RSS ceiling in MB for a child, or ``None`` when recycling is off.

    An assigned ``config["memory_limit_mb"]`` wins outright, even ``None`` or
    ``0``: that is how an application switches recycling off whatever the
    environment says. The setting has no default, so while it is unassigned it
    is absent from the configuration and ``WURK_MAXMEM_MB``, then
    ``SIDEKIQ_MAXMEM_MB``, decide. Never raises.
    """
    try:
        if "memory_limit_mb" in config:
            return _positive_mb(config["memory_limit_mb"])
    except KeyError:  # a mapping that claims the key and cannot produce it
        pass
    return environment_limit_mb()


class MemoryWatch:
    """Rate-limited RSS check over the supervisor's children.

    The supervisor calls :meth:`over` on every 0.2 s tick; the watch reads
    ``/proc`` only once per ``interval`` (the first call reads at once), so the
    tick stays cheap and the caller needs no timer of its own.

    Example::

        watch = MemoryWatch(memory_limit_mb(config))
        for pid, rss in watch.over(children):
            log.warning(watch.message(pid, rss))
            restart.request(slot_of[pid], pid, "memory")
    """

    def __init__(
        self,
        limit_mb: int | None,
        *,
        interval: float = MEMORY_CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        reader: Callable[[int], int | None] = rss_kb,
    ) -> None:
        self.limit_mb = _positive_mb(limit_mb)
        self.interval = interval
        self._clock = clock
        self._reader = reader
        self._due: float | None = None  # None: never checked, so due now

    @property
    def enabled(self) -> bool:
        return self.limit_mb is not None

    @property
    def limit_kb(self) -> int | None:
        """The limit in KB, the unit statm gives, so comparisons stay exact."""
        return None if self.limit_mb is None else self.limit_mb * 1024

    def over(self, pids: Iterable[int]) -> list[tuple[int, int]]:
        """``(pid, rss_kb)`` of each child at or over the limit, when a check is
        due; ``[]`` when disabled or not due. An unreadable child is skipped."""
        limit = self.limit_kb
        if limit is None:
            return []
        now = self._clock()
        if self._due is not None and now < self._due:
            return []
        self._due = now + self.interval
        breaches = []
        for pid in pids:
            rss = self._reader(pid)
            if rss is not None and rss >= limit:
                breaches.append((pid, rss))
        return breaches

    def message(self, pid: int, rss: int) -> str:
        """The operator's log line for one breach, in the guides' wording."""
        return f"swarm: child {pid} RSS {rss}KB >= {self.limit_kb}KB; recycling"
