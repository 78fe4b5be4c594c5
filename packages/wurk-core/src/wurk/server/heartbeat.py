"""The heartbeat: how a worker process shows up in ``processes`` and the Web UI.

Once at start and then every 10 seconds it flushes the processed/failed/
expired/rescheduled counters, rewrites the ``<identity>:work`` hash of
running jobs, and refreshes the ``<identity>`` hash (60 s TTL) with every
field Sidekiq 8 writes, in one MULTI that also pops one remote signal from
``<identity>-signals``. A Redis error during a beat is reported like any
component's failed tick, by the base :class:`~wurk.plugins.component.Component`, and
the beat is skipped; the counts of a failed flush are kept for the next one.

The 10-second beat is the wire's cadence, but a person watching ``wurk stats``
or a dashboard should not wait that long to see what just happened. So the
thread also wakes every second in between: it flushes the counters when jobs
have finished since the last flush (one pipeline a second at most, never one
per job), and beats at once when the process has just been quieted. While
Redis is unreachable it pings it on each wake (the base's back-off spacing the
wakes out, up to the beat's own 10 seconds), and beats the moment it answers,
which also ends the outage in the log.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from wurk._version import __version__
from wurk.errors import LostReplyError
from wurk.plugins.component import Component
from wurk.redis import fence, keys

if TYPE_CHECKING:
    from wurk.redis.connection import RedisPool
    from wurk.server.runtime import Runtime

BEAT_PAUSE = 10.0
#: Seconds between two wakes of the heartbeat thread between beats.
TICK = 1.0
PROCESS_TTL = 60
DAILY_STAT_TTL = 5 * 365 * 24 * 60 * 60


def rss_kb() -> int:
    """Resident set size in kilobytes, from /proc (0 where unavailable)."""
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Heartbeat(Component):
    name = "wurk-heartbeat"
    context = "heartbeat"
    interval = TICK
    #: Failing wakes back off to the wire's cadence, no further: a process
    #: whose Redis comes back should reappear within one beat.
    max_backoff = BEAT_PAUSE

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime.config)
        self.runtime = runtime
        self.identity = runtime.identity.identity
        self._info = json.dumps(self.info(), separators=(",", ":"), ensure_ascii=False)
        self._pause = float(self.config.option("heartbeat_interval", BEAT_PAUSE))
        self._next_beat = 0.0
        #: The quiet state the last beat wrote (or tried to).
        self._quiet_shown = False
        self._failed = False

    def info(self) -> dict[str, Any]:
        capsules = self.config.capsules
        labels = sorted(str(label) for label in self.config.option("labels") or ())
        queues = list(dict.fromkeys(name for capsule in capsules.values() for name in capsule.weights))
        return {
            "hostname": self.runtime.identity.hostname,
            "started_at": self.runtime.started_at,
            "pid": self.runtime.identity.pid,
            "tag": self.config.option("tag") or "",
            "concurrency": self.config.total_concurrency,  # read by Sidekiq 7's Web UI
            "capsules": {
                name: {"concurrency": c.concurrency, "mode": c.mode, "weights": c.weights}
                for name, c in capsules.items()
            },
            "queues": queues,
            "weights": [c.weights for c in capsules.values()],
            "labels": labels,
            "identity": self.identity,
            "version": __version__,
            "embedded": bool(self.runtime.embedded),
        }

    @property
    def last_beat(self) -> float | None:
        return self.runtime.last_beat

    def start(self) -> None:
        # The first beat before any job runs: the process is visible at once.
        # A failure is reported and counted like a failed tick; the loop retries.
        self.guarded(self.beat)
        super().start()

    def first_wait(self) -> float:
        return self.next_wait()

    def next_wait(self) -> float:
        return min(TICK, self._next_beat - time.monotonic())

    def finish(self) -> None:
        """The counters' last flush, the last beat (showing quiet), then leave."""
        try:
            self.flush_stats()
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "final stats flush"})
        self.beat_quiet_then_clear()

    def tick(self) -> None:
        """One wake: the beat when it is due (or the process was just
        quieted), else the counters, or a ping while Redis is unreachable.
        Raises what Redis raised; the base reports it and backs off."""
        if time.monotonic() >= self._next_beat or self.runtime.quieted != self._quiet_shown:
            self.beat()
            return
        if self.config.outage_log.down:
            self.config.redis_pool.execute(lambda conn: conn.ping())
            if self._failed:
                # Back: beat now, so a process whose hash lapsed during
                # the outage reappears at once, not at the next beat.
                self.beat()
                return
            self.config.outage_log.recovered()
        self.flush_stats()

    def beat(self) -> None:
        """One beat; raises when Redis did not take it."""
        self._next_beat = time.monotonic() + self._pause
        # Taken before the beat, so that a beat which fails is not retried
        # every second: the regular cadence (or the end of an outage) will.
        self._quiet_shown = self.runtime.quieted
        try:
            self._beat()
        except Exception:
            self._failed = True
            raise
        self._failed = False

    def _beat(self) -> None:
        self.flush_stats()
        for manager in self.runtime.managers:
            manager.fetcher.flush_acks()
        self._write_work()
        pool = self.config.redis_pool
        started = time.perf_counter()
        pool.execute(lambda conn: conn.ping())
        rtt_us = int((time.perf_counter() - started) * 1_000_000)
        busy = sum(manager.busy() for manager in self.runtime.managers)
        quiet = self._quiet_shown
        fields = {
            "info": self._info,
            "concurrency": self.config.total_concurrency,
            "busy": busy,
            "beat": repr(time.time()),
            "rtt_us": rtt_us,
            "quiet": "true" if quiet else "false",
            "rss": rss_kb(),
        }

        def write(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=True)
            pipe.sadd(keys.PROCESSES, self.identity)
            pipe.exists(self.identity)
            pipe.hset(self.identity, mapping=fields)
            pipe.expire(self.identity, PROCESS_TTL)
            replies: list[Any] = pipe.execute()
            return replies

        _, existed, _, _ = pool.execute(write)
        signal = self._take_signal(pool)
        self.runtime.last_beat = time.time()
        self.config.outage_log.recovered()
        if not existed:
            self.config.fire_event("heartbeat")
        self.config.fire_event("beat")
        if signal:
            self.runtime.on_signal(signal.decode() if isinstance(signal, bytes) else signal)

    def _take_signal(self, pool: RedisPool) -> bytes | None:
        """The next signal left for this process through Redis, by a fenced
        pop: a plain ``RPOP`` sent again after a lost reply would drop one."""
        ticket = fence.ticket()
        script_keys = [keys.process_signals(self.identity), keys.pop_receipt(ticket.token)]
        signal: bytes | None = pool.execute(
            lambda conn: self.config.scripts.call("core.signal_pop", conn, script_keys, [ticket.seq, ticket.ttl])
        )
        return signal

    def flush_stats(self) -> None:
        processed, failed, expired, rescheduled = self.runtime.stats.swap()
        if not (processed or failed or expired or rescheduled):
            return
        day = datetime.now(UTC).strftime("%Y-%m-%d")

        def write(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            for stat, count in ((keys.STAT_PROCESSED, processed), (keys.STAT_FAILED, failed)):
                pipe.incrby(stat, count)
                pipe.incrby(keys.daily_stat(stat, day), count)
                pipe.expire(keys.daily_stat(stat, day), DAILY_STAT_TTL)
            # Wurk's own counters, written only when there is something to add.
            for stat, count in ((keys.STAT_EXPIRED, expired), (keys.STAT_RESCHEDULED, rescheduled)):
                if count:
                    pipe.incrby(stat, count)
                    pipe.incrby(keys.daily_stat(stat, day), count)
                    pipe.expire(keys.daily_stat(stat, day), DAILY_STAT_TTL)
            pipe.execute()

        try:
            self.config.redis_pool.execute(write, once=True)
        except LostReplyError:
            # The counts may be in Redis already: putting them back could
            # count them twice, leaving them out at most undercounts a beat.
            self.config.logger.warning(
                "heartbeat: the reply to a stats flush was lost; %s processed, %s failed may be missing",
                processed,
                failed,
            )
        except Exception:
            self.runtime.stats.restore(processed, failed, expired, rescheduled)
            raise

    def _write_work(self) -> None:
        work_key = keys.process_work(self.identity)
        entries = {
            thread_id: json.dumps(state, separators=(",", ":"), ensure_ascii=False)
            for thread_id, state in list(self.runtime.work_state.items())
        }

        def write(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.unlink(work_key)
            if entries:
                pipe.hset(work_key, mapping=entries)
                pipe.expire(work_key, PROCESS_TTL)
            pipe.execute()

        self.config.redis_pool.execute(write)

    def clear(self) -> None:
        """Leave ``processes`` at shutdown; the hash itself simply expires."""

        def remove(conn: Any) -> None:
            pipe = conn.pipeline(transaction=False)
            pipe.srem(keys.PROCESSES, self.identity)
            pipe.unlink(keys.process_work(self.identity))
            pipe.execute()

        try:
            self.config.redis_pool.execute(remove)
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "heartbeat clear"})

    def beat_quiet_then_clear(self) -> None:
        """The last beat (showing ``quiet``) and then leave ``processes``."""
        self.guarded(self.beat)
        self.clear()
