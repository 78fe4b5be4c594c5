"""Registering loops: the manager a ``config.periodic`` block receives.

::

    @wurk.configure_server
    def configure(config):
        @config.periodic
        def loops(mgr):
            mgr.tz = "America/Chicago"  # the default for the calls below
            mgr.register("*/5 * * * *", "app.jobs.ReportJob")
            mgr.register("0 4 * * *", "app.jobs.NightlyJob", queue="low", retry=2, args=["nightly"])

``config.periodic`` only keeps the block; the blocks run, in order and onto
one shared :class:`Manager`, when a worker process starts (the ``startup``
event), so registration writes to Redis from workers and never from a
client or a web process. A bad schedule or class name fails that boot, in
one line naming the job (a :class:`~wurk.errors.ConfigurationError`, which
is a ``ValueError``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from wurk.client import payload as wire
from wurk.errors import ConfigurationError
from wurk_cron.loop import Loop, loop_id
from wurk_cron.parser import Parser
from wurk_cron.registry import prune, write_loop
from wurk_cron.zones import TzSpec, ZoneResolver, zone_name

if TYPE_CHECKING:
    from wurk.config.configuration import Config

__all__ = ["SERVICE", "Manager", "Periodic", "periodic_service"]

#: Where the plugin keeps each configuration's blocks (``config.lookup``).
SERVICE = "periodic"

Block = Callable[["Manager"], object]
_UNSET: Any = object()


class Manager:
    """Registers loops, persisting each at once, and remembers what it wrote."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._tz = ""
        #: Every loop this manager registered, in order.
        self.loops: list[Loop] = []

    @property
    def tz(self) -> str | None:
        """The zone name later ``register`` calls default to (None: UTC)."""
        return self._tz or None

    @tz.setter
    def tz(self, value: TzSpec) -> None:
        self._tz = zone_name(value)

    def register(
        self,
        cron: str,
        klass: str | type | Callable[..., Any],
        *,
        queue: str = _UNSET,
        retry: Any = _UNSET,
        args: Sequence[Any] = _UNSET,
        tz: str | tzinfo | None = _UNSET,
        paused: bool | str = False,
        **other: Any,
    ) -> Loop:
        """Register and persist one loop; returns it.

        Only the options given are stored (they form the loop's identity);
        any option beyond ``queue``/``retry``/``args`` changes the identity
        but never enters the job. ``tz`` and ``paused`` are not options: the
        zone is stored beside them, and ``paused`` is only the initial state.
        """
        name = _class_name(klass)
        try:
            schedule = Parser(cron).expression
            options: dict[str, Any] = {}
            if queue is not _UNSET:
                options["queue"] = _queue(queue)
            if retry is not _UNSET:
                options["retry"] = retry
            if args is not _UNSET:
                options["args"] = _args(args)
            options.update(other)
            _check_json(options)
            tz_name = self._tz if tz is _UNSET else zone_name(tz)
            initially_paused = _paused(paused)
        except ValueError as exc:
            # One line naming the job: a worker's boot ends on it, and the
            # traceback through the startup hooks would bury it.
            raise ConfigurationError(f"periodic job {name}: {exc}") from None
        loop = Loop(
            lid=loop_id(schedule, name, options),
            schedule=schedule,
            klass=name,
            options=options,
            tz_name=tz_name or None,
            paused=initially_paused,
            config=self.config,
        )
        write_loop(self.config, loop)
        self.loops.append(loop)
        return loop

    @property
    def classes(self) -> set[str]:
        return {loop.klass for loop in self.loops}

    @property
    def lids(self) -> set[str]:
        return {loop.lid for loop in self.loops}


def _class_name(klass: object) -> str:
    if isinstance(klass, str):
        if not klass.strip():
            raise ConfigurationError("a periodic job needs a class name, got an empty string")
        return klass.strip()
    try:
        return wire.class_name(klass)
    except Exception as exc:
        raise ConfigurationError(f"a periodic job's class must be a name or a job class, got {klass!r}: {exc}") from exc


def _queue(queue: object) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise ValueError(f"queue must be a non-empty string, got {queue!r}")
    return queue


def _args(args: object) -> list[Any]:
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise ValueError(f"args must be a list, got {args!r}")
    return list(args)


def _check_json(options: dict[str, Any]) -> None:
    try:
        json.dumps(options)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"options must be JSON-native (stored once, at boot): {exc}") from exc


def _paused(paused: object) -> bool:
    if paused in (True, False, "1", "0", "true", "false"):
        return paused in (True, "1", "true")
    raise ValueError(f"paused must be True, False, '1' or '0', got {paused!r}")


class Periodic:
    """The blocks given to ``config.periodic``, run at a worker's start."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.blocks: list[Block] = []
        self.manager: Manager | None = None
        #: Zone names to zones for this process, warning once per unknown name.
        self.zones = ZoneResolver(config.logger)

    def add(self, block: Block) -> Block:
        if not callable(block):
            raise TypeError(f"config.periodic takes a function of the manager, got {block!r}")
        self.blocks.append(block)
        return block

    def run(self) -> Manager | None:
        """Run every block onto one manager, pruning what each supersedes.

        The prune after a block is scoped to the classes registered so far
        and keeps every lid written so far, so two blocks registering one
        class on two schedules keep both.
        """
        if not self.blocks:
            return None
        manager = self.manager = Manager(self.config)
        for block in self.blocks:
            block(manager)
            removed = prune(self.config, manager.classes, manager.lids)
            if removed:
                self.config.logger.info("[cron] pruned superseded loops: %s", ", ".join(removed))
        return manager


def periodic_service(config: Config) -> Periodic:
    """The configuration's :class:`Periodic`, created on first use."""
    found = config.lookup(SERVICE, Periodic)
    assert isinstance(found, Periodic)
    return found
