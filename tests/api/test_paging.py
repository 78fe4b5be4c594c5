"""Stable pages of a sorted set against a real server."""

from __future__ import annotations

import pytest

from wurk.api.paging import page_by_score, parse_cursor


def walk(redis, key, limit, between=None, *, ascending=False):
    """Every member, page by page; ``between(page_number)`` runs after each page."""
    seen, cursor, pages = [], None, 0
    while True:
        rows, cursor = page_by_score(redis, key, cursor, limit, ascending=ascending)
        seen += [member.decode() for member, _score in rows]
        pages += 1
        if between is not None:
            between(pages)
        if cursor is None:
            return seen, pages


def test_pages_cover_every_member_once_even_across_equal_scores(redis):
    # Ten members share each score: pages end in the middle of a run of ties.
    redis.zadd("z", {f"m{n:03d}": n // 10 for n in range(95)})
    members, pages = walk(redis, "z", 7)
    assert sorted(members) == [f"m{n:03d}" for n in range(95)]
    assert len(members) == 95
    assert pages == 14  # 13 full pages and the last; no empty page after it


def test_an_ascending_walk_covers_every_member_once_lowest_first(redis):
    redis.zadd("z", {f"m{n:03d}": n // 10 for n in range(95)})
    members, pages = walk(redis, "z", 7, ascending=True)
    assert len(members) == 95
    assert sorted(members) == [f"m{n:03d}" for n in range(95)]
    assert [int(m[1:]) // 10 for m in members] == sorted(int(m[1:]) // 10 for m in members)
    assert pages == 14

    def sooner_arrive(page):
        redis.zadd("z", {f"sooner{page}-{n}": -1 for n in range(5)})  # below the cursor: not shifting it

    redis.delete("z")
    redis.zadd("z", {f"old{n}": n for n in range(30)})
    members, _pages = walk(redis, "z", 10, sooner_arrive, ascending=True)
    assert [member for member in members if member.startswith("old")] == [f"old{n}" for n in range(30)]


def test_members_added_above_the_cursor_do_not_shift_the_next_pages(redis):
    redis.zadd("z", {f"old{n}": n for n in range(30)})

    def newer_arrive(page):
        redis.zadd("z", {f"new{page}-{n}": 1000 + page for n in range(5)})

    members, _pages = walk(redis, "z", 10, newer_arrive)
    assert [member for member in members if member.startswith("old")] == [f"old{n}" for n in range(29, -1, -1)]


def test_a_bad_cursor_is_named_and_a_floor_bounds_the_page(redis):
    with pytest.raises(ValueError, match="not a page cursor: 'yesterday'"):
        page_by_score(redis, "z", "yesterday", 10)
    with pytest.raises(ValueError, match="at least one entry"):
        page_by_score(redis, "z", None, 0)
    redis.zadd("z", {"a": 1, "b": 2, "c": 3})
    rows, cursor = page_by_score(redis, "z", None, 10, floor="(1")
    assert [member for member, _score in rows] == [b"c", b"b"]
    assert cursor is None
    assert parse_cursor("2.5:3") == (2.5, 3)
