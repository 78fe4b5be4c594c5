"""Hypothesis strategies for job arguments and options, and the oracle that
says which values a job may carry.

The oracle is written here, apart from ``wurk.client.payload``, so that the tests do
not grade the client by its own rules: a value is JSON-native when a JSON
round trip gives back an equal value of the same types, which Ruby's parser
(at most 100 levels of nesting) can also read.
"""

from __future__ import annotations

import datetime
import decimal
import fractions
import json
import math
import sys
from typing import Any

from hypothesis import strategies as st

#: Ruby's ``JSON.parse`` refuses more than 100 levels; the payload object is one.
PAYLOAD_DEPTH = 100
#: Integers Python's ``json`` writes and reads (at most 4,300 digits by default).
INT_LIMIT = 10 ** sys.get_int_max_str_digits()


class Opaque:
    """An object JSON knows nothing about."""

    def __repr__(self) -> str:
        return "<Opaque>"


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def cycle() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def depth(value: Any) -> int:
    """Levels of nesting, iteratively (the values can be deeper than the stack)."""
    deepest = 0
    stack = [(value, 0)]
    seen: set[int] = set()
    while stack:
        item, level = stack.pop()
        if isinstance(item, list | tuple | dict | set | frozenset):
            if id(item) in seen:
                return sys.maxsize
            seen.add(id(item))
            level += 1
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level) for child in children)
    return deepest


def text_ok(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def native(value: Any) -> bool:
    """Whether ``value`` is JSON that a worker, Python or Ruby, reads back as it is."""
    if depth(value) > PAYLOAD_DEPTH - 1:
        return False
    return _native(value)


def _native(value: Any) -> bool:
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return abs(value) < INT_LIMIT
    if kind is float:
        return math.isfinite(value)
    if kind is str:
        return text_ok(value)
    if kind is list:
        return all(_native(item) for item in value)
    if kind is dict:
        return all(type(key) is str and text_ok(key) and _native(item) for key, item in value.items())
    return False


def same(left: Any, right: Any) -> bool:
    """Equal, and of the same JSON types all the way down (``1 == True`` is not enough)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[key], right[key]) for key in left)
    return bool(left == right)


def strict_loads(data: bytes) -> Any:
    """JSON as a strict reader sees it: UTF-8, no NaN or Infinity, no lone surrogates."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    value = json.loads(data.decode("utf-8"), parse_constant=refuse)
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return value


# -- strategies ----------------------------------------------------------------------------------------

surrogates = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
texts = st.text(max_size=20) | st.sampled_from(["", "é", "日本", "\x00", "a/b<c>", "\u2028", "😀"])
#: Built when drawn: the repr of an integer over 4,300 digits raises.
huge_ints = st.sampled_from([(1, 63), (-1, 63), (1, 997), (1, 14280), (1, 14300), (-1, 16610), (1, 33220)]).map(
    lambda sign_bits: sign_bits[0] * 2 ** sign_bits[1]
)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=25,
)
odd_scalars = (
    st.sampled_from([math.nan, math.inf, -math.inf])
    | huge_ints
    | st.binary(max_size=8)
    | surrogates
    | st.builds(Opaque)
    | st.dates()
    | st.datetimes()
    | st.timedeltas()
    | st.decimals(allow_nan=True)
    | st.fractions()
    | st.complex_numbers(max_magnitude=10)
    | st.sampled_from([Ellipsis, int, print, decimal.Decimal("1.5"), fractions.Fraction(1, 3)])
    | st.builds(cycle)
    | st.integers(1, 3000).map(nested)
)
odd_keys = (
    st.integers() | st.booleans() | st.none() | st.floats() | st.tuples(st.integers()) | surrogates | st.builds(Opaque)
)
any_values = st.recursive(
    json_scalars | odd_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.frozensets(st.integers() | texts, max_size=3)
        | st.sets(st.integers(), max_size=3)
        | st.dictionaries(texts | odd_keys, children, max_size=4)
        | st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=25,
)
arglists = st.lists(json_values, max_size=5) | st.lists(any_values, max_size=5)

#: Times and intervals: numbers of every size and sign, and things that are not times at all.
times = (
    st.floats()
    | st.integers()
    | huge_ints
    | st.sampled_from([0, -1, 1e9, 1e9 - 1, 1e300, -1e300, 2**1023 * 2.0 - 1, True, False])
    | st.datetimes()
    | st.timedeltas()
    | st.dates()
    | texts
    | st.none()
    | st.lists(st.integers(), max_size=2)
    | st.builds(lambda: datetime.datetime.max)
    | st.builds(Opaque)
)
queue_names = (
    st.sampled_from(["default", "critical", "a.b-c_d:e", "", " ", "é", "q" * 10_000, "queue:x", "a b", "a*b"])
    | texts
    | st.integers()
    | st.none()
    | st.builds(Opaque)
)
option_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    huge_ints,
    st.floats(),
    texts,
    surrogates,
    st.lists(texts, max_size=3),
    st.lists(any_values, max_size=2),
    st.timedeltas(),
    st.builds(Opaque),
    st.dictionaries(texts | odd_keys, json_scalars, max_size=2),
)
OPTION_NAMES = [
    "queue",
    "retry",
    "retry_queue",
    "retry_for",
    "backtrace",
    "dead",
    "tags",
    "expires_in",
    "jid",
    "bid",
    "created_at",
    "custom",
    "wait",
    "wait_until",
]
options = st.dictionaries(st.sampled_from(OPTION_NAMES), option_values, max_size=3) | st.fixed_dictionaries(
    {}, optional={"queue": queue_names, "retry": option_values, "tags": option_values}
)
