"""Holding a shutdown's interrupt off a processor thread's critical sections.

At the shutdown deadline the manager raises :class:`~wurk.errors.Shutdown` in
every processor thread still running, as an asynchronous exception: it lands
at the next bytecode the thread runs, wherever that is. Most places are fine
(the job's own code: it unwinds, and its job goes back to its queue), but two
are not:

* the **booking** of the job's fate — a failure going to the ``retry`` or
  ``dead`` set, a middleware's reschedule or kill through
  :class:`~wurk.server.retry.Retrier`, ``Interrupted``'s way back to the queue —
  and everything from there to the acknowledgement: cut there, the job would
  be booked *and* given back to its queue (run twice, counted twice), or
  written half;
* the **acknowledgement** itself, and the processor's other calls into the
  fetcher's books: cut there, Redis and the fetcher's ledger disagree.

So a processor thread has a :class:`Shield`. An interrupt asked for while the
thread is outside those sections is raised at once; inside one, it waits and
is raised where the section ends — for a booking, once the processor has
acknowledged the job. The rule is Sidekiq's ``Thread.handle_interrupt`` around
its acknowledgement, extended to the booking. A booking is entered, not
wrapped: the retry layer calls :func:`booking` where it starts deciding, and
the section lasts until the processor's end of the job (:meth:`Shield.release`),
however many frames unwind in between.

Outside a processor thread (a tool, a test, an inline run) there is no shield
and :func:`booking` does nothing.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from contextvars import ContextVar

from wurk.errors import Shutdown

__all__ = ["Shield", "booking", "current_shield", "raise_in_thread"]

#: The shield of the processor thread running in this context (set once per thread).
current_shield: ContextVar[Shield | None] = ContextVar("wurk_current_shield", default=None)


def booking() -> None:
    """The running job's fate is being booked: hold a shutdown's interrupt off
    until its processor has acknowledged it. Raises ``Shutdown`` instead if the
    interrupt already went out, so that nothing is booked for a job the
    shutdown gives back."""
    shield = current_shield.get()
    if shield is not None:
        shield.hold()


def raise_in_thread(thread: threading.Thread, exc_type: type[BaseException] | None) -> None:
    """Ask ``thread`` to unwind with ``exc_type`` at the next bytecode it runs
    (a thread blocked in C raises it once the call returns); ``None`` takes
    back one asked for and not raised yet."""
    ident = thread.ident
    if ident is not None:
        exc = ctypes.py_object(exc_type) if exc_type is not None else None
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), exc)


class Shield:
    """One processor thread's critical sections, and the interrupt they defer.

    The thread enters sections (:meth:`critical`, :meth:`hold`); the stopping
    thread calls :meth:`interrupt` and :meth:`settle`. One lock orders the
    two, so an interrupt raised at once never finds the thread inside a
    section: a thread that would enter one after it is raised refuses to
    (raising ``Shutdown`` there itself, and taking the asynchronous one back).
    """

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self._lock = threading.Lock()
        self._calm = threading.Condition(self._lock)
        self._depth = 0
        self._held = False
        #: Asked for inside a section: raised where the last one ends.
        self._pending = False
        #: Raised (or about to be): the thread enters no more sections.
        self._raised = False
        #: Threads waiting in :meth:`settle`: only they need the end of a section told.
        self._settling = 0

    @property
    def inside(self) -> bool:
        """Whether the thread is inside a critical section now."""
        with self._lock:
            return self._busy()

    @property
    def interrupted(self) -> bool:
        """Whether ``Shutdown`` was raised in the thread (or is on its way)."""
        with self._lock:
            return self._raised

    @property
    def pending(self) -> bool:
        """Whether an interrupt waits for the end of a section."""
        with self._lock:
            return self._pending

    def _busy(self) -> bool:
        return self._depth > 0 or self._held

    def _refuse(self) -> None:
        """Called by the thread, lock held, once the interrupt went out."""
        raise_in_thread(self.thread, None)
        raise Shutdown()

    def critical(self) -> Shield:
        """A short section (the acknowledgement), entered as ``with
        shield.critical():``: an interrupt waits for its end. The shield is
        its own context manager (sections nest by depth), since every job
        enters one and a generator-based one costs a job microseconds."""
        return self

    def __enter__(self) -> None:
        with self._lock:
            if self._raised:
                self._refuse()
            self._depth += 1

    def __exit__(self, *exc_info: object) -> None:
        self._leave(depth=True)

    def guard(self, action: Callable[[], object]) -> None:
        """Run ``action`` as a short section: ``with shield.critical():
        action()`` in two calls instead of four, for the acknowledgement every
        job makes."""
        with self._lock:
            if self._raised:
                self._refuse()
            self._depth += 1
        try:
            action()
        finally:
            self._leave(depth=True)

    def hold(self) -> None:
        """A booking starts: critical until :meth:`release`."""
        with self._lock:
            if self._held:
                return
            if self._raised:
                self._refuse()
            self._held = True

    def release(self) -> None:
        """The processor is done with the job: a booking's section ends, and an
        interrupt asked for meanwhile is raised here."""
        # Most jobs book nothing: with no section open there is nothing to
        # end, and no interrupt can be pending (one is deferred only while a
        # section is open, and delivered where the last one ends). Only this
        # thread changes ``_held`` and ``_depth``, so it reads them unlocked.
        if not self._held and not self._depth:
            return
        self._leave(depth=False)

    def _leave(self, *, depth: bool) -> None:
        with self._lock:
            if depth:
                self._depth -= 1
            else:
                self._held = False
            if self._depth > 0 or self._held:
                return
            if self._settling:
                self._calm.notify_all()
            deliver = self._pending
            if deliver:
                self._pending = False
                self._raised = True
        if deliver:
            raise Shutdown()

    def interrupt(self, before: Callable[[], None] | None = None) -> bool:
        """Raise ``Shutdown`` in the thread now, after calling ``before``; or,
        inside a section, where it ends. Whether it was raised now."""
        with self._lock:
            if self._raised or self._pending:
                return False
            if self._busy():
                self._pending = True
                return False
            if before is not None:
                before()
            self._raised = True
            raise_in_thread(self.thread, Shutdown)
            return True

    def settle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the thread to leave its critical
        sections; whether it did."""
        with self._lock:
            self._settling += 1
            try:
                return self._calm.wait_for(lambda: not self._busy(), max(0.0, timeout))
            finally:
                self._settling -= 1
