"""Leader election: one process in the fleet runs the once-per-cluster work.

Every process campaigns for ``dear-leader`` with ``SET NX EX 30``. The leader
renews every 15 s (only while it still holds the lock) and bumps
``leader-token`` on each promotion, so work it fenced with an older token can
be told apart. Followers try again every 60 s. A graceful shutdown releases
the lock (again only if still held), so a successor takes over at once rather
than after the TTL; so does a process on the dead leader's own host, which
can see that its process is gone (a SIGKILLed leader whose replacement
starts on the same host leads at once, not a lease and a try later). A
follower on the leader's host also watches that process between its tries,
with a local ``kill(pid, 0)`` every second and no Redis call, and campaigns
as soon as it is gone: a swarm whose leading child is killed has a new
leader within about a second.
``WURK_LEADER=false`` keeps a process out of elections.

Leadership is announced both ways: ``leader`` fires on each promotion and
``leader_lost`` once each time it ends (a refused renewal, a lease that ran
out while Redis could not be reached, or the release at shutdown). Components
ask whether this process leads *now* with :func:`leadership`, which reads the
:class:`Leader` the launcher registers on the configuration, and carry its
token into :func:`fenced_set` so a write from a leader that has since been
replaced is refused inside Redis.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wurk.config import env
from wurk.plugins.component import Component
from wurk.redis import keys
from wurk.server.identity import gone, parse_identity

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: Seconds between a follower's local checks that the leader on its host lives.
WATCH_INTERVAL = 1.0

#: The name the launcher registers its :class:`Leader` under (``config.lookup``).
SERVICE = "leader"


@dataclass(frozen=True)
class Leadership:
    """One answer to "do we lead, and under which token?", taken at one instant,
    so a check-then-write carries the token that the check saw."""

    leading: bool
    token: int | None = None

    def __bool__(self) -> bool:
        return self.leading


NOT_LEADING = Leadership(False, None)


class Leader(Component):
    name = "wurk-leader"
    context = "leader election"

    def __init__(self, config: Config, identity: str) -> None:
        super().__init__(config)
        self.identity = identity
        self.ttl = int(config.option("leader_ttl", 30))
        self.renew_interval = float(config.option("leader_renew_interval", 15))
        self.follower_interval = float(config.option("leader_follower_interval", 60))
        self.token: int | None = None
        self._until = 0.0
        # Whether we were promoted and have not yet announced the end; separate
        # from the lease so that an end is noticed (and announced) even when the
        # lease ran out while the process was stopped or Redis was unreachable.
        self._promoted = False
        self._lock = threading.Lock()
        #: The holder seen at our last try, when it runs on this host: watched
        #: between tries, so its death is noticed within a second.
        self._holder_here: tuple[str, int, str] | None = None
        self._tried = float("-inf")

    def leads(self) -> bool:
        """True while promoted and the last claim or renewal is within the TTL.

        Cached, no Redis call: a process resumed after a long pause answers
        False at once, before its election thread has noticed anything."""
        return self._promoted and time.monotonic() < self._until

    def fence(self) -> int | None:
        """The ``leader-token`` taken at our promotion, or None when not leading."""
        return self.leadership().token

    def leadership(self) -> Leadership:
        with self._lock:
            if self.leads():
                return Leadership(True, self.token)
        return NOT_LEADING

    def start(self) -> None:
        if env.leader_opted_out():
            self.config.logger.info("WURK_LEADER=false: not campaigning for leadership")
            return
        super().start()

    def first_wait(self) -> float:
        return 0.0

    def next_wait(self) -> float:
        if self._promoted:
            return self.renew_interval
        if self._holder_here is not None:
            return min(WATCH_INTERVAL, self.follower_interval)
        return self.follower_interval

    def backed_off(self, wait: float) -> float:
        return wait  # a renewal must not wait out its own lease

    def tick(self) -> None:
        holder = self._holder_here
        if (
            not self._promoted
            and holder is not None
            and time.monotonic() - self._tried < self.follower_interval
            and not gone(*holder, env.hostname())
        ):
            return  # the leader on this host lives: nothing to ask Redis yet
        try:
            self.campaign()
        except Exception:
            if self._promoted and not self.leads():
                # Unreachable until the lease ran out: someone else may lead now.
                self._lose("the lease ran out before a renewal got through")
            raise

    def campaign(self) -> bool:
        """One round: renew if promoted, else try to take the lock."""
        pool = self.config.redis_pool
        started = time.monotonic()
        if self._promoted:
            # Renewed even when the local lease has run out (a long pause): the
            # script only extends a lock still holding our identity, which no one
            # else can have taken meanwhile, so leadership never changed hands.
            renewed = pool.execute(
                lambda conn: self.config.scripts.call(
                    "core.leader_renew", conn, [keys.LEADER], [self.identity, self.ttl]
                )
            )
            if renewed:
                self._until = started + self.ttl
                return True
            self._lose("the lock is gone or someone else's")
            return False
        self._tried = started
        if pool.execute(lambda conn: self._claim(conn)):
            token = int(pool.execute(lambda conn: conn.incr(keys.LEADER_TOKEN)))
            with self._lock:
                self.token = token
                self._until = started + self.ttl
                self._promoted = True
            self.config.logger.info("became the cluster leader (token %s)", token)
            self.config.fire_event("leader")
            return True
        return False

    def _claim(self, conn: Any) -> bool:
        """Take the lock if it is free, or held by a process this host sees
        dead. ``SET NX`` sent again after a lost reply finds the lock it set
        itself: the identity, unique to this process, tells it is ours. The
        token ``INCR`` that follows may then run twice, which is harmless: the
        token we read is still the newest."""
        if conn.set(keys.LEADER, self.identity, nx=True, ex=self.ttl):
            return True
        raw = conn.get(keys.LEADER)
        holder = raw.decode() if isinstance(raw, bytes) else raw
        self._holder_here = None
        if holder is None or holder == self.identity:
            return holder is not None
        parts = parse_identity(holder)
        if parts is None or parts[0] != env.hostname():
            return False
        if not gone(*parts, env.hostname()):
            self._holder_here = parts
            return False
        taken = self.config.scripts.call("core.leader_takeover", conn, [keys.LEADER], [holder, self.identity, self.ttl])
        if taken:
            self.config.logger.info("took the lead from %s, whose process is gone", holder)
        return bool(taken)

    def _lose(self, why: str) -> None:
        """End our leadership and announce it, once however many paths get here."""
        with self._lock:
            if not self._promoted:
                return
            self._promoted = False
            self._until = 0.0
            token, self.token = self.token, None
        self.config.logger.info("lost leadership (token %s): %s", token, why)
        self.config.fire_event("leader_lost")

    def finish(self) -> None:
        """Release the lock at shutdown, so a follower takes over at once."""
        if not self._promoted:
            return
        try:
            self.config.redis_pool.execute(
                lambda conn: self.config.scripts.call("core.leader_release", conn, [keys.LEADER], [self.identity])
            )
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "leader release"})
        self._lose("released at shutdown")


def leadership(config: Config) -> Leadership:
    """Whether this process leads now, and its fencing token.

    Reads the :class:`Leader` the launcher registered; a process without one
    (a client, a test) never leads::

        from wurk.server.leader import fenced_set, leadership

        now = leadership(config)
        if now:
            fenced_set(config, "report:last", payload, now.token)
    """
    leader = config.lookup(SERVICE)
    return leader.leadership() if isinstance(leader, Leader) else NOT_LEADING


def fenced_set(config: Config, key: str, value: str | bytes, token: int, *, ex: int | None = None) -> bool:
    """SET ``key`` only while ``token`` is still the newest ``leader-token``.

    Why: a leader paused past its TTL may resume and write before it learns it
    was replaced; the newer leader's promotion bumped the token, so the check
    inside Redis refuses the stale write. Returns whether it was written.
    """
    script_args: list[str | bytes | int] = [token, value, ex or 0]
    written = config.redis_pool.execute(
        lambda conn: config.scripts.call("core.fenced_set", conn, [keys.LEADER_TOKEN, key], script_args)
    )
    return bool(written)
