"""The launcher: one worker process's parts, started and stopped in order.

``run`` freezes the configuration, fires ``startup`` (whose failure aborts the
boot), builds the :class:`wurk.server.runtime.Runtime`, asks every plugin (core
first) for its components, starts them (the heartbeat's first beat makes the
process visible before any job is fetched; the health check comes last), and
then a manager per capsule.

Stopping has two phases. ``quiet`` stops fetching new jobs (one-way: a quiet
process never fetches again) and tells the components. ``stop`` then fires
``shutdown``, lets running jobs finish until shortly before the ``timeout``
deadline, gives everything still unfinished back to its queue, stops the
components within what is left of the deadline, and fires ``exit``: the
whole process is down within ``timeout``, as a supervisor counting on it
(systemd's stop timeout, Kubernetes' grace period) expects.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from wurk import current
from wurk.plugins.component import Component, ComponentRegistry
from wurk.server.identity import ProcessIdentity
from wurk.server.leader import SERVICE as LEADER_SERVICE
from wurk.server.leader import Leader
from wurk.server.loop import LoopRunner
from wurk.server.manager import Manager
from wurk.server.processor import ProcessStats
from wurk.server.runtime import Runtime

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.server.heartbeat import Heartbeat

#: The plugin API (docs/plugins.md): a supervisor runs each worker process
#: through a Launcher, as ``wurk`` does.
__all__ = ["Launcher"]

#: Seconds of the shutdown timeout kept for the components after the jobs
#: (at most :data:`COMPONENT_SHARE` of it): enough for the final beat and the
#: leader's release, which are one round trip each.
COMPONENT_RESERVE = 1.0
#: The largest part of the shutdown timeout the components' reserve may take,
#: so a short timeout still leaves most of it to the jobs.
COMPONENT_SHARE = 0.2
#: Seconds the started components get to stop when the boot itself fails (no
#: shutdown timeout applies then).
COMPONENT_GRACE = 3.0

M = TypeVar("M", bound=Callable[..., Any])


def _as_its_config(method: M) -> M:
    """Run a launcher method as its configuration (see :mod:`wurk.current`):
    it runs in the host's thread (the main thread, an embedding
    application's), and the lifecycle hooks, the first beat and anything they
    push must reach this worker's Redis, not the process default's."""

    @functools.wraps(method)
    def marked(self: Launcher, *args: Any, **kwargs: Any) -> Any:
        with current.running(self.config):
            return method(self, *args, **kwargs)

    return marked  # type: ignore[return-value]


def _threads_and_queues(config: Config) -> str:
    """The default capsule's :attr:`~wurk.config.capsule.Capsule.description`;
    with more capsules, the total and then each capsule's."""
    capsules = list(config.capsules.values())
    if len(capsules) == 1:
        return capsules[0].description
    each = "; ".join(f"{capsule.name} capsule {capsule.description}" for capsule in capsules)
    return f"{config.total_concurrency} threads: {each}"


