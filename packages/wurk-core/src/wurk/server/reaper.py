"""The reaper: gives the jobs of dead processes back to their queues.

A process killed mid-job (SIGKILL, OOM, a vanished host) leaves its claimed
jobs in private lists nobody will acknowledge. Every worker runs a reaper
thread that finds such lists and moves their jobs, one by one and atomically,
from the private list's tail to the public queue's tail, where the next fetch
takes them:

* at boot, one scoped sweep with no lock, so a replacement recovers its dead
  sibling at once;
* every ``super_fetch_reaper_interval`` (60 s) a scoped sweep of the queues
  this process serves, and at most hourly a sweep of the whole keyspace (for
  queues nobody serves any more) — each behind a ``SET NX EX`` lock, so one
  process in the fleet sweeps per interval, leader or not.

Whether an owner is dead is decided per list, from what a restarted process
cannot impersonate: the owner's heartbeat hash ``<host>:<pid>:<nonce>`` (60 s
TTL), whose nonce is new in every process. On this host the kernel answers
sooner: no process with that pid (``kill(pid, 0)``) means dead, and so does
our own pid under another nonce — a container restarted as PID 1 under the
same host name finds its predecessor's lists that way, at its boot sweep.

A job recovered for the first time is counted in ``super_fetch:recovered:<id>``
(72 h) and becomes a *suspect*; after that it is counted again only when the
dead process had marked it, which the fetcher does for a suspect in the first
``poison_pill_window`` seconds of its run (see :mod:`wurk.server.fetch.suspects`);
an iterable job's checkpoint that moved its cursor resets its count (see
:mod:`wurk.iterable.state`). At the third counted recovery it is a poison
pill: it goes to the dead set instead, its copy is taken off the queue and
its iteration state ``it-<jid>`` deleted, the death handlers run and its
outcome is ``died`` for the reason ``poison_pill``. A job that was only
claimed beside the one that crashed its process, or killed long after it
started, never gets there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from wurk.client import payload as wire
from wurk.plugins import outcomes
from wurk.plugins.component import Component
from wurk.plugins.outcomes import Outcome
from wurk.redis import keys
from wurk.redis.scripts import Arg
from wurk.server.identity import gone, parse_private_queue
from wurk.server.retry import JobRetry

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.server.identity import ProcessIdentity

RECOVERY_THRESHOLD = 3
RECOVERY_TTL = 72 * 60 * 60
SCOPED_LOCK = "super_fetch:reaper"
FULL_LOCK = "super_fetch:reaper:full"
FULL_INTERVAL = 3600
RECLAIM_BATCH = 100


class Reaper(Component):
    name = "wurk-reaper"
    context = "reaper"

    def __init__(self, config: Config, identity: ProcessIdentity, queues: list[str]) -> None:
        super().__init__(config)
        self.identity = identity
        self.queues = queues
        self.interval = float(config.option("super_fetch_reaper_interval", 60))
        self._last_full = float("-inf")  # the first periodic pass may sweep everything
        self._booted = False

    def first_wait(self) -> float:
        return 0.0

    def tick(self) -> None:
        if not self._booted:
            self._booted = True
            self.sweep()  # the boot sweep: no lock, our dead sibling's jobs come back now
        else:
            self.periodic()

    def periodic(self) -> int:
        conn = self.config.redis_pool.client
        moved = 0
        if conn.set(SCOPED_LOCK, "1", nx=True, ex=max(1, int(self.interval))):
            moved += self.sweep()
        if time.monotonic() - self._last_full >= FULL_INTERVAL and conn.set(FULL_LOCK, "1", nx=True, ex=FULL_INTERVAL):
            self._last_full = time.monotonic()
            moved += self.sweep(full=True)
        return moved

    def sweep(self, *, full: bool = False) -> int:
        """Reclaim every dead owner's private lists; the number of jobs moved."""
        conn = self.config.redis_pool.client
        patterns = ["queue:*|*"] if full else [f"queue:{_escape(queue)}|*" for queue in self.queues]
        moved = 0
        for pattern in patterns:
            for raw_key in conn.scan_iter(match=pattern, count=500):
                key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
                owner = parse_private_queue(key)
                if owner is None:
                    continue
                queue, host, pid, nonce = owner
                if (host, pid, nonce) == (self.identity.hostname, self.identity.pid, self.identity.nonce):
                    continue
                if not self.alive(conn, host, pid, nonce):
                    moved += self.reclaim(conn, key, queue, f"{host}:{pid}:{nonce}")
        return moved

    def alive(self, conn: Any, host: str, pid: int, nonce: str) -> bool:
        if gone(host, pid, nonce, self.identity.hostname):
            return False
        return bool(conn.exists(f"{host}:{pid}:{nonce}"))

    def reclaim(self, conn: Any, private: str, queue: str, owner: str) -> int:
        moved = 0
        script_keys = [private, keys.queue(queue), keys.DEAD, keys.SUSPECTS, keys.running_suspects(owner)]
        while True:
            now = time.time()
            args: list[Arg] = [
                RECOVERY_THRESHOLD,
                RECOVERY_TTL,
                repr(now),
                int(self.config["dead_timeout_in_seconds"]),
                int(self.config["dead_max_jobs"]),
                RECLAIM_BATCH,
            ]
            result = self.config.scripts.call("core.reclaim", conn, script_keys, args)
            for index in range(0, len(result), 2):
                job = result[index]
                self.report(wire.exact(job), int(result[index + 1]), queue)
            moved += len(result) // 2
            if len(result) // 2 < RECLAIM_BATCH:
                break
        if moved:
            self.config.logger.warning("recovered %s job(s) of a dead process from %s", moved, private)
        return moved

    def report(self, jobstr: str | bytes, count: int, queue: str) -> str:
        """Tell statsd and the callbacks about one recovery: ``"poison"`` or ``"recovered"``."""
        callback = self.config.option("super_fetch_callback")
        if count < RECOVERY_THRESHOLD:
            self.config.statsd_increment("jobs.recovered.fetch")
            self._call(callback, jobstr, None)
            return "recovered"
        try:
            job = wire.loads(jobstr)
        except ValueError:
            job = {}
        if not isinstance(job, dict):
            job = {}
        pill = {"jid": job.get("jid"), "klass": job.get("class"), "count": count, "queue": queue}
        self.config.statsd_increment("jobs.poison")
        self.config.logger.error(
            "poison pill: %s %s recovered %s times, moved to the dead set", pill["klass"], pill["jid"], count
        )
        for on_poison in list(self.config.option("poison_callbacks") or ()):
            self._call(on_poison, pill)
        self._call(callback, jobstr, pill)
        if job:  # a payload that is not a job has no one to tell, as in the retry layer
            JobRetry(self.config).run_death_handlers(job, poisoned(count), "poison_pill")
        # Told whatever the payload: a listener keyed on jids skips a jid-less one.
        outcomes.report(self.config, Outcome.of("died", job, queue=queue, reason="poison_pill"))
        return "poison"

    def _call(self, callback: Any, *args: Any) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception as exc:
            self.config.handle_exception(exc, {"context": "poison pill callback"})


def poisoned(count: int) -> RuntimeError:
    """What the death handlers get for a poison pill: it raised nothing, it
    crashed the processes that ran it."""
    try:
        raise RuntimeError(f"poison pill: its process died while it was running, {count} times")
    except RuntimeError as exc:
        return exc


def _escape(pattern: str) -> str:
    """Escape glob characters in a queue name for SCAN MATCH."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in pattern)
