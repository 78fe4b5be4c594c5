"""Where the test applications leave their evidence.

A test application records what its jobs did in keys of its own, which the
least-privilege ACL user of docs/deployment.md may not touch; under
``WURK_TEST_ACL=1`` the suite sets ``WURK_TEST_EVIDENCE_URL`` to the
administrator's URL for that, while Wurk itself runs as the user.
"""

from __future__ import annotations

import os

EVIDENCE_ENV = "WURK_TEST_EVIDENCE_URL"


def evidence_url() -> str:
    return os.environ.get(EVIDENCE_ENV) or os.environ["REDIS_URL"]
