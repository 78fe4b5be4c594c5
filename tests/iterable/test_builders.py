"""The enumerator builders: arrays, CSV files and SQLAlchemy selects
(Django QuerySets are in ``test_django.py``, in processes of their own)."""

from __future__ import annotations

import csv
import io

import pytest
import sqlalchemy as sa
from sqlalchemy import orm as sa_orm

import wurk

build = wurk.IterableJob()


def test_array_enumerator_starts_at_the_cursor():
    walk = build.array_enumerator(["a", "b", "c", "d"], cursor=2)
    assert list(walk) == [("c", 2), ("d", 3)]
    assert walk.size() == 4
    assert list(build.array_enumerator(("a",), cursor=None)) == [("a", 0)]
    with pytest.raises(TypeError, match="array_enumerator takes a list or tuple, got generator"):
        build.array_enumerator((x for x in "ab"), cursor=None)
    with pytest.raises(ValueError, match="the cursor must be a whole number >= 0"):
        build.array_enumerator(["a"], cursor=-1)


@pytest.fixture
def people(tmp_path):
    path = tmp_path / "people.csv"
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["name", "age"])
        for n in range(7):
            writer.writerow([f"p{n}", n])
    return path


def test_csv_enumerator_rows_and_size_from_the_file(people):
    with people.open(newline="") as source:
        walk = build.csv_enumerator(source, cursor=None)
        assert walk.size() == 8
        rows = list(walk)
    assert rows[0] == (["name", "age"], 0)
    assert rows[-1] == (["p6", "6"], 7)
    with people.open(newline="") as source:
        walk = build.csv_enumerator(source, cursor=5, headers=True)
        assert walk.size() == 7  # the header line is not a row
        assert list(walk) == [({"name": "p5", "age": "5"}, 5), ({"name": "p6", "age": "6"}, 6)]


def test_csv_enumerator_without_a_file_has_no_size():
    walk = build.csv_enumerator(csv.reader(io.StringIO("a,b\nc,d\n")), cursor=1)
    assert walk.size() is None
    assert list(walk) == [(["c", "d"], 1)]
    walk = build.csv_enumerator(io.StringIO("x;y\n"), cursor=None, delimiter=";")
    assert walk.size() is None
    assert list(walk) == [(["x", "y"], 0)]


def test_csv_enumerator_refuses_a_string(people):
    with pytest.raises(TypeError, match=r"csv_enumerator takes an open file .* not str"):
        build.csv_enumerator("name,age\n", cursor=None)
    with pytest.raises(TypeError, match="not PosixPath"):
        build.csv_enumerator(people, cursor=None)


def test_csv_batches_enumerator(people):
    with people.open(newline="") as source:
        walk = build.csv_batches_enumerator(source, cursor=None, batch_size=3, headers=True)
        assert walk.size() == 3
        batches = list(walk)
    assert [index for _, index in batches] == [0, 1, 2]
    assert [len(batch) for batch, _ in batches] == [3, 3, 1]
    assert batches[1][0][0] == {"name": "p3", "age": "3"}
    with people.open(newline="") as source:
        resumed = list(build.csv_batches_enumerator(source, cursor=2, batch_size=3, headers=True))
    assert resumed == [([{"name": "p6", "age": "6"}], 2)]
    with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
        build.csv_batches_enumerator(io.StringIO(""), cursor=None, batch_size=0)


# -- SQLAlchemy -----------------------------------------------------------------------


class Base(sa_orm.DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "items"
    id: sa_orm.Mapped[int] = sa_orm.mapped_column(primary_key=True)
    kind: sa_orm.Mapped[str]
    done: sa_orm.Mapped[bool] = sa_orm.mapped_column(default=False)


@pytest.fixture
def session():
    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with sa_orm.Session(engine) as session:
        # Keys with gaps, and a filter, so pages are bounded by key, not by offset.
        session.add_all(Item(id=n * 3, kind="odd" if n % 2 else "even") for n in range(1, 201))
        session.commit()
        yield session
    engine.dispose()


@pytest.fixture
def statements(session):
    """The SQL the session runs, with its parameters."""
    issued = []

    def record(conn, cursor, statement, parameters, context, executemany):
        issued.append((statement, parameters))

    engine = session.get_bind()
    sa.event.listen(engine, "before_cursor_execute", record)
    yield issued
    sa.event.remove(engine, "before_cursor_execute", record)


def test_sqlalchemy_records_resume_with_a_keyset_query(session, statements):
    odd = sa.select(Item).where(Item.kind == "odd").order_by(Item.kind)
    walk = build.sqlalchemy_records_enumerator(session, odd, cursor=303, batch_size=40)
    pairs = list(walk)
    assert pairs[0][1] == 303
    assert [cursor for _, cursor in pairs] == [n * 3 for n in range(101, 201, 2)]
    assert all(item.id == cursor for item, cursor in pairs)
    first, *rest = statements
    assert "items.id >= ?" in first[0]
    assert "ORDER BY items.id" in first[0]
    assert "LIMIT ?" in first[0]
    assert first[1][1:] == (303, 40, 0)  # this dialect always says OFFSET; it stays 0
    assert len(rest) == 1  # 50 rows, 40 a page: a full page, then the short last one
    assert "items.id > ?" in rest[0][0]
    assert rest[0][1][1] == pairs[39][1]
    assert walk.size() == 100


def test_sqlalchemy_batches_and_relations(session, statements):
    everything = sa.select(Item)
    batches = list(build.sqlalchemy_batches_enumerator(session, everything, cursor=None, batch_size=75))
    assert [cursor for _, cursor in batches] == [3, 228, 453]
    assert [len(batch) for batch, _ in batches] == [75, 75, 50]
    statements.clear()
    walk = build.sqlalchemy_relations_enumerator(session, everything, cursor=228, batch_size=75)
    assert walk.size() == 3
    relations = list(walk)
    assert [cursor for _, cursor in relations] == [228, 453]
    keys = statements[1]  # after the count
    assert keys[0].startswith("SELECT items.id \nFROM items \nWHERE items.id >= ?")
    assert keys[1][0] == 228
    for relation, _ in relations:
        session.execute(sa.update(Item).where(relation.whereclause).values(done=True))
    assert session.scalar(sa.select(sa.func.count()).where(Item.done)) == 125
    assert session.scalar(sa.select(sa.func.min(Item.id)).where(Item.done)) == 228


def test_sqlalchemy_builders_check_what_they_walk(session):
    with pytest.raises(TypeError, match="takes a SQLAlchemy select"):
        build.sqlalchemy_records_enumerator(session, "SELECT 1", cursor=None)
    with pytest.raises(TypeError, match="select a mapped class"):
        build.sqlalchemy_records_enumerator(session, sa.select(sa.literal(1)), cursor=None)
    by_kind = list(
        build.sqlalchemy_records_enumerator(session, sa.select(Item), cursor=None, batch_size=500, key=Item.id)
    )
    assert len(by_kind) == 200
