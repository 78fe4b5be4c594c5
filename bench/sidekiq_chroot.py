"""Ruby Sidekiq for the benchmarks, run from the Debian chroot the interop tests use.

The chroot (``/srv/forky`` unless ``WURK_INTEROP_CHROOT`` names another) holds
Debian's Ruby and ``ruby-sidekiq``; ``tools/interop/setup-ruby-sidekiq.sh``
builds it. The harness copies ``drain_app.rb`` into it and starts ``sidekiq``
through ``chroot`` and ``env``, which both exec, so the pid it holds is
Sidekiq's own. The chroot shares the host's network and pid namespace, so
``127.0.0.1`` and ``psutil`` see the same things inside and out; files the two
sides share (the FIFO, counter and latency files) live under the chroot's
``/tmp`` and are named by their inside path in Sidekiq's environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROOT = Path(os.environ.get("WURK_INTEROP_CHROOT", "/srv/forky"))
APP_DIR = "/opt/bench"
APP = HERE / "drain_app.rb"

_CALIBRATE = """
def drain_spin(loops)
  total = 0
  i = 0
  while i < loops
    total += i
    i += 1
  end
  total
end
loops = 10_000
3.times do
  timings = Array.new(50) do
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    drain_spin(loops)
    Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end
  median = timings.sort[timings.size / 2]
  loops = [1, (loops * TARGET / median).round].max
end
puts loops
"""


def problem() -> str | None:
    """Why Sidekiq cannot run here, in one line; ``None`` when it can."""
    if os.geteuid() != 0:
        return "running Sidekiq through chroot needs root"
    for needed in ("usr/bin/ruby", "usr/bin/sidekiq"):
        if not (CHROOT / needed).exists():
            return f"no /{needed} in {CHROOT} (build the chroot with tools/interop/setup-ruby-sidekiq.sh)"
    if not shutil.which("chroot"):
        return "no chroot command on this machine"
    return None


class Chroot:
    """The chroot made ready for a run: the app copied in, ``/proc`` mounted
    (and unmounted afterwards, if this run mounted it)."""

    def __init__(self) -> None:
        self._mounted = False

    def __enter__(self) -> Chroot:
        target = CHROOT / APP_DIR.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(APP, target / APP.name)
        (CHROOT / "tmp").mkdir(exist_ok=True)
        proc = CHROOT / "proc"
        if subprocess.run(["mountpoint", "-q", str(proc)], check=False).returncode != 0:
            subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
            self._mounted = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mounted:
            subprocess.run(["umount", str(CHROOT / "proc")], check=False)
            self._mounted = False


def tmp_root() -> Path:
    """Where to make a run's directory so that both sides can see it."""
    return CHROOT / "tmp"


def inside(path: Path | str) -> str:
    """``path`` (under the chroot) as Sidekiq sees it."""
    return "/" + str(Path(path).resolve().relative_to(CHROOT.resolve()))


def command(env: Mapping[str, str], *sidekiq_args: str) -> list[str]:
    """``sidekiq -r ./drain_app.rb ...`` in the chroot, with ``env`` as its environment's additions."""
    assignments = [f"{key}={value}" for key, value in env.items()]
    argv = ["chroot", str(CHROOT), "/usr/bin/env", "-C", APP_DIR, *assignments]
    return [*argv, "sidekiq", "-r", f"./{APP.name}", *sidekiq_args]


def ruby(script: str, timeout: float = 120) -> str:
    done = subprocess.run(
        ["chroot", str(CHROOT), "ruby", "-e", script], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruby failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def version() -> str:
    """Sidekiq's and Ruby's versions, as the chroot has them."""
    return ruby('require "sidekiq"; print Sidekiq::VERSION, " (Ruby ", RUBY_VERSION, ")"')


def calibrate(target: float = 0.001) -> int:
    """Loop count for which the Ruby job's loop takes about ``target`` seconds here."""
    return int(ruby(f"TARGET = {target!r}\n{_CALIBRATE}"))
