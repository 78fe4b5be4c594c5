"""The deployment examples in examples/: each parses, says what the guide
says, and agrees with the others on the numbers that must match.

The shutdown timeout (``-t``) is the number everything else is sized from:
systemd's ``TimeoutStopSec``, Heroku's fixed 30 s, and Kubernetes'
``terminationGracePeriodSeconds`` must each leave room for it, the swarm's
5 s grace on top, and (for Kubernetes) the preStop sleep. The probe port is
the other one: the app's ``HEALTH_PORT``, the Dockerfile's ``EXPOSE`` and the
manifest's probes. The example app is booted for real, by a ``wurk`` worker
and by the swarm as the Procfile starts it, and the container entrypoint is
run to prove it leaves the worker as PID 1.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT, Subprocess, wait_for
from wurk.redis.servers import free_port
from wurk.server.health import SHARE_RETRY

EXAMPLES = ROOT / "examples"
#: Seconds the swarm parent waits past the shutdown timeout before it kills a child.
SWARM_GRACE = 5
#: Seconds Heroku waits after TERM before it kills every process of a dyno.
HEROKU_KILL = 30


def timeout_flag(args: list[str]) -> int:
    """The ``-t`` value of a worker command line."""
    assert "-t" in args, f"no -t in {args}: every example states its shutdown timeout"
    return int(args[args.index("-t") + 1])


def unit(name: str) -> configparser.ConfigParser:
    # systemd allows repeated keys (Environment=) and '%' specifiers: no
    # strictness, no interpolation, and keys keep their case.
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((EXAMPLES / name).read_text(encoding="utf-8"))
    return parser


def environment(service: configparser.SectionProxy, text: str) -> dict[str, str]:
    """Every ``Environment=`` of a unit (configparser keeps only the last one)."""
    pairs = re.findall(r"^Environment=(\w+)=(.*)$", text, re.MULTILINE)
    return dict(pairs)


def dockerfile() -> dict[str, list[str]]:
    """The Dockerfile's instructions, by name, continuation lines joined."""
    text = (EXAMPLES / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", text)
    found: dict[str, list[str]] = {}
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            instruction, _, rest = line.strip().partition(" ")
            found.setdefault(instruction.upper(), []).append(rest.strip())
    return found


def deployment() -> dict[str, Any]:
    documents = list(yaml.safe_load_all((EXAMPLES / "k8s" / "worker-deployment.yaml").read_text(encoding="utf-8")))
    assert len(documents) == 1
    return documents[0]


def worker_container() -> dict[str, Any]:
    (container,) = deployment()["spec"]["template"]["spec"]["containers"]
    return container


def procfile() -> dict[str, str]:
    lines = (EXAMPLES / "Procfile").read_text(encoding="utf-8").splitlines()
    processes = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_-]+):\s*(\S.*)", line)
        assert match, f"not a Procfile line: {line!r}"
        processes[match[1]] = match[2]
    return processes


def app_health_port() -> int:
    """The app's default probe port, read in a clean interpreter (importing
    the app here would register its configure_server block in the tests)."""
    env = {key: value for key, value in os.environ.items() if key != "WURK_HEALTH_PORT"}
    code = "import runpy, sys; print(runpy.run_path(sys.argv[1])['HEALTH_PORT'])"
    out = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "app.py")], env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout)


# -- systemd ---------------------------------------------------------------------------


def test_the_swarm_unit_says_what_the_guide_says():
    service = unit("wurk.service")["Service"]
    command = shlex.split(service["ExecStart"])
    assert Path(command[0]).name == "wurkswarm"
    assert command[command.index("-r") + 1] == "app.py"
    assert service["Type"] == "simple"
    assert service["ExecReload"] == "/bin/kill -USR1 $MAINPID"
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # TERM to the parent, which relays it
    assert service["Restart"] == "on-failure"
    assert int(service["TimeoutStopSec"]) > timeout_flag(command) + SWARM_GRACE
    env = environment(service, (EXAMPLES / "wurk.service").read_text(encoding="utf-8"))
    assert {"WURK_COUNT", "WURK_MAXMEM_MB", "APP_ENV"} <= set(env)
    assert unit("wurk.service")["Install"]["WantedBy"] == "multi-user.target"


