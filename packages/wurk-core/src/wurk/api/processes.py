"""The live cluster: worker processes and the jobs they are running right now.

Every worker (Ruby Sidekiq, Ruby Wurk, Python Wurk) is a member of the
``processes`` SET plus an ``<identity>`` HASH that its heartbeat rewrites every
10 seconds with a 60-second TTL, and an ``<identity>:work`` HASH of its running
jobs. A member whose hash expired is a process that died without leaving;
:class:`ProcessSet` skips it, and its cleanup removes it (once a minute,
cluster-wide, behind the ``process_cleanup`` lock).

Signals travel through Redis: ``quiet()`` / ``stop()`` / ``dump_threads()``
leave ``TSTP`` / ``TERM`` / ``TTIN`` in ``<identity>-signals`` (60-second TTL),
and the process pops one per heartbeat, so the effect comes within a beat or
two, not at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from wurk.api._base import RedisAccess, as_int, busy_threads, text
from wurk.api.record import JobRecord
from wurk.errors import EmbeddedProcessError
from wurk.redis import keys
from wurk.server.scheduled import cleanup_processes

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

__all__ = ["Process", "ProcessSet", "Work", "WorkSet", "Workers"]

#: The hash fields read for each process, in Sidekiq's order.
FIELDS = ("info", "concurrency", "busy", "beat", "quiet", "rss", "rtt_us")
SIGNAL_TTL = 60


class hybridmethod:
    """A method callable on the class or on an instance: it receives whichever
    it was called on, so ``Deploy.mark(...)`` uses the default configuration
    and ``Deploy(config=c).mark(...)`` the instance's."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, instance: Any, owner: type) -> Callable[..., Any]:
        return partial(self.function, owner if instance is None else instance)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def build_process(reply: list[Any], access: RedisAccess) -> Process | None:
    """A :class:`Process` from an ``HMGET`` of :data:`FIELDS`; ``None`` for a lapsed hash."""
    info, concurrency, busy, beat, quiet, rss, rtt_us = reply
    if info is None:
        return None
    try:
        attributes = json.loads(info)
    except ValueError:
        return None  # not a heartbeat any Sidekiq-compatible process writes
    if not isinstance(attributes, dict):
        return None
    attributes.update(
        concurrency=as_int(concurrency),
        busy=as_int(busy),
        beat=_float(beat),
        quiet=text(quiet) == "true",
        rss=as_int(rss),
        rtt_us=as_int(rtt_us),
    )
    return Process(attributes, config=access.config, pool=access._pool)


class ProcessSet(RedisAccess):
    """Every live process, sorted by identity.

    Construction prunes members whose heartbeat lapsed (at most once a minute
    across the cluster); pass ``clean=False`` on a hot path. ``size`` counts
    raw members and may include the dead; ``len(list(ProcessSet()))`` does not.
    """

    def __init__(
        self, clean: bool = True, *, config: Config | None = None, pool: RedisPool | str | None = None
    ) -> None:
        super().__init__(config, pool)
        if clean:
            self.cleanup()

    def cleanup(self) -> int:
        """Remove members whose heartbeat hash expired; 0 when another caller
        already did so in the last minute. Returns how many were removed."""
        return int(self.run(cleanup_processes))

    @hybridmethod
    def get(
        owner: Any, identity: str, *, config: Config | None = None, pool: RedisPool | str | None = None
    ) -> Process | None:
        """The process with this identity; ``None`` if unknown or lapsed.

        ``ProcessSet.get(identity)`` reads through the default configuration,
        ``process_set.get(identity)`` through that set's own."""
        access = owner if isinstance(owner, RedisAccess) and config is None and pool is None else None
        access = access or RedisAccess(config, pool)

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=True)
            pipe.sismember(keys.PROCESSES, identity)
            pipe.hmget(identity, *FIELDS)
            replies: list[Any] = pipe.execute()
            return replies

        member, reply = access.run(read)
        return build_process(reply, access) if member else None

    def __getitem__(self, identity: str) -> Process:
        found: Process | None = self.get(identity)
        if found is None:
            raise KeyError(identity)
        return found

    def __iter__(self) -> Iterator[Process]:
        def read(conn: Any) -> list[Any]:
            members = sorted(text(member) for member in conn.sscan_iter(keys.PROCESSES))
            pipe = conn.pipeline(transaction=False)
            for member in members:
                pipe.hmget(member, *FIELDS)
            replies: list[Any] = pipe.execute()
            return replies

        for reply in self.run(read):
            process = build_process(reply, self)
            if process is not None:
                yield process

    @property
    def size(self) -> int:
        """Members of ``processes`` (``SCARD``), lapsed ones included until a cleanup."""
        return int(self.run(lambda conn: conn.scard(keys.PROCESSES)))

    @property
    def total_concurrency(self) -> int:
        """Threads across every live process."""
        return sum(process.concurrency for process in self)

    @property
    def total_rss_in_kb(self) -> int:
        """Resident memory across every live process, in kilobytes."""
        return sum(process.rss for process in self)

    total_rss = total_rss_in_kb

    @cached_property
    def leader(self) -> str:
        """The cluster leader's identity (``dear-leader``), ``""`` when there is none.
        Read once per ``ProcessSet``."""
        return text(self.run(lambda conn: conn.get(keys.LEADER)))


