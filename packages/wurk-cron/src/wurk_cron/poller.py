"""The cron poller: every worker process runs one, only the leader ticks.

Each tick (every ``cron_tick_interval`` seconds, 60 by default, the first one
interval after start so a short-lived process never ticks) returns at once
unless this process leads. The leader reads each unpaused loop's ``nf``
mark, fires the loop when ``nf <= now`` and computes the following fire
from *now*, so ticks missed while no one led are not backfilled: a due loop
fires once on the first tick after recovery, with a warning when that is
more than 90 seconds late.

The time comes from ``cron_clock`` (a callable returning epoch seconds,
``time.time`` by default), so that an application's tests can drive the
poller through simulated minutes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from wurk.plugins.component import Component
from wurk.server.leader import leadership
from wurk_cron import keys
from wurk_cron.firing import advance, enqueue, record
from wurk_cron.loop import Loop
from wurk_cron.manager import periodic_service
from wurk_cron.parser import Parser
from wurk_cron.registry import LoopSet, decode_fields

if TYPE_CHECKING:
    from wurk.config.configuration import Config

__all__ = ["LATE_AFTER", "Poller"]

#: Seconds late after which a fire is logged as a missed tick.
LATE_AFTER = 90


class Poller(Component):
    name = "wurk-cron"
    context = "cron poller"

    def __init__(self, config: Config, clock: Callable[[], float] | None = None) -> None:
        super().__init__(config)
        self.interval = float(config["cron_tick_interval"])
        self.clock: Callable[[], float] = clock or config["cron_clock"] or time.time
        self.zones = periodic_service(config).zones

    def tick(self) -> None:
        now = leadership(self.config)
        if not now or now.token is None:
            return  # a follower does not even list the loops
        moment = float(self.clock())
        for lid in LoopSet(self.config).lids():
            try:
                self.tick_loop(lid, moment, now.token)
            except Exception as exc:  # one broken loop must not stop the others
                self.config.handle_exception(exc, {"context": "cron poller", "lid": lid})

    def tick_loop(self, lid: str, now: float, token: int) -> str | None:
        """Fire ``lid`` if it is due at ``now``; the jid pushed, if any."""
        fields = decode_fields(self.config.redis_pool.execute(lambda conn: conn.hgetall(keys.loop(lid))))
        if not fields:
            return None
        loop = Loop.from_hash(lid, fields, self.config)
        if loop.paused:
            return None
        parser = Parser(loop.schedule)
        zone = self.zones.zone(loop.tz_name)
        stored = fields.get(keys.NEXT_FIRE, "")
        # No mark yet (just registered): a slot of the preceding interval counts.
        due = int(float(stored)) if stored else parser.next_fire_at(now - self.interval, zone)
        if due is None or due > now:
            if (str(due) if due is not None else "") != stored:
                advance(self.config, lid, expected=stored, next_fire=due, fired_at=0, token=token, mode="mark")
            return None
        following = parser.next_fire_at(now, zone)
        fired_at = int(now)
        if not advance(
            self.config, lid, expected=stored, next_fire=following, fired_at=fired_at, token=token, mode="tick"
        ):
            return None  # another leader fired it, or it was paused or removed meanwhile
        if now - due > LATE_AFTER:
            self.config.logger.warning(
                "[cron] missed tick lid=%s klass=%s expected_at=%s fired_at=%s drift=%ss",
                lid,
                loop.klass,
                due,
                fired_at,
                int(now - due),
            )
        jid = enqueue(self.config, loop)
        if jid is not None:
            record(self.config, lid, fired_at, jid)
        return jid
