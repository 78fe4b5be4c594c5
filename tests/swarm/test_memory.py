"""Memory recycling's measurements: real ``/proc`` reads, the limit's sources
and the rate-limited watch.

RSS is read from real processes (this one and a child that allocates a known
amount); only the watch's clock and, where a platform without ``/proc`` is
the point, its reader are stand-ins.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import wurk
from wurk.plugins.manager import DISABLE_ENV
from wurk_swarm.memory import MEMORY_CHECK_INTERVAL, MemoryWatch, environment_limit_mb, memory_limit_mb, rss_kb

needs_proc = pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")

ALLOCATED_MB = 64

# Touches every page (a repeated non-zero byte), so the kernel really maps them,
# then says so and waits for stdin to close.
HOLDER = """
import sys
held = b"\\x01" * ({mb} * 1024 * 1024)
sys.stdout.write("ready\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def vm_rss_kb(pid: int) -> int:
    """The kernel's own KB figure from /proc/<pid>/status, to check the page arithmetic."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def start_holder(mb: int) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(mb=mb)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"
    return child


def stop(child: subprocess.Popen[str]) -> None:
    """Close its stdin so it exits by itself; terminate by pid if it lingers."""
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.close()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.terminate()
        child.wait(timeout=10)
    child.stdout.close()


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            stop(child)


def nonexistent_pid() -> int:
    """A pid above the kernel's maximum, so no process can ever hold it."""
    pid_max = Path("/proc/sys/kernel/pid_max")
    return int(pid_max.read_text()) + 1 if pid_max.exists() else 2**22 + 1


# -- rss_kb on real processes ---------------------------------------------------------


@needs_proc
def test_rss_of_this_process_matches_the_kernels_figure():
    rss = rss_kb(os.getpid())
    assert rss is not None
    assert rss > 1024, "a running Python interpreter is over 1 MB"
    # Read a moment apart, so allow a little drift.
    assert abs(rss - vm_rss_kb(os.getpid())) < 2048


@needs_proc
def test_rss_of_a_child_grows_by_what_it_allocated(holders):
    small = start_holder(0)
    large = start_holder(ALLOCATED_MB)
    holders += [small, large]

    small_rss, large_rss = rss_kb(small.pid), rss_kb(large.pid)
    assert small_rss is not None
    assert large_rss is not None
    grown = large_rss - small_rss
    assert ALLOCATED_MB * 1024 * 0.9 < grown < ALLOCATED_MB * 1024 * 1.25
    assert abs(large_rss - vm_rss_kb(large.pid)) < 1024


@needs_proc
def test_rss_of_a_reaped_child_is_none(holders):
    child = start_holder(0)
    holders.append(child)
    assert rss_kb(child.pid) is not None
    stop(child)
    assert rss_kb(child.pid) is None


def test_rss_of_a_pid_that_does_not_exist_is_none():
    assert rss_kb(nonexistent_pid()) is None


# -- where the limit comes from -------------------------------------------------------


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("WURK_MAXMEM_MB", raising=False)
    monkeypatch.delenv("SIDEKIQ_MAXMEM_MB", raising=False)
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    return monkeypatch


def test_limit_is_off_by_default(environ):
    assert memory_limit_mb(wurk.Config()) is None


def test_limit_from_the_sidekiq_name(environ):
    environ.setenv("SIDEKIQ_MAXMEM_MB", "1500")
    assert memory_limit_mb(wurk.Config()) == 1500


def test_the_native_name_wins_over_the_sidekiq_name(environ):
    environ.setenv("SIDEKIQ_MAXMEM_MB", "1500")
    environ.setenv("WURK_MAXMEM_MB", "900")
    assert memory_limit_mb(wurk.Config()) == 900


def test_an_assigned_value_wins_over_both_names(environ):
    environ.setenv("SIDEKIQ_MAXMEM_MB", "1500")
    environ.setenv("WURK_MAXMEM_MB", "900")
    config = wurk.Config()
    config["memory_limit_mb"] = 1024
    assert memory_limit_mb(config) == 1024


@pytest.mark.parametrize("value", [None, 0])
def test_an_assigned_none_or_zero_switches_recycling_off_whatever_the_environment_says(environ, value):
    environ.setenv("WURK_MAXMEM_MB", "900")
    config = wurk.Config()
    config["memory_limit_mb"] = value
    assert memory_limit_mb(config) is None


@pytest.mark.parametrize("raw", ["", "  ", "0", "-5", "lots", "1.5e3", "1500MB"])
def test_unusable_environment_values_switch_recycling_off_without_raising(environ, raw):
    environ.setenv("WURK_MAXMEM_MB", raw)
    assert memory_limit_mb(wurk.Config()) is None


def test_a_plain_mapping_reads_the_same_way(environ):
    environ.setenv("WURK_MAXMEM_MB", "900")
    assert memory_limit_mb({}) == 900
    assert memory_limit_mb({"memory_limit_mb": "1200"}) == 1200
    assert memory_limit_mb({"memory_limit_mb": None}) is None
    assert memory_limit_mb({"memory_limit_mb": "junk"}) is None
    assert memory_limit_mb({"memory_limit_mb": True}) is None


def test_the_environment_alone():
    assert environment_limit_mb({}) is None
    assert environment_limit_mb({"WURK_MAXMEM_MB": "1024"}) == 1024
    assert environment_limit_mb({"SIDEKIQ_MAXMEM_MB": "512"}) == 512
    assert environment_limit_mb({"WURK_MAXMEM_MB": "1024", "SIDEKIQ_MAXMEM_MB": "512"}) == 1024
    for value in ("0", "-5", "", "lots", "1.5"):
        assert environment_limit_mb({"WURK_MAXMEM_MB": value}) is None


def test_the_setting_reads_the_environment_while_unassigned(environ):
    """The swarm declares the fallback with its setting: ``config[...]`` reads
    the environment at each read, and an assignment wins over it."""
    config = wurk.Config()
    assert config["memory_limit_mb"] is None
    environ.setenv("SIDEKIQ_MAXMEM_MB", "512")
    assert config["memory_limit_mb"] == 512
    environ.setenv("WURK_MAXMEM_MB", "1024")
    assert config.get("memory_limit_mb") == 1024
    assert "memory_limit_mb" not in config  # nothing assigned
    config["memory_limit_mb"] = 2048
    assert config["memory_limit_mb"] == 2048
    config["memory_limit_mb"] = 0
    assert config["memory_limit_mb"] == 0
    assert memory_limit_mb(config) is None  # 0 switches recycling off


@pytest.mark.parametrize("value", [-1, "1024", 1.5, True])
def test_the_setting_must_be_a_whole_number(value):
    config = wurk.Config()
    _ = config.plugins  # the swarm's declaration checks the value
    with pytest.raises(wurk.ConfigurationError, match="memory_limit_mb"):
        config["memory_limit_mb"] = value


def test_without_the_swarm_the_setting_has_no_fallback(environ):
    environ.setenv("WURK_MAXMEM_MB", "900")
    config = wurk.Config(disabled_plugins=["swarm"])
    assert config.get("memory_limit_mb") is None


# -- the watch --------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def readings(values: dict[int, int | None]):
    """A reader standing in for /proc, recording which pids were read."""
    read: list[int] = []

    def reader(pid: int) -> int | None:
        read.append(pid)
        return values.get(pid)

    return reader, read


def test_the_watch_reports_children_at_or_over_the_limit():
    reader, _ = readings({1: 1536000, 2: 1535999, 3: 1574912})
    watch = MemoryWatch(1500, clock=Clock(), reader=reader)
    assert watch.over([1, 2, 3]) == [(1, 1536000), (3, 1574912)]


def test_the_watch_reads_at_most_once_per_interval():
    clock = Clock()
    reader, read = readings({1: 2_000_000})
    watch = MemoryWatch(1000, clock=clock, reader=reader)
    assert watch.interval == MEMORY_CHECK_INTERVAL == 10.0

    assert watch.over([1]) == [(1, 2_000_000)], "the first call checks at once"
    for step in (0.2, 5.0, 9.9):
        clock.now = 50.0 + step
        assert watch.over([1]) == []
    assert read == [1], "/proc is not read between checks"

    clock.now = 60.0
    assert watch.over([1]) == [(1, 2_000_000)]
    clock.now = 69.9
    assert watch.over([1]) == []
    clock.now = 70.0
    assert watch.over([1]) == [(1, 2_000_000)]
    assert read == [1, 1, 1]


def test_a_custom_interval():
    clock = Clock()
    reader, read = readings({1: 10})
    watch = MemoryWatch(1, interval=2.0, clock=clock, reader=reader)
    watch.over([1])
    clock.now += 1.9
    watch.over([1])
    clock.now += 0.1
    watch.over([1])
    assert read == [1, 1]


@pytest.mark.parametrize("limit", [None, 0, -1])
def test_a_disabled_watch_never_reads(limit):
    reader, read = readings({1: 10**9})
    watch = MemoryWatch(limit, clock=Clock(), reader=reader)
    assert not watch.enabled
    assert watch.over([1]) == []
    assert read == []


def test_without_proc_no_child_is_ever_recycled():
    """Where /proc is missing every read is None: never a breach."""
    clock = Clock()
    watch = MemoryWatch(1, clock=clock, reader=lambda pid: None)
    assert watch.over([1, 2]) == []
    clock.now += 10
    assert watch.over([1, 2]) == []


def test_the_watch_skips_a_child_that_vanished_with_the_real_reader():
    watch = MemoryWatch(1, clock=Clock())
    assert watch.over([nonexistent_pid()]) == []


@needs_proc
def test_the_watch_catches_a_real_child_over_the_limit(holders):
    small = start_holder(0)
    large = start_holder(ALLOCATED_MB)
    holders += [small, large]
    small_rss = rss_kb(small.pid)
    assert small_rss is not None
    # Half way between the two: only the child holding 64 MB more is over it.
    limit_mb = (small_rss + ALLOCATED_MB * 1024 // 2) // 1024
    watch = MemoryWatch(limit_mb, clock=Clock())
    assert [pid for pid, _ in watch.over([small.pid, large.pid])] == [large.pid]


def test_the_log_line_is_the_one_in_the_guides():
    watch = MemoryWatch(1500)
    assert watch.message(4242, 1574912) == "swarm: child 4242 RSS 1574912KB >= 1536000KB; recycling"
