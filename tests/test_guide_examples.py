"""Each guide's first example runs as a newcomer runs it, twice in a row.

A guide's first example is written in its page as named files and the exact
commands that run them. This test writes those files into an empty
directory, runs the commands as the page states them, with real ``wurk``
worker processes, against the test server, and checks what the page says
they print; then it runs them all again on the same Redis, since a reader
runs an example more than once and the second time the server is not empty.
The page is the test's only source, so the two cannot drift apart.

How a page marks its example (fenced blocks, read by the info string that
follows the backticks; a renderer highlights by its first word and ignores
the rest):

- ```` ```python file=app.py ```` (any language, then ``file=`` and a path
  relative to the example's directory): a file of the example, written as
  it stands. The paragraph just before it names the file in backticks, so a
  reader sees it too. These blocks are not part of the page's snippet module
  (tests/test_docs.py runs only the blocks fenced ```` ```python ```` alone),
  but test_docs.py writes them beside that module, so a later snippet may
  import from the example as the reader's own code would (``from app import
  WelcomeEmail``).
- ```` ```bash run ````: the commands, one a line, run in order from that
  directory (a ``#`` starts a comment):

  * ``wurk server ...`` is the development server; the test server stands in
    for it (``REDIS_URL`` points every command at it);
  * ``wurk`` followed by an option, or alone (a trailing ``&`` allowed), is a
    worker: it is started and left running, and the next command waits until
    it says it is starting its threads, as a reader waits for that line;
  * ``export NAME=VALUE`` is evaluated by bash and sets ``NAME`` for the
    commands after it;
  * ``pip install ...`` installs into a directory of the test's own (with
    ``--no-deps --no-build-isolation``: what it needs is installed already),
    which every later command finds on ``PYTHONPATH``;
  * anything else runs to its end, and must succeed.

- ```` ```text output ````: lines that must show up in what the workers and
  the commands print, each exactly as many times as it is listed (so a job
  that runs twice, or a duplicate that was not dropped, fails the test).
  Once they have all shown up, the workers are stopped with TERM and must
  exit cleanly.

A page with a ``run`` block has exactly one, and one ``output`` block.
Python's output is written as it is printed (``PYTHONUNBUFFERED=1``), as a
terminal shows it line by line, rather than held until the process ends.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import ROOT, Subprocess

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: The guides whose first example a newcomer runs; each must keep one.
REQUIRED = {
    "getting-started.md",
    "jobs.md",
    "middleware.md",
    "batches.md",
    "rate-limiting.md",
    "periodic.md",
    "unique-jobs.md",
    "encryption.md",
    "iterable-jobs.md",
    "plugins.md",
}

FENCE = re.compile(r"^```(\w+)[ \t]+([^\n]+)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
READY = re.compile(r"Wurk \S+ starting \d+ threads?\b")
BIN = Path(sys.executable).parent
#: How long the example's output may take to show up, and a command to end.
OUTPUT_TIMEOUT = 60.0
COMMAND_TIMEOUT = 300.0


@dataclass
class Example:
    page: Path
    files: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)


def example_files(text: str) -> dict[str, str]:
    """The ``file=`` blocks of a page's markdown: path to content."""
    files = {}
    for match in FENCE.finditer(text):
        words = match.group(2).split()
        for word in words:
            if word.startswith("file="):
                files[word.removeprefix("file=")] = match.group(3)
    return files


def read_example(page: Path) -> Example | None:
    text = page.read_text(encoding="utf-8")
    example = Example(page, files=example_files(text))
    runs, outputs = [], []
    for match in FENCE.finditer(text):
        words = match.group(2).split()
        if match.group(1) == "bash" and words == ["run"]:
            runs.append(match.group(3))
        elif match.group(1) == "text" and words == ["output"]:
            outputs.append(match.group(3))
    if not runs:
        return None  # files shown without a run (docs/django.md's project is run by tests/django)
    assert len(runs) == 1, f"{page.name}: more than one ```bash run block"
    assert len(outputs) == 1, f"{page.name}: a ```bash run block needs one ```text output block"
    example.commands = [line for line in runs[0].splitlines() if _command_words(line)]
    example.output = [line.strip() for line in outputs[0].splitlines() if line.strip()]
    return example


def _command_words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


EXAMPLES = [example for example in map(read_example, PAGES) if example is not None]


def test_every_guide_that_needs_one_has_a_runnable_first_example():
    missing = REQUIRED - {example.page.name for example in EXAMPLES}
    assert not missing, f"no runnable first example (a ```bash run block) in {sorted(missing)}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.page.name)
