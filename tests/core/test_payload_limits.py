"""What the client refuses before a byte is written, found by fuzzing
(``tests/fuzz/``): each case used to raise an unrelated error while writing,
half-way through a bulk push, or to store a payload no worker could book."""

from __future__ import annotations

import json
import math
import sys

import pytest

import wurk
from wurk.client.payload import ComplexArgumentError, InvalidJobError
from wurk.errors import ConfigurationError


class Plain(wurk.Job):
    def perform(self, *args):
        pass


HUGE = 10 ** (sys.get_int_max_str_digits() + 1)


def nested(depth):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([HUGE], "args[0] = an integer of"),
        (["ok", "\ud800"], "args[1]"),
        ([{"\udfff": 1}], "args[0] has the key"),
        ([nested(99)], "nests deeper than 99"),
    ],
    ids=["huge-int", "surrogate", "surrogate-key", "too-deep"],
)
def test_arguments_json_cannot_carry_are_refused_by_name(config, redis, args, named):
    with pytest.raises(ComplexArgumentError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Plain.perform_async(*args)
    assert redis.dbsize() == 0


def test_arguments_as_deep_as_a_json_reader_takes_are_pushed(config, redis):
    Plain.perform_async(nested(98))
    [raw] = redis.lrange("queue:default", 0, -1)
    assert json.loads(raw)["args"] == [nested(98)]


def test_a_bulk_push_with_one_bad_job_writes_none(config, redis):
    arglists = [[n] for n in range(5)] + [[HUGE]]
    with pytest.raises(ComplexArgumentError, match=r"args\[0\]"):
        Plain.perform_bulk(arglists, batch_size=2)
    assert redis.dbsize() == 0
    with pytest.raises(InvalidJobError, match="'at'"):
        wurk.Client(config).push_bulk({"class": Plain, "args": [[1], [2]], "at": [1e10, math.nan], "batch_size": 1})
    assert redis.dbsize() == 0


@pytest.mark.parametrize(
    "when", [math.nan, math.inf, -math.inf, HUGE, -HUGE], ids=["nan", "inf", "-inf", "huge-int", "-huge-int"]
)
def test_a_time_that_is_not_a_finite_number_is_refused(config, redis, when):
    with pytest.raises(InvalidJobError, match="an interval must be a finite number of seconds"):
        Plain.perform_in(when)
    with pytest.raises(InvalidJobError, match="an interval must be a finite number of seconds"):
        Plain.perform_at(when)
    with pytest.raises(InvalidJobError, match="'at' must be a finite number of seconds"):
        wurk.Client(config).push({"class": Plain, "args": [], "at": when})
    assert redis.dbsize() == 0


def test_options_json_cannot_carry_are_refused_by_name(config, redis):
    with pytest.raises(InvalidJobError, match="the option 'custom'"):
        Plain.set(custom=object()).perform_async()
    with pytest.raises(InvalidJobError, match=r"the option 'note'.*lone surrogate"):
        Plain.set(note="\ud800").perform_async()
    with pytest.raises(InvalidJobError, match="the field 'tags'"):
        Plain.set(tags=["a", "\ud800"]).perform_async()
    with pytest.raises(InvalidJobError, match="option name"):
        wurk.Client(config).push({"class": Plain, "args": [], 1: 2})
    assert redis.dbsize() == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("retry", "yes"), ("retry", -1), ("jid", 5), ("retry_count", "3"), ("bid", ""), ("created_at", "now")],
)
def test_fields_a_worker_would_refuse_are_refused_at_push(config, redis, field, value):
    with pytest.raises(InvalidJobError, match=f"the field '{field}'"):
        wurk.Client(config).push({"class": Plain, "args": [], field: value})
    assert redis.dbsize() == 0


def test_a_queue_name_with_a_trailing_newline_is_refused(config, redis):
    with pytest.raises(InvalidJobError, match="queue name"):
        wurk.Client(config).push({"class": Plain, "args": [], "queue": "default\n"})
    with pytest.raises(ConfigurationError, match="queue name"):
        Plain.set(queue="default\n")


def test_an_error_message_never_fails_on_the_value_it_names(config, redis):
    with pytest.raises(ConfigurationError, match="retry must be"):
        Plain.set(retry=-HUGE)
    with pytest.raises(InvalidJobError, match="queue must be"):
        wurk.Client(config).push({"class": Plain, "args": [], "queue": HUGE})


def test_lossy_arguments_are_always_json(config, redis):
    config["on_complex_arguments"] = False
    loop = [1]
    loop.append(loop)
    wurk.Client(config).push({"class": Plain, "args": [math.nan, {(1, 2): math.inf, 3: "x"}, {1, 2}, "\ud800"]})
    [raw] = redis.lrange("queue:default", 0, -1)
    assert json.loads(raw)["args"] == ["nan", {"(1, 2)": "inf", "3": "x"}, "{1, 2}", "?"]
    with pytest.raises(ComplexArgumentError, match="holds itself"):
        wurk.Client(config).push({"class": Plain, "args": [loop]})
    with pytest.raises(ComplexArgumentError, match="too many digits"):
        wurk.Client(config).push({"class": Plain, "args": [HUGE]})


def test_tags_of_none_are_no_tags(config, redis):
    """``tags=None`` passed the checks and then failed while normalising, with
    "'NoneType' object is not iterable"."""
    wurk.Client(config).push({"class": Plain, "args": [], "tags": None})
    [raw] = redis.lrange("queue:default", 0, -1)
    assert "tags" not in json.loads(raw)
