"""The application the component tests run: a plugin that adds components.

Loaded by real ``wurk`` worker processes (``-r tests.worker.component_app``).
``Witness`` records its life in the ``components`` list as ``"<pid> <what>"``
(``start <identity>``, ``tick`` once, ``quiet``, ``finish``), beside the
``startup``/``shutdown``/``exit`` events and the first job's run, so a test
reads the order things happened in. With ``TEST_STUCK_COMPONENT`` set, a
second component wedges in its tick and never answers a stop request.
"""

from __future__ import annotations

import os
import threading

import tests.worker.worker_app  # noqa: F401  (its timing knobs)
import wurk
from tests.worker.worker_app import evidence
from wurk.config.configuration import Config
from wurk.plugins.component import ComponentRegistry
from wurk.server.runtime import Runtime


def record(what: str) -> None:
    evidence().rpush("components", f"{os.getpid()} {what}")


class Witness(wurk.Component):
    name = "witness"
    interval = 0.05

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime.config)
        self.runtime = runtime
        self.ticked = False

    def start(self) -> None:
        record(f"start {self.runtime.identity.identity}")
        super().start()

    def tick(self) -> None:
        if not self.ticked:
            self.ticked = True
            record("tick")

    def quiet(self) -> None:
        record(f"quiet {self.runtime.quieted}")

    def finish(self) -> None:
        record(f"finish {self.runtime.stopping}")


class Stuck(wurk.Component):
    """A component wedged on something that never returns (a dead socket)."""

    name = "stuck"
    interval = 0.05

    def tick(self) -> None:
        record("stuck")
        threading.Event().wait()


class Components:
    @wurk.hookimpl
    def wurk_register_components(self, components: ComponentRegistry, runtime: Runtime) -> None:
        components.add(Witness(runtime))
        if os.environ.get("TEST_STUCK_COMPONENT"):
            components.add(Stuck(runtime.config))


class Noted(wurk.Job):
    def perform(self) -> None:
        record("job")


@wurk.configure_server
def add_components(config: Config) -> None:
    for event in ("startup", "shutdown", "exit"):
        config.on(event, lambda event=event: record(event))
    config.plugins.register(Components(), name="component-app")
