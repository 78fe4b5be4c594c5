"""Components: the worker's background threads, core's and plugins' alike.

The first tests drive components in this process on the test server; the
rest run real workers (``tests.worker.component_app``) whose plugin adds a
component through ``wurk_register_components`` and records its life.
"""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

import wurk
from tests.helpers import logged_at, wait_for
from tests.worker.component_app import Noted
from tests.worker.worker_app import Slow
from wurk.plugins.component import STOP_TIMEOUT, Component, ComponentRegistry


def lines(redis, pid: int) -> list[str]:
    rows = [row.decode().split(" ", 1) for row in redis.lrange("components", 0, -1)]
    return [what for who, what in rows if who == str(pid)]


class Failing(Component):
    name = "failing"
    interval = 0.01

    def __init__(self, config) -> None:
        super().__init__(config)
        self.ticks: list[float] = []

    def tick(self) -> None:
        self.ticks.append(time.monotonic())
        raise ConnectionError("the server is away")


def test_a_failing_tick_is_reported_and_backs_off_instead_of_spinning(config):
    reports: list[tuple[str, str]] = []
    config.error_handlers.append(lambda exc, context, cfg: reports.append((str(exc), context["context"])))
    component = Failing(config)
    component.start()
    wait_for(lambda: len(component.ticks) >= 3, timeout=30)
    assert component.stop()
    # Waits of 1, 2 (then 4) s after the first failures, not 0.01 s. A loaded
    # machine only makes a wait longer, so the gaps are bounded from below;
    # spinning would make them hundredths of a second.
    gaps = [later - earlier for earlier, later in zip(component.ticks, component.ticks[1:], strict=False)]
    assert gaps[0] >= 0.9
    assert gaps[1] >= 1.9
    assert reports[0] == ("the server is away", "failing")
    assert not component.running


def test_stop_wakes_a_sleeping_component_at_once_and_finish_runs_last(config):
    done: list[str] = []

    class Sleepy(Component):
        name = "sleepy"
        interval = 3600.0

        def tick(self) -> None:
            done.append("tick")

        def finish(self) -> None:
            done.append(f"finish running={self.running}")

    component = Sleepy(config)
    component.start()
    started = time.monotonic()
    assert component.stop()  # joined within STOP_TIMEOUT, where the sleep was an hour long
    assert time.monotonic() - started < STOP_TIMEOUT
    assert done == ["finish running=False"]


def test_the_registry_takes_components_only_once_and_keeps_last_ones_last(config):
    registry = ComponentRegistry()
    first, health, plugin, beat = (Failing(config) for _ in range(4))
    health.name, plugin.name, beat.name = "health", "plugin", "beat"
    registry.add(first)
    registry.add(health, last=True)
    registry.add(plugin)
    registry.add(beat, first=True)
    assert [c.name for c in registry] == ["beat", "failing", "plugin", "health"]
    assert registry.named("plugin") is plugin
    with pytest.raises(ValueError, match="already registered"):
        registry.add(plugin)
    with pytest.raises(TypeError, match=r"takes a wurk.Component, got .*subclass wurk.Component"):
        registry.add(threading.Thread())  # type: ignore[arg-type]


@pytest.fixture
def component_workers(config, redis_url, tmp_path):
    from tests.helpers import WorkerPool
    from tests.worker.conftest import FAST

    pool = WorkerPool(redis_url, tmp_path, "tests.worker.component_app", FAST)
    yield pool
    pool.stop_all()


def test_a_plugin_component_starts_before_jobs_hears_quiet_and_finishes_before_exit(component_workers, redis):
    worker = component_workers.start("-c", "1")
    wait_for(lambda: "tick" in lines(redis, worker.pid), timeout=30)
    Noted.perform_async()
    wait_for(lambda: "job" in lines(redis, worker.pid), timeout=30)
    identity = redis.smembers("processes").pop().decode()
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: "quiet True" in lines(redis, worker.pid), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    seen = lines(redis, worker.pid)
    assert seen == ["startup", f"start {identity}", "tick", "job", "quiet True", "shutdown", "finish True", "exit"]
    assert redis.scard("processes") == 0  # the heartbeat, stopped last, still left


#: Seconds a loaded machine may add past the shutdown deadline inside the
#: process: the components' last words, unregistering, the last lines. A
#: component waited for on its own (STOP_TIMEOUT, 5 s) would exceed it.
SHUTDOWN_SLACK = 1.5
#: Seconds, from the TERM to the process gone, allowed beyond its timeout for
#: leaving the interpreter on a loaded machine: far below the 60 s job and
#: the component that never ends, which the process must not wait for.
EXIT_ALLOWANCE = 10


@pytest.mark.parametrize("timeout", [1, 3])
def test_a_wedged_component_does_not_hold_the_process_past_its_timeout(component_workers, redis, timeout):
    """Jobs, then components: the whole process is down within ``-t``, even
    with a job running to the end and a component that never stops."""
    Slow.perform_async("long", 60)
    worker = component_workers.start("-c", "1", "-t", str(timeout), env={"TEST_STUCK_COMPONENT": "1"})
    wait_for(lambda: "stuck" in lines(redis, worker.pid) and "tick" in lines(redis, worker.pid), timeout=30)
    wait_for(lambda: redis.lrange("started", 0, -1) == [b"long"], timeout=30)
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    took = time.monotonic() - started
    assert took < timeout + EXIT_ALLOWANCE
    assert lines(redis, worker.pid)[-2:] == ["finish True", "exit"]
    assert redis.scard("processes") == 0  # the heartbeat still wrote its last beat
    assert [json.loads(job)["args"] for job in redis.lrange("queue:default", 0, -1)] == [["long", 60]]
    log = worker.output()
    assert "component stuck did not stop within the shutdown timeout" in log
    # The deadline as the process keeps it, from its own lines: the test's
    # scheduling and the interpreter's exit are not in this measure.
    assert logged_at(log, ": bye") - logged_at(log, "received TERM") < timeout + SHUTDOWN_SLACK


def test_a_component_that_cannot_start_takes_the_started_ones_down_with_the_boot(config, redis):
    from wurk.server.launcher import Launcher

    class Broken(Component):
        name = "broken"

        def start(self) -> None:
            raise OSError("port 7433 is taken")

    class Adds:
        @wurk.hookimpl
        def wurk_register_components(self, components, runtime):
            components.add(Broken(runtime.config))

    config.plugins.register(Adds(), name="adds-broken")
    launcher = Launcher(config)
    with pytest.raises(OSError, match="port 7433 is taken"):
        launcher.run()
    started = [c for c in launcher.components if c.name != "broken"]
    assert started  # the heartbeat, the scheduler, the leader… had started
    assert not any(c.running for c in started)
    assert redis.scard("processes") == 0  # the heartbeat left again
    assert redis.get("dear-leader") is None
