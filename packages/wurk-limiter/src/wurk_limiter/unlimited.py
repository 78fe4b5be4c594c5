"""``unlimited``: admits everything, never touches Redis, never registers.

It accepts any arguments and any ``within_limit`` keywords, and yields a
handle whose ``points_used`` does nothing, so it can replace any limiter at
a call site (tests, or switching a limit off).
"""

from __future__ import annotations

from typing import Any

from wurk_limiter.handle import Attempt, Handle, Request
from wurk_limiter.limiter import Limiter


class Unlimited(Limiter):
    type = "unlimited"
    takes_used = True

    def __init__(self, *ignored: Any, **also_ignored: Any) -> None:
        super().__init__("unlimited", {}, register=False, config=also_ignored.get("config"))

    def _request(self, used: int | None, estimate: float | None) -> Request:
        return Request(used=1, estimate=estimate)

    def _try(self, request: Request, first: float | None) -> Attempt:
        return Attempt(True, 0.0, 0.0)

    def _charge(self, request: Request) -> float:
        return 0.0  # a zero-cost handle

    def _settle(self, handle: Handle, actual: float) -> float:
        return actual

    def _status(self, conn: Any) -> dict[str, Any]:
        return {"used": 0, "limit": None, "reset_at": None, "available": True}

    def status(self) -> dict[str, Any]:
        return self._status(None)

    def reset(self) -> None:
        """Nothing to clear."""

    def delete(self) -> None:
        """Nothing to delete."""

    def _state_keys(self, conn: Any) -> list[str]:
        return []
