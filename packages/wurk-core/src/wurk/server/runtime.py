"""The runtime: what one worker process is, in one typed object.

The launcher builds it before anything starts and hands it to every
component, core's and plugins' alike (``wurk_register_components(components,
runtime)``), so that a component reads the process's identity, its counters,
its leadership or whether it is quieting from one place, instead of being
given pieces of the launcher one constructor argument at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.server.identity import ProcessIdentity
    from wurk.server.leader import Leader
    from wurk.server.loop import LoopRunner
    from wurk.server.manager import Manager
    from wurk.server.processor import ProcessStats


@dataclass(eq=False)
class Runtime:
    config: Config
    identity: ProcessIdentity
    #: The leader election: ``runtime.leader.leadership()`` says whether this
    #: process leads now, with the fencing token to write under.
    leader: Leader
    #: Jobs processed and failed since the last heartbeat flushed them.
    stats: ProcessStats
    #: The event loop ``async def perform`` jobs run on.
    loop: LoopRunner
    #: Whether the process runs inside another application (``wurk.server.embedded``).
    embedded: bool = False
    #: Called with a signal name (``"TSTP"``, ``"TERM"``…) sent through Redis
    #: (the dashboard's quiet and stop buttons); the heartbeat delivers them.
    on_signal: Callable[[str], None] = lambda name: None
    started_at: float = field(default_factory=time.time)
    #: One manager per capsule, set once the processors are built.
    managers: list[Manager] = field(default_factory=list)
    #: What each processor thread is running, for the ``<identity>:work`` hash.
    work_state: dict[str, Any] = field(default_factory=dict)
    #: When the last heartbeat reached Redis (``time.time()``), or None.
    last_beat: float | None = None
    _quiet: threading.Event = field(default_factory=threading.Event, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _once: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def quieted(self) -> bool:
        """Whether the process stopped fetching new jobs (it never resumes)."""
        return self._quiet.is_set()

    @property
    def stopping(self) -> bool:
        """Whether the shutdown has begun."""
        return self._stopping.is_set()

    def mark_quiet(self) -> bool:
        """Record the quiet; whether this call was the first to."""
        return self._set_once(self._quiet)

    def mark_stopping(self) -> bool:
        return self._set_once(self._stopping)

    def _set_once(self, event: threading.Event) -> bool:
        with self._once:
            if event.is_set():
                return False
            event.set()
            return True
