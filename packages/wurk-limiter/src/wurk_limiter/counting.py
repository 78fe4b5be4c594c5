"""``bucket`` and ``window``: a count of charges per period.

A bucket counts per calendar period in ``lmtr-b:<name>:<epoch>`` (epoch =
Redis's ``TIME`` // period) and resets by rolling onto the next key; a window
keeps one ``lmtr-w:<name>`` entry per charge and trims those older than the
interval, so there is no boundary to burst across.
"""

from __future__ import annotations

import math
from typing import Any

import wurk
from wurk.redis import fence
from wurk_limiter import checks, keys
from wurk_limiter.handle import Attempt, Request
from wurk_limiter.limiter import Limiter, call_token, number, server_read

#: Tries for a bucket charge whose period key went stale between the caller
#: learning Redis's clock and the script running (a boundary in between).
STALE_KEY_TRIES = 4


class _Counting(Limiter):
    takes_used = True

    def __init__(
        self,
        name: str,
        count: int,
        interval: Any,
        seconds: float,
        *,
        wait_timeout: Any,
        backoff: Any,
        ttl: Any,
        reschedule: Any,
        register: bool,
        config: wurk.Config | None,
    ) -> None:
        self.count = checks.positive_int("count", count)
        self.interval = seconds
        options = {
            "count": self.count,
            "interval": interval,
            "wait_timeout": checks.wait_timeout(wait_timeout),
            "backoff": checks.backoff(backoff),
            "ttl": checks.ttl(ttl),
            "reschedule": checks.reschedule(reschedule),
        }
        super().__init__(name, options, register=register, config=config)


class Bucket(_Counting):
    type = "bucket"

    def __init__(
        self,
        name: str,
        count: int,
        interval: str,
        *,
        wait_timeout: Any = 5,
        backoff: Any = None,
        ttl: Any = checks.DEFAULT_TTL,
        reschedule: Any = 20,
        register: bool = True,
        config: wurk.Config | None = None,
    ) -> None:
        # The period its counter belongs to, as last told by Redis; a stale
        # guess costs one more round trip, never a wrong decision.
        self._epoch = -1
        seconds = checks.unit("interval", interval)
        super().__init__(
            name,
            count,
            interval,
            float(seconds),
            wait_timeout=wait_timeout,
            backoff=backoff,
            ttl=ttl,
            reschedule=reschedule,
            register=register,
            config=config,
        )

    def _learn_time(self, now: float) -> None:
        self._epoch = math.floor(now / self.interval)

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        for _ in range(STALE_KEY_TRIES):
            epoch = self._epoch
            reply = self._script(
                conn,
                "bucket_acquire",
                [keys.bucket(self.name, epoch), keys.meta(self.name), call.key],
                [self.count, int(self.interval), self.ttl, request.used, epoch, call.seq, call.ttl],
            )
            status = int(reply[0])
            if status == -1:
                self._epoch = int(reply[2])
                continue
            return Attempt(status == 1, number(reply[1]), number(reply[2]), reset_at=number(reply[3]))
        raise RuntimeError(f"bucket {self.name!r}: Redis's clock kept crossing period boundaries")

    def _poll(self, attempt: Attempt) -> float:
        # Sleep toward the boundary, but never more than 50 ms at a time.
        until = (attempt.reset_at or attempt.now) - attempt.now
        return min(0.05, max(until, 0.001))

    def _status(self, conn: Any) -> dict[str, Any]:
        now, _ = server_read(conn)
        epoch = math.floor(now / self.interval)
        used = int(number(conn.get(keys.bucket(self.name, epoch))))
        return {
            "used": used,
            "limit": self.count,
            "reset_at": (epoch + 1) * self.interval,
            "available": used < self.count,
        }

    def _state_keys(self, conn: Any) -> list[str]:
        # Every period's counter, not only the current one; a name's prefix
        # may be another limiter's ("a" and "a:b"), hence the digit check.
        prefix = keys.bucket_prefix(self.name)
        found = []
        for key in conn.scan_iter(match=f"{prefix}*", count=500):
            text = key.decode()
            if text[len(prefix) :].isdigit():
                found.append(text)
        return found


class Window(_Counting):
    type = "window"
    poll_interval = 0.5

    def __init__(
        self,
        name: str,
        count: int,
        interval: Any,
        *,
        wait_timeout: Any = 5,
        backoff: Any = None,
        ttl: Any = checks.DEFAULT_TTL,
        reschedule: Any = 20,
        register: bool = True,
        config: wurk.Config | None = None,
    ) -> None:
        seconds = checks.interval("interval", interval)
        super().__init__(
            name,
            count,
            checks.wire(interval),
            seconds,
            wait_timeout=wait_timeout,
            backoff=backoff,
            ttl=ttl,
            reschedule=reschedule,
            register=register,
            config=config,
        )

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        reply = self._script(
            conn,
            "window_acquire",
            [keys.window(self.name), keys.meta(self.name)],
            [self.count, repr(self.interval), self.ttl, request.used, call_token(call)],
        )
        leaves = reply[3] if len(reply) > 3 else None
        return Attempt(int(reply[0]) == 1, number(reply[1]), number(reply[2]), reset_at=number(leaves) or None)

    def _status(self, conn: Any) -> dict[str, Any]:
        now, (entries,) = server_read(conn, ("zrange", (keys.window(self.name), 0, -1, False, True)))
        inside = [score for _member, score in entries if score > now - self.interval]
        return {
            "used": len(inside),
            "limit": self.count,
            "reset_at": min(inside) + self.interval if inside else None,
            "available": len(inside) < self.count,
        }

    def _state_keys(self, conn: Any) -> list[str]:
        return [keys.window(self.name)]