class Process(Mapping[str, Any]):
    """One live process: its ``info`` JSON merged with its heartbeat fields.

    Read it like a dict (``process["busy"]``, ``process["hostname"]``); the
    heartbeat fields are typed: ``concurrency``, ``busy``, ``rss`` (KB) and
    ``rtt_us`` are ints, ``beat`` is epoch seconds, ``quiet`` is a bool.
    """

    def __init__(
        self, attributes: Mapping[str, Any], *, config: Config | None = None, pool: RedisPool | str | None = None
    ) -> None:
        self._attributes = dict(attributes)
        self._access = RedisAccess(config, pool)

    def __getitem__(self, key: str) -> Any:
        return self._attributes[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._attributes)

    def __len__(self) -> int:
        return len(self._attributes)

    def __repr__(self) -> str:
        return f"<Process {self.identity} busy={self.busy}/{self.concurrency}{' quiet' if self.stopping else ''}>"

    @property
    def identity(self) -> str:
        return str(self._attributes.get("identity", ""))

    id = identity

    @property
    def tag(self) -> str:
        return str(self._attributes.get("tag") or "")

    @property
    def labels(self) -> list[str]:
        return list(self._attributes.get("labels") or ())

    @property
    def version(self) -> str | None:
        return self._attributes.get("version")

    @property
    def capsules(self) -> dict[str, Any] | None:
        return self._attributes.get("capsules")

    @property
    def queues(self) -> list[str]:
        """Every queue served, from the capsules (else the pre-8.0.9 ``queues`` field)."""
        capsules = self.capsules
        if not capsules:
            return list(self._attributes.get("queues") or ())
        names = (name for capsule in capsules.values() for name in capsule.get("weights", {}))
        return list(dict.fromkeys(names))

    @property
    def weights(self) -> dict[str, int]:
        """Queue weights; two capsules serving one queue collapse into one entry."""
        capsules = self.capsules
        if not capsules:
            legacy = self._attributes.get("weights") or []
            return {name: weight for entry in legacy for name, weight in entry.items()}
        return {name: weight for capsule in capsules.values() for name, weight in capsule.get("weights", {}).items()}

    @property
    def concurrency(self) -> int:
        return as_int(self._attributes.get("concurrency"))

    @property
    def busy(self) -> int:
        return as_int(self._attributes.get("busy"))

    @property
    def rss(self) -> int:
        return as_int(self._attributes.get("rss"))

    @property
    def beat(self) -> float:
        return _float(self._attributes.get("beat"))

    @property
    def embedded(self) -> bool:
        return bool(self._attributes.get("embedded"))

    @property
    def stopping(self) -> bool:
        """True once the process has gone quiet (or is shutting down)."""
        return bool(self._attributes.get("quiet"))

    @property
    def leader(self) -> bool:
        """Whether this process holds ``dear-leader`` (asks Redis)."""
        return text(self._access.run(lambda conn: conn.get(keys.LEADER))) == self.identity

    def quiet(self) -> None:
        """Ask the process to stop fetching jobs (``TSTP``); it finishes the ones it has."""
        if self.embedded:
            raise EmbeddedProcessError(
                f"{self.identity} is embedded in its host application: call quiet() on its "
                "embedded instance there; it cannot be quieted through Redis"
            )
        self.signal("TSTP")

    def stop(self) -> None:
        """Ask the process to shut down (``TERM``), within its ``timeout``."""
        if self.embedded:
            raise EmbeddedProcessError(
                f"{self.identity} is embedded in its host application: call stop() on its "
                "embedded instance there; it cannot be stopped through Redis"
            )
        self.signal("TERM")

    def dump_threads(self) -> None:
        """Ask the process to log every thread's stack (``TTIN``)."""
        self.signal("TTIN")

    def signal(self, name: str) -> None:
        """Leave ``name`` for the process's next heartbeat to pop."""
        key = keys.process_signals(self.identity)

        def send(conn: Any) -> None:
            pipe = conn.pipeline(transaction=True)
            pipe.lpush(key, name)
            pipe.expire(key, SIGNAL_TTL)
            pipe.execute()

        self._access.run(send)