class Launcher:
    def __init__(
        self,
        config: Config,
        *,
        embedded: bool = False,
        on_signal: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        identity = ProcessIdentity.current()
        if not config.frozen:
            config["identity"] = identity.identity
        self.leader = Leader(config, identity.identity)
        config.register(LEADER_SERVICE, self.leader)  # read through wurk.server.leader.leadership(config)
        self.runtime = Runtime(
            config=config,
            identity=identity,
            leader=self.leader,
            stats=ProcessStats(),
            loop=LoopRunner(),
            embedded=embedded,
            on_signal=on_signal or (lambda name: None),
        )
        config.register("process_stats", self.runtime.stats)
        self.components = ComponentRegistry()

    # The runtime's parts under the names callers knew before it existed.
    @property
    def identity(self) -> ProcessIdentity:
        return self.runtime.identity

    @property
    def embedded(self) -> bool:
        return self.runtime.embedded

    @property
    def managers(self) -> list[Manager]:
        return self.runtime.managers

    @property
    def quieted(self) -> bool:
        return self.runtime.quieted

    @property
    def heartbeat(self) -> Heartbeat | None:
        from wurk.server.heartbeat import Heartbeat

        found = self.components.named(Heartbeat.name)
        return found if isinstance(found, Heartbeat) else None

    @_as_its_config
    def run(self, *, quiet: bool = False) -> None:
        """Boot everything; returns once it all runs in its own threads.

        ``quiet`` boots the process already quiet: its managers are quieted
        before their threads start, so it never fetches a job (a swarm child
        forked while the swarm is quiet).
        """
        config, runtime = self.config, self.runtime
        for capsule in config.capsules.values():
            capsule.prepare()
        _ = config.scripts, config.job_options  # load the plugins before freezing
        config.freeze()
        config.fire_event("startup", reraise=True)
        runtime.identity.register()
        runtime.managers[:] = [
            Manager(capsule, runtime.identity, runtime.stats, runtime.work_state, runtime.loop)
            for capsule in config.capsules.values()
        ]
        config.plugins.call.register_components(self.components, runtime)
        started: list[Component] = []
        try:
            for component in self.components:
                component.start()
                started.append(component)
        except BaseException:
            # The boot fails: what did start must not outlive it (a leader
            # holding its lock until the lease runs out, a beat that says
            # the process is alive).
            self._stop_started(started)
            raise
        if quiet:
            self.quiet()
        # Said before the managers start, so that it comes before the first job's lines.
        config.logger.info("Wurk %s starting %s", runtime.identity.identity, _threads_and_queues(config))
        for manager in runtime.managers:
            manager.start()

    @_as_its_config
    def quiet(self) -> None:
        if not self.runtime.mark_quiet():
            return
        self.config.logger.info("quieting: no new jobs will be fetched")
        for manager in self.managers:
            manager.quiet()
        for component in self.components:
            self._guarded(component, component.quiet)
        self.config.fire_event("quiet")

    @_as_its_config
    def stop(self) -> None:
        if not self.runtime.mark_stopping():
            return
        timeout = float(self.config["timeout"])
        deadline = time.monotonic() + timeout
        jobs_deadline = deadline - min(COMPONENT_RESERVE, COMPONENT_SHARE * timeout)
        self.quiet()
        self.config.fire_event("shutdown")
        requeued = 0
        for manager in self.managers:
            try:
                requeued += manager.stop(jobs_deadline)
            except Exception as exc:
                self.config.handle_exception(exc, {"context": "shutdown requeue"})
        if requeued:
            self.config.logger.info("gave %s unfinished job(s) back to their queues", requeued)
        self._stop_components(deadline)
        self.runtime.loop.stop()
        self.runtime.identity.unregister()
        self.config.fire_event("exit")
        self.config.logger.info("bye")

    def _stop_started(self, started: list[Component]) -> None:
        deadline = time.monotonic() + COMPONENT_GRACE
        for component in reversed(started):
            self._guarded(component, component.request_stop)
        for component in reversed(started):
            component.join(deadline)
            self._guarded(component, component.finish)

    def _stop_components(self, deadline: float) -> None:
        """Ask all to stop at once, then wait for each within one deadline, so
        that one slow component does not eat the others' time."""
        components = list(reversed(list(self.components)))
        for component in components:
            self._guarded(component, component.request_stop)
        for component in components:
            if not component.join(deadline):
                self.config.logger.warning(
                    "component %s did not stop within the shutdown timeout; leaving it behind", component.name
                )
            self._guarded(component, component.finish)

    def _guarded(self, component: Component, action: Callable[[], Any]) -> None:
        try:
            action()
        except Exception as exc:
            self.config.handle_exception(exc, {"context": f"stopping {component.name}"})

    def dump_threads(self) -> None:
        """Log every thread's stack (TTIN)."""
        frames = sys._current_frames()
        for thread in threading.enumerate():
            frame = frames.get(thread.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame else "(no frame)\n"
            self.config.logger.warning("thread %s (%s)\n%s", thread.name, thread.ident, stack.rstrip())
