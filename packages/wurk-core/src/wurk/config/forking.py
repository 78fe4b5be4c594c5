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
  configuration, once per fork; then each of Wurk's log handlers is locked
  and flushed, and stays locked across the fork, so that no thread is half
  way through a line when the process is copied: the child neither writes
  the parent's buffered line a second time nor inherits a lock held by a
  thread it does not have (it gets a fresh one; the parent's is released);
* in the child: each live configuration lets go of the parent's state
  (:meth:`wurk.config.configuration.Config.reset_after_fork`), then every other object
  tracked with :func:`reset_in_child` (an outage buffer, whose jobs are the
  parent's to replay), then ``fork`` fires on each configuration, for plugins
  and ``config.on("fork", ...)`` callbacks to reconnect what they keep of
  their own.

The only state here is the set of live configurations and of those objects,
held weakly so that tracking one never keeps it alive. The hooks are
registered once, when the first one is tracked, and never at import: one
reset for the whole process, instead of an ``os.register_at_fork`` per object
that would keep each alive forever.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from wurk.config.configuration import Config


class Resettable(Protocol):
    def reset_after_fork(self) -> None:
        """In a forked child: drop what belongs to the parent; must not raise."""
        ...


_configs: weakref.WeakSet[Config] = weakref.WeakSet()
_others: weakref.WeakSet[Resettable] = weakref.WeakSet()
_installed = False
_install_lock = threading.Lock()
#: The log handlers locked for the fork in progress (one at a time: a fork
#: runs its at-fork hooks under the interpreter's fork lock).
_held: list[logging.Handler] = []


def track(config: Config) -> None:
    """Reset ``config`` in every child this process forks from now on."""
    _configs.add(config)
    _install()


def reset_in_child(thing: Resettable) -> None:
    """Call ``thing.reset_after_fork()`` in every child this process forks
    from now on, for as long as ``thing`` lives elsewhere."""
    _others.add(thing)
    _install()


def _install() -> None:
    global _installed
    if _installed:
        return
    with _install_lock:
        if not _installed:
            os.register_at_fork(
                before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
            )
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
    for handler in list(logging.getLogger("wurk").handlers):
        handler.acquire()
        _held.append(handler)
        try:
            handler.flush()
        except Exception:  # a closed stream: nothing buffered to duplicate
            pass


def _after_fork_in_parent() -> None:
    while _held:
        _held.pop().release()


def _after_fork_in_child() -> None:
    """In the child, first thing: reset every configuration, then fire ``fork``.

    All the resets come before any event, so a ``fork`` handler of one
    configuration that talks to Redis through another never meets a socket
    of the parent's.
    """
    while _held:
        # The forking thread's hold on the lock is the parent's; this process
        # starts with the handler free.
        _held.pop().createLock()
    configs = live_configs()
    for config in configs:
        try:
            config.reset_after_fork()
        except Exception as exc:
            _report(config, exc, "reset after fork")
    for thing in list(_others):
        try:
            thing.reset_after_fork()
        except Exception:  # nothing to report it to; the others still reset
            pass
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
