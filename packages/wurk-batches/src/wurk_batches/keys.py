"""Every Redis key a batch reads or writes, in one screen.

The names are Sidekiq Pro's, as the guides give them, with no namespace: a
batch created by Ruby Sidekiq Pro or Ruby Wurk is read by
:class:`wurk_batches.Status`, and the other way round. A batch is one hash
plus the companion sets it actually needs; every one of them carries a TTL,
so Redis, not a sweeper, bounds the footprint.

The fields of the ``b-<bid>`` hash are listed in :data:`FIELDS`.
"""

from __future__ import annotations

BATCHES = "batches"  # ZSET of every bid, score = created_at (epoch seconds)
DEAD_BATCHES = "dead-batches"  # ZSET of the bids that fired death, score = when

#: The events a callback can be registered for.
EVENTS = ("complete", "success", "death")

#: What the ``b-<bid>`` hash holds (all strings, as Redis stores them).
FIELDS = {
    "created_at": "epoch seconds, a float",
    "description": "free text shown in the dashboard",
    "callback_queue": "the queue callback jobs go to",
    "callback_class": "the class a '#method' callback resolves against",
    "tags": "a JSON array of strings",
    "parent_bid": "the enclosing batch, when there is one",
    "linger": "seconds the batch is kept after success",
    "total": "distinct jobs added",
    "pending": "jobs not yet succeeded (a death leaves it alone)",
    "failures": "jobs failing right now (a gauge)",
    "complete": "'1' once complete fired",
    "complete_at": "when complete fired",
    "success_at": "when success fired",
    "death_at": "when death fired",
    "invalidated": "'1' once invalidate_all ran",
    "cb-complete": "the complete callbacks, a JSON array of [target, options]",
    "cb-success": "the success callbacks, likewise",
    "cb-death": "the death callbacks, likewise",
}


def batch(bid: str) -> str:
    """HASH: the batch itself (see :data:`FIELDS`)."""
    return f"b-{bid}"


def jids(bid: str) -> str:
    """SET of the live jids: added, not yet succeeded nor dead. While a
    ``jobs`` block is open it also holds that block's ``open:`` token, so the
    batch cannot complete while jobs are still being added."""
    return f"b-{bid}-jids"


def failed(bid: str) -> str:
    """SET of the jids failing right now (raised, will retry)."""
    return f"b-{bid}-failed"


def died(bid: str) -> str:
    """SET of the jids that died; a death stands while it is not empty."""
    return f"b-{bid}-died"


def kids(bid: str) -> str:
    """SET of every child batch's bid."""
    return f"b-{bid}-kids"


def pkids(bid: str) -> str:
    """SET of the child batches not yet finished (their callbacks included)."""
    return f"b-{bid}-pkids"


def callbacks_running(bid: str) -> str:
    """SET of the jids of this child batch's complete and success callback
    jobs still to finish: the parent waits for them, so that a callback can
    add the next stage to it."""
    return f"b-{bid}-cbs"


def marker(bid: str, event: str) -> str:
    """STRING set once, ``SET NX``, when ``event`` fires: the at-most-once guard."""
    return f"b-{bid}-{event}"


def removal_receipt(token: str) -> str:
    """STRING ``<seq>:<removed>``: how many jids one thread's last
    ``remove_jobs`` call took out, kept as long as its write fence
    (``wurk.redis.fence``), so that the call sent again after a lost reply answers
    that number instead of 0. Ours alone: Sidekiq Pro has no such key."""
    return f"wurk:batch-removed:{token}"


def tag(name: str) -> str:
    """SET of the bids of the batches tagged ``name``."""
    return f"tags:{name}"


def all_keys(bid: str) -> list[str]:
    """Every key of one batch but its callback markers (which keep their own
    30-day TTL, so a batch recreated under the same bid does not fire again)."""
    return [batch(bid), jids(bid), failed(bid), died(bid), kids(bid), pkids(bid), callbacks_running(bid)]
