"""What an admitted call holds, and the result of one acquire attempt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wurk_limiter.limiter import Limiter


@dataclass(frozen=True, slots=True)
class Attempt:
    """One acquire script's answer. ``now`` is Redis's ``TIME`` when it ran;
    ``reset_at`` (epoch seconds, Redis's clock) is when room is expected, if
    the type can tell; ``token`` names a concurrent slot."""

    admitted: bool
    now: float
    used: float
    reset_at: float | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """What a ``within_limit`` call asks for: ``used`` units (bucket and
    window) or an ``estimate`` of points."""

    used: int = 1
    estimate: float | None = None


class Handle:
    """Given to the block of an admitted call.

    ``admitted_at`` is Redis's clock at admission (epoch seconds), so callers
    and tests can reason about admissions without trusting their own clock.
    For a ``points`` limiter, :meth:`points_used` settles the estimate.
    """

    __slots__ = ("_charged", "admitted_at", "limiter", "token")

    def __init__(self, limiter: Limiter, attempt: Attempt, charged: float) -> None:
        self.limiter = limiter
        self.admitted_at = attempt.now
        self.token = attempt.token
        self._charged = charged

    @property
    def charged(self) -> float:
        """Points charged so far (the estimate, until :meth:`points_used`)."""
        return self._charged

    def points_used(self, actual: float) -> None:
        """Settle a ``points`` call: refund ``estimate - actual`` when positive,
        charge the difference when negative; the balance stays within
        ``[0, initial_points]``. Calling it again corrects the last settlement.
        A no-op on an ``unlimited`` limiter, so a swap changes no call site."""
        self._charged = self.limiter._settle(self, actual)

    def __repr__(self) -> str:
        return f"<Handle {self.limiter.type} {self.limiter.name!r} admitted_at={self.admitted_at:.6f}>"
