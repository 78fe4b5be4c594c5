"""``within_limit``'s answer: a context manager (sync and async) and the
callable forms, all sharing one rule — what an admitted call holds is given
back however the block ends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from wurk.server.loop import on_job_loop
from wurk_limiter.handle import Handle, Request

if TYPE_CHECKING:
    from wurk_limiter.limiter import Limiter


class Admission:
    """Waits for room on entry, releases on exit. The wait covers only the
    acquire, never the block."""

    def __init__(self, limiter: Limiter, request: Request) -> None:
        self.limiter = limiter
        self.request = request
        self.handle: Handle | None = None

    def __enter__(self) -> Handle:
        self._refuse_to_block_a_loop("with limiter.within_limit():", "async with limiter.within_limit():")
        handle = self.limiter._admit(self.request)
        assert handle is not None  # within_limit() refuses a with statement under policy="ignore"
        self.handle = handle
        return handle

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._finish(failing=exc is not None)

    async def __aenter__(self) -> Handle:
        handle = await self.limiter._admit_async(self.request)
        assert handle is not None
        self.handle = handle
        return handle

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish(failing=exc is not None)

    def _finish(self, *, failing: bool) -> None:
        handle, self.handle = self.handle, None
        if handle is None:
            return
        try:
            self.limiter._release(handle)
        except Exception as exc:
            if not failing:
                raise
            # The block's own error matters more; the slot expires after
            # lock_timeout anyway.
            self.limiter.config.handle_exception(exc, {"context": f"releasing limiter {self.limiter.name}"})

    def _refuse_to_block_a_loop(self, written: str, instead: str) -> None:
        """A wait for room on the worker's job loop would sleep the loop's
        thread: every async job of the process would stall until the wait
        ends. Refused, naming the asynchronous form that waits without
        blocking. Elsewhere (a thread that happens to run some other loop,
        as a synchronous browser driver's does) a blocking wait stalls only
        its caller, as any blocking call there would, so it is left alone."""
        if self.limiter.wait_timeout <= 0 or not on_job_loop():
            return  # no wait (one round trip, like any other Redis call), or not a worker's loop
        raise RuntimeError(
            f"limiter {self.limiter.name!r}: `{written}` in an async job would block the worker's event loop for "
            f"up to {self.limiter.wait_timeout:g} s while it waits for room, stalling every other async job: "
            f"use `{instead}`"
        )

    def run(self, fn: Callable[..., Any], wants_handle: bool) -> Any:
        self._refuse_to_block_a_loop("limiter.within_limit(fn)", "await limiter.within_limit(async_fn)")
        handle = self.limiter._admit(self.request)
        if handle is None:
            return None
        self.handle = handle
        failing = True
        try:
            result = fn(handle) if wants_handle else fn()
            failing = False
            return result
        finally:
            self._finish(failing=failing)

    def run_async(self, fn: Callable[..., Awaitable[Any]], wants_handle: bool) -> Awaitable[Any]:
        async def admitted() -> Any:
            handle = await self.limiter._admit_async(self.request)
            if handle is None:
                return None
            self.handle = handle
            failing = True
            try:
                result = await (fn(handle) if wants_handle else fn())
                failing = False
                return result
            finally:
                self._finish(failing=failing)

        return admitted()
