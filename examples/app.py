"""The application every deployment example runs (``-r app.py``).

A job module plus the worker's settings: the jobs live here, so that a
worker started with ``-r app.py`` finds them, and a web process or a script
enqueues with ``from app import Hello``. Copy it next to your code and put
your own jobs in place of ``Hello``.
"""

from __future__ import annotations

import logging
import os

import wurk

#: The port of the ``/live`` and ``/ready`` probes: the Dockerfile exposes it,
#: the Kubernetes manifest probes it. ``WURK_HEALTH_PORT`` overrides it.
HEALTH_PORT = int(os.environ.get("WURK_HEALTH_PORT", "7433"))

log = logging.getLogger(__name__)


class Hello(wurk.Job):
    """Says hello: a stand-in for your own jobs."""

    def perform(self, name: str) -> None:
        log.info("hello, %s", name)


@wurk.configure_server
def probes(config: wurk.Config) -> None:
    # share=True: every worker process of one host or pod (a swarm's children,
    # several wurk@ instances) is given the same port; one serves it and the
    # others take it over when that one exits. A lone process gets it at once.
    config.health_check(port=HEALTH_PORT, share=True)
