"""Ruby Sidekiq 8.1.7, open-source edition, from the Debian chroot the interop tests use.

The jobs are pushed from Python with Wurk's client (the same bytes Sidekiq's
own client writes, as the interop tests check), and run by two ``sidekiq``
processes of five threads loading ``sidekiq_app.rb``. Sidekiq's open-source
fetch (``BasicFetch``) takes a job with ``BRPOP``: the job is then only in
the process's memory, so a job running when its process is killed, or whose
``BRPOP`` reply is lost, is gone. Sidekiq documents this and sells
``super_fetch`` (Sidekiq Pro) as the remedy; it is measured here as shipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from chaos.peers.base import Peer, WorkerSpec, own_python

CHROOT = Path(os.environ.get("WURK_INTEROP_CHROOT", "/srv/forky"))
APP_DIR = "/opt/chaos"
APP = Path(__file__).with_name("sidekiq_app.rb")


class SidekiqPeer(Peer):
    name = "sidekiq"
    lib = "sidekiq"
    settle = 60.0
    settings = {  # noqa: RUF012
        "fetch": "BasicFetch (open source): BRPOP",
        "worker": "sidekiq -c 5 -t 10, poll_interval_average 1 s",
    }
    _mounted_proc = False

    def python(self) -> str:
        # The producer is Wurk's client, from the project's own virtualenv.
        return own_python()

    def available(self) -> str | None:
        if os.geteuid() != 0:
            return "running Sidekiq in the chroot needs root"
        if not (CHROOT / "usr" / "bin" / "ruby").exists():
            return f"no Ruby chroot at {CHROOT}: run bash tools/interop/setup-ruby-sidekiq.sh"
        return None

    def version(self) -> str:
        done = subprocess.run(
            ["chroot", str(CHROOT), "ruby", "-e", 'require "sidekiq"; print Sidekiq::VERSION'],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip()

    def prepare(self) -> None:
        target = CHROOT / APP_DIR.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(APP, target / "chaos_app.rb")
        proc = CHROOT / "proc"
        if subprocess.run(["mountpoint", "-q", str(proc)], check=False).returncode != 0:
            subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
            self._mounted_proc = True

    def release(self) -> None:
        if self._mounted_proc:
            subprocess.run(["umount", str(CHROOT / "proc")], check=False)
            self._mounted_proc = False

    def worker(self, index: int) -> WorkerSpec:
        # chroot and env both exec, so the pid the driver holds is sidekiq's own.
        argv = ["chroot", str(CHROOT), "/usr/bin/env", "-C", APP_DIR, "REDIS_URL={broker}"]
        argv += ["CHAOS_LEDGER_URL={ledger}", "sidekiq", "-r", "./chaos_app.rb", "-c", "5", "-q", "default", "-t", "10"]
        return WorkerSpec(argv)
