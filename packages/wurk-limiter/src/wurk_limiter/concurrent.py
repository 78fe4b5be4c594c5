"""``concurrent``: how many blocks may run at the same time.

A slot is a member of ``lmtr-cs:<name>`` scored with its expiry (Redis's
``TIME`` + ``lock_timeout``); a crashed holder's slot is reclaimed once it
expires. The only type with metric counters, in ``lmtr-stats:<name>``.
"""

from __future__ import annotations

from typing import Any

import wurk
from wurk.redis import fence
from wurk_limiter import checks, keys
from wurk_limiter.handle import Attempt, Handle, Request
from wurk_limiter.limiter import Limiter, call_token, count_once, number, server_read

#: The counters ``status()`` merges, all zero until first counted.
COUNTERS = ("held", "held_time", "immediate", "waited", "wait_time", "overages", "reclaimed")
FLOAT_COUNTERS = ("held_time", "wait_time")


class Concurrent(Limiter):
    type = "concurrent"
    poll_interval = 0.05

    def __init__(
        self,
        name: str,
        limit: int,
        *,
        wait_timeout: Any = 5,
        lock_timeout: Any = 30,
        policy: str = "raise",
        backoff: Any = None,
        ttl: Any = checks.DEFAULT_TTL,
        register: bool = True,
        config: wurk.Config | None = None,
    ) -> None:
        self.limit = checks.positive_int("limit", limit)
        self.lock_timeout = checks.lock_timeout(lock_timeout)
        options = {
            "limit": self.limit,
            "wait_timeout": checks.wait_timeout(wait_timeout),
            "lock_timeout": self.lock_timeout,
            "policy": checks.policy(policy),
            "backoff": checks.backoff(backoff),
            "ttl": checks.ttl(ttl),
        }
        super().__init__(name, options, register=register, config=config)

    def _acquire(self, conn: Any, request: Request, first: float | None, call: fence.Ticket) -> Attempt:
        token = call_token(call)
        reply = self._script(
            conn,
            "concurrent_acquire",
            [keys.slots(self.name), keys.stats(self.name), keys.meta(self.name)],
            [self.limit, self.lock_timeout, self.ttl, token, "" if first is None else f"{first:.6f}"],
        )
        if int(reply[0]) == 1:
            return Attempt(True, number(reply[1]), number(reply[2]), token=token)
        soonest = reply[3] if len(reply) > 3 else None
        return Attempt(False, number(reply[1]), number(reply[2]), reset_at=number(soonest) if soonest else None)

    def _release(self, handle: Handle) -> None:
        # Safe to send again: a slot already given back is not found again.
        token = handle.token
        self._pool().execute(
            lambda conn: self._script(
                conn,
                "concurrent_release",
                [keys.slots(self.name), keys.stats(self.name)],
                [token or "", self.lock_timeout, self.ttl],
            )
        )

    def _overage(self) -> None:
        def count(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.hincrby(keys.stats(self.name), "overages", 1)
            pipe.expire(keys.stats(self.name), self.ttl)
            pipe.execute()

        count_once(self, "an overage", count)

    def _status(self, conn: Any) -> dict[str, Any]:
        now, (slots, counters) = server_read(
            conn,
            ("zrange", (keys.slots(self.name), 0, -1, False, True)),
            ("hgetall", (keys.stats(self.name),)),
        )
        live = [score for _member, score in slots if score > now]
        status: dict[str, Any] = {
            "used": len(live),
            "limit": self.limit,
            "reset_at": min(live) if live else None,
            "available": len(live) < self.limit,
        }
        raw = {field.decode(): value for field, value in counters.items()}
        for counter in COUNTERS:
            value = number(raw.get(counter))
            status[counter] = value if counter in FLOAT_COUNTERS else int(value)
        return status

    def _state_keys(self, conn: Any) -> list[str]:
        return [keys.slots(self.name), keys.stats(self.name)]
