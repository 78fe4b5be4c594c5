"""Runs the Django builders in a process of its own and prints what they
yielded and the SQL they issued, as JSON (see ``test_django.py``)."""

from __future__ import annotations

import json
import os
import sys

from tests.iterable.rows import make_rows


def main() -> None:
    make_rows(os.environ["ITER_DB"], 1000)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import wurk
    from tests.iterable.django_app import Row

    build = wurk.IterableJob()
    report: dict[str, object] = {}
    with CaptureQueriesContext(connection) as queries:
        walk = build.django_records_enumerator(
            Row.objects.filter(n__gte=10).order_by("-n"), cursor=1000, batch_size=200
        )
        pairs = [(row.n, cursor) for row, cursor in walk]
    report["records"] = {"first": pairs[0], "last": pairs[-1], "count": len(pairs), "sql": [q["sql"] for q in queries]}
    with CaptureQueriesContext(connection) as queries:
        walk = build.django_batches_enumerator(Row.objects, cursor=None, batch_size=300)
        batches = [(len(batch), cursor) for batch, cursor in walk]
        report["batches"] = {"batches": batches, "size": walk.size(), "queries": len(queries)}
    with CaptureQueriesContext(connection) as queries:
        walk = build.django_relations_enumerator(Row.objects.all(), cursor=1202, batch_size=300)
        cursors = []
        for relation, cursor in walk:
            cursors.append(cursor)
            relation.update(done=True)
        report["relations"] = {
            "cursors": cursors,
            "done": Row.objects.filter(done=True).count(),
            "first_done": Row.objects.filter(done=True).order_by("pk").first().pk,
            "sql": [q["sql"] for q in queries],
        }
    try:
        build.django_records_enumerator([1, 2], cursor=None)
    except TypeError as exc:
        report["refused"] = str(exc)
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
