"""The process-wide default configuration, and the configure decorators.

Most applications have one Wurk configuration per process, reached by
``Job.perform_async`` without passing it around; this module owns that one
object. Components never read it themselves: the launcher, client and
middleware receive their configuration explicitly, and tests or embedding
hosts can build as many :class:`~wurk.config.configuration.Config` objects as they like.

The rule: nothing on a worker's path (processor, middleware, components,
plugin hooks, a running job) calls :func:`default_config`. Code that may run
both in a job and in the application asks :func:`current_config`, which is
the configuration running the job (see :mod:`wurk.current`) and the process
default only outside any worker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from wurk.current import running_capsule, running_config

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config

F = TypeVar("F", bound="Callable[[Config], object]")

_lock = threading.Lock()
_default: Config | None = None
# How the default is built: :mod:`wurk.config.configuration` registers its
# class here when it is imported (``wurk`` imports it), so this module, which
# the client and the data API read, never imports the configuration, its
# settings and its plugin manager.
_factory: Callable[[], Config] | None = None


def provide(factory: Callable[[], Config]) -> None:
    """Register how the process default is built (the ``Config`` class)."""
    global _factory
    _factory = factory


def default_config() -> Config:
    """The process-wide configuration, created on first use."""
    global _default
    with _lock:
        if _default is None:
            if _factory is None:
                raise RuntimeError("wurk.config.configuration is not imported: import wurk first")
            _default = _factory()
        return _default


def current_config() -> Config:
    """The configuration running the code in this context: in a job, a
    middleware, a component or a lifecycle hook, the worker's own; in the
    application's code, outside any worker, the process default."""
    config = running_config.get()
    return config if config is not None else default_config()


def current_capsule() -> Capsule | None:
    """The capsule whose processor runs the job in this context; ``None``
    outside a processor thread."""
    return running_capsule.get()


def set_default_config(config: Config | None) -> Config | None:
    """Swap the process-wide configuration; returns the previous one."""
    global _default
    with _lock:
        previous, _default = _default, config
        return previous


def enter_server_mode(config: Config | None = None) -> Config:
    """Mark the process as a worker, before the application is imported, so
    that its ``configure_server`` functions run and ``configure_client`` ones
    do not."""
    config = config or default_config()
    config["server"] = True
    return config


def configure_server(fn: F) -> F:
    """Run ``fn(config)`` now if this process is a worker (decorator)."""
    config = default_config()
    if config.server:
        fn(config)
    return fn


def configure_client(fn: F) -> F:
    """Run ``fn(config)`` now if this process is not a worker (decorator)."""
    config = default_config()
    if not config.server:
        fn(config)
    return fn
