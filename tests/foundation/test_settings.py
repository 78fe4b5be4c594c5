"""Settings declared through ``wurk_register_settings``: defaults, checks,
typo warnings, owners, and the hint when a feature's plugin is missing."""

from __future__ import annotations

import logging
import os
import sys

import pytest

import wurk
import wurk_web
from tests.foundation.test_plugins import install_dist
from wurk.config.settings import UNSET, SettingRegistry, optional, positive_number, published_settings, whole_number
from wurk.errors import ConfigurationError, PluginError
from wurk.plugins.manager import DISABLE_ENV, Plugins


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured(monkeypatch):
    """A fresh configuration (every installed plugin enabled) whose warnings are recorded."""
    monkeypatch.delenv(DISABLE_ENV, raising=False)

    def build(**kwargs):
        config = wurk.Config(**kwargs)
        logger = logging.getLogger(f"wurk.test.settings.{id(config)}")
        logger.propagate = False
        handler = ListHandler()
        logger.addHandler(handler)
        config.logger = logger
        build.handlers.append((logger, handler))
        return config, handler

    build.handlers = []
    yield build
    for logger, handler in build.handlers:
        logger.removeHandler(handler)


def not_loaded(key: str, distribution: str) -> str:
    return (
        f"option {key!r} is a setting of {distribution}, whose plugin is not loaded (switched off in "
        "WURK_DISABLE_PLUGINS or config['disabled_plugins'], or left out of config['plugins'] with "
        "WURK_DISABLE_PLUGIN_AUTOLOAD set): it has no effect"
    )


def warnings_of(handler):
    return [record.getMessage() for record in handler.records if record.levelno == logging.WARNING]


class Invoices:
    """A third-party plugin that owns two settings."""

    @wurk.hookimpl
    def wurk_register_settings(self, settings):
        settings.add("invoice_batch_size", default=100, check=whole_number(1), owner="acme-invoices")
        settings.add("invoice_tags", default=["billing"], owner="acme-invoices", doc="tags on every invoice job")


def with_plugin(plugin, name="acme-invoices"):
    plugins = Plugins(entry_points=False)
    plugins.register(plugin, name=name)
    return plugins


# -- the registry ---------------------------------------------------------------------------


def test_a_setting_records_its_default_check_owner_and_doc():
    registry = SettingRegistry()
    setting = registry.add("batch", default=[1], check=whole_number(0), owner="acme", doc="why")
    assert registry.get("batch") is setting
    assert (setting.owner, setting.doc, setting.has_default) == ("acme", "why", True)
    assert setting.default_value() == [1]
    assert setting.default_value() is not setting.default
    assert "batch" in registry
    assert registry.names() == {"batch"}
    assert not registry.add("later").has_default
    assert registry.get("later").default is UNSET


def test_a_name_declared_by_two_owners_is_refused_naming_both():
    registry = SettingRegistry()
    registry.add("shared_pool_size", default=5, owner="acme-one")
    with pytest.raises(PluginError, match="'shared_pool_size' is declared by both acme-one and acme-two"):
        registry.add("shared_pool_size", default=6, owner="acme-two")
    assert registry.get("shared_pool_size").default == 5


def test_two_plugins_declaring_one_setting_fail_when_the_plugins_load():
    class Other:
        @wurk.hookimpl
        def wurk_register_settings(self, settings):
            settings.add("invoice_batch_size", default=7, owner="other-invoices")

    plugins = with_plugin(Invoices())
    plugins.register(Other(), name="other")
    with pytest.raises(PluginError, match="invoice_batch_size"):
        wurk.Config().use_plugins(plugins)


def test_the_owner_defaults_to_the_declaring_package():
    registry = SettingRegistry()
    assert registry.add("anything").owner == "tests"


def test_checks_name_the_key_and_the_value_and_may_normalise():
    with pytest.raises(ConfigurationError, match=r"batch must be a whole number >= 1, got 0"):
        whole_number(1)("batch", 0)
    with pytest.raises(ConfigurationError, match=r"wait must be a number > 0, got '3'"):
        positive_number("wait", "3")
    assert optional(whole_number(1))("batch", None) is None
    registry = SettingRegistry()
    normalising = registry.add("names", check=lambda key, value: list(value), owner="acme")
    assert normalising.validate(("a", "b")) == ["a", "b"]
    plain = registry.add("flag", check=lambda key, value: None, owner="acme")  # a check that only raises
    assert plain.validate(0) == 0


