"""wurk-cron: Sidekiq Enterprise's periodic jobs for Wurk.

Register loops in a worker's configuration; the cluster leader ticks once a
minute and exactly one process enqueues each due loop::

    @wurk.configure_server
    def configure(config):
        @config.periodic
        def loops(mgr):
            mgr.register("*/5 * * * *", "app.jobs.ReportJob")

The registry is read back with :class:`LoopSet`; :func:`fire`,
:func:`unregister`, :func:`register` and :class:`ConfigTester` are for tests
and operations. See docs/periodic.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from wurk_cron.firing import enqueue_now, fire, history, pause, unpause
from wurk_cron.loop import Loop, loop_id
from wurk_cron.manager import Manager
from wurk_cron.parser import Parser
from wurk_cron.registry import LoopSet
from wurk_cron.tester import ConfigTester

if TYPE_CHECKING:
    from wurk.config.configuration import Config

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-cron")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "ConfigTester",
    "Loop",
    "LoopSet",
    "Manager",
    "Parser",
    "__version__",
    "enqueue_now",
    "fire",
    "history",
    "loop_id",
    "pause",
    "register",
    "reset",
    "unpause",
    "unregister",
]


def _config(config: Config | None) -> Config:
    """``config``, else the one running this code (see :func:`wurk.current_config`)."""
    if config is None:
        from wurk import current_config

        return current_config()
    return config


def register(
    name: str, cron: str, worker_class: Any, args: Sequence[Any] = (), *, config: Config | None = None, **options: Any
) -> Loop:
    """Register one loop outside a ``config.periodic`` block, storing ``name``
    as its ``label`` option. The label is part of the loop's identity, so it
    is not a rename-safe handle; prefer ``config.periodic``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a periodic loop's name must be a non-empty string, got {name!r}")
    return Manager(_config(config)).register(cron, worker_class, args=list(args), label=name, **options)


def unregister(lid: str, *, config: Config | None = None) -> bool:
    """Remove a loop from the ``periodic`` set with its hash and history;
    whether it was registered."""
    from wurk_cron.registry import unregister as remove

    return remove(_config(config), lid)


def reset(*, config: Config | None = None) -> int:
    """Remove every loop of the cluster: a test helper, never for production."""
    from wurk_cron.registry import reset as remove_all

    return remove_all(_config(config))
