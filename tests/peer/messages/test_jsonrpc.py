"""Sans-IO units of the messages layer: the JSON-RPC codec and the converter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_mcp
from trio_mcp.peer._messages import (
    CallToolParams,
    InitializeParams,
    Task,
    TaskStatus,
    Tool,
    from_wire,
    to_wire,
)
from trio_mcp.peer._messages._jsonrpc import (
    ErrorData,
    ErrorResponse,
    Notification,
    Request,
    Response,
    Undecodable,
    decode_message,
    encode_for_wire,
    encode_message,
)

# --- JSON-RPC envelopes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', Request(1, "ping")),
        (b'{"jsonrpc":"2.0","id":"a","method":"x","params":{}}', Request("a", "x", {})),
        (b'{"jsonrpc":"2.0","method":"n"}', Notification("n")),
        (b'{"jsonrpc":"2.0","id":2,"result":{}}', Response(2, {})),
        (
            b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m"}}',
            ErrorResponse(3, ErrorData(-1, "m")),
        ),
    ],
)
def test_jsonrpc_decode_classifies_by_keys(raw: bytes, expected: Any) -> None:
    assert decode_message(raw) == expected


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{not json", trio_mcp.PARSE_ERROR),
        (b"\xff\xfe", trio_mcp.PARSE_ERROR),
        (b"NaN", trio_mcp.PARSE_ERROR),
        (b"[1,2]", trio_mcp.INVALID_REQUEST),
        (b'"text"', trio_mcp.INVALID_REQUEST),
        (b'{"id":1,"method":"ping"}', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":3}', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1}', trio_mcp.INVALID_REQUEST),
        (b"[" * 100_000, trio_mcp.PARSE_ERROR),
    ],
)
def test_jsonrpc_decode_marks_bad_input_undecodable(raw: bytes, code: int) -> None:
    item = decode_message(raw)
    assert isinstance(item, Undecodable)
    assert item.code == code


_JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5), st.just({}), st.just([1]), st.just({"a": 1}),
)


@given(
    envelope=st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
        st.one_of(_JSON_VALUES, st.sampled_from(["2.0", "1.0", "ping"])),
    )
)
@settings(max_examples=400)
def test_jsonrpc_decode_shortcut_is_parse_message(envelope: dict[str, Any]) -> None:
    """decode_message reads a well-formed request at once: what parse_message says of it."""
    from trio_mcp.peer._messages._jsonrpc import parse_message

    assert decode_message(json.dumps(envelope).encode()) == parse_message(envelope)


def test_jsonrpc_invalid_request_keeps_a_readable_id() -> None:
    item = decode_message(b'{"jsonrpc":"1.0","id":7,"method":"ping"}')
    assert isinstance(item, Undecodable) and item.id == 7


def test_jsonrpc_encode_always_writes_jsonrpc_and_null_id() -> None:
    out = json.loads(encode_message(ErrorResponse(None, ErrorData(-32700, "Parse error"))))
    assert out == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    out = json.loads(encode_message(Notification("notifications/initialized")))
    assert out == {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_jsonrpc_unencodable_result_becomes_internal_error() -> None:
    data = encode_for_wire(Response(5, {"x": float("nan")}))
    assert data is not None
    out = json.loads(data)
    assert out["id"] == 5 and out["error"]["code"] == trio_mcp.INTERNAL_ERROR


# --- the converter ------------------------------------------------------------------------


def test_convert_camel_case_and_omits_absent_optionals() -> None:
    task = Task("t", TaskStatus.WORKING, "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", None,
                poll_interval=500)
    wire = to_wire(task)
    assert wire == {
        "taskId": "t",
        "status": "working",
        "createdAt": "2025-01-01T00:00:00Z",
        "lastUpdatedAt": "2025-01-01T00:00:00Z",
        "ttl": None,  # null means unlimited: never omitted
        "pollInterval": 500,
    }
    assert from_wire(wire, Task) == task


def test_convert_preserves_meta_and_unknown_fields() -> None:
    wire = {
        "name": "t",
        "inputSchema": {"type": "object"},
        "_meta": {"k": 1},
        "futureField": {"nested": [1, 2]},
    }
    tool = from_wire(wire, Tool)
    assert tool.meta == {"k": 1}
    assert to_wire(tool) == wire


def test_convert_is_strict_about_types() -> None:
    with pytest.raises(trio_mcp.McpError) as info:
        from_wire({"name": 5}, CallToolParams)
    assert info.value.code == trio_mcp.INVALID_PARAMS
    with pytest.raises(trio_mcp.McpError):
        from_wire({"name": "x", "arguments": [1]}, CallToolParams)
    with pytest.raises(trio_mcp.McpError):
        from_wire({"protocolVersion": "x"}, InitializeParams)
