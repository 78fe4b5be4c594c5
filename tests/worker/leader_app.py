"""The application the leadership tests run: each worker records, in Redis,
every time it gains or loses the lead and every write it makes as leader.

Loaded by real ``wurk`` worker processes (``-r tests.worker.leader_app``);
elections are made fast through the ``TEST_LEADER_*`` variables that
``worker_app`` reads. Events go to the ``leadership`` list as ``"<pid> <what>"``:
``on:leader`` / ``on:leader_lost`` from ``config.on`` (one-shot, as every
event but ``beat``), ``hook:leader`` / ``hook:leader_lost`` from plugin hooks
(every transition), ``exit`` at the very end. While it leads, a thread
writes ``acted`` through the fence every 0.1 s and counts the writes that
went through in ``acts:<pid>``; ``leads:<pid>`` holds its latest answer.
"""

from __future__ import annotations

import os
import threading

import tests.worker.worker_app  # noqa: F401  (its timing knobs)
import wurk
from tests.worker.worker_app import evidence
from wurk.config.configuration import Config
from wurk.server.leader import fenced_set, leadership


def record(what: str) -> None:
    evidence().rpush("leadership", f"{os.getpid()} {what}")


class LeadershipEvidence:
    """Plugin hooks fire on every transition, where ``config.on`` handlers are one-shot."""

    @wurk.hookimpl
    def wurk_leader(self, config: Config) -> None:
        record(f"hook:leader {leadership(config).token}")

    @wurk.hookimpl
    def wurk_leader_lost(self, config: Config) -> None:
        record("hook:leader_lost")


def act_while_leading(config: Config, stop: threading.Event) -> None:
    """What a leader-only component does: check, then write under the token it saw."""
    client = evidence()
    pid = os.getpid()
    while not stop.wait(0.1):
        try:
            now = leadership(config)
            client.set(f"leads:{pid}", f"1 {now.token}" if now else "0")
            if now and now.token is not None and fenced_set(config, "acted", f"{pid} {now.token}", now.token):
                client.incr(f"acts:{pid}")
        except Exception as exc:  # keep acting across a blip, like a real component
            config.handle_exception(exc, {"context": "leader_app actor"})


@wurk.configure_server
def leadership_evidence(config: Config) -> None:
    config.on("leader", lambda: record("on:leader"))
    config.on("leader_lost", lambda: record("on:leader_lost"))
    config.on("exit", lambda: record("exit"))
    config.plugins.register(LeadershipEvidence(), name="leadership-evidence")
    stop = threading.Event()
    config.on("startup", lambda: threading.Thread(target=act_while_leading, args=(config, stop), daemon=True).start())
    config.on("shutdown", stop.set)
