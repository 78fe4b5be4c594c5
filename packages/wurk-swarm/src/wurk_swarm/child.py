"""A swarm child: what a freshly forked worker process does until it exits.

By the time :func:`run_child` runs, :mod:`wurk.config.forking` has already reset
every configuration (the parent's sockets dropped, locks replaced) and fired
``fork``. The child then:

1. applies its slot's queues and concurrency to the default capsule, before
   the launcher freezes the configuration;
2. PINGs Redis and exits with status 1 if it cannot: the parent respawns it
   with back-off, so a swarm started before its Redis crash-loops visibly
   rather than idling. A configuration the boot refuses (a bad Redis URL, a
   cron string, a setting) is logged in one line and ends the child with
   :data:`REFUSED_EXIT`, on which the parent stops the swarm;
3. runs the boot checks that need the server (version, eviction policy,
   pool sizes for the slot's concurrency);
4. traps ``TERM``/``INT`` (stop), ``TSTP`` (quiet), ``USR2`` (reopen logs) and
   ``USR1`` as an explicit no-op: rolling restarts are the parent's business,
   and a stray ``USR1`` must not kill a child mid-job;
5. runs a :class:`wurk.server.launcher.Launcher`, booting quiet when the swarm is
   quiet (sticky quiet: a respawn never resumes fetching behind the
   operator's back);
6. writes one byte to its heartbeat pipe at its first heartbeat, which is how
   the parent learns the child is up without a Redis connection of its own;
7. watches its parent: when the parent is gone (``kill -9``, an OOM kill),
   nobody is left to respawn, recycle or stop the child, so it stops as on
   ``TERM`` (running jobs get the shutdown timeout, the rest go back to their
   queues) instead of working on unsupervised.
"""

from __future__ import annotations

import os
import queue
import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING

from wurk.cli import boot
from wurk.errors import ConfigurationError, PluginError
from wurk.redis.connection import mask_url
from wurk.server.launcher import Launcher
from wurk.server.logger import reopen

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk_swarm.topology import Assignment

#: Exit status of a child that could not reach Redis at boot.
UNREACHABLE_EXIT = 1

#: Exit status of a child that refused its configuration at boot (a bad cron
#: string, a setting a plugin's check refused): ``EX_CONFIG`` of sysexits.h.
#: Every child would refuse it alike, so the parent stops instead of
#: respawning them.
REFUSED_EXIT = 78

#: The signals a child turns into names for its main loop.
HANDLED = ("TERM", "INT", "TSTP", "USR2")

#: Seconds between two looks at whether the parent is still there: a child
#: notices its parent's death within about this long.
PARENT_CHECK = 0.5


def run_child(
    config: Config,
    assignment: Assignment,
    *,
    quiet: bool,
    beat_fd: int,
    parent: int,
    mask: Iterable[int] = (),
) -> int:
    """Boot and run one worker process; its exit status.

    ``parent`` is the swarm parent's pid, taken by the parent before the
    fork: read after it, by the child, it could already be the pid of the
    process that adopted an orphan. ``mask`` is the signal mask to restore
    once the child's handlers are in place: the parent forks with the
    signals it handles blocked, so that one sent to the new child early
    waits for the child's own handler.
    """
    # First thing, so a USR1 during boot is harmless too. A handler, not
    # SIG_IGN, which a program this child execs would inherit.
    signal.signal(signal.SIGUSR1, lambda number, frame: None)
    names: queue.SimpleQueue[str] = queue.SimpleQueue()
    for name in HANDLED:
        signal.signal(getattr(signal, f"SIG{name}"), lambda number, frame: names.put(signal.Signals(number).name[3:]))
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    config.queues = list(assignment.queues)
    config.concurrency = assignment.concurrency
    try:
        config.redis_pool.ping()
    except (ConfigurationError, PluginError):
        raise  # a bad URL or option, not an outage: respawning cannot help
    except Exception as exc:
        config.logger.error(
            "swarm child %s: Redis at %s is unreachable (%s); exiting to be respawned",
            os.getpid(),
            mask_url(str(config.redis["url"])),
            exc,
        )
        return UNREACHABLE_EXIT
    boot.validate(config)
    config.on("heartbeat", lambda: _report_heartbeat(beat_fd))
    launcher = Launcher(config, on_signal=names.put)
    launcher.run(quiet=quiet)
    return _serve(config, launcher, names, parent)


def _report_heartbeat(fd: int) -> None:
    """Tell the parent, once, that this child's first heartbeat reached Redis."""
    try:
        os.write(fd, b"\x01")
    except OSError:  # the parent is gone: nobody to tell, and the child works on
        pass
    finally:
        os.close(fd)


def orphaned(parent: int) -> bool:
    """Whether the swarm parent ``parent`` has died since it forked this process.

    The kernel hands an orphan to another process (init, or the nearest
    subreaper) as the parent exits, however it exits, so ``getppid()`` stops
    being ``parent`` at once and never becomes it again: the adopter was alive
    beside the parent, so it cannot have the parent's pid. Looked at from the
    loop below, that is portable (no ``/proc``), costs one system call, needs
    no file descriptor that every fork and every job's own fork would have to
    keep straight, and has no window: a parent that died before the child's
    first look is still seen, since ``parent`` was read before the fork.
    ``prctl(PR_SET_PDEATHSIG)`` would be quicker but is Linux-only, fires
    when the *thread* that forked exits rather than the process, and misses
    a parent that died before the call; and it would deliver a bare signal,
    where the loop below can say in the log why the child stops.
    """
    return os.getppid() != parent


def _serve(config: Config, launcher: Launcher, names: queue.SimpleQueue[str], parent: int) -> int:
    """Act on signals (from the parent, or from Redis via the heartbeat) until
    told to stop, or until the parent is gone."""
    while True:
        if orphaned(parent):
            config.logger.warning(
                "swarm child %s: the swarm parent %s is gone; shutting down as on TERM", os.getpid(), parent
            )
            launcher.stop()
            return 0
        try:
            name = names.get(timeout=PARENT_CHECK)
        except queue.Empty:
            continue
        if name in ("TERM", "INT"):
            config.logger.info("received %s, shutting down", name)
            launcher.stop()
            return 0
        if name == "TSTP":
            launcher.quiet()
        elif name == "USR2":
            reopen(config.logger)
        else:
            config.logger.warning("ignoring unknown signal %r", name)
