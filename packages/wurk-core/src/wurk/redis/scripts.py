"""The Lua script registry.

Scripts live as ``.lua`` files in a ``lua/`` folder inside the package that
owns them, each opening with a comment header that documents its ``KEYS`` and
``ARGV``::

    -- Pops the lowest-scored member of a sorted set if its score is due.
    -- KEYS[1]: the sorted set
    -- ARGV[1]: now, epoch seconds

Every key a script touches is passed in ``KEYS`` (so it stays correct on a
cluster-aware proxy and readable in a MONITOR log). The registry reads the
header to learn how many keys a script takes and refuses a call with the wrong
number, before anything reaches Redis.

Scripts are loaded with ``SCRIPT LOAD`` once per connection pool, on first use,
and then called by SHA. A server that lost its script cache (restarted, failed
over, ``SCRIPT FLUSH``) answers ``NOSCRIPT``; the registry then loads the
script again and repeats the call once, so callers never see it. Calls queued
on a pipeline recover the same way when the pipeline is run through
:meth:`ScriptRegistry.execute`: a ``NOSCRIPT`` reply means that one command did
nothing, so it is repeated alone once its script is loaded again.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError

from wurk.errors import ScriptError

if TYPE_CHECKING:
    from wurk.redis.connection import KeptConnection, RedisPool

_KEYS_LINE = re.compile(r"^--\s*KEYS\[(\d+)(\.\.(\d+|n))?\]")
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")

Arg = str | bytes | int | float


@dataclass(frozen=True)
class Script:
    """One Lua script: its namespaced name, source, SHA1 and key arity."""

    name: str
    source: str
    sha: str
    min_keys: int
    variadic: bool

    @classmethod
    def parse(cls, name: str, source: str) -> Script:
        if not _NAME.match(name):
            raise ScriptError(f"script name {name!r} must be namespaced, like 'core.zpopbyscore'")
        header = []
        for line in source.splitlines():
            if not line.startswith("--"):
                break
            header.append(line)
        if not header:
            raise ScriptError(f"script {name} has no header comment documenting its KEYS and ARGV")
        count, variadic = 0, False
        for line in header:
            match = _KEYS_LINE.match(line)
            if match:
                count = max(count, int(match.group(1)))
                variadic = variadic or bool(match.group(2))
        if variadic:
            count -= 1  # "KEYS[2..n]" means at least one key before the variadic tail
        sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        return cls(name=name, source=source, sha=sha, min_keys=count, variadic=variadic)

    def check_keys(self, keys: Sequence[Any]) -> None:
        if len(keys) < self.min_keys or (not self.variadic and len(keys) != self.min_keys):
            expected = f"at least {self.min_keys}" if self.variadic else str(self.min_keys)
            raise ScriptError(f"script {self.name} takes {expected} keys, got {len(keys)}")


class ScriptRegistry:
    """The scripts of one configuration, loaded lazily into each pool."""

    def __init__(self) -> None:
        self._scripts: dict[str, Script] = {}
        self._by_sha: dict[str, Script] = {}
        self._loaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def register(self, name: str, source: str) -> Script:
        script = Script.parse(name, source)
        existing = self._scripts.get(name)
        if existing is not None and existing.sha != script.sha:
            raise ScriptError(f"script {name} is already registered with a different source")
        self._scripts[name] = script
        self._by_sha[script.sha] = script
        return script

    def register_package(self, package: str, namespace: str) -> list[Script]:
        """Register every ``<package>/lua/*.lua`` file as ``<namespace>.<stem>``."""
        folder = resources.files(package).joinpath("lua")
        if not folder.is_dir():
            raise ScriptError(f"package {package} has no lua/ folder")
        registered = []
        for entry in sorted(folder.iterdir(), key=lambda item: item.name):
            if entry.name.endswith(".lua"):
                stem = entry.name[: -len(".lua")]
                registered.append(self.register(f"{namespace}.{stem}", entry.read_text(encoding="utf-8")))
        return registered

    def __contains__(self, name: object) -> bool:
        return name in self._scripts

    def __getitem__(self, name: str) -> Script:
        try:
            return self._scripts[name]
        except KeyError:
            raise ScriptError(f"no script named {name!r}; is the plugin that owns it enabled?") from None

    def names(self) -> list[str]:
        return sorted(self._scripts)

    def _ensure_loaded(self, client: Any, script: Script) -> None:
        pool = client.connection_pool
        with self._lock:
            loaded = self._loaded.setdefault(pool, set())
            if script.sha in loaded:
                return
        self._load(client, script)

    def _load(self, client: Any, script: Script) -> None:
        sha = client.script_load(script.source)
        if isinstance(sha, bytes):
            sha = sha.decode()
        if sha != script.sha:  # cannot happen unless the server hashes differently
            raise ScriptError(f"server returned SHA {sha} for script {script.name}, expected {script.sha}")
        with self._lock:
            self._loaded.setdefault(client.connection_pool, set()).add(script.sha)

    def forget(self, pool: Any) -> None:
        """The server behind ``pool`` lost its script cache: load every script again on next use."""
        with self._lock:
            self._loaded.pop(pool, None)

    def reset_after_fork(self) -> None:
        """In a forked child: forget every pool's loaded scripts and take a new lock.

        The server's script cache is shared, so the record is not wrong in the
        child; but it is keyed by the parent's pool objects, whose connections
        the child has just dropped, and a lock some other parent thread held at
        the fork would stay held forever. Loading again costs one ``SCRIPT
        LOAD`` per script and pool, once.
        """
        self._lock = threading.Lock()
        self._loaded = weakref.WeakKeyDictionary()

    def call(self, name: str, client: Any, keys: Sequence[str] = (), args: Sequence[Arg] = ()) -> Any:
        """Run script ``name`` on ``client`` (a ``redis.Redis``) and return its reply."""
        script = self[name]
        script.check_keys(keys)
        return self._reloading(script, client, lambda: client.evalsha(script.sha, len(keys), *keys, *args))

    def send(
        self,
        name: str,
        pool: RedisPool,
        keys: Sequence[str] = (),
        args: Sequence[Arg] = (),
        via: KeptConnection | None = None,
    ) -> Any:
        """:meth:`call` on a pool's raw send path (:meth:`RedisPool.send`, or
        ``via`` a connection kept from it): no client object in between, for
        a call on the hot path. Nothing is retried but ``NOSCRIPT``: the
        caller decides what a lost reply means."""
        script = self[name]
        script.check_keys(keys)
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        send = pool.send if via is None else via.send
        return self._reloading(script, pool.client, lambda: send([command])[0])

    def _reloading(self, script: Script, client: Any, run: Callable[[], Any]) -> Any:
        """``run()`` with the script loaded into ``client``'s pool; a server that
        lost its cache (``NOSCRIPT``: the call did nothing) gets it again, once."""
        self._ensure_loaded(client, script)
        try:
            return run()
        except NoScriptError:
            self.forget(client.connection_pool)
            self._load(client, script)
            return run()

    def queue(self, name: str, pipeline: Any, keys: Sequence[str] = (), args: Sequence[Arg] = ()) -> None:
        """Queue a call on a pipeline; the script is loaded beforehand if needed.

        The script is loaded on a direct connection of the same pool before the
        call is queued; run the pipeline with :meth:`execute`, which recovers
        from a server that lost the script since.
        """
        script = self[name]
        script.check_keys(keys)
        pool = pipeline.connection_pool
        with self._lock:
            loaded = script.sha in self._loaded.get(pool, ())
        if not loaded:  # building a client is costly: only when the script must be loaded
            import redis

            self._ensure_loaded(redis.Redis(connection_pool=pool), script)
        pipeline.evalsha(script.sha, len(keys), *keys, *args)

    def execute(self, pipeline: Any) -> list[Any]:
        """Run a non-transactional pipeline holding script calls, and its replies.

        A server that lost its script cache answers ``NOSCRIPT`` to each queued
        call, and such a command had no effect: the registry forgets what it
        had loaded into the pool, loads the script again and repeats just that
        call. Any other error reply is raised, as ``pipeline.execute`` would.
        """
        commands = [args for args, _options in pipeline.command_stack]
        pool = pipeline.connection_pool
        replies: list[Any] = pipeline.execute(raise_on_error=False)
        missing = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            import redis

            self.forget(pool)
            client = redis.Redis(connection_pool=pool)
            for index in missing:
                command = commands[index]
                script = self._by_sha.get(_text(command[1]))
                if script is None:  # not one of ours: nothing to reload it from
                    continue
                self._ensure_loaded(client, script)
                replies[index] = client.execute_command(*command)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
