"""Module-level job classes for the Data API tests (a job must be importable)."""

from __future__ import annotations

import wurk


class HardJob(wurk.Job):
    def perform(self, *args):
        pass


class OtherJob(wurk.Job, queue="other"):
    def perform(self, *args):
        pass


class ScheduledJob(wurk.Job, retry=3):
    def perform(self, *args):
        pass
