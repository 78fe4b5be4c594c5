"""Django QuerySets as iterable jobs' enumerators, in processes of their own
(Django's settings are process-wide): keyset pages, and a real worker that
resumes a 50,000-row walk with a ``pk >=`` query after a TERM."""

from __future__ import annotations

import json
import signal
import sys

import pytest

import wurk
from tests.helpers import ROOT, Subprocess, WorkerPool, wait_for
from tests.iterable.conftest import FAST, calls, events, seen
from tests.iterable.rows import make_rows

ROWS = 50_000


def test_django_builders_page_by_primary_key(tmp_path):
    probe = Subprocess(
        [sys.executable, "-m", "tests.iterable.django_probe"], env={"ITER_DB": str(tmp_path / "rows.db")}, cwd=ROOT
    )
    assert probe.wait(60) == 0, probe.output()
    report = json.loads(probe.output())
    records = report["records"]
    # Key 1000 is the row n=499; the QuerySet's own ordering gives way to the key's.
    assert records["first"] == [499, 1000]
    assert records["last"] == [999, 2000]
    assert records["count"] == 501
    first, *rest = records["sql"]
    assert '"iter_row"."n" >= 10' in first
    assert '"iter_row"."id" >= 1000' in first
    assert first.endswith('ORDER BY "iter_row"."id" ASC LIMIT 200')
    assert all('"iter_row"."id" > ' in sql and "OFFSET" not in sql for sql in rest)
    batches = {"batches": [[300, 2], [300, 602], [300, 1202], [100, 1802]], "size": 4, "queries": 5}
    assert report["batches"] == batches  # 4 pages, and the count behind size()
    relations = report["relations"]
    assert relations["cursors"] == [1202, 1802]
    assert (relations["done"], relations["first_done"]) == (400, 1202)
    # Only the keys are read to find a batch.
    assert (
        relations["sql"][0]
        == 'SELECT "iter_row"."id" AS "pk" FROM "iter_row" WHERE "iter_row"."id" >= 1202 ORDER BY 1 ASC LIMIT 300'
    )
    assert report["refused"] == "django_records_enumerator takes a Django QuerySet (or a manager), got list"


@pytest.fixture
def django_workers(config, redis_url, tmp_path):
    database = tmp_path / "rows.db"
    pool = WorkerPool(redis_url, tmp_path, "tests.iterable.django_app", {**FAST, "ITER_DB": str(database)})
    yield pool, database
    pool.stop_all()


def runs(redis) -> list[list]:
    """The ``sql`` evidence split into runs: [cursor, [(sql, params), ...]]."""
    split: list[list] = []
    for entry in redis.lrange("sql", 0, -1):
        sql, params = json.loads(entry)
        if sql == "run":
            split.append([params, []])
        else:
            split[-1][1].append((sql, params))
    return split


def test_a_queryset_walk_over_50000_rows_resumes_with_a_keyset_query(django_workers, redis):
    pool, database = django_workers
    make_rows(str(database), ROWS)
    jid = wurk.Client().push({"class": "tests.iterable.django_app.RowWalk", "args": []})
    worker = pool.start("-c", "1")
    wait_for(lambda: calls(redis) >= 10_000, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    cursor = json.loads(redis.hget(f"it-{jid}", "c"))
    assert cursor == 2 * (seen(redis) + 1)  # the key of the first row not done
    again = pool.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0
    (first_cursor, _first_run), (resumed_from, resumed) = runs(redis)
    assert first_cursor is None
    assert resumed_from == cursor
    opening, *pages = resumed
    assert 'WHERE "iter_row"."id" >= %s ORDER BY "iter_row"."id" ASC LIMIT 500' in opening[0]
    assert opening[1] == [cursor]
    assert all('WHERE "iter_row"."id" > %s' in sql for sql, _ in pages)
    assert len(resumed) <= (ROWS - seen_before(cursor)) // 500 + 1  # never a page it had done
    assert seen(redis) == ROWS
    assert calls(redis) == ROWS
    assert events(redis) == ["on_start", "on_stop", "on_resume", "on_complete"]


def seen_before(cursor: int) -> int:
    return cursor // 2 - 1
