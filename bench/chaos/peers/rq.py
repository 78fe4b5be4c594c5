"""RQ: four forking workers (RQ runs one job at a time per worker).

RQ recovers a job whose worker died only through its registries: the
started-job registry entry outlives a heartbeat TTL (the job's remaining
timeout, at most the monitoring interval, plus 60 s), then a worker's
maintenance pass (``--maintenance-interval``) finds it *abandoned* and
retries it if the job was enqueued with a ``Retry`` left, or else moves it to
the failed registry. Without ``retry=`` an abandoned job is never run again
by design. Delayed jobs need a worker started ``--with-scheduler``; when the
worker holding the scheduler lock dies, another takes the lock over only
after its TTL (61 s), at its own maintenance pass. An idle worker runs
maintenance only when its blocking dequeue times out, ``--worker-ttl`` less
15 s (405 s by default), so ``--worker-ttl 60`` makes it wake every 45 s.
"""

from __future__ import annotations

from chaos.peers.base import PEERS_VENV, Peer, WorkerSpec, peer_version


class RqPeer(Peer):
    name = "rq"
    lib = "rq"
    processes = 4
    concurrency = 1
    settle = 180.0
    settings = {  # noqa: RUF012
        "enqueue": "retry=Retry(max=3), job_timeout=10",
        "worker": "rq worker (forking), --with-scheduler, --maintenance-interval 30, --worker-ttl 60",
    }

    def version(self) -> str:
        return peer_version("rq")

    def worker(self, index: int) -> WorkerSpec:
        argv = [str(PEERS_VENV / "bin" / "rq"), "worker", "default", "--with-scheduler"]
        argv += ["--maintenance-interval", "30", "--worker-ttl", "60"]
        argv += ["-n", f"chaos-{index}-{{nonce}}", "-u", "{broker}"]
        return WorkerSpec(argv)
