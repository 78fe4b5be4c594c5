"""Integrations with the frameworks and libraries around Wurk.

Each integration is an optional module that imports its framework only when
it is itself imported, never from ``import wurk``: a worker, or an
application on another framework, loads none of them. Their dependencies are
extras of ``wurk-core`` (``pip install 'wurk-core[django]'``).

* :mod:`wurk.contrib.django`: a Django app (``"wurk.contrib.django"`` in
  ``INSTALLED_APPS``) and a backend for Django's ``django.tasks``
  (:mod:`wurk.contrib.django.backend`).
* :mod:`wurk.contrib.flask`: a Flask extension (``wurk-core[flask]``).
* :mod:`wurk.contrib.asgi`: a lifespan, a middleware and the dashboard's
  mount for FastAPI, Starlette and other ASGI applications (``wurk-core[asgi]``).
* :mod:`wurk.contrib.sqlalchemy`: pushes held to an SQLAlchemy session's
  commit (``wurk-core[sqlalchemy]``).
* :mod:`wurk.contrib.opentelemetry`: traces of pushes and runs, with the W3C
  context carried in the payload (``wurk-core[opentelemetry]``).
* :mod:`wurk.contrib.hosting`: what the Flask and ASGI integrations share:
  settings from the application, and the embedded worker a web process may run.
"""
