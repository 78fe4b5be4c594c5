"""Plugin discovery, switching off, ordering and validation, on real entry points."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wurk
from tests.helpers import ROOT
from wurk.errors import PluginError, UnknownOptionError
from wurk.plugins import Plugins

FEATURES = ["batches", "cron", "crypto", "limiter", "swarm", "unique", "web"]


class Locked(wurk.Job, unique_for=60):
    def perform(self):
        pass


class Audited(wurk.Job):
    def perform(self):
        pass


def install_dist(site: Path, name: str, module_source: str, entry_points: str) -> None:
    """Lay out a real installed distribution (dist-info + module) on ``site``."""
    (site / f"{name}.py").write_text(module_source)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_all_feature_plugins_are_discovered_with_versions(monkeypatch):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    plugins = Plugins()
    infos = {info.name: info for info in plugins.discovered()}
    assert sorted(infos) == FEATURES
    for name in FEATURES:
        assert infos[name].distribution == f"wurk-{name}"
        assert infos[name].version == wurk.__version__
        assert infos[name].enabled
    assert plugins.names()[0] == "core"


def test_disabling_by_env_removes_the_plugins_hooks(monkeypatch):
    monkeypatch.setenv("WURK_DISABLE_PLUGINS", "unique, cron")
    plugins = Plugins()
    assert not plugins.is_enabled("unique")
    assert not plugins.is_enabled("cron")
    impl_plugins = {impl.plugin_name for impl in plugins.hook.wurk_register_options.get_hookimpls()}
    assert "unique" not in impl_plugins
    assert "crypto" in impl_plugins
    assert "cron" not in {impl.plugin_name for impl in plugins.hook.wurk_configure.get_hookimpls()}
    states = {info.name: info.enabled for info in plugins.discovered()}
    assert states["unique"] is False
    assert states["cron"] is False
    assert states["batches"] is True


def test_a_disabled_plugins_option_fails_with_a_hint(config, monkeypatch):
    monkeypatch.setenv("WURK_DISABLE_PLUGINS", "unique")
    disabled = wurk.Config(disabled_plugins=[])
    disabled.redis = config.redis
    with pytest.raises(UnknownOptionError, match="wurk-unique"):
        wurk.Client(disabled).push({"class": Locked, "args": []})


def test_enabled_plugin_owns_its_option(config):
    assert config.job_options.owner("unique_for") == "wurk-unique"
    assert config.job_options.owner("encrypt") == "wurk-crypto"
    assert config.job_options.owner("queue") == "wurk-core"


def test_disabling_from_configuration(monkeypatch):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    config = wurk.Config(disabled_plugins=["crypto"])
    assert not config.plugins.is_enabled("crypto")
    assert config.job_options.owner("encrypt") is None
    assert config.plugins.is_enabled("unique")


def test_plugin_defaults_do_not_override_user_values(monkeypatch):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    config = wurk.Config({"cron_tick_interval": 5})
    _ = config.plugins
    assert config["cron_tick_interval"] == 5
    untouched = wurk.Config()
    _ = untouched.plugins
    assert untouched["web_pool_size"] == 5


def test_core_cannot_be_disabled():
    with pytest.raises(PluginError, match="core"):
        Plugins(["core"], entry_points=False)


def test_a_plugin_with_an_unknown_hook_is_rejected_at_registration():
    class Typo:
        @wurk.hookimpl
        def wurk_register_middlewares(self, client, server):  # note the extra "s"
            pass

    plugins = Plugins(entry_points=False)
    with pytest.raises(PluginError, match="wurk_register_middlewares"):
        plugins.register(Typo(), name="typo")
    assert not plugins.is_enabled("typo")


def test_lifecycle_hooks_are_isolated_and_shutdown_runs_in_reverse(config):
    calls = []

    class First:
        @wurk.hookimpl
        def wurk_startup(self, config):
            calls.append("first-startup")

        @wurk.hookimpl
        def wurk_shutdown(self, config):
            calls.append("first-shutdown")

    class Second:
        @wurk.hookimpl
        def wurk_startup(self):
            calls.append("second-startup")

        @wurk.hookimpl
        def wurk_shutdown(self, config):
            calls.append("second-shutdown")
            raise RuntimeError("second plugin fails on shutdown")

    reported = []
    config.error_handlers.append(lambda exc, ctx, cfg: reported.append((str(exc), ctx["context"])))
    plugins = Plugins(entry_points=False)
    plugins.register(First(), name="first")
    plugins.register(Second(), name="second")
    plugins.fire("startup", config)
    plugins.fire("shutdown", config)
    assert calls == ["first-startup", "second-startup", "second-shutdown", "first-shutdown"]
    assert reported == [("second plugin fails on shutdown", "plugin second on shutdown")]
    with pytest.raises(ValueError, match="unknown lifecycle event"):
        plugins.fire("reboot", config)


def test_startup_failure_aborts_when_asked(config):
    class Broken:
        @wurk.hookimpl
        def wurk_startup(self, config):
            raise RuntimeError("cannot boot")

    plugins = Plugins(entry_points=False)
    plugins.register(Broken(), name="broken")
    with pytest.raises(RuntimeError, match="cannot boot"):
        plugins.fire("startup", config, reraise=True)


def test_addhooks_lets_a_plugin_offer_hooks_of_its_own():
    class Specs:
        @wurk.hookspec
        def audit_extra(self, value):
            """A hook offered by a plugin."""

    class Offering:
        @wurk.hookimpl
        def wurk_addhooks(self, pluginmanager):
            pluginmanager.add_hookspecs(Specs)

    class Using:
        @wurk.hookimpl
        def audit_extra(self, value):
            return value * 2

    plugins = Plugins(entry_points=False)
    plugins.register(Offering(), name="offering")
    plugins.register(Using(), name="using")
    assert plugins.hook.audit_extra(value=21) == [42]


def test_third_party_plugin_from_the_docs_is_discovered_through_its_entry_point(tmp_path, monkeypatch, config):
    site = tmp_path / "site"
    site.mkdir()
    source = (ROOT / "docs" / "examples" / "audit_plugin.py").read_text()
    install_dist(site, "audit_plugin", source, "[wurk]\naudit = audit_plugin\n")
    monkeypatch.syspath_prepend(str(site))

    fresh = wurk.Config()
    fresh.redis = config.redis
    assert fresh.plugins.is_enabled("audit")
    assert "audit" in {info.name for info in fresh.plugins.discovered()}
    assert fresh.job_options.owner("audit") == "audit-plugin"

    client = wurk.Client(fresh)
    client.push({"class": Audited, "args": []})
    client.push({"class": Audited, "args": [], "audit": False})
    raw = fresh.redis_pool.client.lrange("queue:default", 0, -1)
    stamped = [wurk.payload.loads(item) for item in raw]
    assert [job.get("enqueued_by") for job in reversed(stamped)] == [socket.gethostname(), None]

    monkeypatch.setenv("WURK_DISABLE_PLUGINS", "audit")
    switched_off = wurk.Config()
    assert not switched_off.plugins.is_enabled("audit")
    assert len(switched_off.client_middleware) == 0


def test_third_party_plugin_adds_a_cli_command(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    source = (ROOT / "docs" / "examples" / "audit_plugin.py").read_text()
    install_dist(site, "audit_plugin", source, "[wurk]\naudit = audit_plugin\n")
    wurk_cli = shutil.which("wurk", path=str(Path(sys.executable).parent))
    assert wurk_cli, "the wurk console script must be installed"
    env = {"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run([wurk_cli, "audit"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "enqueued_by=" in result.stdout
    listing = subprocess.run([wurk_cli, "plugins"], env=env, capture_output=True, text=True, timeout=60).stdout
    assert textwrap.dedent(listing).splitlines()[1].split()[:4] == ["audit", "audit_plugin", "1.0", "enabled"]
