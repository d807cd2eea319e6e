"""The optional orjson codec writes and reads what the json codec does.

Every input goes through both ``_dumps``/``_loads`` (orjson when installed) and
the stdlib ``json`` path they fall back to; outcomes must be identical: the
same values read (``repr``-equal, so ``1`` vs ``1.0`` and ``-0.0`` count), the
same bytes written (for floats: the same value, possibly another notation,
``1e16`` for ``1e+16``), or the same exception type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp.peer._messages import _jsonrpc

pytest.importorskip("orjson")
pytestmark = pytest.mark.skipif(
    not hasattr(_jsonrpc, "_std_dumps"), reason="orjson is not used by the codec"
)

special_floats = st.sampled_from(
    [0.0, -0.0, 1e16, 1e-7, 1e-5, -0.00012, 0.0001, 1.5e300, 5e-324, 123456789012345.0, 1e15, 0.1, math.nan, math.inf]
)
special_ints = st.sampled_from(
    [0, -1, 2**53, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]
)
texts = st.text() | st.sampled_from(["null", "\ud800", "a\udfff", "x:1e5", "é\u2028\x00\x7f"])
leaves = (
    st.none() | st.booleans() | st.integers() | special_ints | st.floats() | special_floats | texts
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(texts, inner, max_size=4)
    | st.dictionaries(st.integers() | st.none() | st.booleans(), inner, max_size=2),
    max_leaves=20,
)


def _outcome(fn: Callable[[Any], Any], arg: Any) -> tuple[str, Any]:
    try:
        return ("ok", repr(fn(arg)))
    except Exception as exc:
        return ("error", type(exc))


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_float(v) for v in value)
    return False


def _assert_same_encoding(value: Any) -> None:
    fast, std = _outcome(_jsonrpc._dumps, value), _outcome(_jsonrpc._std_dumps, value)
    if fast[0] == std[0] == "ok" and _has_float(value):
        # Same numbers, possibly written differently: compare what a reader gets.
        read = json.loads(_jsonrpc._dumps(value))
        assert repr(read) == repr(json.loads(_jsonrpc._std_dumps(value)))
    else:
        assert fast == std


@settings(max_examples=600, deadline=None)
@given(values)
def test_fast_dumps_matches_json(value: Any) -> None:
    _assert_same_encoding(value)


@settings(max_examples=600, deadline=None)
@given(values.filter(lambda v: _outcome(_jsonrpc._std_dumps, v)[0] == "ok"))
def test_fast_loads_matches_json_on_json_text(value: Any) -> None:
    data = _jsonrpc._std_dumps(value)
    assert _outcome(_jsonrpc._loads, data) == _outcome(_jsonrpc._std_loads, data)
    text = data.decode("utf-8", "surrogatepass") if b"\\" not in data else data.decode("ascii", "replace")
    assert _outcome(_jsonrpc._loads, text) == _outcome(_jsonrpc._std_loads, text)


number_text = st.from_regex(r"\A-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?\Z")


@settings(max_examples=600, deadline=None)
@given(number_text | st.binary(max_size=40) | st.text(max_size=40).map(lambda t: t.encode()))
def test_fast_loads_matches_json_on_any_bytes(data: bytes | str) -> None:
    if isinstance(data, str):
        data = data.encode()
    assert _outcome(_jsonrpc._loads, data) == _outcome(_jsonrpc._std_loads, data)


@pytest.mark.parametrize(
    "data",
    [
        b"18446744073709551616",
        b"-9223372036854775809",
        b"1e400",
        b'"\\ud800"',
        b'"\xed\xa0\x80"',
        b"\xef\xbb\xbf{}",
        b"[" * 5000 + b"]" * 5000,
        b"NaN",
        b'{"a":1,"a":2}',
        b"-0",
        b"1E2",
        "\u00e9",
        '{"k":"\\u00e9"}',
    ],
)
def test_fast_loads_corner_cases(data: bytes | str) -> None:
    assert _outcome(_jsonrpc._loads, data) == _outcome(_jsonrpc._std_loads, data)


def test_fast_dumps_corner_cases() -> None:
    import enum

    class Color(enum.StrEnum):
        RED = "red"

    for value in [
        {"x": math.nan},
        {"x": [math.inf]},
        {1: "int key"},
        {"big": 2**64},
        {"s": "\ud800"},
        {"e": Color.RED},
        {"f": 1e16},
        {"t": (1, 2)},
        {"set": {1}},
    ]:
        _assert_same_encoding(value)


def test_fast_dumps_known_difference() -> None:
    """The one documented difference: orjson also encodes ``uuid.UUID`` and
    plain ``enum.Enum`` members (as their string/value), which json refuses."""
    import enum
    import uuid

    class Plain(enum.Enum):
        A = 1

    assert _jsonrpc._dumps({"u": uuid.UUID(int=0)}) == (
        b'{"u":"00000000-0000-0000-0000-000000000000"}'
    )
    assert _jsonrpc._dumps({"e": Plain.A}) == b'{"e":1}'


def test_fast_codec_round_trips_a_message() -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "é"}]}}
    assert _jsonrpc._loads(_jsonrpc._dumps(msg)) == msg
    assert json.loads(_jsonrpc._dumps(msg)) == msg
