"""Loads the Hypothesis profile (see :mod:`tests.fuzz.profiles`) before the fuzz tests are collected."""

from tests.fuzz import profiles  # noqa: F401 - registers and loads the profile
