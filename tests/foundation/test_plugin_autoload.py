"""``WURK_DISABLE_PLUGIN_AUTOLOAD``: no entry point is imported but those the
configuration names, seen from a fresh interpreter with a real installed
distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.foundation.test_plugins import install_dist
from wurk.errors import PluginError
from wurk.plugins.manager import NO_AUTOLOAD_ENV, Plugins

PROBE = textwrap.dedent(
    """
    import json, sys
    import wurk

    config = wurk.Config(json.loads(sys.argv[1]))
    plugins = config.plugins
    print(json.dumps({
        "imported": "autoload_probe" in sys.modules,
        "probe": plugins.is_enabled("probe"),
        "cron": plugins.is_enabled("cron"),
    }))
    """
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A distribution publishing the ``probe`` plugin, whose module is only imported if loaded."""
    site = tmp_path / "site"
    site.mkdir()
    source = "import wurk\n\n@wurk.hookimpl\ndef wurk_configure(config):\n    config.setdefault('probe_seen', True)\n"
    install_dist(site, "autoload_probe", source, "[wurk]\nprobe = autoload_probe\n")
    return site


def probe(site: Path, options: dict[str, object], autoload: str | None) -> dict[str, bool]:
    env = {key: value for key, value in os.environ.items() if key not in ("WURK_DISABLE_PLUGINS", NO_AUTOLOAD_ENV)}
    env["PYTHONPATH"] = str(site)
    if autoload is not None:
        env[NO_AUTOLOAD_ENV] = autoload
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(options)], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, bool] = json.loads(result.stdout)
    return answer


@pytest.mark.parametrize("autoload", [None, "0", "false"])
def test_without_the_switch_an_installed_plugin_is_loaded(site, autoload):
    assert probe(site, {}, autoload) == {"imported": True, "probe": True, "cron": True}


def test_with_the_switch_no_entry_point_is_imported(site):
    assert probe(site, {}, "1") == {"imported": False, "probe": False, "cron": False}


def test_with_the_switch_a_plugin_named_in_the_configuration_still_loads(site):
    assert probe(site, {"plugins": ["probe"]}, "1") == {"imported": True, "probe": True, "cron": False}


def test_a_named_plugin_nobody_publishes_is_refused():
    with pytest.raises(PluginError, match=r"config\['plugins'\] names 'nowhere', but no installed distribution"):
        Plugins(named=["nowhere"], environ={NO_AUTOLOAD_ENV: "1"})
    with pytest.raises(PluginError, match="nowhere"):
        Plugins(named=["nowhere"], environ={})
