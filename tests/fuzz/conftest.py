"""Hypothesis profiles for the fuzz tests.

``ci`` (the default) is deterministic and short, so the whole folder stays well
under a minute on a loaded machine; ``long`` explores far more inputs with a
fresh seed each run and keeps failing examples in ``.hypothesis/``. Pick one
with ``WURK_FUZZ_PROFILE=long``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "WURK_FUZZ_PROFILE"

settings.register_profile(
    "ci",
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))