def test_each_file_is_named_where_a_reader_sees_it(example):
    """The ``file=`` label is invisible once rendered: the prose before the
    block must name the file."""
    text = example.page.read_text(encoding="utf-8")
    for name in example.files:
        block = re.search(rf"^```\w+[ \t]+file={re.escape(name)}[ \t]*$", text, re.MULTILINE)
        before = text[: block.start()].rstrip().rsplit("\n\n", 1)[-1]
        assert f"`{name}`" in before, f"{example.page.name}: the paragraph before {name} does not name it"


def installs(example: Example) -> bool:
    return any(_command_words(line)[:2] == ["pip", "install"] for line in example.commands)


#: An example that builds and installs a distribution is a slow test.
RUNS = [
    pytest.param(example, id=example.page.name, marks=[pytest.mark.slow] if installs(example) else [])
    for example in EXAMPLES
]


@pytest.mark.parametrize("example", RUNS)
def test_the_first_example_runs_as_written_twice_in_a_row(example, redis_url, tmp_path):
    workdir = tmp_path / "example"
    workdir.mkdir()
    for name, content in example.files.items():
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    for run in (1, 2):
        logs = tmp_path / f"run-{run}"
        logs.mkdir()
        printed = run_commands(example, workdir, logs, redis_url, site=tmp_path / "site")
        for line in set(example.output):
            seen = sum(line in printed_line for printed_line in printed.splitlines())
            wanted = example.output.count(line)
            assert seen == wanted, f"run {run}: {line!r} printed {seen} times, not {wanted}:\n{printed}"


def base_env(redis_url: str) -> dict[str, str]:
    """A reader's shell: no Wurk settings of the test run, the test server as
    REDIS_URL, the environment's own ``python``, ``pip`` and ``wurk`` first."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("WURK_", "SIDEKIQ_"))}
    env.pop("PYTHONPATH", None)
    env.update({"REDIS_URL": redis_url, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1"})
    return env


def run_commands(example: Example, workdir: Path, logs: Path, redis_url: str, site: Path) -> str:
    """Run the example's commands once; what they all printed."""
    env = base_env(redis_url)
    if site.exists():
        env["PYTHONPATH"] = str(site)
    workers: list[Subprocess] = []
    printed: list[str] = []

    def everything() -> str:
        return "\n".join([*printed, *(worker.log.read_text("utf-8", "replace") for worker in workers)])

    try:
        for number, line in enumerate(example.commands):
            words = _command_words(line)
            if words[:2] == ["wurk", "server"]:
                continue
            if words[0] == "export":
                name = words[1].split("=", 1)[0]
                evaluated = subprocess.run(
                    ["bash", "-c", f'{line}\nprintf %s "${name}"'], env=env, cwd=workdir, capture_output=True, text=True
                )
                assert evaluated.returncode == 0, evaluated.stderr
                env[name] = evaluated.stdout
            elif words[0] == "wurk" and (len(words) == 1 or words[1].startswith("-") or words[1] == "&"):
                args = [word for word in words if word != "&"]
                worker = Subprocess(args, env=env, cwd=workdir, log=logs / f"worker-{number}.log")
                workers.append(worker)
                wait_until_ready(worker)
            elif words[:2] == ["pip", "install"]:
                site.mkdir(exist_ok=True)
                env["PYTHONPATH"] = str(site)
                pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
                printed.append(finish([*pip, "--upgrade", "--target", str(site), *words[2:]], env, workdir))
            else:
                printed.append(finish(words, env, workdir))
        wait_for_output(example, everything)
    finally:
        for worker in workers:
            if worker.proc.poll() is None:
                worker.signal(signal.SIGTERM)
        codes = [worker.wait(60) for worker in workers]
    assert codes == [0] * len(workers), f"a worker did not exit cleanly:\n{everything()}"
    return everything()


def finish(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT
    )
    assert done.returncode == 0, f"{shlex.join(args)} failed:\n{done.stdout}"
    return done.stdout


def wait_until_ready(worker: Subprocess) -> None:
    deadline = time.monotonic() + OUTPUT_TIMEOUT
    while not READY.search(worker.log.read_text("utf-8", "replace")):
        assert worker.proc.poll() is None, f"the worker exited:\n{worker.output()}"
        assert time.monotonic() < deadline, f"the worker never started:\n{worker.log.read_text()}"
        time.sleep(0.05)


def wait_for_output(example: Example, everything) -> None:
    deadline = time.monotonic() + OUTPUT_TIMEOUT
    while True:
        printed = everything().splitlines()
        missing = [
            line
            for line in set(example.output)
            if sum(line in printed_line for printed_line in printed) < example.output.count(line)
        ]
        if not missing:
            return
        assert time.monotonic() < deadline, f"never printed {missing}:\n{everything()}"
        time.sleep(0.1)
