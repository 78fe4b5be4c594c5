"""No dead code in the distributions.

vulture reads every distribution's source together with what uses it (the
tests, the docs' examples, the examples and the benchmarks) and reports
names nothing uses. Those under ``packages/`` fail here unless
``tools/dead_code_allowed.py`` lists them with the reason they stay.
"""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT


def test_no_unused_code_in_the_distributions():
    users = ["tests", "docs/examples", "examples", *sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("bench/*.py"))]
    sources = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("packages/*/src"))
    found = subprocess.run(
        [sys.executable, "-m", "vulture", *sources, *users, "tools/dead_code_allowed.py", "--min-confidence", "60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert found.returncode in (0, 3), found.stderr  # 3: vulture found something
    unused = [
        line
        for line in found.stdout.splitlines()
        if line.startswith("packages/") and "unused variable 'tb'" not in line and "'ignored'" not in line
    ]
    assert unused == [], "unused code: delete it, or list it in tools/dead_code_allowed.py with why it stays"
