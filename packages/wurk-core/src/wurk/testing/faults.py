"""A TCP proxy in front of a Redis server that injects network faults for real.

Tests of delivery guarantees need the faults production meets, not a mocked
client: a connection reset mid-conversation (a failover, a NAT timeout, a
proxy restart) and, the subtle one, a *lost reply* — the server applied a
write, and the client never heard. Point a worker or a client at the proxy's
URL and arm a fault::

    with FaultProxy(port=6380) as proxy:
        config.redis = {"url": proxy.url()}
        proxy.lose_reply(FaultProxy.command(b"LPUSH"))  # the next LPUSH is applied, its reply never arrives
        Job.perform_async(1)
        proxy.refuse(FaultProxy.command(b"SET"))  # the next SET never reaches the server
        proxy.cut()  # reset every open connection now

The proxy reads the Redis protocol both ways, so it knows which reply belongs
to which command, pipelines and transactions included: a lost reply is
dropped only once the server has sent it, which proves the command ran.
The client's connection is then reset (``SO_LINGER`` 0), as a dropped
connection looks to a client.

In front of a TLS-only server, pass ``tls=`` an :class:`ssl.SSLContext` for
the proxy's side of the conversation (the CA, and the client certificate the
server asks for): the proxy then speaks TLS to the server and plain Redis to
its own clients, since it must read their commands to inject its faults.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FaultProxy", "Matcher"]

#: Decides, from a command's arguments (``[b"LPUSH", b"queue:default", ...]``),
#: whether an armed fault applies to it.
Matcher = Callable[[list[bytes]], bool]

_LINE_TYPES = frozenset(b"+-:_#,(")
_BULK_TYPES = frozenset(b"$!=")
_ARRAY_TYPES = frozenset(b"*~>")
_MAP_TYPES = frozenset(b"%|")


def _reply_end(buf: bytes | bytearray, pos: int) -> int | None:
    """Where the reply starting at ``pos`` ends, or ``None`` if it is incomplete."""
    if pos >= len(buf):
        return None
    line_end = buf.find(b"\r\n", pos)
    if line_end < 0:
        return None
    kind = buf[pos]
    after = line_end + 2
    if kind in _LINE_TYPES:
        return after
    size = int(buf[pos + 1 : line_end])
    if kind in _BULK_TYPES:
        if size < 0:
            return after
        end = after + size + 2
        return end if end <= len(buf) else None
    if kind in _ARRAY_TYPES or kind in _MAP_TYPES:
        items = size * 2 if kind in _MAP_TYPES else size
        for _ in range(max(items, 0)):
            nested = _reply_end(buf, after)
            if nested is None:
                return None
            after = nested
        return after
    raise ValueError(f"not a Redis reply: type byte {bytes([kind])!r}")


def _command_at(buf: bytes | bytearray, pos: int) -> tuple[list[bytes], int] | None:
    """The command (its arguments) starting at ``pos`` and where it ends, or ``None``."""
    line_end = buf.find(b"\r\n", pos)
    if line_end < 0:
        return None
    if buf[pos] != ord("*"):  # an inline command, as typed into telnet
        return bytes(buf[pos:line_end]).split(), line_end + 2
    count = int(buf[pos + 1 : line_end])
    args: list[bytes] = []
    cursor = line_end + 2
    for _ in range(count):
        header_end = buf.find(b"\r\n", cursor)
        if header_end < 0:
            return None
        size = int(buf[cursor + 1 : header_end])
        start = header_end + 2
        if start + size + 2 > len(buf):
            return None
        args.append(bytes(buf[start : start + size]))
        cursor = start + size + 2
    return args, cursor


@dataclass
class _Fault:
    matcher: Matcher
    remaining: int


class _TLSUpstream:
    """The proxy's TLS connection to the server, run through memory buffers.

    One thread reads the server while another writes to it; an SSL socket
    shared that way is not safe, so the TLS state is kept here under a lock
    and only the plain socket is read and written outside it.
    """

    def __init__(self, raw: socket.socket, context: ssl.SSLContext, hostname: str) -> None:
        self.raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=hostname)
        self._lock = threading.Lock()
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = raw.recv(65536)
                if not data:
                    raise ConnectionError("the server closed the connection during the TLS handshake") from None
                self._incoming.write(data)
        self._flush()

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self.raw.sendall(data)

    def sendall(self, data: bytes | bytearray) -> None:
        with self._lock:
            self._tls.write(data)
            self._flush()

    def recv(self, size: int) -> bytes:
        while True:
            with self._lock:
                try:
                    return self._tls.read(size)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLZeroReturnError:
                    return b""
                finally:
                    self._flush()
            data = self.raw.recv(65536)
            if not data:
                return b""
            with self._lock:
                self._incoming.write(data)

    def setsockopt(self, *args: Any) -> None:
        self.raw.setsockopt(*args)

    def shutdown(self, how: int) -> None:
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()


@dataclass
class _Link:
    """One client connection and its server connection."""

    client: socket.socket
    server: socket.socket | _TLSUpstream
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Ordinals (0-based, in this connection) of the commands whose reply is lost.
    doomed: set[int] = field(default_factory=set)
    sent: int = 0
    closed: bool = False


class FaultProxy:
    """A loopback proxy to one Redis server; see the module docstring."""

    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.target = (target_host, target_port)
        self.tls = tls
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._links: list[_Link] = []
        self._faults: list[_Fault] = []
        self._refusals: list[_Fault] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        #: Every command whose reply was dropped, in order.
        self.lost: list[list[bytes]] = []
        #: When each of them was sent (``time.time()``), to date the fault in a
        #: longer run: a duplicate is explained by a lost reply only if it
        #: struck while the job was in flight.
        self.lost_at: list[float] = []
        #: Every command refused (never sent to the server), in order.
        self.refused: list[list[bytes]] = []
        self._acceptor = threading.Thread(target=self._accept, name="fault-proxy-accept", daemon=True)

    @staticmethod
    def command(name: bytes, *leading: bytes) -> Matcher:
        """A matcher for command ``name`` (any case) whose first arguments are ``leading``."""
        wanted = [name.upper(), *leading]

        def matches(args: list[bytes]) -> bool:
            return len(args) >= len(wanted) and [args[0].upper(), *args[1 : len(wanted)]] == wanted

        return matches

    @staticmethod
    def push(config: Any) -> Matcher:
        """Core's push (``wurk.client.writers.push_core``), whichever form it takes:
        the fence ``SET`` that ends a small push's pipeline (losing its reply
        loses the reply to the whole push, all of it applied), or the
        ``core.push`` script of a large one."""
        script = config.scripts["core.push"].sha.encode()

        def matches(args: list[bytes]) -> bool:
            name = args[0].upper()
            if name == b"SET":
                return len(args) > 1 and args[1].startswith(b"wurk:fence:")
            return name == b"EVALSHA" and len(args) > 1 and args[1] == script

        return matches

    @staticmethod
    def push_start(config: Any) -> Matcher:
        """The first command of core's push: refusing it keeps the whole push
        from the server, as a connection that drops before the write does."""
        script = config.scripts["core.push"].sha.encode()

        def matches(args: list[bytes]) -> bool:
            name, key = args[0].upper(), args[1] if len(args) > 1 else b""
            return (name, key) in ((b"ZADD", b"schedule"), (b"SADD", b"queues"), (b"EVALSHA", script))

        return matches

    @staticmethod
    def first_sending(matcher: Matcher) -> Matcher:
        """``matcher``, but only for the first sending of each exact command:
        the write sent again after its lost reply gets through, as after a
        single network fault."""
        seen: set[tuple[bytes, ...]] = set()

        def matches(args: list[bytes]) -> bool:
            if not matcher(args):
                return False
            exact = tuple(args)
            if exact in seen:
                return False
            seen.add(exact)
            return True

        return matches

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> FaultProxy:
        self._acceptor.start()
        return self

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        # A close alone would not wake the thread blocked in accept(), and the
        # socket would go on accepting (on a port the kernel may hand out again).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._acceptor.is_alive():
            self._acceptor.join(timeout=5)
        self.cut()

    def lose_reply(self, matcher: Matcher, times: int = 1) -> None:
        """Drop the reply to the next ``times`` commands that ``matcher``
        accepts, each after the server has sent it, resetting that client's
        connection."""
        with self._lock:
            self._faults.append(_Fault(matcher, times))

    def refuse(self, matcher: Matcher, times: int = 1) -> None:
        """Reset the connection instead of passing on the next ``times``
        commands that ``matcher`` accepts: the server never sees them, as
        when a connection drops just before a write."""
        with self._lock:
            self._refusals.append(_Fault(matcher, times))

    def disarm(self) -> int:
        """Drop every armed fault that has not struck yet; how many were still to come."""
        with self._lock:
            pending = sum(fault.remaining for fault in (*self._faults, *self._refusals))
            self._faults = []
            self._refusals = []
        return pending

    def armed(self) -> int:
        """Lost replies and refusals still to come."""
        with self._lock:
            return sum(fault.remaining for fault in (*self._faults, *self._refusals))

    def cut(self) -> int:
        """Reset every open connection now; how many were open."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            self._close(link)
        return len(links)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                raw = socket.create_connection(self.target, timeout=5)
            except OSError:
                self._reset(client)
                continue
            try:
                server = _TLSUpstream(raw, self.tls, self.target[0]) if self.tls is not None else raw
            except OSError:
                raw.close()
                self._reset(client)
                continue
            raw.settimeout(None)
            for sock in (client, raw):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._upstream, args=(link,), name="fault-proxy-up", daemon=True).start()
            threading.Thread(target=self._downstream, args=(link,), name="fault-proxy-down", daemon=True).start()

    def _take(self, faults: list[_Fault], args: list[bytes]) -> bool:
        """Whether an armed fault of ``faults`` applies to this command (it is then used up)."""
        with self._lock:
            for fault in faults:
                if fault.remaining > 0 and fault.matcher(args):
                    fault.remaining -= 1
                    return True
        return False

    def _upstream(self, link: _Link) -> None:
        """Client to server, a whole command at a time: note which commands'
        replies are to be lost, and cut the connection before a refused one."""
        buf = bytearray()
        while True:
            data = self._recv(link.client)
            if not data:
                break
            buf += data
            pos = 0
            refused = False
            while True:
                parsed = _command_at(buf, pos)
                if parsed is None:
                    break
                args, end = parsed
                if args and self._take(self._refusals, args):
                    with self._lock:
                        self.refused.append(args)
                    refused = True
                    break
                with link.lock:
                    if args and self._take(self._faults, args):
                        link.doomed.add(link.sent)
                        with self._lock:
                            self.lost.append(args)
                            self.lost_at.append(time.time())
                    link.sent += 1
                pos = end
            try:
                link.server.sendall(buf[:pos])
            except OSError:
                break
            del buf[:pos]
            if refused:
                break
        self._close(link)

    def _downstream(self, link: _Link) -> None:
        """Server to client, a whole reply at a time; a doomed reply resets the client."""
        buf = bytearray()
        received = 0
        while True:
            data = self._recv(link.server)
            if not data:
                break
            buf += data
            pos = 0
            while True:
                end = _reply_end(buf, pos)
                if end is None:
                    break
                if buf[pos] == ord(">"):  # a RESP3 push message answers no command
                    pos = end
                    continue
                with link.lock:
                    doomed = received in link.doomed
                if doomed:
                    self._forward(link, buf[:pos])
                    self._close(link)
                    return
                received += 1
                pos = end
            if pos and not self._forward(link, buf[:pos]):
                break
            del buf[:pos]
        self._close(link)

    @staticmethod
    def _recv(sock: socket.socket | _TLSUpstream) -> bytes:
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    @staticmethod
    def _forward(link: _Link, data: bytes | bytearray) -> bool:
        if not data:
            return True
        try:
            link.client.sendall(data)
            return True
        except OSError:
            return False

    def _close(self, link: _Link) -> None:
        with link.lock:
            if link.closed:
                return
            link.closed = True
        with self._lock:
            if link in self._links:
                self._links.remove(link)
        self._reset(link.client)
        with contextlib.suppress(OSError):
            link.server.shutdown(socket.SHUT_RDWR)  # wakes the thread reading it
        with contextlib.suppress(OSError):
            link.server.close()

    @staticmethod
    def _reset(sock: socket.socket) -> None:
        """Close with a TCP reset, as a dropped connection looks to a client.

        Only the reading side is shut down first: it wakes the thread blocked
        reading this socket without sending the FIN that a full shutdown
        would, so the close that follows (lingering 0 s) sends a reset."""
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RD)
        with contextlib.suppress(OSError):
            sock.close()
