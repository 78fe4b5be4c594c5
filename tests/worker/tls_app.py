"""The application of the TLS tests: a job that leaves its evidence through
the worker's own pool, so it reaches Redis however the worker was told to."""

from __future__ import annotations

import os

import wurk


class Mark(wurk.Job):
    def perform(self, label: str) -> None:
        wurk.default_config().redis_pool.client.hset("tls-runs", label, os.getpid())
