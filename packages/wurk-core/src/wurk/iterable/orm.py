"""Keyset-paginated enumerators over Django QuerySets and SQLAlchemy selects.

They stand where Sidekiq has its ActiveRecord builders, with the same cursor:
the primary key of the record (or of a batch's first record), and a run
resumed from it starts *at* it. Each page is one query ordered by the primary
key and bounded by it (``pk >= cursor`` for the first page of a resumed run,
``pk > last`` for every page after), so resuming a walk over millions of rows
costs one indexed seek, never a scan over the rows already done.

Both ORMs stay optional: nothing here imports one until a builder is called
with one of its objects. The walk is always in ascending primary-key order
(any ordering on the query is replaced), and the key must be a single column
whose values JSON keeps as they are (integers or strings).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator
from typing import Any

from wurk.iterable.enumerators import Enumerator

DEFAULT_BATCH_SIZE = 1000


def _batch_size(value: Any, builder: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{builder}: batch_size must be a whole number >= 1, got {value!r}")
    return value


def _pages(
    first: Any, after: Callable[[Any], Any], fetch: Callable[[Any], list[Any]], size: int
) -> Iterator[list[Any]]:
    """Pages of keyset pagination: ``fetch(first)``, then ``fetch(after(last))``
    while pages come back full."""
    query = first
    while True:
        rows = fetch(query)
        if not rows:
            return
        yield rows
        if len(rows) < size:
            return
        query = after(rows[-1])


# -- Django -----------------------------------------------------------------------------


def _django_queryset(source: Any, builder: str) -> Any:
    try:
        models = importlib.import_module("django.db.models")
    except ImportError:
        raise TypeError(f"{builder} needs Django installed and a QuerySet to walk") from None
    if isinstance(source, models.Manager):
        source = source.all()
    if not isinstance(source, models.QuerySet):
        raise TypeError(f"{builder} takes a Django QuerySet (or a manager), got {type(source).__name__}")
    return source


def _django_walk(queryset: Any, cursor: Any, size: int, values: bool) -> Iterator[list[Any]]:
    ordered = queryset.order_by("pk")
    if values:
        ordered = ordered.values_list("pk", flat=True)
    first = ordered if cursor is None else ordered.filter(pk__gte=cursor)

    def key(row: Any) -> Any:
        return row if values else row.pk

    return _pages(first, lambda last: ordered.filter(pk__gt=key(last)), lambda query: list(query[:size]), size)


def django_records(queryset: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> Enumerator:
    """Each model instance with its primary key, fetched ``batch_size`` at a time."""
    queryset = _django_queryset(queryset, "django_records_enumerator")
    size = _batch_size(batch_size, "django_records_enumerator")

    def pairs() -> Iterator[tuple[Any, Any]]:
        for page in _django_walk(queryset, cursor, size, values=False):
            for record in page:
                yield record, record.pk

    return Enumerator(pairs(), queryset.count)


def django_batches(queryset: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> Enumerator:
    """Lists of up to ``batch_size`` instances, each with its first one's key."""
    queryset = _django_queryset(queryset, "django_batches_enumerator")
    size = _batch_size(batch_size, "django_batches_enumerator")
    pages = ((page, page[0].pk) for page in _django_walk(queryset, cursor, size, values=False))
    return Enumerator(pages, lambda: math.ceil(queryset.count() / size))


