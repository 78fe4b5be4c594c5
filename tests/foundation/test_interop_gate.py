"""CI's interop gate: a skipped or empty Ruby interop run fails, a full one passes.

The reports come from real pytest runs, including one of ``tests/interop``
itself with no chroot named, which is what CI sees on a machine where the
chroot could not be built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

CHECK = ROOT / "tools" / "interop" / "check_report.py"


def report_of(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Path:
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args],
        cwd=ROOT if env is not None else tmp_path,
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    return report


def check(report: Path) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, str(CHECK), str(report)], capture_output=True, text=True, check=False, timeout=60
    )
    return done.returncode, done.stdout.strip()


def write_tests(tmp_path: Path, body: str) -> None:
    (tmp_path / "test_sample.py").write_text("import pytest\n\n" + body)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")


def test_a_run_where_every_test_ran_passes(tmp_path):
    write_tests(tmp_path, "def test_one():\n    pass\n\ndef test_two():\n    pass\n")
    assert check(report_of(tmp_path)) == (0, "")


def test_one_skipped_test_fails_the_gate_with_its_reason(tmp_path):
    write_tests(tmp_path, "def test_one():\n    pass\n\ndef test_two():\n    pytest.skip('no chroot here')\n")
    code, said = check(report_of(tmp_path))
    assert code == 1
    assert said.startswith("1 of 2 interop tests SKIPPED")
    assert "no chroot here" in said


def test_a_run_without_tests_fails_the_gate(tmp_path):
    write_tests(tmp_path, "")
    assert check(report_of(tmp_path)) == (1, "no interop test ran")


def test_a_missing_report_fails_the_gate(tmp_path):
    code, said = check(tmp_path / "never-written.xml")
    assert code == 1
    assert "did not run" in said


def test_the_interop_suite_without_a_chroot_fails_the_gate(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "WURK_INTEROP_CHROOT"}
    report = report_of(tmp_path, "-m", "interop", "tests/interop", "-k", "test_ruby_runs", env=env)
    code, said = check(report)
    assert code == 1
    assert "SKIPPED" in said
    assert "WURK_INTEROP_CHROOT is not set" in said
