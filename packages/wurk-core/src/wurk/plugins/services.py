"""Extension services of one configuration, found by name.

Plugins and core parts that need one shared object per configuration (the
outage buffer, the leader, the process's counters, a custom client class)
register it here instead of in a module global, so that two configurations in
one process never share one, and a forked child can drop what belongs to its
parent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: Services that describe the process that registered them: a forked child
#: must not report its parent's worker counters as its own, nor answer that
#: it leads because its parent did (its own launcher registers fresh ones).
PER_PROCESS = ("process_stats", "leader")


class Services:
    """A name → object map with lazily built defaults."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._services: dict[str, Any] = {}

    def register(self, name: str, service: Any) -> None:
        self._services[name] = service

    def lookup(self, name: str, default_factory: Callable[[Config], Any] | None = None) -> Any:
        """The service under ``name``; when there is none and a factory is
        given, ``default_factory(config)`` is built once and kept."""
        found = self._services.get(name)
        if found is None and default_factory is not None:
            found = self._services[name] = default_factory(self._config)
        return found

    def reset_after_fork(self) -> None:
        for name in PER_PROCESS:
            self._services.pop(name, None)
