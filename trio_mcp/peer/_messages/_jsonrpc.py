"""JSON-RPC 2.0 envelopes, and the codec between them and bytes.

Envelopes are told apart by the keys present (as pygls does): ``method`` with
``id`` is a request, ``method`` without ``id`` a notification, ``result`` or
``error`` a response. Input that cannot be classified becomes an
:class:`Undecodable` value -- it is never raised and never sent in-band as an
exception -- so the router can answer it with the right error.

``params`` and ``result`` stay plain JSON dicts at this layer; the router turns
them into typed MCP objects with the converter in :mod:`._convert` once it
knows which method (or which pending request) they belong to.
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Final, TypeAlias

import attrs

from ..._errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

# The optional ``fast`` extra; imported by name so type checking does not
# depend on whether it is installed.
orjson: Any
try:
    orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None

RequestId: TypeAlias = "str | int"
JSON: TypeAlias = Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_ascii_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _dumps(obj: Any) -> bytes:
    try:
        return _encoder.encode(obj).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (legal in a JSON "\ud800" escape, impossible in
        # UTF-8), e.g. in an id the peer sent: write it back as an escape.
        return _ascii_encoder.encode(obj).encode("ascii")


def _loads(data: bytes | str) -> Any:
    if isinstance(data, bytes | bytearray):
        data = data.decode("utf-8")
    return _decoder.decode(data)


if orjson is not None:
    # orjson is many times faster than json but differs from it in a few
    # corners; each is detected cheaply and handed to the json codec above:
    # * orjson writes NaN and infinities as ``null`` (json raises) -> output
    #   holding ``null`` is encoded again by json;
    # * orjson refuses ints over 64 bits, non-string keys and lone
    #   surrogates, and passes subclasses, dataclasses and datetimes to
    #   ``default``, which refuses them -> TypeError, encoded by json (which
    #   encodes or raises as it always did);
    # * orjson reads integers beyond 64 bits as floats -> input holding a run
    #   of 19 digits is read by json; input orjson rejects (lone surrogates,
    #   1e400, deep nesting, bad UTF-8...) is read by json, which decides.
    # So every value read and written is the same with or without orjson.
    # Two differences remain, neither in MCP's own types: a float may be
    # written in another but equal form (``1e16`` for ``1e+16``, ``0.00001``
    # for ``1e-05``: the same number to any JSON reader), and ``uuid.UUID``
    # and plain ``enum.Enum`` members in raw user JSON are encoded (json
    # refuses them, so such a result used to become -32603).
    _ORJSON_OPTIONS: Final = (
        orjson.OPT_PASSTHROUGH_SUBCLASS
        | orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
    )
    _std_dumps = _dumps
    _std_loads = _loads
    _orjson_dumps = orjson.dumps
    _orjson_loads = orjson.loads
    _OrjsonDecodeError = orjson.JSONDecodeError
    # Digits to "0", everything else to " ": a 19-digit run is then a plain
    # substring search (several times faster than a regular expression).
    _DIGIT_MAP: Final = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
    _LONG_RUN: Final = b"0" * 19

    def _refuse(obj: Any) -> Any:
        raise TypeError

    def _dumps(obj: Any) -> bytes:
        try:
            data: bytes = _orjson_dumps(obj, default=_refuse, option=_ORJSON_OPTIONS)
        except TypeError:
            return _std_dumps(obj)
        if b"null" in data:
            return _std_dumps(obj)
        return data

    def _loads(data: bytes | str) -> Any:
        if isinstance(data, str):
            try:
                raw = data.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: json decides
                return _std_loads(data)
        else:
            raw = bytes(data)
        if _LONG_RUN not in raw.translate(_DIGIT_MAP):
            try:
                return _orjson_loads(raw)
            except _OrjsonDecodeError:
                pass
        return _std_loads(data)


def value_key(value: Any) -> bytes | str:
    """An exact, hashable stand-in for a JSON value read off the wire, to remember work on it.

    Its compact JSON by orjson (a few times cheaper than ``repr``), else its
    ``repr``: values that differ (``1``, ``1.0``, ``true``) never share a key.
    """
    if orjson is not None:
        try:
            key: bytes = orjson.dumps(value)
        except TypeError:  # (an int over 64 bits: json read it)
            return repr(value)
        return key
    return repr(value)


_JSONRPC: Final = "2.0"


@attrs.frozen
class Request:
    """A JSON-RPC request: it expects exactly one response with the same id."""

    id: str | int
    method: str
    params: dict[str, Any] | None = None
    #: Not on the wire: the id of the incoming request this one was sent
    #: while handling, so a transport with several streams can route it.
    related_request_id: str | int | None = attrs.field(
        default=None, kw_only=True, eq=False, repr=False
    )
    #: Not on the wire: the era the request was read in, when it is not its
    #: connection's (the 2026-07-28 dialect's per-request value; the features
    #: see it as their ``Dialect`` protocol). ``None``: the handshake's era.
    dialect: Any = attrs.field(default=None, kw_only=True, eq=False, repr=False)
    #: Not on the wire: who sent it, when it came without a connection of its
    #: own (a 2026-07-28 Streamable HTTP POST; the features' ``Caller``).
    #: ``None``: its connection's requestor context, identity and facts.
    caller: Any = attrs.field(default=None, kw_only=True, eq=False, repr=False)


@attrs.frozen
class Notification:
    """A JSON-RPC notification: no response is ever sent."""

    method: str
    params: dict[str, Any] | None = None
    #: Not on the wire: as for :attr:`Request.related_request_id`.
    related_request_id: str | int | None = attrs.field(
        default=None, kw_only=True, eq=False, repr=False
    )


@attrs.frozen
class Response:
    """A successful JSON-RPC response."""

    id: str | int
    result: dict[str, Any]


@attrs.frozen
class ErrorData:
    """The ``error`` member of a JSON-RPC error response."""

    code: int
    message: str
    data: Any = None


@attrs.frozen
class ErrorResponse:
    """A JSON-RPC error response; ``id`` is ``None`` when it could not be read."""

    id: str | int | None
    error: ErrorData


@attrs.frozen
class Undecodable:
    """Input a transport could not turn into a message.

    Attributes:
        code: :data:`PARSE_ERROR` for bytes that are not JSON (or not UTF-8),
            :data:`INVALID_REQUEST` for JSON that is not a JSON-RPC message.
        reason: A short human-readable reason, safe to send to the peer.
        id: The request id, when one could be recovered from the input.
        response_to: For a malformed *response*, the id of the request it
            answers, when readable: that request fails instead of waiting
            forever for an answer that will not come.
    """

    code: int
    reason: str
    id: str | int | None = None
    response_to: str | int | None = None


Message: TypeAlias = Request | Notification | Response | ErrorResponse
Incoming: TypeAlias = Message | Undecodable


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def parse_message(obj: Any, *, caller: Any = None) -> Incoming:
    """Classify one decoded JSON value as a JSON-RPC message.

    Args:
        obj: The value ``json.loads`` produced.
        caller: A request's :attr:`Request.caller` (who sent it, when it comes
            without a connection of its own).

    Returns:
        The envelope, or :class:`Undecodable` with code -32600 when the value
        is not a well-formed JSON-RPC 2.0 message. Never raises.
    """
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            return Undecodable(INVALID_REQUEST, "JSON-RPC batches are not supported")
        return Undecodable(INVALID_REQUEST, "a JSON-RPC message must be a JSON object")
    raw_id = obj.get("id")
    id_ok = _valid_id(raw_id)
    if obj.get("jsonrpc") != _JSONRPC:
        return Undecodable(
            INVALID_REQUEST,
            'missing or wrong "jsonrpc" member (must be "2.0")',
            raw_id if id_ok else None,
        )
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            return Undecodable(
                INVALID_REQUEST, '"method" must be a string', raw_id if id_ok else None
            )
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            # MCP params are always objects; positional params are not used.
            return Undecodable(
                INVALID_REQUEST, '"params" must be an object', raw_id if id_ok else None
            )
        if "id" in obj:
            if not id_ok:
                return Undecodable(INVALID_REQUEST, '"id" must be a string or an integer')
            return Request(raw_id, method, params, caller=caller)  # type: ignore[arg-type]
        return Notification(method, params)
    if "result" in obj:
        result = obj["result"]
        if not id_ok or not isinstance(result, dict):
            return Undecodable(
                INVALID_REQUEST, "malformed response", response_to=raw_id if id_ok else None
            )
        return Response(raw_id, result)  # type: ignore[arg-type]
    if "error" in obj:
        err = obj["error"]
        if not isinstance(err, dict) or not isinstance(err.get("code"), int):
            return Undecodable(
                INVALID_REQUEST, "malformed error response", response_to=raw_id if id_ok else None
            )
        message = err.get("message")
        return ErrorResponse(
            raw_id if id_ok else None,
            ErrorData(err["code"], message if isinstance(message, str) else "", err.get("data")),
        )
    return Undecodable(
        INVALID_REQUEST, "not a request, notification or response", raw_id if id_ok else None
    )


def decode_message(data: bytes | str, *, caller: Any = None) -> Incoming:
    """Decode one serialized message (one NDJSON line, one WebSocket frame, one POST).

    Args:
        data: UTF-8 bytes or text of exactly one JSON value.
        caller: A request's :attr:`Request.caller`, as :func:`parse_message`.

    Returns:
        The envelope, or :class:`Undecodable` (-32700 for invalid JSON or
        UTF-8, -32600 for JSON that is not a message). Never raises.
    """
    try:
        obj = _loads(data)
    except UnicodeDecodeError:
        return Undecodable(PARSE_ERROR, "Parse error: input is not valid UTF-8")
    except (ValueError, RecursionError):
        return Undecodable(PARSE_ERROR, "Parse error: input is not valid JSON")
    if type(obj) is dict:  # the usual well-formed request, read at once
        method = obj.get("method")
        raw_id = obj.get("id")
        params = obj.get("params")
        if (
            type(method) is str
            and (type(raw_id) is int or type(raw_id) is str)
            and (params is None or type(params) is dict)
            and obj.get("jsonrpc") == _JSONRPC
        ):
            # (without a caller, none is passed: a keyword costs every message)
            if caller is None:
                return Request(raw_id, method, params)
            return Request(raw_id, method, params, caller=caller)
    return parse_message(obj, caller=caller)


def message_to_json(msg: Message) -> dict[str, Any]:
    """Return the JSON object of an envelope, with ``jsonrpc`` always present."""
    if type(msg) is Response:  # the most frequent, first
        return {"jsonrpc": _JSONRPC, "id": msg.id, "result": msg.result}
    if isinstance(msg, Request):
        out: dict[str, Any] = {"jsonrpc": _JSONRPC, "id": msg.id, "method": msg.method}
        if msg.params is not None:
            out["params"] = msg.params
        return out
    if isinstance(msg, Notification):
        out = {"jsonrpc": _JSONRPC, "method": msg.method}
        if msg.params is not None:
            out["params"] = msg.params
        return out
    if isinstance(msg, Response):
        return {"jsonrpc": _JSONRPC, "id": msg.id, "result": msg.result}
    error: dict[str, Any] = {"code": msg.error.code, "message": msg.error.message}
    if msg.error.data is not None:
        error["data"] = msg.error.data
    # JSON-RPC 2.0 section 5: id is null when it could not be determined.
    return {"jsonrpc": _JSONRPC, "id": msg.id, "error": error}


def encode_message(msg: Message) -> bytes:
    """Serialize an envelope to compact UTF-8 JSON with no trailing newline."""
    return _dumps(message_to_json(msg))


def encode_for_wire(msg: Message) -> bytes | None:
    """Serialize ``msg`` for a transport, never raising.

    A response whose result is not JSON (a NaN, an object JSON cannot hold)
    becomes a -32603 error response for the same id, so the request is still
    answered exactly once. Any other unserializable message is dropped and
    ``None`` returned (the caller logs it).
    """
    try:
        return encode_message(msg)
    except (TypeError, ValueError, RecursionError):
        if isinstance(msg, Response | ErrorResponse):
            return encode_message(
                ErrorResponse(
                    msg.id,
                    ErrorData(
                        INTERNAL_ERROR, "Internal error: the result could not be encoded as JSON"
                    ),
                )
            )
        return None
