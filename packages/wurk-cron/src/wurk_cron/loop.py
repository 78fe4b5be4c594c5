"""One periodic loop: its identity, its registration, and how to read it back.

A loop's identity (``lid``) is the first 16 hex digits of
``SHA1(schedule | klass | sorted options)``: registering the same triple from
every process and every deploy rewrites the same keys, and changing any part
of it makes a different loop (which the registration then prunes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wurk_cron import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config

__all__ = ["DEFAULT_QUEUE", "Loop", "loop_id"]

DEFAULT_QUEUE = "default"


def canonical_options(options: dict[str, Any]) -> str:
    """The options as stored and as hashed: JSON with sorted keys, compact."""
    return json.dumps(options, sort_keys=True, separators=(",", ":"))


def loop_id(schedule: str, klass: str, options: dict[str, Any]) -> str:
    identity = f"{schedule}|{klass}|{canonical_options(options)}"
    return hashlib.sha1(identity.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def _number(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    return int(float(raw))


def is_paused(raw: str | None) -> bool:
    return (raw or "").lower() in ("1", "true")


@dataclass
class Loop:
    """A registered loop as Redis holds it (``LoopSet`` builds these)."""

    lid: str
    schedule: str
    klass: str
    options: dict[str, Any] = field(default_factory=dict)
    tz_name: str | None = None
    paused: bool = False
    #: Epoch seconds of the next due fire, None when paused or never again.
    next_fire_at: int | None = None
    last_fired_at: int | None = None
    config: Config | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_hash(cls, lid: str, fields: dict[str, str], config: Config | None = None) -> Loop:
        try:
            options = json.loads(fields.get(keys.OPTIONS) or "{}")
        except ValueError:
            options = {}  # written by hand or by a broken client: still listed, fired with defaults
        paused = is_paused(fields.get(keys.PAUSED))
        return cls(
            lid=lid,
            schedule=fields.get(keys.SCHEDULE, ""),
            klass=fields.get(keys.KLASS, ""),
            options=options if isinstance(options, dict) else {},
            tz_name=fields.get(keys.TZ) or None,
            paused=paused,
            next_fire_at=None if paused else _number(fields.get(keys.NEXT_FIRE)),
            last_fired_at=_number(fields.get(keys.LAST_FIRE)),
            config=config,
        )

    # -- what a fire pushes ---------------------------------------------------------

    @property
    def queue(self) -> str:
        return str(self.options.get("queue") or DEFAULT_QUEUE)

    @property
    def args(self) -> list[Any]:
        args = self.options.get("args")
        return list(args) if isinstance(args, list) else []

    @property
    def retry(self) -> Any:
        return self.options.get("retry", True)

    @property
    def label(self) -> str | None:
        label = self.options.get("label")
        return str(label) if label is not None else None

    def payload(self) -> dict[str, Any]:
        """The job a fire pushes: only class, args, queue and retry; the other
        options identify the loop but never enter the job."""
        return {"class": self.klass, "args": self.args, "queue": self.queue, "retry": self.retry}

    def history(self) -> list[tuple[int, str]]:
        """The last fires, newest first, as ``(fired_at, jid)``."""
        if self.config is None:
            raise RuntimeError("this Loop was built without a configuration to read its history from")
        rows = self.config.redis_pool.execute(lambda conn: conn.lrange(keys.history(self.lid), 0, -1))
        return [parse_history_row(row) for row in rows]


def history_row(fired_at: int, jid: str) -> str:
    return json.dumps([fired_at, jid])


def parse_history_row(row: str | bytes) -> tuple[int, str]:
    fired_at, jid = json.loads(row)
    return int(fired_at), str(jid)