def django_relations(queryset: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> Enumerator:
    """QuerySets of up to ``batch_size`` rows (bounded by their first and last
    key, for bulk ``update()`` / ``delete()``), each with its first key; only
    the keys are read to find a batch."""
    queryset = _django_queryset(queryset, "django_relations_enumerator")
    size = _batch_size(batch_size, "django_relations_enumerator")

    def pairs() -> Iterator[tuple[Any, Any]]:
        for keys in _django_walk(queryset, cursor, size, values=True):
            yield queryset.filter(pk__gte=keys[0], pk__lte=keys[-1]).order_by("pk"), keys[0]

    return Enumerator(pairs(), lambda: math.ceil(queryset.count() / size))


# -- SQLAlchemy -------------------------------------------------------------------------------


def _sqlalchemy_key(statement: Any, key: Any, builder: str) -> tuple[Any, str]:
    """The key column to page by and the attribute that holds it on a row."""
    try:
        import sqlalchemy
    except ImportError:
        raise TypeError(f"{builder} needs SQLAlchemy installed and a select() to walk") from None
    if not isinstance(statement, sqlalchemy.Select):
        raise TypeError(f"{builder} takes a SQLAlchemy select(), got {type(statement).__name__}")
    if key is not None:
        return key, key.key
    entity = statement.column_descriptions[0].get("entity")
    if entity is None:
        raise TypeError(f"{builder}: select a mapped class (select(User)), or pass key=User.id")
    mapper = sqlalchemy.inspect(entity)
    if len(mapper.primary_key) != 1:
        raise TypeError(f"{builder}: {entity.__name__} has a composite primary key; pass key= a unique column")
    name = mapper.get_property_by_column(mapper.primary_key[0]).key
    return getattr(entity, name), name


def _sqlalchemy_walk(session: Any, statement: Any, cursor: Any, size: int, column: Any, only_keys: bool) -> Any:
    ordered = statement.order_by(None).order_by(column)
    if only_keys:
        ordered = ordered.with_only_columns(column)
    first = ordered if cursor is None else ordered.where(column >= cursor)

    def fetch(query: Any) -> list[Any]:
        return list(session.scalars(query.limit(size)))

    return ordered, first, fetch


def _sqlalchemy_count(session: Any, statement: Any) -> int:
    import sqlalchemy

    counted = sqlalchemy.select(sqlalchemy.func.count()).select_from(statement.order_by(None).subquery())
    return int(session.scalar(counted))


def sqlalchemy_records(
    session: Any, statement: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE, key: Any = None
) -> Enumerator:
    """Each mapped object of ``statement`` with its primary key, fetched
    through ``session`` ``batch_size`` at a time."""
    column, name = _sqlalchemy_key(statement, key, "sqlalchemy_records_enumerator")
    size = _batch_size(batch_size, "sqlalchemy_records_enumerator")
    ordered, first, fetch = _sqlalchemy_walk(session, statement, cursor, size, column, only_keys=False)

    def pairs() -> Iterator[tuple[Any, Any]]:
        for page in _pages(first, lambda last: ordered.where(column > getattr(last, name)), fetch, size):
            for record in page:
                yield record, getattr(record, name)

    return Enumerator(pairs(), lambda: _sqlalchemy_count(session, statement))


def sqlalchemy_batches(
    session: Any, statement: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE, key: Any = None
) -> Enumerator:
    """Lists of up to ``batch_size`` mapped objects, each with its first one's key."""
    column, name = _sqlalchemy_key(statement, key, "sqlalchemy_batches_enumerator")
    size = _batch_size(batch_size, "sqlalchemy_batches_enumerator")
    ordered, first, fetch = _sqlalchemy_walk(session, statement, cursor, size, column, only_keys=False)
    pages = _pages(first, lambda last: ordered.where(column > getattr(last, name)), fetch, size)
    return Enumerator(
        ((page, getattr(page[0], name)) for page in pages),
        lambda: math.ceil(_sqlalchemy_count(session, statement) / size),
    )


def sqlalchemy_relations(
    session: Any, statement: Any, *, cursor: Any, batch_size: int = DEFAULT_BATCH_SIZE, key: Any = None
) -> Enumerator:
    """Selects each bounded to one batch of up to ``batch_size`` rows (for bulk
    ``update()`` / ``delete()`` or a query of your own), each with its first
    key; only the keys are read to find a batch."""
    column, _name = _sqlalchemy_key(statement, key, "sqlalchemy_relations_enumerator")
    size = _batch_size(batch_size, "sqlalchemy_relations_enumerator")
    ordered, first, fetch = _sqlalchemy_walk(session, statement, cursor, size, column, only_keys=True)

    def pairs() -> Iterator[tuple[Any, Any]]:
        for keys in _pages(first, lambda last: ordered.where(column > last), fetch, size):
            bounded = statement.where(column >= keys[0], column <= keys[-1]).order_by(None).order_by(column)
            yield bounded, keys[0]

    return Enumerator(pairs(), lambda: math.ceil(_sqlalchemy_count(session, statement) / size))
