"""What ``wurk`` says when a plugin, a plugin's setting, a switched-off name or
a command is wrong: one line naming the thing and what to do, never a
traceback. Each case runs the real console script in a subprocess, with a
real installed distribution where a third-party plugin is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.foundation.test_plugins import install_dist

WURK = str(Path(sys.executable).parent / "wurk")

#: A third party's plugin whose setting's check refuses every value but its
#: default, the way a check written with ``raise ValueError`` does.
REFUSING = """
import wurk


def colour(key, value):
    if value != "red":
        raise ValueError(f"{value!r} is not a colour this plugin knows")


@wurk.hookimpl
def wurk_register_settings(settings):
    settings.add("acme_colour", default="red", check=colour, owner="acme-colours")
"""

#: One whose check takes only the value: checks are called as check(name, value).
ONE_ARGUMENT = """
import wurk


def colour(value):
    return value


@wurk.hookimpl
def wurk_register_settings(settings):
    settings.add("acme_colour", default="red", check=colour, owner="acme-colours")
"""

APP = "import wurk\n\n\n@wurk.job()\ndef noop():\n    pass\n"


def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("WURK_DISABLE_PLUGIN", "WURK_DEBUG"))}
    full_env.update(env)
    return subprocess.run([WURK, *args], env=full_env, cwd=cwd, capture_output=True, text=True, timeout=120)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused command printed (on stderr, nothing on stdout)."""
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("wurk: ")
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    return tmp_path


def with_plugin(project: Path, source: str) -> dict[str, str]:
    site = project / "site"
    site.mkdir()
    install_dist(site, "acme_colours", textwrap.dedent(source), "[wurk]\nacme = acme_colours\n")
    return {"PYTHONPATH": str(site)}


# -- a plugin's setting ----------------------------------------------------------------------


def test_a_setting_its_plugin_refuses_in_the_config_file_stops_the_worker_in_one_line(project, redis_url):
    env = with_plugin(project, REFUSING)
    (project / "wurk.yml").write_text("acme_colour: blue\n", encoding="utf-8")
    result = run("-r", "app.py", "-C", "wurk.yml", cwd=project, REDIS_URL=redis_url, **env)
    assert result.returncode == 2
    assert one_line(result) == (
        "wurk: acme_colour = 'blue' was refused by the check of acme-colours: "
        "ValueError: 'blue' is not a colour this plugin knows"
    )


def test_a_setting_its_plugin_refuses_in_the_app_names_the_apps_line(project, redis_url):
    env = with_plugin(project, REFUSING)
    (project / "app.py").write_text(APP + "\nwurk.default_config()['acme_colour'] = 'blue'\n", encoding="utf-8")
    result = run("-r", "app.py", cwd=project, REDIS_URL=redis_url, **env)
    assert result.returncode == 2
    line = one_line(result)
    assert "acme_colour = 'blue' was refused by the check of acme-colours" in line
    assert line.endswith(f"({project / 'app.py'} line 8)")  # the app's line, not Wurk's


def test_a_check_that_cannot_take_name_and_value_fails_as_the_plugin_loads(project, redis_url):
    env = with_plugin(project, ONE_ARGUMENT)
    for args in (["-r", "app.py"], ["plugins"], ["stats"]):
        result = run(*args, cwd=project, REDIS_URL=redis_url, **env)
        assert result.returncode == 2, args
        assert one_line(result) == (
            "wurk: acme-colours declares setting 'acme_colour' with the check colour(value), but a check is "
            "called as check(name, value): fix the check, or switch the plugin off with WURK_DISABLE_PLUGINS"
        )


def test_a_core_features_refused_setting_names_its_distribution(project, redis_url):
    (project / "wurk.yml").write_text("web_pool_size: 0\n", encoding="utf-8")
    result = run("-r", "app.py", "-C", "wurk.yml", cwd=project, REDIS_URL=redis_url)
    assert result.returncode == 2
    assert one_line(result) == "wurk: web_pool_size must be a whole number >= 1, got 0 (a setting of wurk-web)"


# -- the config file -------------------------------------------------------------------------


def test_a_misspelt_key_in_the_environments_section_is_refused_naming_the_file(project, redis_url):
    (project / "config").mkdir()
    (project / "config" / "wurk.yml").write_text("timeout: 5\nproduction:\n  :timout: 8\n", encoding="utf-8")
    result = run("-r", "app.py", "-e", "production", cwd=project, REDIS_URL=redis_url)
    assert result.returncode == 2
    assert one_line(result) == "wurk: config/wurk.yml: unknown option 'timout'; did you mean 'timeout'?"


# -- switching plugins off by a wrong name ----------------------------------------------------


def test_a_misspelt_name_to_switch_off_is_warned_about_with_the_nearest_plugin():
    result = run("plugins", WURK_DISABLE_PLUGINS="wurk-limitr,cron")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    [warning] = [line for line in result.stdout.splitlines() if line.startswith("WARNING")]
    assert warning.endswith(
        "WURK_DISABLE_PLUGINS: no installed plugin is called 'wurk-limitr', so it switches nothing off; "
        "did you mean 'limiter' (of wurk-limiter)?"
    )
    rows = [line.split() for line in result.stdout.splitlines() if not line.startswith("WARNING")]
    assert [row[0] for row in rows] == ["NAME", "batches", "cron", "crypto", "limiter", "swarm", "unique", "web"]
    states = {row[0]: row[3] for row in rows[1:]}
    assert states["cron"] == "disabled"
    assert states["limiter"] == "enabled"  # the misspelling switched nothing off


def test_a_name_like_no_plugin_gets_the_listing_hint_and_no_phantom_row():
    result = run("plugins", "--json", WURK_DISABLE_PLUGINS="zzzz")
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert warning.endswith(
        "no installed plugin is called 'zzzz', so it switches nothing off; `wurk plugins` lists their names"
    )
    names = [row["name"] for row in json.loads(result.stdout)]  # with --json, stdout is the JSON alone
    assert names == ["batches", "cron", "crypto", "limiter", "swarm", "unique", "web"]


# -- a command whose plugin is switched off ---------------------------------------------------


@pytest.mark.parametrize(
    ("command", "distribution", "plugin"),
    [
        (["web"], "wurk-web", "web"),
        (["swarm", "-r", "app.py"], "wurk-swarm", "swarm"),
        (["cron", "list"], "wurk-cron", "cron"),
    ],
)
def test_a_command_whose_plugin_is_switched_off_names_its_distribution(command, distribution, plugin, project):
    result = run(*command, cwd=project, WURK_DISABLE_PLUGINS=plugin)
    assert result.returncode == 2
    assert one_line(result) == (
        f"wurk: wurk {command[0]} comes with the {distribution} distribution, whose plugin {plugin!r} "
        f"is switched off in WURK_DISABLE_PLUGINS: take {plugin!r} out of it"
    )


def test_a_command_whose_plugin_autoload_left_out_says_how_to_name_it(project):
    result = run("web", cwd=project, WURK_DISABLE_PLUGIN_AUTOLOAD="1")
    assert result.returncode == 2
    assert one_line(result) == (
        "wurk: wurk web comes with the wurk-web distribution, whose plugin 'web' is not loaded: "
        "WURK_DISABLE_PLUGIN_AUTOLOAD is set and config['plugins'] does not name 'web'"
    )
