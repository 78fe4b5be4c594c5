"""The launcher: one worker process's components, started and stopped in order.

``run`` freezes the configuration, fires ``startup`` (whose failure aborts the
boot), sends the first heartbeat, and starts a manager per capsule, the
scheduler, the reaper, the leader election and, last, the health check.

Stopping has two phases. ``quiet`` stops fetching new jobs (one-way: a quiet
process never fetches again). ``stop`` then fires ``shutdown``, lets running
jobs finish until the ``timeout`` deadline, gives everything still unfinished
back to its queue, leaves the ``processes`` set, and fires ``exit``.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wurk.heartbeat import Heartbeat
from wurk.identity import ProcessIdentity
from wurk.leader import SERVICE as LEADER_SERVICE
from wurk.leader import Leader
from wurk.loop import LoopRunner
from wurk.manager import Manager
from wurk.processor import ProcessStats
from wurk.reaper import Reaper
from wurk.scheduled import Poller

if TYPE_CHECKING:
    from wurk.config import Config


class Launcher:
    def __init__(
        self,
        config: Config,
        *,
        embedded: bool = False,
        on_signal: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.embedded = embedded
        self.identity = ProcessIdentity.current()
        if not config.frozen:
            config["identity"] = self.identity.identity
        self.started_at = time.time()
        self.stats = ProcessStats()
        config.register("process_stats", self.stats)
        self.work_state: dict[str, Any] = {}
        self.loop = LoopRunner()
        self.quieted = False
        self.stopped = False
        self._lock = threading.Lock()
        self._on_signal = on_signal or (lambda name: None)
        self.managers: list[Manager] = []
        self.heartbeat: Heartbeat | None = None
        self.poller: Poller | None = None
        self.leader = Leader(config, self.identity.identity)
        config.register(LEADER_SERVICE, self.leader)  # read through wurk.leader.leadership(config)
        self.health: Any = None
        self.extras: list[Any] = []

    def run(self) -> None:
        """Boot every component; returns once they run in their own threads."""
        config = self.config
        for capsule in config.capsules.values():
            capsule.prepare()
        _ = config.scripts, config.job_options  # load the plugins before freezing
        config.freeze()
        config.fire_event("startup", reraise=True)
        self.identity.register()
        self.managers = [
            Manager(capsule, self.identity, self.stats, self.work_state, self.loop)
            for capsule in config.capsules.values()
        ]
        self.heartbeat = Heartbeat(self, self._on_signal)
        self.heartbeat.start()
        for manager in self.managers:
            manager.start()
        self.poller = Poller(config)
        self.poller.start()
        served = list(dict.fromkeys(name for capsule in config.capsules.values() for name in capsule.weights))
        reaper = Reaper(config, self.identity, served)
        reaper.start()
        self.leader.start()
        from wurk.metrics.rollup import MetricsRollup

        rollup = MetricsRollup(config)  # acts only while this process leads
        rollup.start()
        self.extras += [reaper, self.leader, rollup]
        options = config.option("health_check_options")
        if options:  # last, so "ready" means everything above is running
            from wurk.health import HealthCheck

            self.health = HealthCheck(self, **options)
            self.health.start()
            self.extras.append(self.health)
        config.logger.info(
            "Wurk %s starting %s threads on %s",
            self.identity.identity,
            config.total_concurrency,
            ", ".join(f"{name}={c.queue_specs}" for name, c in config.capsules.items()),
        )

    def quiet(self) -> None:
        with self._lock:
            if self.quieted:
                return
            self.quieted = True
        self.config.logger.info("quieting: no new jobs will be fetched")
        for manager in self.managers:
            manager.quiet()
        if self.poller is not None:
            self.poller.stop()
        self.config.fire_event("quiet")

    def stop(self) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
        deadline = time.monotonic() + float(self.config["timeout"])
        self.quiet()
        self.config.fire_event("shutdown")
        requeued = 0
        for manager in self.managers:
            try:
                requeued += manager.stop(deadline)
            except Exception as exc:
                self.config.handle_exception(exc, {"context": "shutdown requeue"})
        if requeued:
            self.config.logger.info("gave %s unfinished job(s) back to their queues", requeued)
        for extra in reversed(self.extras):
            try:
                extra.stop()
            except Exception as exc:
                self.config.handle_exception(exc, {"context": f"stopping {type(extra).__name__}"})
        if self.heartbeat is not None:
            self.heartbeat.stop()
            try:
                self.heartbeat.flush_stats()
            except Exception as exc:
                self.config.handle_exception(exc, {"context": "final stats flush"})
            self.heartbeat.beat_quiet_then_clear()
        self.loop.stop()
        self.identity.unregister()
        self.config.fire_event("exit")
        self.config.logger.info("bye")

    def dump_threads(self) -> None:
        """Log every thread's stack (TTIN)."""
        frames = sys._current_frames()
        for thread in threading.enumerate():
            frame = frames.get(thread.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame else "(no frame)\n"
            self.config.logger.warning("thread %s (%s)\n%s", thread.name, thread.ident, stack.rstrip())
