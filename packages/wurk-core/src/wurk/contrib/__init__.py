"""Integrations with the web frameworks Python applications run on.

Each integration is an optional module that imports its framework only when
it is itself imported, never from ``import wurk``: a worker, or an
application on another framework, loads none of them. Their dependencies are
extras of ``wurk-core`` (``pip install 'wurk-core[django]'``).

* :mod:`wurk.contrib.django`: a Django app (``"wurk.contrib.django"`` in
  ``INSTALLED_APPS``) and a backend for Django's ``django.tasks``
  (:mod:`wurk.contrib.django.backend`).
"""
