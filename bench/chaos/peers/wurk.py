"""Wurk itself: two ``wurk`` processes of five threads, or one ``wurkswarm`` of two children."""

from __future__ import annotations

import wurk
from chaos.peers.base import Peer, WorkerSpec, own_python
from wurk.testing.faults import FaultProxy, Matcher


class WurkPeer(Peer):
    name = "wurk"
    lib = "wurk"
    faults = ("kill", "swarm-child", "swarm-parent", "redis-stop", "redis-restart", "cut", "lost-reply", "exit")
    settle = 60.0
    settings = {  # noqa: RUF012
        "fetch": "reliable fetch (always on): private list per process, reaper at boot",
        "scheduler": (
            "config.reliable_scheduler() (CHAOS_SCHEDULER=default: the default promoter), poll_interval_average 1 s"
        ),
        "poison pills": "dead after 3 recoveries (documented)",
        "cron": "one loop, * * * * *",
    }

    def held_per_process(self) -> int:
        # docs/reliability.md: a process never holds more than twice its concurrency.
        return 2 * self.concurrency

    def python(self) -> str:
        return own_python()

    def available(self) -> str | None:
        return None

    def version(self) -> str:
        return wurk.__version__

    def worker(self, index: int, *, swarm: bool = False) -> WorkerSpec:
        module = "wurk_swarm" if swarm else "wurk.cli.main"
        argv = [self.python(), "-m", module, "-r", "chaos.jobs", "-q", "default", "-c", str(self.concurrency)]
        env = {"CHAOS_CRON": "1"}
        if swarm:
            env["WURK_COUNT"] = str(self.processes)
        return WorkerSpec([*argv, "-t", "10"], env)

    def script_names(self) -> dict[str, str]:
        scripts = wurk.default_config().scripts
        return {scripts[name].sha: name for name in scripts.names()}

    def lost_reply_matchers(self, broker_url: str) -> list[tuple[str, Matcher]]:
        """The scheduler's pop and the push, aimed at directly: the writes whose
        lost replies once lost or doubled work."""
        config = wurk.Config()
        config.redis = {"url": broker_url}
        return [
            (name, FaultProxy.command(b"EVALSHA", config.scripts[name].sha.encode()))
            for name in ("core.zpopbyscore", "core.push")
        ]
