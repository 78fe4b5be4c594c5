"""The swarm's shape: topology declarations and the WURK_COUNT rules."""

from __future__ import annotations

import pytest

import wurk
from wurk.errors import ConfigurationError
from wurk_swarm.topology import Assignment, Slot, Topology, configured, process_count


def test_slots_chain_and_expand_in_order():
    topology = Topology().slot(count=2, queues=["critical"], concurrency=3).slot(4, ["default", "low,2"], 10)
    assert topology.slots == [Slot(2, ("critical",), 3), Slot(4, ("default", "low,2"), 10)]
    assert topology.total_processes == 6
    assert not topology.empty
    assert topology.assignments[:3] == [
        Assignment(("critical",), 3, 0),
        Assignment(("critical",), 3, 0),
        Assignment(("default", "low,2"), 10, 1),
    ]
    assert len(topology.assignments) == 6


def test_flat_is_count_identical_forks():
    topology = Topology.flat(count=3, queues="default", concurrency=5)
    assert topology.assignments == [Assignment(("default",), 5, 0)] * 3
    assert Topology().empty
    assert Topology().total_processes == 0


@pytest.mark.parametrize(
    ("count", "queues", "concurrency", "message"),
    [
        (0, ["a"], 1, "count must be a whole number > 0, got 0"),
        (1.5, ["a"], 1, "count must be a whole number > 0, got 1.5"),
        (True, ["a"], 1, "count must be a whole number > 0, got True"),
        (1, [], 1, "queues must name at least one queue"),
        (1, ["a"], -2, "concurrency must be a whole number > 0, got -2"),
        (1, ["a", 3], 1, "queue entries are 'name' or 'name,weight' strings, got 3"),
        (1, ["queue:a"], 1, "without the 'queue:' prefix"),
        (1, ["a,x"], 1, "weight"),
    ],
)
def test_slot_validation_names_the_problem(count, queues, concurrency, message):
    with pytest.raises(ConfigurationError, match=r"topology slot|queue") as info:
        Topology().slot(count, queues, concurrency)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"WURK_COUNT": "3"}, 3),
        ({"SIDEKIQ_COUNT": "5"}, 5),
        ({"WURK_COUNT": "2", "SIDEKIQ_COUNT": "7"}, 2),  # the native name wins
        ({"WURK_COUNT": "", "SIDEKIQ_COUNT": "7"}, 7),
        ({"WURK_COUNT": "0.5"}, 4),  # half of 8 CPUs
        ({"WURK_COUNT": "0.3"}, 2),  # 2.4 rounds to 2
        ({"WURK_COUNT": "0.5625"}, 5),  # 4.5 rounds half up
        ({"WURK_COUNT": "1.5"}, 12),
        ({"WURK_COUNT": "0.01"}, 1),  # floored at 1
        ({"WURK_COUNT": "0"}, 1),
        ({"WURK_COUNT": "-3"}, 1),
        ({"WURK_COUNT": "2.0"}, 2),  # a whole number written with a point is still a count
        ({"WURK_COUNT": " 4 "}, 4),
        ({"WURK_COUNT": "lots"}, 8),  # unparseable: the CPU count
        ({"WURK_COUNT": "nan"}, 8),
        ({"WURK_COUNT": "inf"}, 8),
        ({}, 8),
    ],
)
def test_process_count(environ, expected):
    assert process_count(environ, cpus=8) == expected


def test_configured_is_flat_over_the_default_capsule_without_a_topology():
    config = wurk.Config()
    config.queues = ["critical,3", "default"]
    config.concurrency = 7
    topology = configured(config, {"WURK_COUNT": "3"})
    assert topology.assignments == [Assignment(("critical,3", "default"), 7, 0)] * 3
    assert topology.total_processes == 3


def test_an_explicit_topology_supersedes_wurk_count():
    config = wurk.Config()
    declared = Topology().slot(1, ["a"], 2).slot(1, ["b"], 3)
    config["topology"] = declared
    assert configured(config, {"WURK_COUNT": "9"}) is declared
    config["topology"] = Topology()  # empty: no slots, so WURK_COUNT decides
    assert configured(config, {"WURK_COUNT": "2"}).total_processes == 2


def test_the_topology_setting_refuses_anything_else():
    config = wurk.Config()
    _ = config.settings  # the plugins are loaded: wurk-swarm's settings are declared
    with pytest.raises(ConfigurationError, match=r"topology must be a wurk_swarm\.topology\.Topology"):
        config["topology"] = [("default", 2)]
    assert config["topology"] is None