def test_core_declares_its_settings_through_its_own_plugin():
    config = wurk.Config()
    settings = config.settings
    assert settings.get("timeout").default == 25
    assert settings.get("timeout").owner == "wurk-core"
    assert not settings.get("max_retries").has_default  # unset until assigned
    assert "core" in {impl.plugin_name for impl in config.plugins.manager.hook.wurk_register_settings.get_hookimpls()}


# -- a third-party plugin's settings ----------------------------------------------------------


def test_a_declared_default_is_read_until_set(captured):
    config, _ = captured()
    config.use_plugins(with_plugin(Invoices()))
    assert config["invoice_batch_size"] == 100
    assert config.get("invoice_batch_size") == 100
    config["invoice_batch_size"] = 50
    assert config["invoice_batch_size"] == 50


def test_each_configuration_gets_its_own_copy_of_a_mutable_default():
    first, second = wurk.Config(), wurk.Config()
    first.use_plugins(with_plugin(Invoices()))
    second.use_plugins(with_plugin(Invoices()))
    first["invoice_tags"].append("urgent")
    assert second["invoice_tags"] == ["billing"]


def test_a_bad_value_is_refused_when_written_once_the_plugin_has_loaded(captured):
    config, _ = captured()
    config.use_plugins(with_plugin(Invoices()))
    with pytest.raises(ConfigurationError, match="invoice_batch_size must be a whole number >= 1, got 0"):
        config["invoice_batch_size"] = 0
    assert config["invoice_batch_size"] == 100


def test_a_bad_value_written_before_the_plugin_loaded_is_refused_when_it_loads(captured):
    config, _ = captured()
    config["invoice_batch_size"] = "lots"  # nothing knows this key yet
    with pytest.raises(ConfigurationError, match=r"invoice_batch_size.*'lots'"):
        config.use_plugins(with_plugin(Invoices()))
    assert config["invoice_batch_size"] == 100  # the refused value did not stay


def test_a_value_written_before_the_plugin_loaded_wins_over_its_default(captured):
    config, handler = captured()
    config["invoice_batch_size"] = 20
    config.use_plugins(with_plugin(Invoices()))
    assert config["invoice_batch_size"] == 20
    assert warnings_of(handler) == []


def test_a_key_close_to_a_declared_setting_is_reported_as_a_typo(captured):
    config, handler = captured()
    config["invoice_batch_sise"] = 20  # before the plugin loaded: looked at again when it does
    assert warnings_of(handler) == []
    config.use_plugins(with_plugin(Invoices()))
    config["invoice_tag"] = ["x"]  # after: at once
    assert warnings_of(handler) == [
        "unknown option 'invoice_batch_sise'; did you mean 'invoice_batch_size'?",
        "unknown option 'invoice_tag'; did you mean 'invoice_tags'?",
    ]


def test_a_core_setting_is_checked_at_once_without_loading_the_plugins():
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="fetch_poll_interval"):
        config["fetch_poll_interval"] = 0
    assert config._plugins is None


# -- the feature distributions' settings ----------------------------------------------------


def test_the_features_declare_their_settings(captured):
    config, _ = captured()
    owners = {
        name: config.settings.get(name).owner for name in ("web_pool_size", "memory_limit_mb", "cron_tick_interval")
    }
    assert owners == {"web_pool_size": "wurk-web", "memory_limit_mb": "wurk-swarm", "cron_tick_interval": "wurk-cron"}
    assert config["web_pool_size"] == 5
    assert config["cron_tick_interval"] == 60
    assert config["swarm_shutdown_grace"] == 5
    assert "memory_limit_mb" not in config  # unset: reading it falls back to WURK_MAXMEM_MB


def test_reading_a_feature_setting_loads_the_plugins_for_its_default(captured):
    config, _ = captured()
    assert config["cron_tick_interval"] == 60
    assert config.plugins.is_enabled("cron")


