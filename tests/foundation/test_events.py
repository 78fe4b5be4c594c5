"""One event system: ``config.on`` callbacks and plugin hooks in one dispatch."""

from __future__ import annotations

import logging

import pytest

import wurk
from wurk.errors import ConfigurationError
from wurk.plugins.manager import DISABLE_ENV, Plugins


@pytest.fixture
def config(monkeypatch):
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    return wurk.Config()


class Recorder:
    """A plugin that records the events it hears."""

    def __init__(self, seen: list[str], label: str) -> None:
        self.seen, self.label = seen, label

    @wurk.hookimpl
    def wurk_startup(self, config):
        self.seen.append(f"{self.label}:startup")

    @wurk.hookimpl
    def wurk_shutdown(self, config):
        self.seen.append(f"{self.label}:shutdown")

    @wurk.hookimpl
    def wurk_beat(self, config):
        self.seen.append(f"{self.label}:beat")


def test_callbacks_go_first_on_the_way_up_and_last_on_the_way_down(config):
    seen: list[str] = []
    config.on("startup", lambda: seen.append("on1:startup"))
    config.on("shutdown", lambda: seen.append("on1:shutdown"))
    config.plugins.register(Recorder(seen, "plugin"), name="recorder")
    config.on("startup", lambda: seen.append("on2:startup"))
    config.on("shutdown", lambda: seen.append("on2:shutdown"))
    config.fire_event("startup")
    config.fire_event("shutdown")
    assert seen == [
        "on1:startup",
        "on2:startup",
        "plugin:startup",
        "plugin:shutdown",
        "on2:shutdown",
        "on1:shutdown",
    ]


def test_callbacks_are_plugins_of_the_one_dispatch(config):
    config.on("quiet", lambda: None)
    names = [impl.plugin_name for impl in config.plugins.manager.hook.wurk_quiet.get_hookimpls()]
    assert any(name.startswith("config.on:quiet:") for name in names)


def test_a_callback_given_before_the_plugins_loaded_joins_when_they_load():
    config = wurk.Config()
    config.on("startup", lambda: None)
    assert config._plugins is None  # config.on never loads the plugins itself
    impls = config.plugins.manager.hook.wurk_startup.get_hookimpls()
    assert any(impl.plugin_name.startswith("config.on:startup:") for impl in impls)


def test_callbacks_are_one_shot_but_plugin_hooks_fire_every_time(config):
    seen: list[str] = []
    config.plugins.register(Recorder(seen, "plugin"), name="recorder")
    config.on("startup", lambda: seen.append("on:startup"))
    config.on("beat", lambda: seen.append("on:beat"))
    for _ in range(2):
        config.fire_event("startup")
        config.fire_event("beat")
    assert seen.count("plugin:startup") == 2
    assert seen.count("on:startup") == 1
    assert seen.count("on:beat") == 2
    assert seen.count("plugin:beat") == 2
    impls = config.plugins.manager.hook.wurk_startup.get_hookimpls()
    assert not [impl for impl in impls if impl.plugin_name.startswith("config.on:")]  # unregistered too


def test_a_failing_callback_is_reported_and_the_plugins_still_run(config):
    seen: list[str] = []
    reported = []
    config.error_handlers = [lambda exc, ctx, cfg: reported.append(ctx["context"])]
    config.plugins.register(Recorder(seen, "plugin"), name="recorder")

    def broken():
        raise RuntimeError("no")

    config.on("shutdown", broken)
    config.on("shutdown", lambda: seen.append("on:shutdown"))
    config.fire_event("shutdown")
    assert seen == ["plugin:shutdown", "on:shutdown"]
    assert reported == ["exception in shutdown event"]


def test_a_failing_startup_callback_aborts_before_the_plugins_and_is_not_kept(config):
    seen: list[str] = []
    config.plugins.register(Recorder(seen, "plugin"), name="recorder")

    def broken():
        raise RuntimeError("cannot boot")

    config.on("startup", broken)
    config.on("startup", lambda: seen.append("on:startup"))
    with pytest.raises(RuntimeError, match="cannot boot"):
        config.fire_event("startup", reraise=True)
    assert seen == []
    assert config["lifecycle_events"]["startup"] == []
    config.fire_event("startup", reraise=True)  # the callbacks were one-shot, even unrun
    assert seen == ["plugin:startup"]


def test_a_reraising_dispatch_on_one_thread_leaves_another_dispatch_contained(config):
    reported = []
    config.error_handlers = [lambda exc, ctx, cfg: reported.append(str(exc))]

    def nested():  # a callback that fires another event while startup re-raises
        config.fire_event("beat")

    def broken_beat():
        raise RuntimeError("beat failed")

    config.on("beat", broken_beat)
    config.on("startup", nested)
    config.fire_event("startup", reraise=True)
    assert reported == ["beat failed"]


def test_callbacks_listed_by_hand_are_dispatched_and_removed_ones_dropped(config):
    seen: list[str] = []
    config.on("quiet", lambda: seen.append("removed"))
    _ = config.plugins
    config["lifecycle_events"]["quiet"].clear()
    config["lifecycle_events"]["quiet"].append(lambda: seen.append("listed"))
    config.fire_event("quiet")
    assert seen == ["listed"]


def test_the_same_function_for_two_events_runs_for_each(config):
    seen: list[str] = []

    def note():
        seen.append("note")

    config.on("quiet", note)
    config.on("exit", note)
    config.fire_event("quiet")
    config.fire_event("exit")
    assert seen == ["note", "note"]


def test_an_unknown_event_is_refused_by_both_calls(config):
    with pytest.raises(ConfigurationError, match="'reboot'"):
        config.on("reboot", lambda: None)
    with pytest.raises(ConfigurationError, match="'reboot'"):
        config.fire_event("reboot")


def test_a_callback_registered_while_the_plugins_load_runs_once(config):
    seen: list[str] = []

    class Registers:
        @wurk.hookimpl
        def wurk_configure(self, config):
            config.on("startup", lambda: seen.append("startup"))

    plugins = Plugins(entry_points=False)
    plugins.register(Registers(), name="registers")
    config.use_plugins(plugins)
    config.fire_event("startup")
    config.fire_event("startup")
    assert seen == ["startup"]
    assert not [name for name, _ in plugins.manager.list_name_plugin() if name.startswith("config.on:")]


def test_disabling_plugins_after_they_loaded_says_it_has_no_effect(config):
    warnings: list[str] = []

    class Note(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    note = Note()
    config.logger.addHandler(note)
    try:
        _ = config.get("some_option_of_mine", 1)  # a read may load the plugins
        config["disabled_plugins"] = ["web"]
    finally:
        config.logger.removeHandler(note)
    assert any("disabled_plugins set after the plugins were loaded" in line for line in warnings)
