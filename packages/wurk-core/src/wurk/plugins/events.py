"""Lifecycle events: ``config.on`` callbacks ride the plugins' own dispatch.

There is one event system, :meth:`wurk.plugins.manager.Plugins.fire`, which calls the
``wurk_<event>`` hook through pluggy. A callback given to
``config.on(event, fn)`` becomes a tiny plugin implementing that one hook, so
callbacks and plugin hooks form one call. The plugins run in pluggy's order
(the last registered first); the callbacks keep Sidekiq's: marked
``tryfirst``, they run before every plugin, in the order given; on ``quiet``,
``shutdown`` and ``exit`` they are marked ``trylast`` and run after every
plugin, in the reverse order, so the application's callbacks, first up, are
the last to go down. pluggy puts the later of two ``tryfirst``
implementations first and the later of two ``trylast`` ones last, so both
orders come from registering an event's callbacks from the last given to the
first, again whenever its list changes.

What ``config.on`` promised before it rode the hooks still holds:

* a callback runs once, and is forgotten as the dispatch begins, except on
  ``beat`` and ``before_fork``, which fire again and again (``fork`` stays
  one-shot: each child clears its own copy, so its siblings still fire
  theirs);
* a callback registered while its event is being dispatched waits for the
  next dispatch;
* a failing callback is reported under ``exception in <event> event`` and the
  rest still run, unless the dispatch re-raises (``startup``, whose failure
  aborts the boot).

The callbacks stay listed in ``config["lifecycle_events"]``, which is what
decides: a callback put in (or taken out of) those lists by hand is
registered (or dropped) at the next dispatch.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wurk.config.settings import LIFECYCLE_EVENTS, check_event
from wurk.errors import ConfigurationError
from wurk.plugins.hookspecs import hookimpl

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.plugins.manager import Plugins

#: Events that fire again and keep their callbacks.
ONESHOT_EXEMPT = frozenset({"beat", "before_fork"})

#: Events whose callbacks run after the plugins, the last given first.
REVERSED_EVENTS = frozenset({"quiet", "shutdown", "exit"})

#: How a callback plugin is named in the plugin manager (``config.on:startup:3``).
NAME_PREFIX = "config.on:"


class Callback:
    """One ``config.on`` callback, as a plugin implementing ``wurk_<event>``."""

    def __init__(self, event: str, callback: Callable[[], object], events: Events, name: str) -> None:
        self.event = event
        self.callback = callback
        self.name = name

        def run(config: Config) -> None:
            events.run(self, config)

        marker = hookimpl(trylast=True) if event in REVERSED_EVENTS else hookimpl(tryfirst=True)
        setattr(self, f"wurk_{event}", marker(run))

    def __repr__(self) -> str:
        return f"<{self.name} {self.callback!r}>"


class Events:
    """The ``config.on`` callbacks of one configuration, and their dispatch."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._lock = threading.RLock()
        self._registered: dict[str, list[Callback]] = {event: [] for event in LIFECYCLE_EVENTS}
        self._numbers = itertools.count(1)
        #: The plugin manager the registered callbacks belong to.
        self._attached: Plugins | None = None
        # Whether the dispatch running on this thread re-raises: the callbacks
        # are called by Plugins.fire, which passes them the configuration only.
        self._local = threading.local()

    def _lists(self) -> dict[str, list[Callable[[], object]]]:
        lists: dict[str, list[Callable[[], object]]] = self._config.option("lifecycle_events")
        return lists

    def on(self, event: str, handler: Callable[[], object], plugins: Plugins | None) -> None:
        """List ``handler`` for ``event``; with the plugins loaded, it joins the
        dispatch at once (else when they load)."""
        check_event(event)
        if not callable(handler):
            raise ConfigurationError(f"config.on({event!r}) needs a callable, got {handler!r}")
        with self._lock:
            self._lists()[event].append(handler)
            if plugins is not None:
                self._sync(plugins, event)

    def attach(self, plugins: Plugins) -> None:
        """Register every listed callback with a plugin manager just loaded."""
        with self._lock:
            for event in LIFECYCLE_EVENTS:
                self._sync(plugins, event)

    def reset_after_fork(self) -> None:
        """In a forked child: a parent thread may have held the lock (a beat
        being dispatched), and would never release it here."""
        self._lock = threading.RLock()
        self._local = threading.local()

    def _sync(self, plugins: Plugins, event: str) -> None:
        """Make the registered callback plugins match ``lifecycle_events[event]``.

        Callbacks registered with another manager are not this one's: a new
        manager (``use_plugins``) starts from none. One registered with this
        manager while it was loading (``config.on`` inside a plugin's
        ``wurk_configure``) is kept, not registered a second time."""
        if plugins is not self._attached:
            self._registered = {name: [] for name in LIFECYCLE_EVENTS}
            self._attached = plugins
        wanted = list(self._lists()[event])
        current = self._registered[event]
        if len(wanted) == len(current) and all(c.callback is fn for c, fn in zip(current, wanted, strict=True)):
            return
        kept: list[Callback] = []
        spare = list(current)
        for fn in wanted:
            match = next((c for c in spare if c.callback is fn), None)
            if match is None:
                match = Callback(event, fn, self, f"{NAME_PREFIX}{event}:{next(self._numbers)}")
            else:
                spare.remove(match)
            kept.append(match)
        for callback in current:
            self._unregister(plugins, callback)
        for callback in reversed(kept):  # pluggy's placement turns this into the order wanted
            plugins.register(callback, name=callback.name)
        self._registered[event] = kept

    @staticmethod
    def _unregister(plugins: Plugins, callback: Callback) -> None:
        if plugins.is_enabled(callback.name):
            plugins.unregister(callback.name)

    def fire(self, event: str, plugins: Plugins, *, reraise: bool) -> None:
        """Dispatch ``event`` to the plugin hooks and the callbacks, in one order."""
        check_event(event)
        with self._lock:
            self._sync(plugins, event)
            once: list[Callback] = []
            if event not in ONESHOT_EXEMPT:
                # Forgotten before any runs, so that one registered meanwhile
                # waits for the next dispatch and a failing one is gone too.
                once, self._registered[event] = self._registered[event], []
                self._lists()[event] = []
        previous = getattr(self._local, "reraise", False)
        self._local.reraise = reraise
        try:
            plugins.fire(event, self._config, reraise=reraise)
        finally:
            self._local.reraise = previous
            for callback in once:
                self._unregister(plugins, callback)

    def run(self, callback: Callback, config: Config) -> Any:
        """Call one callback on behalf of :meth:`Plugins.fire`."""
        try:
            return callback.callback()
        except Exception as exc:
            if getattr(self._local, "reraise", False):
                raise
            config.handle_exception(exc, {"context": f"exception in {callback.event} event"})
            return None
