"""The SQLite table the Django tests walk, made with the standard library so
the test process never configures Django."""

from __future__ import annotations

import sqlite3


def make_rows(path: str, count: int) -> None:
    """``count`` rows keyed 2, 4, 6, … (gaps, so a key is never an offset),
    each with its index ``n``."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE iter_row (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, done BOOLEAN DEFAULT 0)")
        db.executemany("INSERT INTO iter_row (id, n) VALUES (?, ?)", ((2 * (n + 1), n) for n in range(count)))
