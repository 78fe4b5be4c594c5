"""Refuse an interop run that proved nothing: read pytest's JUnit XML report
and fail when it is missing, holds no test, or holds a skipped test.

The interop tests skip themselves when they cannot run (no chroot, not root),
which is right on a developer's machine and wrong in CI, where they are the
only evidence that Ruby Sidekiq reads what Wurk writes. ``.ci/run`` calls this
after the interop step; the problem, if any, is printed on stdout.

    python tools/interop/check_report.py REPORT.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def problem(report: Path) -> str | None:
    """Why the run at ``report`` does not count, or ``None`` when it does."""
    if not report.is_file():
        return f"no test report at {report}: the interop tests did not run"
    try:
        root = ElementTree.parse(report).getroot()
    except ElementTree.ParseError as exc:
        return f"the interop test report {report} cannot be read ({exc})"
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = sum(int(suite.get("tests", "0")) for suite in suites)
    skipped = sum(int(suite.get("skipped", "0")) for suite in suites)
    if tests == 0:
        return "no interop test ran"
    if skipped:
        reasons = sorted({element.get("message", "") for element in root.iter("skipped")})
        return f"{skipped} of {tests} interop tests SKIPPED: " + "; ".join(reasons)
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    found = problem(Path(argv[1]))
    if found:
        print(found)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
