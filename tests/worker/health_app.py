"""The application the health-check sharing tests run: a worker with probes.

Loaded by real ``wurk`` worker processes (``-r tests.worker.health_app``).
``TEST_HEALTH_PORT`` is the probe port; ``TEST_HEALTH_SHARE=1`` shares it
with the other workers of the test, and ``TEST_HEALTH_RETRY`` (seconds)
shortens the takeover attempts so that a test need not wait the default.
"""

from __future__ import annotations

import os

import tests.worker.worker_app  # noqa: F401  (its timing knobs)
import wurk


@wurk.configure_server
def probes(config):
    retry = os.environ.get("TEST_HEALTH_RETRY")
    config.health_check(
        port=int(os.environ["TEST_HEALTH_PORT"]),
        bind="127.0.0.1",
        share=os.environ.get("TEST_HEALTH_SHARE") == "1",
        retry=float(retry) if retry else None,
    )
