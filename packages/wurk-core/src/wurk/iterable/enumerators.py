"""Enumerators over in-memory sequences and CSV files.

An enumerator is any iterable of ``(item, cursor)`` pairs; these builders add
a ``size()`` for progress displays (the run loop never calls it). A cursor is
where a run starts, inclusive: the one saved for an item is that item's own
index, so a run resumed from cursor ``2`` starts with element ``2``, exactly
as Sidekiq reads the same cursor. Sequences and CSV files have no index to
seek by, so a resumed run steps over the rows before the cursor (parsing, not
processing them); the ORM builders in :mod:`wurk.iterable.orm` seek instead.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

#: The type ``csv.reader(...)`` returns (not importable by name).
CSV_READER_TYPE = type(csv.reader([]))
DEFAULT_CSV_BATCH_SIZE = 100


class Enumerator:
    """``(item, cursor)`` pairs plus an optional, lazily computed size."""

    def __init__(self, pairs: Iterable[tuple[Any, Any]], size: Callable[[], int | None] | None = None) -> None:
        self._pairs = pairs
        self._size = size

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self._pairs)

    def size(self) -> int | None:
        """How many items the whole walk has (``None`` when it cannot tell)."""
        return self._size() if self._size is not None else None


def start_index(cursor: Any, builder: str) -> int:
    """An index cursor as the first position to yield."""
    if cursor is None:
        return 0
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise ValueError(f"{builder}: the cursor must be a whole number >= 0 (an index), got {cursor!r}")
    return cursor


def array_enumerator(array: Sequence[Any], *, cursor: Any) -> Enumerator:
    """Each element with its index; a resumed run starts at ``array[cursor]``."""
    if not isinstance(array, list | tuple):
        raise TypeError(f"array_enumerator takes a list or tuple, got {type(array).__name__}")
    start = start_index(cursor, "array_enumerator")
    return Enumerator(((array[index], index) for index in range(start, len(array))), lambda: len(array))


def _reader(source: Any, headers: bool, fmtparams: dict[str, Any], builder: str) -> tuple[Iterator[Any], str | None]:
    """A row iterator over ``source`` and the path behind it, if any."""
    if isinstance(source, str | bytes | os.PathLike):
        raise TypeError(
            f"{builder} takes an open file (open(path, newline='')) or a csv reader, "
            f"not {type(source).__name__}: a str is neither CSV text nor a path here"
        )
    if isinstance(source, CSV_READER_TYPE | csv.DictReader):
        return iter(source), None
    if isinstance(source, io.TextIOBase) or hasattr(source, "readline"):
        rows = csv.DictReader(source, **fmtparams) if headers else csv.reader(source, **fmtparams)
        name = getattr(source, "name", None)
        return iter(rows), name if isinstance(name, str) and os.path.isfile(name) else None
    raise TypeError(f"{builder} takes an open file or a csv reader, got {type(source).__name__}")


def count_rows(path: str, headers: bool) -> int:
    """Lines in the file (the header line not counted): a cheap size that
    counts a quoted field with a line break in it as two rows."""
    lines = 0
    last = b"\n"
    with open(path, "rb") as raw:
        while chunk := raw.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1
    return max(0, lines - 1) if headers else lines


def csv_enumerator(source: Any, *, cursor: Any, headers: bool = False, **fmtparams: Any) -> Enumerator:
    """Each row with its index (the header line is not a row).

    ``source`` is an open text file, read with ``csv.reader`` (``headers=True``:
    ``csv.DictReader``) and ``fmtparams``, or a reader you made; ``size()``
    counts the file's lines when there is a file behind it.
    """
    rows, path = _reader(source, headers, fmtparams, "csv_enumerator")
    start = start_index(cursor, "csv_enumerator")
    pairs = itertools.islice(((row, index) for index, row in enumerate(rows)), start, None)
    return Enumerator(pairs, (lambda: count_rows(path, headers)) if path else None)


def csv_batches_enumerator(
    source: Any,
    *,
    cursor: Any,
    batch_size: int = DEFAULT_CSV_BATCH_SIZE,
    headers: bool = False,
    **fmtparams: Any,
) -> Enumerator:
    """Lists of up to ``batch_size`` rows, each with its batch index."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"csv_batches_enumerator: batch_size must be a whole number >= 1, got {batch_size!r}")
    rows, path = _reader(source, headers, fmtparams, "csv_batches_enumerator")
    start = start_index(cursor, "csv_batches_enumerator")

    def slices() -> Iterator[tuple[list[Any], int]]:
        for _ in itertools.islice(rows, start * batch_size):
            pass  # the rows before the cursor's batch: read, not processed
        for index in itertools.count(start):
            batch = list(itertools.islice(rows, batch_size))
            if not batch:
                return
            yield batch, index

    def size() -> int:
        return math.ceil(count_rows(path, headers) / batch_size) if path else 0

    return Enumerator(slices(), size if path else None)
