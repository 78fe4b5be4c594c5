"""Commands as a server received them: the MONITOR log captured from Ruby Sidekiq
8.1.7, and the same log recorded live from a test server while Wurk runs.

Both are read by one parser, so a comparison between them is between the
argument bytes each client sent.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass

import redis as redis_py

from tests.helpers import ROOT

CAPTURED_LOG = ROOT / "tests" / "fixtures" / "sidekiq-8.1.7" / "redis-commands-monitor.txt"

_LINE = re.compile(r"^(?P<at>\d+\.\d+) \[(?P<db>\d+) (?P<client>[^\]]+)\] (?P<args>.*)$", re.DOTALL)
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}


@dataclass(frozen=True)
class Command:
    """One command: the client that sent it (``lua`` inside a script) and its arguments."""

    client: str
    args: tuple[bytes, ...]

    @property
    def name(self) -> str:
        """Lower case: Sidekiq's client sends ``zadd``, redis-py ``ZADD``; the server takes either."""
        return self.args[0].decode().lower()

    @property
    def key(self) -> str | None:
        return self.args[1].decode("utf-8", "replace") if len(self.args) > 1 else None

    def text(self) -> tuple[str, ...]:
        """The name in lower case, then every argument as text."""
        return (self.name, *(arg.decode("utf-8", "replace") for arg in self.args[1:]))


def parse_args(text: str) -> tuple[bytes, ...]:
    """The quoted arguments of one MONITOR line, unescaped to the exact bytes sent."""
    args: list[bytes] = []
    index = 0
    while index < len(text):
        if text[index] == " ":
            index += 1
            continue
        if text[index] != '"':
            raise ValueError(f"unquoted argument at {index}: {text[index : index + 40]!r}")
        index += 1
        value = bytearray()
        while text[index] != '"':
            char = text[index]
            if char == "\\":
                code = text[index + 1]
                if code == "x":
                    value.append(int(text[index + 2 : index + 4], 16))
                    index += 4
                    continue
                value += _ESCAPES[code]
                index += 2
                continue
            value += char.encode("utf-8")
            index += 1
        args.append(bytes(value))
        index += 1
    return tuple(args)


def parse_line(line: str) -> Command | None:
    """A MONITOR line as a :class:`Command`; ``None`` for the ``OK`` reply and comments."""
    found = _LINE.match(line)
    if found is None:
        return None
    return Command(found["client"], parse_args(found["args"]))


def captured() -> list[Command]:
    """Every command in the Sidekiq 8.1.7 capture, in the order the server received them."""
    lines = CAPTURED_LOG.read_text(encoding="utf-8").split("\n")
    return [command for line in lines if (command := parse_line(line)) is not None]


def runs(commands: list[Command], keep: Callable[[Command], bool]) -> list[list[Command]]:
    """The maximal runs of consecutive commands that ``keep`` accepts (one flush each)."""
    groups: list[list[Command]] = []
    current: list[Command] = []
    for command in commands:
        if keep(command):
            current.append(command)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


class Recorder:
    """MONITOR on a live server, read by a thread until :meth:`stop`.

    :meth:`stop` sends an ``ECHO`` of a fresh marker and reads up to it, so
    every command the server ran before the call is in :attr:`commands`.
    """

    def __init__(self, url: str) -> None:
        self._client = redis_py.Redis.from_url(url)
        self._monitor = self._client.monitor()
        self._monitor.__enter__()  # sends MONITOR and reads its OK
        self._marker = f"end-of-log-{secrets.token_hex(8)}".encode()
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._read, name="monitor", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        connection = self._monitor.connection
        assert connection is not None
        while True:
            try:
                raw = connection.read_response()
            except (redis_py.ConnectionError, OSError):
                return  # the server went away: a test that failed before stop()
            line = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
            self._lines.append(line)
            if self._marker.decode() in line and '"echo"' in line.lower():
                return

    def stop(self, timeout: float = 30) -> list[Command]:
        self._client.echo(self._marker)  # on another connection of the same pool
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the end marker never came back through MONITOR"
        self._monitor.__exit__(None, None, None)
        self._client.close()
        commands = [command for line in self._lines if (command := parse_line(line)) is not None]
        return [command for command in commands if command.args[-1:] != (self._marker,)]

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self.stop()
