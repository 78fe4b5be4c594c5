"""An iterable job's progress in Redis: the ``it-<jid>`` HASH.

The layout is Sidekiq 8's, field for field, so a half-done iterable job moves
between a Ruby and a Python worker in either direction:

* ``ex``: how many runs of this jid have started (an integer);
* ``c``: the checkpointed cursor, as JSON text (``null`` before the first);
* ``rt``: seconds spent iterating, summed over the runs (a float);
* ``cancelled``: epoch seconds of the first cancellation, once there is one.

A checkpoint is one ``MULTI`` that writes the three progress fields, renews
the 30-day expiry and reads ``cancelled`` back, so the poll for a remote
cancellation costs no extra round trip. A checkpoint that moved the cursor
past where the run began also deletes the job's poison-pill count
(``super_fetch:recovered:<jid>``, see :mod:`wurk.server.reaper`): the job made
progress since its last crash, so that crash was not a poison pill's, and
one more crash is counted as a first.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wurk.errors import CursorError
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.redis.connection import RedisPool

#: Seconds between checkpoints, and between polls for a remote cancellation.
STATE_FLUSH_INTERVAL = 5.0
#: The state outlives the job's retries: 30 days, renewed at every checkpoint.
STATE_TTL = 30 * 24 * 3600
#: A cancellation marker outlives the longest wait for a default retry.
CANCELLATION_PERIOD = 3 * 24 * 3600


def iteration_key(jid: str) -> str:
    return f"it-{jid}"


@dataclass
class Progress:
    """What a run starts from: the state a previous run (in any language) left."""

    executions: int = 0
    cursor: Any = None
    runtime: float = 0.0
    cancelled: int | None = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode(jid: str, raw: dict[Any, Any]) -> Progress:
    """The progress in a HASH as read; a ``c`` that is not JSON is refused by
    name rather than restarting the job from the beginning."""
    fields = {_text(name): _text(value) for name, value in raw.items()}
    progress = Progress()
    if "ex" in fields:
        progress.executions = int(float(fields["ex"]))
    if "rt" in fields:
        progress.runtime = float(fields["rt"])
    if fields.get("cancelled"):
        progress.cancelled = int(float(fields["cancelled"]))
    if "c" in fields:
        try:
            progress.cursor = json.loads(fields["c"])
        except ValueError:
            raise CursorError(
                f"{iteration_key(jid)}: the saved cursor {fields['c']!r} is not JSON; "
                "fix or delete the field to let the job run"
            ) from None
    return progress


def load(pool: RedisPool, jid: str) -> Progress:
    return decode(jid, pool.execute(lambda conn: conn.hgetall(iteration_key(jid))))


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists: what JSON gives back for a tuple."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def encode_cursor(cursor: Any, owner: str) -> str:
    """The cursor as JSON text, or a :class:`CursorError` naming ``owner``
    (the job class and jid) when it would not come back as itself."""
    try:
        text = json.dumps(cursor, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CursorError(
            f"{owner}: the cursor {cursor!r} cannot be saved as JSON ({exc}); "
            "yield an int, str, float, bool, None, or a list or dict of those (an index, a primary key)"
        ) from None
    if json.loads(text) != _plain(cursor):
        raise CursorError(
            f"{owner}: the cursor {cursor!r} does not survive a JSON round trip (it comes back as {text}); "
            "use str keys in dicts and plain JSON values"
        )
    return text


def flush(
    pool: RedisPool, jid: str, executions: int, cursor_text: str, runtime: float, *, progressed: bool = False
) -> int | None:
    """Checkpoint the progress; the ``cancelled`` stamp if one was written.
    ``progressed``: the cursor moved since the run began, which clears the
    job's poison-pill count."""
    key = iteration_key(jid)

    def write(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=True)
        pipe.hset(key, mapping={"ex": executions, "c": cursor_text, "rt": runtime})
        pipe.expire(key, STATE_TTL)
        pipe.hget(key, "cancelled")
        if progressed:
            pipe.delete(keys.poison_recoveries(jid))
        return list(pipe.execute())

    cancelled = pool.execute(write)[2]
    return int(float(_text(cancelled))) if cancelled else None


def cancel(pool: RedisPool, jid: str) -> int:
    """Mark ``jid`` cancelled (the first stamp wins); the stamp in force.

    The expiry drops to :data:`CANCELLATION_PERIOD`: the marker only has to
    last until the job runs again, and a running job renews it anyway.
    """
    key = iteration_key(jid)

    def write(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=True)
        pipe.hsetnx(key, "cancelled", int(time.time()))
        pipe.hget(key, "cancelled")
        pipe.expire(key, CANCELLATION_PERIOD)
        return list(pipe.execute())

    return int(float(_text(pool.execute(write)[1])))


def delete(pool: RedisPool, jid: str) -> None:
    pool.execute(lambda conn: conn.unlink(iteration_key(jid)))
