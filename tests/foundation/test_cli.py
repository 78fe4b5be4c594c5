"""The ``wurk`` console script, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import wurk

WURK = str(Path(sys.executable).parent / "wurk")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "WURK_DISABLE_PLUGINS"}
    full_env.update(env or {})
    return subprocess.run([WURK, *args], env=full_env, capture_output=True, text=True, timeout=60)


FEATURES = ["batches", "cron", "crypto", "limiter", "swarm", "unique", "web"]
#: What `wurk plugins` shows: "coming" for a stub, the maturity of a built feature.
STATUSES = dict.fromkeys(FEATURES, "alpha")


def test_plugins_lists_the_seven_features_with_version_state_and_status():
    result = run("plugins")
    assert result.returncode == 0, result.stderr
    table, _, footer = result.stdout.partition("\n\n")
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "STATE", "STATUS"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == FEATURES
    assert all(row[2] == wurk.__version__ and row[3] == "enabled" for row in rows)
    # A stub would be listed as coming, not as a working feature, and the
    # footer explains "coming" whenever a plugin shows it.
    assert {row[0]: row[4] for row in rows} == STATUSES
    assert ("not built yet" in footer) == ("coming" in STATUSES.values())


def test_plugins_json_carries_the_status():
    result = run("plugins", "--json")
    assert result.returncode == 0, result.stderr
    assert {row["name"]: row["status"] for row in json.loads(result.stdout)} == STATUSES


def test_plugins_shows_switched_off_plugins_as_disabled():
    result = run("plugins", "--json", env={"WURK_DISABLE_PLUGINS": "cron,batches"})
    assert result.returncode == 0, result.stderr
    states = {row["name"]: row["enabled"] for row in json.loads(result.stdout)}
    assert states == {
        "batches": False,
        "cron": False,
        "crypto": True,
        "limiter": True,
        "swarm": True,
        "unique": True,
        "web": True,
    }


def test_version_and_help_flags():
    assert run("-V").stdout.strip() == f"wurk {wurk.__version__}"
    help_text = run("-h").stdout
    assert "plugins" in help_text
    assert "server" in help_text
    assert "Sidekiq" in help_text


def test_disabling_core_is_a_clear_error():
    result = run("plugins", env={"WURK_DISABLE_PLUGINS": "core"})
    assert result.returncode == 2
    assert "core plugin cannot be disabled" in result.stderr
