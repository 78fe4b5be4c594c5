"""Per-job profiles: a job pushed with ``profile="alice"`` runs under ``cProfile``.

The processor calls :func:`profile_job` between stats and the reloader, and
only for a job that carries ``profile``: every other job pays one dict
lookup. The profile is stored where Sidekiq 8 stores its Vernier profiles,
so one dashboard lists both: a hash ``<token>-<jid>`` holding who asked, the
job, the timings and the data, expiring after a day, and an entry in the
``profiles`` sorted set scored by that expiry. Only a job that finishes
cleanly leaves a profile, as in Sidekiq.

The data is Python's own: the ``pstats`` table (what ``cProfile`` writes to
a ``.prof`` file), marshalled and gzipped. A Ruby dashboard cannot open it,
and ours cannot open a Vernier profile; the ``format`` field, which Sidekiq
does not write, tells them apart.

The interpreter has room for one ``cProfile`` at a time from Python 3.12 on
(it became a ``sys.monitoring`` tool), so a process profiles one job at a
time: a second profiled job that starts meanwhile, or one started under a
debugger or coverage, runs unprofiled with a warning rather than failing.
"""

from __future__ import annotations

import cProfile
import gzip
import json
import marshal
import pstats
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from redis.exceptions import RedisError

from wurk.errors import RedisConnectionError
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config

T = TypeVar("T")

#: Seconds a profile is kept (Sidekiq's one day).
EXPIRY = 86400
#: The ``format`` field of a profile this module wrote.
FORMAT = "pstats"
#: The most a stored profile may unpack to. A job's table is a few hundred
#: kilobytes; the data comes from Redis, so anyone who can write there could
#: otherwise store a few kilobytes that unpack to gigabytes in the reader.
MAX_TABLE_BYTES = 64 * 1024 * 1024
#: The longest ``profile`` value a push accepts: it becomes part of a Redis key.
MAX_TOKEN = 200

#: One profiler per interpreter (see the module docstring): held while a job
#: is profiled, tried without waiting, so no job ever queues behind another.
_PROFILING = threading.Lock()


def check_token(value: Any, job: Mapping[str, Any]) -> str:
    """The option's check at push time: a short string naming who asked."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"the 'profile' option names who asked for the profile (a string), got {value!r}")
    if len(value) > MAX_TOKEN or any(char < " " for char in value):
        raise ValueError(f"the 'profile' option is at most {MAX_TOKEN} printable characters, got {value!r}")
    return value


def token_of(job: Mapping[str, Any]) -> str:
    """The ``profile`` value as Ruby's ``to_s`` would spell it in the key
    (``true`` from a Ruby client that pushed ``profile: true``)."""
    token = job["profile"]
    return token if isinstance(token, str) else json.dumps(token)


def job_type(job: Mapping[str, Any]) -> str:
    """The class shown for the profile: the wrapped job's, for a wrapper."""
    wrapped = job.get("wrapped")
    return str(wrapped) if isinstance(wrapped, str) and wrapped else str(job.get("class", ""))


def profile_job(config: Config, job: Mapping[str, Any], run: Callable[[], T]) -> T:
    """``run()`` under ``cProfile``; its profile stored when it returns."""
    if not _PROFILING.acquire(blocking=False):
        config.logger.warning("profile %r skipped: another job is being profiled in this process", job.get("profile"))
        return run()
    profiler = cProfile.Profile()
    started_at = time.time()
    began = time.perf_counter()
    try:
        profiler.enable()
    except ValueError as exc:  # another profiling tool holds the interpreter's slot
        _PROFILING.release()
        config.logger.warning("profile %r skipped: %s", job.get("profile"), exc)
        return run()
    try:
        try:
            result = run()
        finally:
            profiler.disable()
        elapsed = time.perf_counter() - began
    finally:
        _PROFILING.release()
    _store(config, job, profiler, started_at, elapsed)
    return result


def encode(profiler: cProfile.Profile) -> bytes:
    """The ``pstats`` table as a ``.prof`` file holds it, gzipped."""
    profiler.create_stats()
    return gzip.compress(marshal.dumps(profiler.stats), compresslevel=6)


