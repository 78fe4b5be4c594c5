"""Django's database connections in a worker: fresh per job, never shared with a parent.

A web request begins and ends with ``close_old_connections()``, which closes a
connection past its ``CONN_MAX_AGE`` or left broken by an error; a job is the
worker's request, so :class:`DatabaseConnections` does the same around each
one. Without it a long-running worker keeps one connection per thread
forever, and a database restart breaks every job that follows.

A forked child (``manage.py wurk swarm``, or any fork after the project
loaded) inherits its parent's connections: the same socket used by two
processes corrupts both conversations. :func:`drop_inherited` forgets them in
the child without closing them, since closing sends the server a goodbye on
the parent's socket; the child opens its own on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import close_old_connections, connections

import wurk

#: The parent's connection handles, kept referenced in a forked child so that
#: garbage collection never closes them (which would end the parent's session).
_inherited: list[Any] = []


class DatabaseConnections(wurk.ServerMiddleware):
    """``close_old_connections()`` before and after each job, as around a request."""

    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        close_old_connections()
        try:
            return call_next()
        finally:
            close_old_connections()


def drop_inherited() -> None:
    """In a forked child: forget every connection the parent had opened."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _inherited.append(connection.connection)
            connection.connection = None
        connection.close_at = None
