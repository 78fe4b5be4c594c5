"""Embedded mode: worker threads inside a host process you already run.

::

    instance = wurk.configure_embed(lambda config: config.update({"queues": ["default"]}))
    instance.run()      # returns at once; the threads run in the background
    ...
    instance.quiet()    # stop fetching
    instance.stop()     # drain, requeue what is left, leave

The host keeps its own signal handling: nothing here installs a handler. The
configuration is forced to two threads before ``configure`` runs — the GIL
makes more threads counterproductive next to the host's own work — and the
process shows as ``embedded`` in the dashboard, which therefore offers no
Quiet/Stop buttons for it.
"""

from __future__ import annotations

from collections.abc import Callable

from wurk.config.configuration import Config
from wurk.config.defaults import default_config, enter_server_mode
from wurk.errors import FrozenConfigError
from wurk.server.launcher import Launcher

EMBEDDED_CONCURRENCY = 2


class Embedded:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.launcher: Launcher | None = None

    def run(self) -> None:
        if self.launcher is not None:
            raise RuntimeError("this embedded instance is already running")
        self.launcher = Launcher(self.config, embedded=True, on_signal=self._remote_signal)
        self.launcher.run()

    def _remote_signal(self, name: str) -> None:
        # The dashboard offers no buttons for embedded processes, but an API
        # call can still send one; honour the harmless ones only.
        if name == "TSTP":
            self.quiet()
        elif name == "TTIN" and self.launcher is not None:
            self.launcher.dump_threads()

    def quiet(self) -> None:
        if self.launcher is not None:
            self.launcher.quiet()

    def stop(self) -> None:
        if self.launcher is not None:
            self.launcher.stop()


def configure_embed(configure: Callable[[Config], object] | None = None, config: Config | None = None) -> Embedded:
    """Build an embedded worker on the default (or given) configuration."""
    config = config or default_config()
    if config.frozen:
        raise FrozenConfigError("configure_embed: the configuration is already frozen by a running worker")
    enter_server_mode(config)
    config.concurrency = EMBEDDED_CONCURRENCY
    if configure is not None:
        configure(config)
    return Embedded(config)
