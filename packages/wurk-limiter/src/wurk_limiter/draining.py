"""``leaky`` and ``points``: a level that changes continuously with time.

A leaky bucket's level (``lmtr-l:<name>``) rises by one per admitted call and
drains at ``bucket_size / drain`` per second; a points balance
(``lmtr-p:<name>``) falls by each call's estimate and refills at
``refill_per_second``, clamped to ``[0, initial_points]``. Both are brought up
to date from Redis's ``TIME`` inside the script that reads them.
"""

from __future__ import annotations

from typing import Any

import wurk
from wurk.redis import fence
from wurk_limiter import checks, keys
from wurk_limiter.handle import Attempt, Handle, Request
from wurk_limiter.limiter import Limiter, number, server_read


class Leaky(Limiter):
    type = "leaky"
    poll_interval = 0.05

    def __init__(
        self,
        name: str,
        bucket_size: int,
        drain: Any,
        *,
        wait_timeout: Any = 5,
        backoff: Any = None,
        ttl: Any = checks.DEFAULT_TTL,
        register: bool = True,
        config: wurk.Config | None = None,
    ) -> None:
        self.bucket_size = checks.positive_int("bucket_size", bucket_size)
        self.drain = checks.interval("drain", drain)
        options = {
            "bucket_size": self.bucket_size,
            "drain": checks.wire(drain),
            "wait_timeout": checks.wait_timeout(wait_timeout),
            "backoff": checks.backoff(backoff),
            "ttl": checks.ttl(ttl),
        }
        super().__init__(name, options, register=register, config=config)

    @property
    def rate(self) -> float:
        """Drops drained per second."""
        return self.bucket_size / self.drain

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        reply = self._script(
            conn,
            "leaky_acquire",
            [keys.leaky(self.name), keys.meta(self.name), call.key],
            [self.bucket_size, repr(self.drain), self.ttl, call.seq, call.ttl],
        )
        fits = reply[3] if len(reply) > 3 else None
        return Attempt(int(reply[0]) == 1, number(reply[1]), number(reply[2]), reset_at=number(fits) or None)

    def _status(self, conn: Any) -> dict[str, Any]:
        now, (state,) = server_read(conn, ("hmget", (keys.leaky(self.name), "level", "last")))
        level, last = number(state[0]), number(state[1], now)
        level = max(0.0, level - max(0.0, now - last) * self.rate)
        return {
            "used": level,
            "limit": self.bucket_size,
            "reset_at": now + level / self.rate if level > 0 else None,
            "available": level + 1 <= self.bucket_size,
        }

    def _state_keys(self, conn: Any) -> list[str]:
        return [keys.leaky(self.name)]


class Points(Limiter):
    type = "points"

    def __init__(
        self,
        name: str,
        initial_points: float,
        refill_per_second: float,
        *,
        backoff: Any = None,
        ttl: Any = checks.DEFAULT_TTL,
        register: bool = True,
        config: wurk.Config | None = None,
    ) -> None:
        self.initial_points = checks.positive("initial_points", initial_points)
        self.refill_per_second = checks.non_negative("refill_per_second", refill_per_second)
        options = {
            "initial_points": initial_points,
            "refill_per_second": refill_per_second,
            "backoff": checks.backoff(backoff),
            "ttl": checks.ttl(ttl),
        }
        # wait_timeout stays 0: points never waits.
        super().__init__(name, options, register=register, config=config)

    def _request(self, used: int | None, estimate: float | None) -> Request:
        if used is not None:
            raise ValueError(f"used= is for bucket and window limiters; {self.name!r} is a points limiter")
        if estimate is None:
            raise ValueError(f"points limiter {self.name!r} needs estimate=, the points the call is expected to cost")
        return Request(estimate=checks.positive("estimate", estimate))

    def _charge(self, request: Request) -> float:
        return float(request.estimate or 0.0)

    def _run(self, conn: Any, mode: str, amount: float, call: fence.Ticket) -> list[Any]:
        reply: list[Any] = self._script(
            conn,
            "points",
            [keys.points(self.name), keys.meta(self.name), call.key],
            [
                repr(self.initial_points),
                repr(self.refill_per_second),
                self.ttl,
                mode,
                repr(float(amount)),
                call.seq,
                call.ttl,
            ],
        )
        return reply

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        reply = self._run(conn, "spend", self._charge(request), call)
        ready = reply[3] if len(reply) > 3 else None
        used = self.initial_points - number(reply[2])
        return Attempt(int(reply[0]) == 1, number(reply[1]), used, reset_at=number(ready) or None)

    def _settle(self, handle: Handle, actual: float) -> float:
        spent = checks.non_negative("actual", actual)
        delta = handle.charged - spent  # positive refunds, negative charges more
        if delta:
            call = fence.ticket()  # fenced: a refund sent again is not refunded twice
            self._pool().execute(lambda conn: self._run(conn, "settle", delta, call))
        return spent

    def _status(self, conn: Any) -> dict[str, Any]:
        now, (state,) = server_read(conn, ("hmget", (keys.points(self.name), "points", "last")))
        balance, last = number(state[0], self.initial_points), number(state[1], now)
        balance = min(self.initial_points, balance + max(0.0, now - last) * self.refill_per_second)
        missing = self.initial_points - balance
        full_at = now + missing / self.refill_per_second if missing > 0 and self.refill_per_second > 0 else None
        return {"used": missing, "limit": self.initial_points, "reset_at": full_at, "available": balance >= 1}

    def _state_keys(self, conn: Any) -> list[str]:
        return [keys.points(self.name)]