@pytest.mark.parametrize("bad", [0, -5, "60", True])
def test_a_feature_setting_is_checked_by_its_plugin(captured, bad):
    config, _ = captured()
    _ = config.plugins
    with pytest.raises(ConfigurationError, match="cron_tick_interval"):
        config["cron_tick_interval"] = bad


def test_a_feature_setting_set_while_its_plugin_is_disabled_names_the_distribution(captured):
    config, handler = captured(disabled_plugins=["web", "cron"])
    config["web_pool_size"] = 3  # before the plugins load
    config.freeze()
    assert warnings_of(handler) == [not_loaded("web_pool_size", "wurk-web")]
    assert "cron_tick_interval" not in config


def test_a_feature_setting_written_after_the_plugins_loaded_warns_at_once(captured):
    config, handler = captured(disabled_plugins=["swarm"])
    _ = config.plugins
    config["memory_limit_mb"] = 512
    assert warnings_of(handler) == [not_loaded("memory_limit_mb", "wurk-swarm")]
    assert config["memory_limit_mb"] == 512  # kept as written, like any open key


def test_the_web_pool_needs_the_dashboard_plugin(captured):
    config, _ = captured(disabled_plugins=["web"])
    with pytest.raises(ConfigurationError, match="is wurk-web enabled"):
        wurk_web.redis_pool(config)


def test_a_misspelt_feature_setting_is_suggested_even_without_its_plugin(captured):
    config, handler = captured(disabled_plugins=["web"])
    config["web_pool_sise"] = 3
    assert warnings_of(handler) == ["unknown option 'web_pool_sise'; did you mean 'web_pool_size'?"]


def test_core_lists_no_feature_setting_and_each_distribution_publishes_what_its_plugin_declares(captured):
    """The hint that names a feature's distribution comes from that
    distribution's own metadata, and names exactly what its plugin declares."""
    import wurk.config.settings
    from wurk.config.options import FEATURE_OPTIONS

    assert not hasattr(wurk.config.settings, "FEATURE_SETTINGS")
    config, _ = captured()
    declared = {setting.name: setting.owner for setting in config.settings if setting.owner != "wurk-core"}
    assert published_settings() == declared
    options = config.job_options
    assert {name: options.owner(name) for name in FEATURE_OPTIONS} == FEATURE_OPTIONS


def test_a_third_party_setting_names_its_distribution_while_its_plugin_is_off(captured, tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    source = (
        "import wurk\n\n@wurk.hookimpl\ndef wurk_register_settings(settings):\n"
        "    settings.add('invoice_printer', default='lp0', owner='acme-invoices')\n"
    )
    install_dist(
        site,
        "acme_invoices",
        source,
        "[wurk]\ninvoices = acme_invoices\n\n[wurk.settings]\ninvoice_printer = acme_invoices\n",
    )
    monkeypatch.syspath_prepend(str(site))
    config, handler = captured(disabled_plugins=["invoices"])
    config["invoice_printer"] = "lp1"
    config.freeze()
    assert warnings_of(handler) == [not_loaded("invoice_printer", "acme_invoices")]
    assert "acme_invoices" not in sys.modules  # named from its metadata, never imported

    loaded, handler = captured()
    loaded["invoice_printer"] = "lp1"
    loaded.freeze()
    assert warnings_of(handler) == []
    assert loaded.settings.get("invoice_printer").owner == "acme-invoices"


def test_a_fallback_is_read_while_the_setting_is_unassigned(captured, monkeypatch):
    class Reads:
        @wurk.hookimpl
        def wurk_register_settings(self, settings: SettingRegistry) -> None:
            settings.add("invoice_printer", fallback=lambda: os.environ.get("INVOICE_PRINTER"), owner="acme")

    plugins = Plugins(entry_points=False)
    plugins.register(Reads(), name="reads")
    config = wurk.Config()
    config.use_plugins(plugins)
    monkeypatch.setenv("INVOICE_PRINTER", "lp0")
    assert config["invoice_printer"] == "lp0"
    monkeypatch.setenv("INVOICE_PRINTER", "lp1")
    assert config["invoice_printer"] == "lp1"  # read each time
    assert "invoice_printer" not in config
    config["invoice_printer"] = "lp2"
    assert config["invoice_printer"] == "lp2"
    with pytest.raises(PluginError, match="fallback"):
        SettingRegistry().add("both", default=1, fallback=lambda: 2)
