"""Every hook is called through pluggy: wrappers run around the others, pluggy's
tracing sees the call, the order is pluggy's (as docs/plugins.md says), and a
lifecycle or outcome implementation that raises is reported without stopping
the next."""

from __future__ import annotations

import pytest

import wurk
from wurk.plugins.manager import DISABLE_ENV, Plugins
from wurk.plugins.outcomes import Outcome


@pytest.fixture
def config(monkeypatch):
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    config = wurk.Config()
    config.use_plugins(Plugins(entry_points=False))
    return config


def recorder(label: str, calls: list[str], *, fail: bool = False, **marks: bool) -> object:
    """A plugin whose ``wurk_beat`` and ``wurk_shutdown`` note ``label`` (and raise when ``fail``)."""

    class Recorder:
        @wurk.hookimpl(**marks)
        def wurk_beat(self, config):
            calls.append(label)
            if fail:
                raise RuntimeError(f"{label} broke")

        @wurk.hookimpl(**marks)
        def wurk_shutdown(self, config):
            calls.append(label)

    return Recorder()


def reported(config) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    config.error_handlers = [lambda exc, context, cfg: seen.append((str(exc), context["context"]))]
    return seen


def test_the_order_is_pluggys_last_registered_first_on_every_event(config):
    calls: list[str] = []
    plugins = config.plugins
    plugins.register(recorder("early", calls, tryfirst=True), name="early")
    plugins.register(recorder("first", calls), name="first")
    plugins.register(recorder("second", calls), name="second")
    plugins.register(recorder("late", calls, trylast=True), name="late")
    plugins.register(recorder("third", calls), name="third")
    plugins.fire("beat", config)
    assert calls == ["early", "third", "second", "first", "late"]
    calls.clear()
    plugins.fire("shutdown", config)  # no reversal: pluggy has one order
    assert calls == ["early", "third", "second", "first", "late"]


def test_config_on_callbacks_keep_sidekiqs_order_around_the_plugins(config):
    calls: list[str] = []
    config.on("beat", lambda: calls.append("on1"))
    config.on("shutdown", lambda: calls.append("on1"))
    config.plugins.register(recorder("first", calls), name="first")
    config.plugins.register(recorder("second", calls), name="second")
    config.on("beat", lambda: calls.append("on2"))
    config.on("shutdown", lambda: calls.append("on2"))
    config.fire_event("beat")
    assert calls == ["on1", "on2", "second", "first"]
    calls.clear()
    config.fire_event("shutdown")
    assert calls == ["second", "first", "on2", "on1"]


def test_a_failing_implementation_is_reported_and_the_next_still_runs(config):
    calls: list[str] = []
    errors = reported(config)
    config.plugins.register(recorder("quiet", calls), name="quiet")
    config.plugins.register(recorder("loud", calls, fail=True), name="loud")  # registered last: runs first
    config.plugins.fire("beat", config)
    assert calls == ["loud", "quiet"]
    assert errors == [("loud broke", "plugin loud on beat")]


def test_a_failing_startup_still_aborts_the_boot(config):
    calls: list[str] = []

    class Broken:
        @wurk.hookimpl
        def wurk_startup(self):
            raise RuntimeError("cannot boot")

    class After:
        @wurk.hookimpl(trylast=True)
        def wurk_startup(self):
            calls.append("after")

    config.plugins.register(After(), name="after")
    config.plugins.register(Broken(), name="broken")
    with pytest.raises(RuntimeError, match="cannot boot"):
        config.plugins.fire("startup", config, reraise=True)
    assert calls == []


@pytest.mark.parametrize("style", ["wrapper", "hookwrapper"])
def test_a_wrapper_runs_around_the_others_and_sees_their_outcome(config, style):
    calls: list[str] = []
    errors = reported(config)

    if style == "wrapper":

        class Around:
            @wurk.hookimpl(wrapper=True)
            def wurk_beat(self, config):
                calls.append("before")
                result = yield
                calls.append(f"after {result!r}")
                return result

    else:

        class Around:  # type: ignore[no-redef]
            @wurk.hookimpl(hookwrapper=True)
            def wurk_beat(self, config):
                calls.append("before")
                outcome = yield
                calls.append(f"after {outcome.get_result()!r}")

    config.plugins.register(Around(), name="around")
    config.plugins.register(recorder("quiet", calls), name="quiet")
    config.plugins.register(recorder("loud", calls, fail=True), name="loud")
    config.plugins.fire("beat", config)
    # The failure was contained inside: the wrapper sees a plain call that returned nothing.
    assert calls == ["before", "loud", "quiet", "after []"]
    assert errors == [("loud broke", "plugin loud on beat")]


def test_a_wrapper_that_raises_ends_the_call_and_is_reported(config):
    errors = reported(config)

    class Raising:
        @wurk.hookimpl(wrapper=True)
        def wurk_beat(self, config):
            yield
            raise RuntimeError("wrapper broke")

    config.plugins.register(Raising(), name="raising")
    config.plugins.fire("beat", config)
    assert errors == [("wrapper broke", "plugins on beat")]


def test_pluggys_tracing_sees_a_fired_event_and_a_told_outcome(config):
    traced: list[tuple[str, list[str], list[str]]] = []
    config.plugins.register(recorder("listener", []), name="listener")

    class Listening:
        @wurk.hookimpl
        def wurk_job_outcome(self, outcome):
            pass

    config.plugins.register(Listening(), name="listening")
    undo = config.plugins.manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: traced.append((name, [impl.plugin_name for impl in impls], sorted(kwargs))),
        lambda outcome, name, impls, kwargs: None,
    )
    try:
        config.plugins.fire("beat", config)
        job = {"jid": "a" * 24, "class": "X", "args": [], "queue": "default"}
        config.plugins.call.job_outcome(Outcome.of("succeeded", job), config)
    finally:
        undo()
    assert traced == [
        ("wurk_beat", ["core", "listener"], ["config"]),
        ("wurk_job_outcome", ["listening"], ["config", "outcome"]),
    ]


def test_pluggys_own_trace_writer_hears_the_event(config):
    lines: list[str] = []
    manager = config.plugins.manager
    manager.trace.root.setwriter(lines.append)
    undo = manager.enable_tracing()
    try:
        config.plugins.fire("shutdown", config)
    finally:
        undo()
        manager.trace.root.setwriter(None)
    assert any("wurk_shutdown" in line for line in lines)


def test_outside_a_dispatch_an_implementation_raises_as_pluggy_has_it(config):
    config.plugins.register(recorder("loud", [], fail=True), name="loud")
    with pytest.raises(RuntimeError, match="loud broke"):
        config.plugins.hook.wurk_beat(config=config)
