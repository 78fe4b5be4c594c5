"""Leader election: one process in the fleet runs the once-per-cluster work.

Every process campaigns for ``dear-leader`` with ``SET NX EX 30``. The leader
renews every 15 s (only while it still holds the lock) and bumps
``leader-token`` on each promotion, so work it fenced with an older token can
be told apart. Followers try again every 60 s. A graceful shutdown releases
the lock (again only if still held), so a successor takes over at once rather
than after the TTL. ``WURK_LEADER=false`` keeps a process out of elections.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from wurk import env, keys
from wurk.component import BackgroundThread

if TYPE_CHECKING:
    from wurk.config import Config


class Leader(BackgroundThread):
    thread_name = "wurk-leader"

    def __init__(self, config: Config, identity: str) -> None:
        self.config = config
        self.identity = identity
        self.ttl = int(config.option("leader_ttl", 30))
        self.renew_interval = float(config.option("leader_renew_interval", 15))
        self.follower_interval = float(config.option("leader_follower_interval", 60))
        self.token: int | None = None
        self._until = 0.0
        super().__init__()

    def is_leader(self) -> bool:
        """Cached: true while our last successful claim or renewal is within the TTL."""
        return time.monotonic() < self._until

    def start(self) -> None:
        if env.leader_opted_out():
            self.config.logger.info("WURK_LEADER=false: not campaigning for leadership")
            return
        super().start()

    def _run(self) -> None:
        while not self.stopping:
            try:
                self.campaign()
            except Exception as exc:
                self._until = 0.0
                self.config.handle_exception(exc, {"context": "leader election"})
            wait = self.renew_interval if self.is_leader() else self.follower_interval
            if self.wait(wait):
                return

    def campaign(self) -> bool:
        """One round: renew if leading, else try to take the lock."""
        pool = self.config.redis_pool
        started = time.monotonic()
        if self.is_leader():
            renewed = pool.execute(
                lambda conn: self.config.scripts.call(
                    "core.leader_renew", conn, [keys.LEADER], [self.identity, self.ttl]
                )
            )
            if renewed:
                self._until = started + self.ttl
                return True
            self._until = 0.0
            self.config.logger.info("lost leadership")
            return False
        if pool.execute(lambda conn: conn.set(keys.LEADER, self.identity, nx=True, ex=self.ttl)):
            self._until = started + self.ttl
            self.token = int(pool.execute(lambda conn: conn.incr(keys.LEADER_TOKEN)))
            self.config.logger.info("became the cluster leader (token %s)", self.token)
            self.config.fire_event("leader")
            return True
        return False

    def stop(self) -> None:
        super().stop()
        if self.is_leader():
            try:
                self.config.redis_pool.execute(
                    lambda conn: self.config.scripts.call("core.leader_release", conn, [keys.LEADER], [self.identity])
                )
            except Exception as exc:
                self.config.handle_exception(exc, {"context": "leader release"})
            self._until = 0.0
