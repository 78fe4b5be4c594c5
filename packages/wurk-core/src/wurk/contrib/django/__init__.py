"""Wurk in a Django project.

Add ``"wurk.contrib.django"`` to ``INSTALLED_APPS`` (first, so that the
worker is marked as one before your apps' modules load) and the app:

* configures the process's Wurk from ``settings.WURK``, a dict with the keys
  of the YAML config file (``concurrency``, ``queues``, ``redis``,
  ``capsules``, an environment's section ...), a misspelt key refused;
* closes the job's stale database connections before and after each job, as
  Django's request cycle does, and drops the parent's connections in a
  forked child (:mod:`wurk.contrib.django.connections`);
* defers a push made inside ``transaction.atomic()`` to the commit
  (:mod:`wurk.contrib.django.transaction`);
* adds ``manage.py wurk``, the ``wurk`` command with the project loaded;
* serves the dashboard from the URLconf, behind Django's authentication
  (:mod:`wurk.contrib.django.urls`).

It never starts a worker in the web process: only ``manage.py wurk`` runs
jobs. The ``django.tasks`` backend is :class:`wurk.contrib.django.backend.WurkBackend`.
This package imports nothing from Django itself; its modules do.
"""
