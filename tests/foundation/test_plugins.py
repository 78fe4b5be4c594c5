"""Plugin discovery, switching off, ordering and validation, on real entry points."""

from __future__ import annotations

import ast
import inspect
import shutil
import socket
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import wurk
from tests.helpers import ROOT
from wurk.errors import PluginError, UnknownOptionError
from wurk.plugins import hookspecs
from wurk.plugins.manager import Plugins

FEATURES = ["batches", "cron", "crypto", "limiter", "swarm", "unique", "web"]


class Locked(wurk.Job, unique_for=60):
    def perform(self):
        pass


class Audited(wurk.Job):
    def perform(self):
        pass


def install_dist(site: Path, name: str, module_source: str, entry_points: str, version: str = "1.0") -> None:
    """Lay out a real installed distribution (dist-info + module) on ``site``."""
    (site / f"{name}.py").write_text(module_source)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


def install_audit(site: Path) -> None:
    """The plugin guide's example, laid out as an installed distribution, with
    the entry points its ``pyproject.toml`` publishes."""
    example = ROOT / "docs" / "examples" / "wurk-audit"
    shutil.copytree(example / "src" / "wurk_audit", site / "wurk_audit")
    info = site / "wurk_audit-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wurk-audit\nVersion: 1.0.0\n")
    groups = tomllib.loads((example / "pyproject.toml").read_text())["project"]["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
            for group, points in groups.items()
        )
    )


def test_all_feature_plugins_are_discovered_with_versions(monkeypatch):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    plugins = Plugins()
    infos = {info.name: info for info in plugins.discovered()}
    assert sorted(infos) == FEATURES
    for name in FEATURES:
        assert infos[name].distribution == f"wurk-{name}"
        # The plugin's own distribution version: features are released apart from core.
        assert infos[name].version == metadata.version(f"wurk-{name}")
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


def test_lifecycle_hooks_are_isolated_and_run_last_registered_first(config):
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
    # pluggy's order on every event: the last registered first (docs/plugins.md, "The order of calls")
    assert calls == ["second-startup", "first-startup", "second-shutdown", "first-shutdown"]
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
    install_audit(site)
    monkeypatch.syspath_prepend(str(site))

    fresh = wurk.Config()
    fresh.redis = config.redis
    assert fresh.plugins.is_enabled("audit")
    assert "audit" in {info.name for info in fresh.plugins.discovered()}
    assert fresh.job_options.owner("audit") == "wurk-audit"

    client = wurk.Client(fresh)
    client.push({"class": Audited, "args": []})
    client.push({"class": Audited, "args": [], "audit": False})
    raw = fresh.redis_pool.client.lrange("queue:default", 0, -1)
    stamped = [wurk.client.payload.loads(item) for item in raw]
    assert [job.get("enqueued_by") for job in reversed(stamped)] == [socket.gethostname(), None]

    monkeypatch.setenv("WURK_DISABLE_PLUGINS", "audit")
    switched_off = wurk.Config()
    switched_off.redis = config.redis
    assert not switched_off.plugins.is_enabled("audit")
    assert len(switched_off.client_middleware) == 0
    # Its option is refused, as docs/plugins.md says, naming the plugin.
    refused = "job option 'audit' belongs to the 'audit' plugin of wurk-audit, which is switched off by"
    with pytest.raises(UnknownOptionError, match=refused):
        wurk.Client(switched_off).push({"class": Audited, "args": [], "audit": False})
    assert len(fresh.redis_pool.client.lrange("queue:default", 0, -1)) == 2  # nothing more was pushed


