"""Every Redis key core reads or writes, in one screen.

The names are Sidekiq 8's, byte for byte, with no namespace: a Ruby Sidekiq
process, a Ruby Wurk process and a Python Wurk process sharing one Redis see
each other's queues, processes, retries and dead jobs. Feature distributions
keep their own keys in a ``keys`` module of their own.
"""

from __future__ import annotations

QUEUES = "queues"  # SET of queue names ever pushed to
PAUSED = "paused"  # SET of paused queue names
SCHEDULE = "schedule"  # ZSET, score = due time (epoch seconds)
RETRY = "retry"  # ZSET, score = next attempt (epoch seconds)
DEAD = "dead"  # ZSET, score = time of death (epoch seconds)
PROCESSES = "processes"  # SET of live process identities
LEADER = "dear-leader"  # STRING, the leader's identity, TTL = leader_ttl
LEADER_TOKEN = "leader-token"  # STRING, fencing counter bumped on each promotion
PROCESS_CLEANUP = "process_cleanup"  # STRING lock, at most one cleanup a minute
STAT_PROCESSED = "stat:processed"
STAT_FAILED = "stat:failed"
STAT_EXPIRED = "stat:expired"
#: Wurk's own, beside Sidekiq's: runs that put their job back to run later (a
#: rate limiter's reschedule) instead of finishing, kept out of stat:processed.
STAT_RESCHEDULED = "stat:rescheduled"


def queue(name: str) -> str:
    """The LIST holding a queue's jobs; the tail is the oldest."""
    return f"queue:{name}"


def private_queue(name: str, hostname: str, pid: int, nonce: str) -> str:
    """A process's reliable-fetch list: holds each job while it runs."""
    return f"queue:{name}|{hostname}|{pid}|{nonce}|0"


def process_work(identity: str) -> str:
    """HASH of the jobs a process is running, field = thread id."""
    return f"{identity}:work"


def process_signals(identity: str) -> str:
    """LIST of signal names sent to a process through Redis (TSTP, TERM…)."""
    return f"{identity}-signals"


def daily_stat(stat: str, day: str) -> str:
    """``stat:processed:2026-11-30``; ``day`` is an ISO date in UTC."""
    return f"{stat}:{day}"


def poison_recoveries(jid: str) -> str:
    """Counter of reaper recoveries of one job (the poison-pill detector); a
    payload without a jid is counted as ``sha1:<hex of its bytes>``."""
    return f"super_fetch:recovered:{jid}"


#: SET of the ids of recovered jobs not yet finished (suspects of a crash).
SUSPECTS = "super_fetch:suspects"


def running_suspects(identity: str) -> str:
    """SET of the suspects a process is running and that are still young
    (in the first ``poison_pill_window`` seconds of their run): what the
    reaper counts against if that process dies too."""
    return f"super_fetch:running:{identity}"


def promote_lock(sorted_set: str) -> str:
    """STRING lock (a random token, with a lease) held by the one process
    promoting ``sorted_set`` through the client middleware."""
    return f"promote-lock:{sorted_set}"


#: ZSET of stored job profiles, member = the profile's hash key, score = the
#: time it expires (epoch seconds), so listing drops lapsed members by score.
PROFILES = "profiles"


def profile(token: str, jid: str) -> str:
    """HASH of one job's profile (``alice-<jid>``): who asked, the job, the
    timings and the data; it expires with its ``profiles`` entry."""
    return f"{token}-{jid}"


def fence(token: str) -> str:
    """STRING, the last write sequence number of one thread of one process,
    by which a fenced script recognises its own call sent again after a lost
    reply (``wurk.redis.fence``); expires ten minutes after the thread's last write."""
    return f"wurk:fence:{token}"


def pop_receipt(token: str) -> str:
    """STRING, the member one scheduler pop took out of ``schedule`` or
    ``retry``, kept a minute so that the pop, sent again after a lost reply,
    returns that member instead of taking the next (``core.zpopbyscore``)."""
    return f"wurk:popped:{token}"