def test_the_template_unit_runs_plain_wurk_and_quiets_on_reload():
    service = unit("wurk@.service")["Service"]
    command = shlex.split(service["ExecStart"])
    assert Path(command[0]).name == "wurk"
    assert "%i" in service["ExecStart"]  # each instance is tagged with its name
    assert service["ExecReload"] == "/bin/kill -TSTP $MAINPID"  # USR1 would end a plain wurk
    assert service["Type"] == "simple"
    assert service["KillSignal"] == "SIGTERM"
    assert service["Restart"] == "on-failure"
    assert int(service["TimeoutStopSec"]) > timeout_flag(command) + SWARM_GRACE


def test_systemd_accepts_the_units(tmp_path):
    """``systemd-analyze verify`` where systemd is installed; the executables
    the units name are stand-ins here, since /srv/myapp is not installed."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # configparser's reading above is the check on a machine without systemd
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("wurk", "wurkswarm"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    for name in ("wurk.service", "wurk@.service"):
        text = (EXAMPLES / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(text.replace("/srv/myapp/.venv/bin/", f"{bin_dir}/"))
    result = subprocess.run(
        [analyze, "verify", "./wurk.service", "./wurk@.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # verify exits 0 even for a line it ignores; any word from it is a defect.
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == ""


# -- Procfile --------------------------------------------------------------------------


def test_the_procfile_runs_the_swarm_within_herokus_window():
    processes = procfile()
    assert set(processes) == {"worker"}
    command = shlex.split(processes["worker"])
    assert command[0] == "wurkswarm"
    assert command[command.index("-r") + 1] == "app.py"
    # Heroku kills every process of the dyno 30 s after TERM: the drain and
    # the swarm's grace must end before that.
    assert timeout_flag(command) + SWARM_GRACE < HEROKU_KILL


# -- Docker ----------------------------------------------------------------------------


def test_the_dockerfile_runs_as_non_root_with_exec_form_commands():
    found = dockerfile()
    (base,) = found["FROM"]
    assert re.fullmatch(r"python:3\.\d+-slim", base)
    (user,) = found["USER"]
    assert user not in ("root", "0")
    for instruction in ("ENTRYPOINT", "CMD"):
        (value,) = found[instruction]
        parsed = json.loads(value)  # shell form would not parse: /bin/sh -c would be PID 1
        assert isinstance(parsed, list)
        assert all(isinstance(part, str) for part in parsed)
    assert json.loads(found["ENTRYPOINT"][0]) == ["/app/entrypoint.sh"]
    assert json.loads(found["CMD"][0])[0] == "worker"
    assert any("pip install" in run for run in found["RUN"])
    assert found["STOPSIGNAL"] == ["SIGTERM"]
    copied = " ".join(found["COPY"])
    for name in ("app.py", "entrypoint.sh", "requirements.txt"):
        assert name in copied
        assert (EXAMPLES / name).exists()


def test_the_requirements_name_wurk_distributions():
    lines = (EXAMPLES / "requirements.txt").read_text(encoding="utf-8").splitlines()
    names = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert names
    for name in names:
        assert (ROOT / "packages" / name / "pyproject.toml").exists(), name


def test_the_entrypoint_execs_so_the_worker_is_pid_1(tmp_path):
    """Each role replaces the shell: the command it starts has the shell's pid
    (in a container, PID 1) and receives its arguments unchanged."""
    entrypoint = EXAMPLES / "entrypoint.sh"
    assert os.access(entrypoint, os.X_OK)
    subprocess.run(["sh", "-n", str(entrypoint)], check=True)
    stub = tmp_path / "bin"
    stub.mkdir()
    for name in ("wurk", "wurkswarm"):
        (stub / name).write_text(f'#!/bin/sh\necho "$$ {name} $*"\n')
        (stub / name).chmod(0o755)
    env = {"PATH": f"{stub}:{os.environ['PATH']}", "APP_ENV": "production"}
    for args, expected in (
        (["worker", "-t", "20"], "wurkswarm -r app.py -e production -t 20"),
        (["single", "-c", "5"], "wurk -r app.py -e production -c 5"),
        ([], "wurkswarm -r app.py -e production"),
        (["echo", "hi"], None),
    ):
        process = Subprocess([str(entrypoint), *args], env=env)
        output = process.output().strip()
        assert process.wait() == 0
        if expected is None:
            assert output == "hi"
        else:
            assert output == f"{process.pid} {expected}"


# -- Kubernetes ------------------------------------------------------------------------


def test_the_manifest_probes_the_apps_health_port():
    container = worker_container()
    port = app_health_port()
    (health,) = container["ports"]
    assert (health["name"], health["containerPort"]) == ("health", port)
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/live"
    assert probes["startupProbe"]["path"] == "/live"
    assert probes["readinessProbe"]["path"] == "/ready"
    for probe in probes.values():
        assert probe["port"] in ("health", port)
    # A failover of the shared port must not look like a dead pod.
    liveness = container["livenessProbe"]
    assert liveness["periodSeconds"] * liveness["failureThreshold"] > SHARE_RETRY * 2
    assert [f"{port}"] == [part.split()[-1] for part in dockerfile()["EXPOSE"]]


def test_the_grace_period_covers_prestop_the_drain_and_the_swarms_grace():
    spec = deployment()["spec"]["template"]["spec"]
    container = worker_container()
    timeout = timeout_flag(container["args"])
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert "kill -TSTP 1" in command[2]
    sleep = int(re.search(r"sleep (\d+)", command[2])[1])  # type: ignore[index]
    assert spec["terminationGracePeriodSeconds"] >= sleep + timeout + SWARM_GRACE
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_the_manifest_sets_the_swarms_environment():
    env = {item["name"]: item for item in worker_container()["env"]}
    assert {"WURK_COUNT", "WURK_MAXMEM_MB", "REDIS_URL"} <= set(env)
    assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"]
    count, limit_mb = int(env["WURK_COUNT"]["value"]), int(env["WURK_MAXMEM_MB"]["value"])
    memory = worker_container()["resources"]["limits"]["memory"]
    assert memory.endswith("Gi")
    assert int(memory[:-2]) * 1024 > count * limit_mb  # a child is recycled before the pod is OOM-killed


# -- together ---------------------------------------------------------------------------


def test_every_example_uses_one_shutdown_timeout():
    timeouts = {
        "wurk.service": timeout_flag(shlex.split(unit("wurk.service")["Service"]["ExecStart"])),
        "wurk@.service": timeout_flag(shlex.split(unit("wurk@.service")["Service"]["ExecStart"])),
        "Procfile": timeout_flag(shlex.split(procfile()["worker"])),
        "Dockerfile": timeout_flag(json.loads(dockerfile()["CMD"][0])),
        "worker-deployment.yaml": timeout_flag(worker_container()["args"]),
    }
    assert len(set(timeouts.values())) == 1, timeouts
    stop = {int(unit(name)["Service"]["TimeoutStopSec"]) for name in ("wurk.service", "wurk@.service")}
    assert len(stop) == 1


def test_the_example_app_runs_under_a_real_worker(config, redis, redis_url, tmp_path):
    """``wurk -r app.py`` as the examples run it: it boots, serves its probes
    on the port it was given, runs a job, and stops on TERM within -t."""
    port = free_port()
    env = {"REDIS_URL": redis_url, "WURK_HEALTH_PORT": str(port), "PYTHONPATH": str(EXAMPLES)}
    worker = Subprocess(
        [sys.executable, "-m", "wurk.cli", "-r", "app.py", "-e", "production", "-t", "20"],
        env=env,
        cwd=EXAMPLES,
        log=tmp_path / "worker.log",
    )
    try:

        def live() -> int | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2) as response:
                    return int(response.status)
            except OSError:
                return None

        wait_for(lambda: live() == 200, timeout=20)
        payload = {"class": "app.Hello", "args": ["deploy"], "queue": "default", "jid": "a1b2c3d4e5f6a7b8c9d0e1f2"}
        payload.update({"retry": True, "created_at": 0.0, "enqueued_at": 0.0})
        redis.sadd("queues", "default")
        redis.lpush("queue:default", json.dumps(payload))
        wait_for(lambda: int(redis.get("stat:processed") or 0) == 1, timeout=20)
    finally:
        worker.stop(timeout=30)
    assert worker.wait() == 0
    assert int(redis.get("stat:failed") or 0) == 0


def test_the_example_app_runs_under_the_swarm_as_the_examples_start_it(redis, redis_url, tmp_path):
    """The Procfile's command with the manifest's ``WURK_COUNT``: every child
    heartbeats as its own process, one of them serves the shared probe port,
    the jobs run, the preStop's ``TSTP`` quiets every child (``/live`` turns
    503), and ``TERM`` then drains the swarm to exit status 0."""
    command = shlex.split(procfile()["worker"])
    count = next(item["value"] for item in worker_container()["env"] if item["name"] == "WURK_COUNT")
    port = free_port()
    env = {"REDIS_URL": redis_url, "WURK_HEALTH_PORT": str(port), "PYTHONPATH": str(EXAMPLES), "WURK_COUNT": count}
    swarm = Subprocess(
        [sys.executable, "-m", "wurk_swarm", *command[1:]], env=env, cwd=EXAMPLES, log=tmp_path / "swarm.log"
    )

    def live() -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return None

    def processes() -> dict[int, dict[bytes, bytes]]:
        found = {}
        for identity in redis.smembers("processes"):
            if redis.exists(identity):
                found[int(identity.decode().split(":")[-2])] = redis.hgetall(identity)
        return found

    try:
        wait_for(lambda: len(processes()) == int(count), timeout=30)
        assert swarm.pid not in processes()  # the parent runs no worker of its own
        wait_for(lambda: live() == 200, timeout=20)
        redis.sadd("queues", "default")
        for number in range(4):
            payload = {"class": "app.Hello", "args": [f"swarm {number}"], "queue": "default", "retry": True}
            payload.update({"jid": f"{number:024x}", "created_at": 0.0, "enqueued_at": 0.0})
            redis.lpush("queue:default", json.dumps(payload))
        wait_for(lambda: int(redis.get("stat:processed") or 0) == 4, timeout=20)

        swarm.signal(signal.SIGTSTP)  # what the manifest's preStop sends to PID 1
        wait_for(lambda: all(info.get(b"quiet") == b"true" for info in processes().values()), timeout=20)
        wait_for(lambda: live() == 503, timeout=20)
        swarm.signal(signal.SIGTERM)
        assert swarm.wait(20 + SWARM_GRACE + 5) == 0
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(swarm.pid, signal.SIGKILL)  # the parent and every child it forked, whatever happened
        swarm.proc.wait()
    assert int(redis.get("stat:failed") or 0) == 0
    assert redis.scard("processes") == 0


@pytest.mark.parametrize("name", ["wurk.service", "wurk@.service", "Procfile", "entrypoint.sh"])
def test_every_command_loads_the_example_app(name):
    assert "-r app.py" in (EXAMPLES / name).read_text(encoding="utf-8")


def test_the_deployment_guide_points_at_every_example():
    guide = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    for path in sorted(EXAMPLES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(EXAMPLES)
            # A project of several files (examples/django_app/) is pointed at by its folder.
            folders = [f"examples/{folder.as_posix()}/" for folder in relative.parents if folder.parts]
            assert any(name in guide for name in [f"examples/{relative.as_posix()}", *folders]), path