def decode(data: bytes) -> pstats.Stats:
    """A stored profile's data as ``pstats.Stats``; ``ValueError`` when it is
    not one this module wrote (a Ruby Vernier profile, say).

    The data is read from Redis, so it is checked before ``pstats`` sees it:
    unpacked to at most :data:`MAX_TABLE_BYTES`, and shaped like the table
    ``cProfile`` makes. ``marshal`` builds values only and runs no code, but
    it is not hardened against crafted input (docs/security.md).
    """
    try:
        table = marshal.loads(_gunzip(data, MAX_TABLE_BYTES))
    except (OSError, EOFError, ValueError, TypeError, zlib.error) as exc:
        raise ValueError(f"not a Python profile: {exc}") from None
    if not isinstance(table, dict) or not all(_is_row(where, row) for where, row in table.items()):
        raise ValueError("not a Python profile: the data is not a pstats table")
    return pstats.Stats(_Loaded(table))  # type: ignore[arg-type]


def _gunzip(data: bytes, limit: int) -> bytes:
    unpacker = zlib.decompressobj(wbits=31)  # a gzip stream, as encode() writes it
    table = unpacker.decompress(data, limit + 1)
    if len(table) > limit:
        raise ValueError(f"the data unpacks to larger than {limit // (1024 * 1024)} MB")
    if not unpacker.eof:
        raise ValueError("the gzip stream is truncated")
    return table


def _is_where(where: Any) -> bool:
    """A pstats function key: ``(path, line, name)``."""
    return (
        isinstance(where, tuple)
        and len(where) == 3
        and isinstance(where[0], str)
        and isinstance(where[1], int)
        and isinstance(where[2], str)
    )


def _is_row(where: Any, row: Any) -> bool:
    """A pstats row: calls, primitive calls, own and cumulative time, callers."""
    if not _is_where(where) or not isinstance(row, tuple) or len(row) != 5:
        return False
    *numbers, callers = row
    return all(isinstance(number, int | float) for number in numbers) and isinstance(callers, dict)


class Timing(NamedTuple):
    """One function's line of a profile, times in seconds."""

    function: str  # "path/to/module.py:12(name)", as pstats prints it
    calls: int
    primitive_calls: int  # calls that were not recursive
    own_time: float  # in the function itself (pstats' tottime)
    cumulative_time: float  # including what it called (pstats' cumtime)


def top_functions(stats: pstats.Stats, limit: int = 30) -> list[Timing]:
    """The ``limit`` functions that took longest including their callees:
    where to look first."""
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    rows = [
        Timing(_where(*where), calls, primitive, own, cumulative)
        for where, (primitive, calls, own, cumulative, _callers) in table.items()
    ]
    rows.sort(key=lambda row: (-row.cumulative_time, row.function))
    return rows[:limit]


def _where(path: str, line: int, name: str) -> str:
    # Built-ins have no file: pstats files them under "~", line 0.
    return name if path == "~" and line == 0 else f"{path}:{line}({name})"


class _Loaded:
    """What ``pstats.Stats`` accepts besides a file name: an object that has
    its table ready (``create_stats`` then ``.stats``)."""

    def __init__(self, table: dict[Any, Any]) -> None:
        self.stats = table

    def create_stats(self) -> None:
        pass


def _store(
    config: Config, job: Mapping[str, Any], profiler: cProfile.Profile, started_at: float, elapsed: float
) -> None:
    """Write the profile as Sidekiq 8 lays it out; a Redis failure here is
    reported, never raised, since the job itself has already succeeded."""
    token, jid, kind = token_of(job), str(job.get("jid", "")), job_type(job)
    data = encode(profiler)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started_at))
    fields = {
        "started_at": int(started_at),
        "token": token,
        "type": kind,
        "jid": jid,
        "filename": f"{token}-{kind}-{jid}-{stamp}.prof",
        "elapsed": repr(elapsed),
        "data": data,
        "size": len(data),
        "format": FORMAT,
    }
    key = keys.profile(token, jid)

    def write(conn: Any) -> None:
        pipe = conn.pipeline(transaction=True)
        pipe.zadd(keys.PROFILES, {key: time.time() + EXPIRY})
        pipe.hset(key, mapping=fields)
        pipe.expire(key, EXPIRY)
        pipe.execute()

    try:
        config.redis_pool.execute(write)
    except (RedisError, RedisConnectionError) as exc:
        config.handle_exception(exc, {"context": "storing a job profile", "jid": jid})
