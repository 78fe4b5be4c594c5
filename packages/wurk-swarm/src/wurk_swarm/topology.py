"""How many worker processes a swarm forks, and what each one serves.

Capsules split queues *inside* one process; a topology splits them *across*
the swarm's forked processes, so a wedged slot cannot starve another slot's
threads::

    import wurk
    from wurk_swarm.topology import Topology

    @wurk.configure_server
    def swarm(config):
        config["topology"] = (
            Topology()
            .slot(count=2, queues=["critical"], concurrency=3)
            .slot(count=4, queues=["default", "low,2"], concurrency=10)
        )

A *slot* declares one kind of fork; :attr:`Topology.assignments` is the flat,
ordered list of forks (a ``count=2`` slot yields two), and the supervisor
indexes children by their position in it. Without a topology,
:func:`configured` builds a flat one: ``WURK_COUNT`` (or ``SIDEKIQ_COUNT``)
forks of the default capsule's queues and concurrency. An explicit topology
supersedes ``WURK_COUNT``: the process count comes from its slots.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wurk.config.capsule import parse_queue
from wurk.errors import ConfigurationError

if TYPE_CHECKING:
    from wurk.config.configuration import Config

__all__ = ["Assignment", "Slot", "Topology", "check_topology", "configured", "cpu_count", "process_count"]

#: The environment variables naming the process count, the native name first.
COUNT_VARIABLES = ("WURK_COUNT", "SIDEKIQ_COUNT")


@dataclass(frozen=True)
class Slot:
    """One kind of fork: ``count`` processes serving ``queues`` with ``concurrency`` threads."""

    count: int
    queues: tuple[str, ...]
    concurrency: int


@dataclass(frozen=True)
class Assignment:
    """One forked process: the queues and threads its default capsule gets.

    ``kind`` is the index of the :class:`Slot` it comes from, for log lines
    that say which declaration a crashing child belongs to.
    """

    queues: tuple[str, ...]
    concurrency: int
    kind: int


class Topology:
    """The swarm's processes, declared slot by slot (chainable)."""

    def __init__(self) -> None:
        self._slots: list[Slot] = []

    def slot(self, count: int, queues: Iterable[str] | str, concurrency: int) -> Topology:
        """Declare ``count`` forks serving ``queues`` with ``concurrency`` threads; returns self."""
        self._slots.append(
            Slot(
                count=_positive("count", count),
                queues=_queue_list(queues),
                concurrency=_positive("concurrency", concurrency),
            )
        )
        return self

    @classmethod
    def flat(cls, count: int, queues: Iterable[str] | str, concurrency: int) -> Topology:
        """``count`` identical forks: what a swarm without a declared topology runs."""
        return cls().slot(count, queues, concurrency)

    @property
    def slots(self) -> list[Slot]:
        return list(self._slots)

    @property
    def assignments(self) -> list[Assignment]:
        """Every fork in order: a slot of count 2 yields two entries."""
        return [
            Assignment(slot.queues, slot.concurrency, kind)
            for kind, slot in enumerate(self._slots)
            for _ in range(slot.count)
        ]

    @property
    def total_processes(self) -> int:
        return sum(slot.count for slot in self._slots)

    @property
    def empty(self) -> bool:
        """No slot declared (an empty topology does not supersede ``WURK_COUNT``)."""
        return not self._slots

    def __repr__(self) -> str:
        inner = ", ".join(
            f"slot(count={s.count}, queues={list(s.queues)!r}, concurrency={s.concurrency})" for s in self._slots
        )
        return f"Topology({inner})"


def _positive(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"topology slot: {what} must be a whole number > 0, got {value!r}")
    return value


def _queue_list(queues: Iterable[str] | str) -> tuple[str, ...]:
    # A lone string is one queue, not a sequence of one-letter queue names.
    entries = [queues] if isinstance(queues, str) else list(queues)
    if not entries:
        raise ConfigurationError("topology slot: queues must name at least one queue")
    for entry in entries:
        if not isinstance(entry, str):
            raise ConfigurationError(f"topology slot: queue entries are 'name' or 'name,weight' strings, got {entry!r}")
        parse_queue(entry)  # a bad weight or a "queue:" prefix fails here, at declaration
    return tuple(entries)


def check_topology(key: str, value: Any) -> Any:
    """The ``topology`` setting's check: None or a :class:`Topology`."""
    if value is not None and not isinstance(value, Topology):
        raise ConfigurationError(f"{key} must be a wurk_swarm.topology.Topology (or None), got {value!r}")
    return value


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity masks on this platform
        return max(1, os.cpu_count() or 1)


def process_count(environ: Mapping[str, str] | None = None, cpus: int | None = None) -> int:
    """The process count from ``WURK_COUNT`` (else ``SIDEKIQ_COUNT``).

    A whole number is a count; a fraction is a multiplier of the CPU count,
    rounded half up (``0.5`` on 3 CPUs is 2). The result is at least 1.
    Unset, empty or unparseable, it is the CPU count: a typo in a deploy
    script should still give a working swarm, not a crash loop.
    """
    environ = os.environ if environ is None else environ
    cpus = cpu_count() if cpus is None else cpus
    raw = next((environ[name] for name in COUNT_VARIABLES if environ.get(name, "").strip()), "").strip()
    try:
        value = float(raw)
    except ValueError:
        return cpus
    if not math.isfinite(value):
        return cpus
    count = int(value) if value.is_integer() else math.floor(value * cpus + 0.5)
    return max(1, count)


def configured(config: Config, environ: Mapping[str, str] | None = None) -> Topology:
    """The topology a swarm on ``config`` runs.

    ``config["topology"]`` when one with slots was assigned; otherwise
    ``Topology.flat`` of :func:`process_count` forks with the default
    capsule's queues (weights kept) and concurrency.
    """
    declared = config.get("topology")
    if isinstance(declared, Topology) and not declared.empty:
        return declared
    capsule = config.default_capsule
    return Topology.flat(process_count(environ), capsule.queue_specs, capsule.concurrency)
