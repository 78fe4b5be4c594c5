"""What a forked child must not share with its parent, and the fork events.

A process that forks (``wurkswarm`` forking workers from a parent that loaded
the application, a web server's pre-fork model, ``multiprocessing`` with the
``fork`` start method) hands its child a copy of every object, including
things that only make sense in the parent: sockets in the middle of the
parent's conversation with Redis, locks held by threads that do not exist in
the child, an event loop whose thread stayed behind. ``os.fork()`` must just
work, so this module hooks into :func:`os.register_at_fork` rather than asking
callers to use a wrapper:

* before every fork, in the parent: ``before_fork`` fires on each live
  configuration, once per fork, and Wurk's log handlers are flushed so the
  child does not write the parent's buffered lines a second time;
* in the child: each live configuration lets go of the parent's state
  (:meth:`wurk.config.Config.reset_after_fork`), then ``fork`` fires on each,
  for plugins and ``config.on("fork", ...)`` callbacks to reconnect what they
  keep of their own.

The only state here is the set of live configurations, held weakly so that
tracking a configuration never keeps it alive. The hooks are registered once,
when the first configuration is created, and never at import.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk.config import Config

_configs: weakref.WeakSet[Config] = weakref.WeakSet()
_installed = False
_install_lock = threading.Lock()


def track(config: Config) -> None:
    """Reset ``config`` in every child this process forks from now on."""
    global _installed
    _configs.add(config)
    if _installed:
        return
    with _install_lock:
        if not _installed:
            os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
            _installed = True


def live_configs() -> list[Config]:
    """The configurations a fork would reset, oldest first where the set keeps it."""
    return list(_configs)


def _before_fork() -> None:
    """In the parent, just before ``fork``: nothing here may raise, since an
    exception in an at-fork hook is printed and then ignored by Python."""
    for config in live_configs():
        try:
            config.fire_event("before_fork")
        except Exception as exc:  # a broken plugin manager: the fork goes ahead regardless
            _report(config, exc, "before_fork")
    for handler in logging.getLogger("wurk").handlers:
        try:
            handler.flush()
        except Exception:  # a closed stream: nothing buffered to duplicate
            pass


def _after_fork_in_child() -> None:
    """In the child, first thing: reset every configuration, then fire ``fork``.

    All the resets come before any event, so a ``fork`` handler of one
    configuration that talks to Redis through another never meets a socket
    of the parent's.
    """
    configs = live_configs()
    for config in configs:
        try:
            config.reset_after_fork()
        except Exception as exc:
            _report(config, exc, "reset after fork")
    for config in configs:
        try:
            config.fire_event("fork")
        except Exception as exc:
            _report(config, exc, "fork")


def _report(config: Config, exc: Exception, context: str) -> None:
    try:
        config.handle_exception(exc, {"context": context})
    except Exception:  # the error handlers themselves failed: stay out of the fork's way
        pass
