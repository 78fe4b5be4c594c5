"""Celery: two prefork workers of five pool processes, Redis broker.

The settings are the ones Celery documents for at-least-once delivery
(``chaos/jobs.py``): ``task_acks_late``, ``task_reject_on_worker_lost``,
``worker_prefetch_multiplier = 1``, and a 60 s ``visibility_timeout``, after
which Redis's transport hands an unacknowledged task to another worker.
"""

from __future__ import annotations

from chaos.peers.base import PEERS_VENV, Peer, WorkerSpec, peer_version


class CeleryPeer(Peer):
    name = "celery"
    lib = "celery"
    settle = 150.0
    settings = {  # noqa: RUF012
        "task": "acks_late=True, reject_on_worker_lost=True",
        "worker": "prefork -c 5, worker_prefetch_multiplier=1",
        "broker": "visibility_timeout=60 s",
    }

    def held_per_process(self) -> int:
        # Five pool processes, one reserved task each, and the unacked countdown tasks it holds.
        return 2 * self.concurrency

    def version(self) -> str:
        return peer_version("celery")

    def worker(self, index: int) -> WorkerSpec:
        argv = [str(PEERS_VENV / "bin" / "celery"), "-A", "chaos.jobs", "worker", "-P", "prefork", "-c", "5"]
        argv += ["-n", f"chaos{index}@%h", "--without-mingle", "--without-gossip", "-l", "WARNING"]
        return WorkerSpec(argv)
