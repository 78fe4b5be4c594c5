"""The batch whose ``jobs`` block is open here.

A block's state lives in a :class:`contextvars.ContextVar`, not on a thread
or in a global: two threads each inside their own block never see each
other's batch, an asyncio task started inside a block inherits it (and one
started outside does not), and a block nested in another (a child batch)
restores its parent's on the way out.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wurk import Payload
    from wurk.redis.connection import RedisPool
    from wurk_batches.batch import Batch


@dataclass
class Frame:
    """One open ``jobs`` block.

    ``token`` sits in the batch's live set while the block is open. ``added``
    counts what the block put into the batch (jobs written, child batches
    created): an empty block enqueues the empty marker instead. ``flush_every``
    is None when pushes go straight to Redis, 0 to hold them until the block
    ends, and N to write them N at a time.
    """

    batch: Batch
    token: str
    flush_every: int | None = None
    added: int = 0
    held: list[tuple[Payload, RedisPool]] = field(default_factory=list)

    @property
    def bid(self) -> str:
        return self.batch.bid

    def holds(self, payload: Payload) -> bool:
        """Whether this block buffers ``payload`` (autoflush): its own
        immediate jobs only; a scheduled job is never held."""
        return self.flush_every is not None and payload.get("bid") == self.bid and payload.get("at") is None

    @property
    def full(self) -> bool:
        return bool(self.flush_every) and len(self.held) >= (self.flush_every or 0)


_active: ContextVar[Frame | None] = ContextVar("wurk_current_batch", default=None)


def active() -> Frame | None:
    """The innermost open block here, or None outside every block."""
    return _active.get()


def enter(frame: Frame) -> Any:
    """Make ``frame`` the active block; returns the token :func:`leave` takes."""
    return _active.set(frame)


def leave(token: Any) -> None:
    _active.reset(token)
