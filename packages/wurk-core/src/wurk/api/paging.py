"""Stable pages of a sorted set, highest score first (or lowest first).

An offset cursor shifts when entries arrive or leave between two pages, so a
reader paging a busy dead set would see entries twice or never. A cursor here
is ``"<score>:<seen>"``: the score of the last entry shown and how many
entries at that score were shown, so the next page starts right after it
whatever changed above. The dashboard's set, batch and profile lists page
this way, and so can a plugin's.
"""

from __future__ import annotations

from typing import Any, cast


def parse_cursor(cursor: str) -> tuple[float, int]:
    """A cursor's score and count; ``ValueError`` naming the cursor otherwise."""
    score, _, seen = str(cursor).rpartition(":")
    try:
        return float(score), max(0, int(seen))
    except ValueError:
        raise ValueError(f"not a page cursor: {cursor!r}") from None


def page_by_score(
    conn: Any, key: str, cursor: str | None, limit: int, *, floor: str = "-inf", ascending: bool = False
) -> tuple[list[tuple[bytes, float]], str | None]:
    """Up to ``limit`` (member, score) pairs of ``key`` after ``cursor``,
    highest score first, down to ``floor`` (a ``ZRANGE`` score bound), and the
    next page's cursor (None after the last page). One ``ZRANGE`` call.

    ``ascending`` walks the other way, lowest score first, to the end of the
    set (``floor`` does not apply): the schedule read soonest due first."""
    if limit < 1:
        raise ValueError(f"a page holds at least one entry, got limit={limit}")
    previous = parse_cursor(cursor) if cursor else None
    start: float | str = ("-inf" if ascending else "+inf") if previous is None else previous[0]
    end = "+inf" if ascending else floor
    skip = 0 if previous is None else previous[1]
    rows = cast(
        list[tuple[bytes, float]],
        conn.zrange(key, start, end, desc=not ascending, byscore=True, offset=skip, num=limit + 1, withscores=True),
    )
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    last = rows[-1][1]
    seen = sum(1 for _member, score in rows if score == last)
    if previous is not None and previous[0] == last:
        seen += previous[1]  # the whole page sat at the cursor's score
    return rows, f"{last!r}:{seen}"


__all__ = ["page_by_score", "parse_cursor"]
