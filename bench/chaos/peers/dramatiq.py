"""Dramatiq: two ``dramatiq`` commands, each one process of five threads, Redis broker.

Dramatiq's Redis broker moves a message it hands a worker into that
worker's acks set and acknowledges it after the actor returns. Each broker
process heartbeats; when a heartbeat is older than ``heartbeat_timeout``
(60 s by default), a maintenance pass, run on a random share of commands
(``maintenance_chance``, 1,000 per million by default), puts that process's
unacknowledged messages back on their queue. A worker process that dies
makes the ``dramatiq`` command stop all its processes (it does not replace
them), so the driver restarts it, like a process supervisor would.
"""

from __future__ import annotations

from chaos.peers.base import PEERS_VENV, Peer, WorkerSpec, peer_version


class DramatiqPeer(Peer):
    name = "dramatiq"
    lib = "dramatiq"
    settle = 180.0
    settings = {  # noqa: RUF012
        "broker": "RedisBroker defaults: heartbeat_timeout 60 s, maintenance_chance 1000",
        "actor": "max_retries=20 (Retries middleware)",
        "worker": "dramatiq --processes 1 --threads 5",
    }

    def held_per_process(self) -> int:
        # A consumer prefetches twice its thread count by default.
        return 2 * self.concurrency

    def version(self) -> str:
        return peer_version("dramatiq")

    def worker(self, index: int) -> WorkerSpec:
        argv = [str(PEERS_VENV / "bin" / "dramatiq"), "chaos.jobs", "--processes", "1", "--threads", "5"]
        return WorkerSpec(argv)
