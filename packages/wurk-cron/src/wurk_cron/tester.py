"""Checking a periodic block before production does: every schedule parses,
every class resolves.

::

    def periodic_jobs(mgr):
        mgr.register("*/5 * * * *", "app.jobs.ReportJob")

    # in the app: config.periodic(periodic_jobs)
    # in a test:
    ConfigTester(config).verify(periodic_jobs)  # ValueError naming a bad cron or class

``verify`` registers (and so persists) as the block goes; on any failure it
unregisters every loop it wrote before re-raising, so a schedule that failed
validation never half-survives in Redis. A loop that was registered before
the call (the same schedule, class and options, booted by a worker) is left
alone: the rollback undoes this call, not the cluster's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from wurk.client.registry import UnknownJobError
from wurk_cron.firing import resolve_target
from wurk_cron.manager import Manager
from wurk_cron.registry import LoopSet, unregister

if TYPE_CHECKING:
    from wurk.config.configuration import Config

__all__ = ["ConfigTester"]


class ConfigTester:
    def __init__(self, config: Config | None = None) -> None:
        if config is None:
            from wurk import current_config

            config = current_config()
        self.config = config

    def verify(self, block: Callable[[Manager], object]) -> Manager:
        """Run ``block`` against a disposable manager and resolve every class;
        the manager (with its ``loops``) when all is well."""
        manager = Manager(self.config)
        existing = set(LoopSet(self.config).lids())
        try:
            block(manager)
            for loop in manager.loops:
                self._resolve(loop.klass)
        except BaseException:
            for lid in manager.lids - existing:
                unregister(self.config, lid)
            raise
        return manager

    def _resolve(self, klass: str) -> None:
        try:
            resolve_target(self.config, klass)
        except UnknownJobError as exc:
            raise ValueError(f"periodic job class {klass!r} does not resolve: {exc}") from exc
