"""A Django application for the iterable tests, in processes of their own
(a worker loading it with ``-r``, or ``django_probe``): Django's settings are
process-wide, so the test process itself never imports this module.

The rows live in the SQLite file named by ``ITER_DB`` (made by :func:`tests.iterable.rows.make_rows`);
``RowWalk`` records every query it issues on them in the ``sql`` list.
"""

from __future__ import annotations

import json
import os
from typing import Any

import django
from django.conf import settings

if not settings.configured:
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["ITER_DB"]}},
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()

from django.db import connection, models

from tests.iterable.iterable_app import Recorded, evidence


class Row(models.Model):
    n = models.IntegerField()
    done = models.BooleanField(default=False)

    class Meta:
        app_label = "iterable_rows"
        db_table = "iter_row"
        managed = False


def record_sql(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    if "iter_row" in sql:
        evidence().rpush("sql", json.dumps([sql, list(params or ())]))
    return execute(sql, params, many, context)


class RowWalk(Recorded):
    """Every row, 500 a query, each marking its ``n``."""

    def build_enumerator(self, cursor: Any) -> Any:
        evidence().rpush("sql", json.dumps(["run", cursor]))
        if record_sql not in connection.execute_wrappers:
            connection.execute_wrappers.append(record_sql)  # this thread's connection
        return self.django_records_enumerator(Row.objects.all(), cursor=cursor, batch_size=500)

    def each_iteration(self, row: Row) -> None:
        self.mark(row.n)