class WorkSet(RedisAccess):
    """The jobs running across the cluster, as of each process's last heartbeat.

    Iteration yields :class:`Work`, oldest start first. The data lags reality
    by up to one heartbeat; treat it as a picture, not a ledger.
    """

    def __init__(self, *, config: Config | None = None, pool: RedisPool | str | None = None) -> None:
        super().__init__(config, pool)

    def __iter__(self) -> Iterator[Work]:
        def read(conn: Any) -> tuple[list[str], list[Any]]:
            members = sorted(text(member) for member in conn.sscan_iter(keys.PROCESSES))
            pipe = conn.pipeline(transaction=False)
            for member in members:
                pipe.hgetall(keys.process_work(member))
            return members, pipe.execute()

        members, works = self.run(read)
        found = []
        for identity, work in zip(members, works, strict=True):
            for thread_id, raw in work.items():
                try:
                    state = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(state, dict):
                    found.append(Work(identity, text(thread_id), state, config=self.config, pool=self._pool))
        found.sort(key=lambda work: work.run_at_epoch)
        return iter(found)

    @property
    def size(self) -> int:
        """Busy threads: the sum of every member's ``busy`` field."""
        return int(self.run(busy_threads))

    def find_work(self, jid: str) -> Work | None:
        """The running job with this jid, by reading every work hash (for consoles)."""
        return next((work for work in self if work.job.jid == jid), None)

    find_work_by_jid = find_work


#: Sidekiq's pre-8 name for :class:`WorkSet`.
Workers = WorkSet


class Work:
    """One running job: which process and thread, since when, and its payload."""

    def __init__(
        self,
        process_id: str,
        thread_id: str,
        state: Mapping[str, Any],
        *,
        config: Config | None = None,
        pool: RedisPool | str | None = None,
    ) -> None:
        self.process_id = process_id
        self.thread_id = thread_id
        self.queue: str = str(state.get("queue") or "")
        raw = state.get("payload")
        # Sidekiq 8 stores the payload as the JSON string that was fetched;
        # older writers stored the object itself.
        self.value: str = raw if isinstance(raw, str) else json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
        self.run_at_epoch = _float(state.get("run_at"))
        self._config = config
        self._pool = pool

    def __repr__(self) -> str:
        return f"<Work {self.process_id}/{self.thread_id} {self.job.display_class} since {self.run_at:%H:%M:%S}>"

    @property
    def run_at(self) -> datetime:
        """When the job started, as an aware UTC datetime."""
        return datetime.fromtimestamp(self.run_at_epoch, UTC)

    @cached_property
    def job(self) -> JobRecord:
        """The payload as a :class:`~wurk.api.JobRecord` (``klass``, ``args``, ``jid``…)."""
        return JobRecord(self.value, self.queue or None, config=self._config, pool=self._pool)

    @property
    def payload(self) -> dict[str, Any]:
        """The parsed payload."""
        return self.job.item
