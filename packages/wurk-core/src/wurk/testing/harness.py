"""The testing harness: the mode, the fake store and the testing server chain,
held in one :class:`TestingState` (``wurk.testing.state``).

The client asks the harness about every push, so the answer must cost nothing
in production. :attr:`TestingState.active` is a plain attribute that is true
only while some mode other than ``disable`` may be in force: the process-wide
mode is not ``disable``, or a ``fake``/``inline`` block is open in *some*
thread. Switching a mode on installs the state as the client's interceptor
(:data:`wurk.client.interception.interceptor`), and switching the last one off
removes it: only while it is installed does the client read the block's
context variable, so a block in one thread raises the flag for all threads,
and each thread still gets its own answer from :meth:`TestingState.mode`.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wurk.client import interception
from wurk.client import payload as wire
from wurk.client.middleware import Chain
from wurk.errors import WurkError
from wurk.testing.running import covers_all, resolve, run_inline, stored_copy, unwrap
from wurk.testing.store import FakeJobs, Queues

if TYPE_CHECKING:
    from wurk.client.push import Client

MODES = ("disable", "fake", "inline")


class TestModeAlreadySetError(WurkError, RuntimeError):
    """A testing-mode block was opened inside another one on the same thread."""

    __test__ = False  # not a test class, whatever pytest's name patterns say


class EmptyQueueError(WurkError, LookupError):
    """``perform_one`` found no fake job for the class."""


class Block:
    """One ``with`` block's mode, as stored in the context variable.

    A record rather than the bare mode name, so that closing the block reaches
    every context that inherited it: the variable's copies keep the record,
    and the record says the block is over.
    """

    __slots__ = ("counted", "mode", "open", "token")

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.open = True
        # A disable block needs no count: where it is open, pushes go to Redis
        # whatever the flag says.
        self.counted = mode != "disable"
        self.token: contextvars.Token[Block | None] | None = None


class TestingState:
    """Everything ``wurk.testing`` keeps between calls.

    One instance lives in the module; holding it in an object rather than in
    module globals lets the flag be recomputed in one place, under one lock,
    whenever the process-wide mode changes or a block opens or closes.
    """

    __test__ = False

    def __init__(self) -> None:
        #: The fake store.
        self.queues = Queues()
        #: The server chain used by inline execution and draining; empty by default.
        self.server_middleware = Chain()
        #: True only while a mode other than ``disable`` may be in force here
        #: or in another thread; the client's whole cost when testing is off.
        self.active = False
        self._global_mode = "disable"
        self._block: contextvars.ContextVar[Block | None] = contextvars.ContextVar("wurk_testing_mode", default=None)
        # Blocks of fake or inline mode open in any thread.
        self._open_blocks = 0
        self._lock = threading.Lock()

    # -- the mode ----------------------------------------------------------------

    def mode(self) -> str:
        """The mode in force here: this block's, else the process-wide one."""
        block = self._block.get()
        return block.mode if block is not None and block.open else self._global_mode

    def enabled(self) -> bool:
        """True in ``fake`` and ``inline`` mode."""
        return self.active and self.mode() != "disable"

    def set_global_mode(self, new_mode: str) -> str:
        """Set the process-wide mode; the previous one."""
        if new_mode not in MODES:
            raise ValueError(f"testing mode must be one of {', '.join(MODES)}, got {new_mode!r}")
        with self._lock:
            previous, self._global_mode = self._global_mode, new_mode
            self._recompute()
        return previous

    def open_block(self, new_mode: str) -> Block:
        """Make ``new_mode`` this context's mode until :meth:`close_block`."""
        current = self._block.get()
        if current is not None and current.open:
            raise TestModeAlreadySetError(
                f"testing mode {current.mode!r} is already set for this block; "
                f"set the outer mode process-wide (wurk.testing.{current.mode}()) and use one block inside it"
            )
        block = Block(new_mode)
        if block.counted:
            # Counted before the variable is set, so no push in this thread can
            # find the block while the flag is still down.
            with self._lock:
                self._open_blocks += 1
                self._recompute()
        block.token = self._block.set(block)
        return block

    def close_block(self, block: Block) -> None:
        """End ``block`` everywhere, including in contexts copied from it
        (asyncio tasks that outlive it): its mode lasts exactly as long as it."""
        if not block.open:
            return
        block.open = False
        try:
            if block.token is not None:
                self._block.reset(block.token)
        except ValueError:  # left from another context than it was entered in
            if self._block.get() is block:
                self._block.set(None)
        if block.counted:
            with self._lock:
                self._open_blocks -= 1
                self._recompute()

    def _recompute(self) -> None:
        # Called with the lock held; a single assignment, so readers without
        # the lock see either the old value or the new one.
        self.active = self._global_mode != "disable" or self._open_blocks > 0
        if self.active:
            interception.interceptor = self
        elif interception.interceptor is self:
            interception.interceptor = None

    # -- the client's hook -------------------------------------------------------

    def intercept(self, payloads: Sequence[Mapping[str, Any]], client: Client) -> None:
        """Called by the client instead of writing to Redis when a mode is on.

        Each payload is stamped as a real push would be (``enqueued_at`` unless
        it is scheduled) and turned into exactly what a worker would read back.
        """
        now = wire.now_ms()
        current = self.mode()
        for payload in payloads:
            job = dict(payload)
            if job.get("at") is None:
                job.pop("at", None)
                job["enqueued_at"] = now
            else:
                job.pop("enqueued_at", None)
            stored = stored_copy(job)
            if current == "fake":
                self.queues.push(stored["queue"], stored["class"], stored)
            else:
                run_inline(resolve(stored["class"], client.config), stored, self.server_middleware, client.config)

    # -- the fake store's helpers ----------------------------------------------------

    def process_job(self, job_class: Any, job: Mapping[str, Any]) -> Any:
        """Run one payload through the testing server chain; ``perform``'s value."""
        return run_inline(job_class, job, self.server_middleware)

    def jobs(self, job_class: Any = None) -> FakeJobs:
        """The fake payloads of ``job_class`` in push order; of every class
        when it is ``None`` or ``wurk.Job``."""
        if covers_all(job_class):
            return FakeJobs(self.queues.jobs())
        return FakeJobs(self.queues.jobs_for_class(unwrap(job_class)))

    def clear(self, job_class: Any = None) -> None:
        """Drop the fake payloads of ``job_class`` (of every class for ``None``/``wurk.Job``)."""
        if covers_all(job_class):
            self.queues.clear_all()
        else:
            self.queues.clear_class(unwrap(job_class))

    def drain(self, job_class: Any = None) -> int:
        """Run and remove every fake job of ``job_class``, including ones pushed
        while draining, oldest first; the number run. Scheduled jobs run too."""
        if covers_all(job_class):
            return self.drain_all()
        job_class = unwrap(job_class)
        count = 0
        # take_first holds the store's lock only while it picks a payload.
        while (job := self.queues.take_first(job_class)) is not None:
            self.process_job(job_class, job)
            count += 1
        return count

    def perform_one(self, job_class: Any = None) -> Any:
        """Run and remove the oldest fake job of ``job_class``; ``perform``'s value.

        Raises :class:`EmptyQueueError` when there is none.
        """
        everything = covers_all(job_class)
        job = self.queues.take_any() if everything else self.queues.take_first(unwrap(job_class))
        if job is None:
            raise EmptyQueueError("no fake jobs" if everything else f"no fake jobs for {wire.class_name(job_class)}")
        return self.process_job(resolve(job["class"]) if everything else job_class, job)

    def drain_all(self) -> int:
        """Run fake jobs of every class, oldest first, until the store is empty;
        the number run."""
        count = 0
        while (job := self.queues.take_any()) is not None:
            self.process_job(resolve(job["class"]), job)
            count += 1
        return count


class ModeSetting:
    """Returned by the setters.

    A plain call must take effect at once, and nothing tells a call apart from
    the start of a ``with`` statement, so the process-wide switch happens here
    and entering the block undoes it in favour of a block-scoped one. (Another
    thread can therefore see the new mode for the instant between the two.)
    """

    def __init__(self, state: TestingState, new_mode: str) -> None:
        self.mode = new_mode
        self._state = state
        self._previous_global = state.set_global_mode(new_mode)
        self._block: Block | None = None

    def __enter__(self) -> ModeSetting:
        self._state.set_global_mode(self._previous_global)
        self._block = self._state.open_block(self.mode)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        block, self._block = self._block, None
        if block is not None:
            self._state.close_block(block)

    def __repr__(self) -> str:
        return f"<wurk.testing mode {self.mode}>"
