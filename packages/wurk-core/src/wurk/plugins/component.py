"""Components: the background threads of a worker process, and how plugins add theirs.

Every thread a worker runs besides its processors (the heartbeat, the
scheduler, the reaper, the leader election, the metrics rollup, the health
check, and those of plugins: cron's poller, the swarm's supervisor…) is a
:class:`Component`. The base owns what each of them would otherwise write
again, and differently: the loop, the sleep that ``stop`` cuts short, the
report of an error through the configuration's error handlers, the back-off
after repeated errors, and a join bounded by the shutdown deadline, so that a
component wedged on a slow server never holds a process past its timeout.

A plugin adds components through the ``wurk_register_components`` hook::

    class AuditSweep(wurk.Component):
        name = "audit-sweep"
        interval = 30.0

        def tick(self) -> None:
            self.config.redis_pool.execute(lambda conn: conn.unlink("audit:stale"))

    @wurk.hookimpl
    def wurk_register_components(components, runtime):
        components.add(AuditSweep(runtime.config))

The launcher starts components in registration order, before the processor
threads fetch anything; at TSTP it calls each one's :meth:`Component.quiet`;
at shutdown, once running jobs are done, it asks them all to stop, waits for
each until the deadline, and lets each finish (in reverse order, so the
heartbeat, registered first, is the last to leave).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from wurk import current

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: Seconds of back-off after the first of several consecutive failed ticks;
#: it doubles with each further failure, up to :attr:`Component.max_backoff`.
BACKOFF_START = 1.0
#: Seconds a component may take to stop when ``stop`` is called on its own.
STOP_TIMEOUT = 5.0


class Component:
    """One named daemon thread with a start / quiet / stop life.

    The default :meth:`run` waits :meth:`first_wait`, then calls :meth:`tick`
    every :meth:`next_wait` seconds until stopped. A tick that raises is
    reported (context: the component's name) and the next wait grows, from
    one second doubling up to :attr:`max_backoff`, but never below the
    regular wait: a component that fails is retried at a calm pace, not
    every second for as long as Redis is away. Components with a different
    shape (a server's accept loop) override :meth:`run` and :meth:`wake`.
    """

    #: The thread's name, as TTIN dumps, debuggers and error reports show it.
    name = "wurk-component"
    #: What an error report of a failed tick names as its context (the name if empty).
    context = ""
    #: Seconds between ticks of the default loop.
    interval = 1.0
    #: The longest wait the back-off grows to after repeated failures.
    max_backoff = 30.0

    def __init__(self, config: Config) -> None:
        self.config = config
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0

    # -- the life the launcher drives -----------------------------------------

    def start(self) -> None:
        """Start the thread. Keep any work done here short: the processors
        wait for every component's ``start`` before they fetch a job."""
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()

    def quiet(self) -> None:
        """The process stopped fetching jobs (TSTP). Most components go on."""

    def request_stop(self) -> None:
        """Ask the thread to end: wakes a sleeping loop at once."""
        self._stop.set()
        self.wake()

    def join(self, deadline: float) -> bool:
        """Wait for the thread until ``deadline`` (``time.monotonic``); whether it ended."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
        return not thread.is_alive()

    def finish(self) -> None:
        """Last words after the thread ended (or was given up on): a release,
        a final write. Runs in the launcher's thread, in reverse order."""

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Stop on its own, outside a launcher: request, join, finish."""
        self.request_stop()
        ended = self.join(time.monotonic() + timeout)
        self.finish()
        return ended

    # -- what subclasses fill in ----------------------------------------------

    def tick(self) -> None:
        """One round of the component's work."""
        raise NotImplementedError(f"{type(self).__name__} must define tick() or run()")

    def first_wait(self) -> float:
        """Seconds before the first tick."""
        return self.interval

    def next_wait(self) -> float:
        """Seconds from the end of one tick to the next."""
        return self.interval

    def wake(self) -> None:
        """Interrupt whatever :meth:`run` blocks on besides :meth:`wait`."""

    def run(self) -> None:
        """The thread's body: the tick loop, unless a subclass has another shape."""
        if self.wait(self.first_wait()):
            return
        while True:
            self.guarded(self.tick)
            if self.wait(self.backed_off(self.next_wait())):
                return

    # -- helpers -----------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; ``True`` when a stop request cut it short."""
        return self._stop.wait(max(0.0, seconds))

    def guarded(self, action: Callable[[], object]) -> bool:
        """Run ``action``, reporting an exception instead of dying of it;
        whether it succeeded. Counts consecutive failures for the back-off."""
        try:
            action()
        except Exception as exc:
            self.failures += 1
            self.config.handle_exception(exc, {"context": self.context or self.name})
            return False
        self.failures = 0
        return True

    def backed_off(self, wait: float) -> float:
        if not self.failures:
            return wait
        return float(max(wait, min(BACKOFF_START * 2 ** (self.failures - 1), self.max_backoff)))

    def _main(self) -> None:
        # Whatever the thread runs (a push, a plugin's code) works for this
        # configuration, not the process default.
        current.mark(self.config)
        try:
            self.run()
        except Exception as exc:  # run() itself broke: say so rather than vanish
            self.config.handle_exception(exc, {"context": f"{self.name} ended"})


class ComponentRegistry:
    """The components of one worker process, in start order.

    ``add(component, first=True)`` keeps a component before every other one
    however early another is added: core's heartbeat goes there, so the
    process is visible before anything acts and leaves after everything
    stopped. ``last=True`` keeps one after all others: core's health check,
    so that "ready" means everything before it runs.
    """

    def __init__(self) -> None:
        self._first: list[Component] = []
        self._items: list[Component] = []
        self._last: list[Component] = []

    def add(self, component: Component, *, first: bool = False, last: bool = False) -> Component:
        if not isinstance(component, Component):
            raise TypeError(
                f"components.add() takes a wurk.Component, got {component!r}; "
                "subclass wurk.Component and define tick() (or run())"
            )
        if any(existing is component for existing in self):
            raise ValueError(f"component {component.name!r} is already registered")
        if first and last:
            raise ValueError("a component is added first or last, not both")
        (self._first if first else self._last if last else self._items).append(component)
        return component

    def __iter__(self) -> Iterator[Component]:
        return iter([*self._first, *self._items, *self._last])

    def __len__(self) -> int:
        return len(self._first) + len(self._items) + len(self._last)

    def named(self, name: str) -> Component | None:
        return next((component for component in self if component.name == name), None)
