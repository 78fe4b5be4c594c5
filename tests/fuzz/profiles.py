"""Hypothesis profiles for the fuzz tests, loaded by this folder's conftest.

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
PROFILE = os.environ.get(PROFILE_ENV, "ci")
if PROFILE not in ("ci", "long"):
    raise RuntimeError(f"{PROFILE_ENV} must be 'ci' or 'long', got {PROFILE!r}")
#: A test's time limit: the long profile runs for as long as it takes.
TIMEOUT = 300 if PROFILE == "ci" else 6 * 3600
settings.load_profile(PROFILE)