def test_third_party_plugin_adds_a_cli_command(tmp_path, redis_url):
    site = tmp_path / "site"
    site.mkdir()
    install_audit(site)
    wurk_cli = shutil.which("wurk", path=str(Path(sys.executable).parent))
    assert wurk_cli, "the wurk console script must be installed"
    env = {"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent), "REDIS_URL": redis_url}
    result = subprocess.run([wurk_cli, "audit"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # no job has run: no outcome counted yet
    listing = subprocess.run([wurk_cli, "plugins"], env=env, capture_output=True, text=True, timeout=60).stdout
    assert textwrap.dedent(listing).splitlines()[1].split()[:4] == ["audit", "wurk-audit", "1.0.0", "enabled"]


def install_api_plugin(site: Path, name: str, declared: str) -> str:
    """A third-party plugin distribution (version 2.5) that declares ``WURK_PLUGIN_API = declared``.

    Its module name is unique to ``site``, since an imported module stays in
    ``sys.modules`` for the rest of the run; returns that name.
    """
    module = f"{site.parent.name}_plugin"
    source = f"import wurk\n\nWURK_PLUGIN_API = {declared}\n\n@wurk.hookimpl\ndef wurk_configure(config):\n    pass\n"
    install_dist(site, module, source, f"[wurk]\n{name} = {module}\n", version="2.5")
    return module


@pytest.mark.parametrize(
    ("core_api", "declared", "upgrade"),
    [
        ((1, 0), "(2, 0)", "upgrade wurk-core to a release that provides plugin API 2.0 or a later 2.x"),
        ((1, 0), "(1, 1)", "upgrade wurk-core to a release that provides plugin API 1.1 or a later 1.x"),
        ((2, 3), "(1, 0)", "upgrade {module} to a release built for plugin API 2.x"),
    ],
)
def test_a_plugin_built_for_an_incompatible_plugin_api_is_refused_at_load(
    tmp_path, monkeypatch, core_api, declared, upgrade
):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    monkeypatch.setattr(wurk.plugins.manager, "PLUGIN_API", core_api)
    site = tmp_path / "site"
    site.mkdir()
    module = install_api_plugin(site, "newer", declared)
    monkeypatch.syspath_prepend(str(site))

    # The features are switched off: built for 1.x, they are refused by a 2.x core too.
    with pytest.raises(PluginError) as refused:
        Plugins(FEATURES)
    message = str(refused.value)
    wanted = declared.strip("()").replace(", ", ".")
    assert f"plugin 'newer' ({module} 2.5)" in message
    assert f"built for plugin API {wanted}" in message
    assert f"wurk-core {wurk.__version__} provides plugin API {core_api[0]}.{core_api[1]}" in message
    assert upgrade.format(module=module) in message
    assert "WURK_DISABLE_PLUGINS=newer" in message

    # Switched off, it is never imported, so the rest still starts.
    assert not Plugins(["newer", *FEATURES]).is_enabled("newer")


@pytest.mark.parametrize("declared", ["(1, 0)", "None"])
def test_a_plugin_built_for_an_older_minor_or_declaring_nothing_loads(tmp_path, monkeypatch, declared):
    monkeypatch.delenv("WURK_DISABLE_PLUGINS", raising=False)
    site = tmp_path / "site"
    site.mkdir()
    install_api_plugin(site, "older", declared)
    monkeypatch.syspath_prepend(str(site))

    plugins = Plugins()
    assert plugins.is_enabled("older")
    assert {info.name: info.version for info in plugins.discovered()}["older"] == "2.5"


def test_a_hand_registered_plugin_is_checked_the_same_way():
    class Future:
        WURK_PLUGIN_API = (wurk.PLUGIN_API[0] + 1, 0)

        @wurk.hookimpl
        def wurk_configure(self, config):
            pass

    class Garbled:
        WURK_PLUGIN_API = "1.0"

    plugins = Plugins(entry_points=False)
    with pytest.raises(PluginError, match=r"plugin 'future' was built for plugin API \d+\.0, but wurk-core"):
        plugins.register(Future(), name="future")
    with pytest.raises(PluginError, match=r"declares WURK_PLUGIN_API = '1.0'; expected \(major, minor\)"):
        plugins.register(Garbled(), name="garbled")
    assert not plugins.is_enabled("future")
    assert not plugins.is_enabled("garbled")


def test_the_typed_caller_has_one_method_per_registration_and_notification_hook():
    from wurk.plugins import hookspecs
    from wurk.plugins.manager import HookCaller

    specs = {name.removeprefix("wurk_") for name in dir(hookspecs) if name.startswith("wurk_")}
    expected = specs - set(hookspecs.LIFECYCLE_EVENTS) - {"addhooks"}
    methods = {name for name in vars(HookCaller) if not name.startswith("_")}
    assert methods == expected
    for name in expected:
        spec = inspect.signature(getattr(hookspecs, f"wurk_{name}"))
        method = inspect.signature(getattr(HookCaller, name))
        assert list(method.parameters)[1:] == list(spec.parameters), name
        assert method.return_annotation == "None", name


#: Core's hooks, as pluggy names them.
HOOK_NAMES = frozenset(name for name in dir(hookspecs) if name.startswith("wurk_"))


def untyped_hook_calls(source: str) -> list[int]:
    """Lines reaching pluggy's relay: ``x.hook`` in any form (``.hook.wurk_…``,
    ``getattr(x.hook, name)``) and ``getattr`` naming a ``wurk_`` hook."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "hook":
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            named = [arg.value for arg in node.args[1:2] if isinstance(arg, ast.Constant)]
            if any(isinstance(name, str) and name in HOOK_NAMES for name in named):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_core_calls_its_hooks_only_through_the_typed_caller():
    """Only the wrapper itself (``wurk/plugins/manager.py``) reaches pluggy's relay."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "packages").glob("*/src/**/*.py"))
        if path.relative_to(ROOT).as_posix() != "packages/wurk-core/src/wurk/plugins/manager.py"
        for number in untyped_hook_calls(path.read_text())
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "line",
    [
        "config.plugins.hook.wurk_beat(config=config)",
        "getattr(config.plugins.hook, HOOK).get_hookimpls()",
        "getattr(plugins.manager.hook, 'wurk_fork')",
        "getattr(relay, 'wurk_job_outcome')(outcome=o, config=c)",
    ],
)
def test_the_guard_sees_each_untyped_form(line):
    assert untyped_hook_calls(line) == [1]


def test_job_outcome_through_the_typed_caller_is_contained(config):
    config = wurk.Config(disabled_plugins=["batches"])  # only the two listeners below
    heard = []

    class Failing:
        @wurk.hookimpl
        def wurk_job_outcome(self, outcome):
            raise RuntimeError("listener broke")

    class Listening:
        @wurk.hookimpl
        def wurk_job_outcome(self, outcome, config):
            heard.append((outcome, config))

    errors = []
    config.error_handlers.append(lambda exc, context, cfg: errors.append((str(exc), context["context"])))
    config.plugins.register(Failing(), name="failing")
    config.plugins.register(Listening(), name="listening")
    marker = object()
    config.plugins.call.job_outcome(marker, config)  # type: ignore[arg-type]
    assert heard == [(marker, config)]
    assert errors == [("listener broke", "plugin failing on wurk_job_outcome")]
