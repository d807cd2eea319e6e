"""The per-request half of the Streamable HTTP server: POST, GET and DELETE.

Each function serves one HTTP request for a :class:`StreamableHttpApp` (seen
through the :class:`HttpEndpoint` protocol, so this module does not import it), after
its Host, Origin and token checks passed. See :mod:`._http_server`; a
2026-07-28 POST goes on to :mod:`._http_modern`.

Cancellation (of any of them, e.g. when the server stops): the HTTP response
is abandoned; the session, its peer and the work in progress go on (only the
session's end stops them), and every event stays stored for a resume.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Final

import trio

from ..peer import Undecodable, decode_message
from ..peer._dialects import is_modern_shaped
from ..peer._messages import (
    ALL_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS,
    Request,
)
from ._http_endpoint import HttpEndpoint, respond_json, wait_ended, write_sse
from ._http_modern import caller_of, modern_post
from ._http_policy import (
    Receive,
    Scope,
    Send,
    fail,
    header,
    header_values,
    respond,
    until_disconnect,
    wants,
)
from ._http_session import HttpSession
from ._sse import encode_event, encode_retry

log = logging.getLogger("trio_mcp.transports")
audit = logging.getLogger("trio_mcp.audit")

#: Methods answered with ``application/json``: they never wait on anything.
IMMEDIATE_METHODS: Final = frozenset(
    {"initialize", "ping", "tasks/get", "tasks/list", "tasks/cancel"}
)
SESSION_HEADER: Final = "mcp-session-id"


def _valid_session_id(value: str) -> bool:
    # Visible ASCII only (0x21-0x7E): printable ASCII but the space.
    return 0 < len(value) <= 256 and value.isascii() and value.isprintable() and (
        " " not in value)


def find_session(http: HttpEndpoint, scope: Scope, identity: str | None) -> HttpSession | int:
    """The request's session, or the HTTP status to refuse it with."""
    values = header_values(scope, SESSION_HEADER)
    if not values:
        return 400
    if len(values) > 1 or not _valid_session_id(values[0]):
        return 400
    session = http.sessions.get(values[0])
    if session is None or session.closed or session.identity != identity:
        return 404
    return session


async def refuse_session(send: Send, status: int, request_id: str | int | None = None) -> None:
    """Answer 400 (no or malformed session id) or 404 (unknown or ended session)."""
    if status == 400:
        await fail(send, 400, "Bad Request: a valid Mcp-Session-Id header is required",
                   request_id=request_id)
    else:
        await fail(send, 404, "Not Found: unknown or ended session", request_id=request_id)


async def read_body(http: HttpEndpoint, receive: Receive, send: Send) -> bytes | None:
    """The whole POST body, or None when the client left or it is too large (413 sent)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if not body and not message.get("more_body", False):  # the usual: in one piece
            data: bytes = message.get("body", b"")
            if len(data) <= http.max_body:
                return data
        body += message.get("body", b"")
        if len(body) > http.max_body:
            await fail(send, 413, f"Payload too large: at most {http.max_body} bytes")
            return None
        if not message.get("more_body", False):
            return bytes(body)


async def post(
    http: HttpEndpoint, scope: Scope, receive: Receive, send: Send, identity: str | None,
    version: str | None,
) -> None:
    """Take one JSON-RPC message: 202 for a notification or response, an answer for a request.

    A modern request (MCP 2026-07-28: a modern ``MCP-Protocol-Version``, or
    none and modern ``_meta`` without ``Mcp-Session-Id``) is served on its
    own (:func:`modern_post`); everything else as 2025-11-25 says.
    """
    # A version neither era has: 400, unless the body is a modern request
    # (then the answer is the JSON-RPC -32022 naming the supported versions).
    unknown = version is not None and version not in ALL_PROTOCOL_VERSIONS
    acceptable = wants(scope, "application/json") and wants(scope, "text/event-stream")
    content_type = (header(scope, "content-type") or "").split(";")[0].strip().lower()
    if unknown and not (acceptable and content_type == "application/json"):
        await _refuse_version(send, version)
        return
    if not acceptable:
        await fail(send, 406, "Not Acceptable: Accept must list both application/json "
                   "and text/event-stream")
        return
    if content_type != "application/json":
        await fail(send, 415, "Unsupported Media Type: Content-Type must be "
                   "application/json")
        return
    body = await read_body(http, receive, send)
    if body is None:
        return
    # A 2026-07-28 POST (its MCP-Protocol-Version says so) is read with who sent it;
    # one only its body calls modern is refused for that header before it is served.
    caller = caller_of(identity, scope) if version in MODERN_PROTOCOL_VERSIONS else None
    item = decode_message(body, caller=caller)
    modern = caller is not None or (
        isinstance(item, Request) and is_modern_shaped(item) and (
            unknown or (version is None and not header_values(scope, SESSION_HEADER))
        )
    )
    if unknown and not modern:
        await _refuse_version(send, version)
        return
    if isinstance(item, Undecodable):
        await fail(send, 400, item.reason, code=item.code, request_id=item.id)
        return
    if isinstance(item, Request) and await http.refuse_unscoped(scope, send, item):
        return
    if modern:
        await modern_post(http, scope, receive, send, identity, item, version)
        return
    if http.stateless:
        if not isinstance(item, Request):
            await respond(send, 202)
            return
        session = await http.start_session(
            identity, scope, pre_initialize=item.method != "initialize",
            protocol_version=version,
        )
        try:
            await answer(http, session, item, receive, send)
        finally:
            await http.end_session(session)
        return
    if isinstance(item, Request) and item.method == "initialize" and not header_values(
        scope, SESSION_HEADER
    ):
        await initialize(http, item, identity, scope, send)
        return
    found = find_session(http, scope, identity)
    if isinstance(found, int):
        await refuse_session(send, found, item.id if isinstance(item, Request) else None)
        return
    session = found
    session.busy += 1
    try:
        session.last_active = trio.current_time()
        if not isinstance(item, Request):
            await session.receive(item)
            await respond(send, 202)
        elif session.request_in_flight(item.id):
            await fail(send, 409, "Conflict: a request with this id is in progress",
                       request_id=item.id)
        else:
            await answer(http, session, item, receive, send)
    finally:
        session.busy -= 1
        session.last_active = trio.current_time()


async def initialize(
    http: HttpEndpoint, item: Request, identity: str | None, scope: Scope, send: Send
) -> None:
    """Answer a POSTed ``initialize`` without a session: create one (JSON answer)."""
    if len(http.sessions) >= http.max_sessions:
        await fail(send, 503, "Service unavailable: too many sessions", request_id=item.id)
        return
    session = await http.start_session(identity, scope)
    stream = session.open_stream(item.id, json=True)
    await session.receive(item)
    with trio.CancelScope(shield=True):
        await wait_ended(stream)
    ok = stream.answer is not None and stream.error_code is None  # a result, not an error
    assert session.session_id is not None
    if not ok:
        await http.end_session(session)
    audit.info("http session %s remote=%s identity=%s",
               session.session_id if ok else "refused", scope.get("client"), identity)
    extra = [(b"mcp-session-id", session.session_id.encode("ascii"))] if ok else []
    await respond_json(send, 200, stream.answer or b"", extra)


async def answer(
    http: HttpEndpoint, session: HttpSession, item: Request, receive: Receive, send: Send
) -> None:
    """Hand a POSTed request to its session's peer and answer with JSON or an SSE stream."""
    as_json = http.json_response or item.method in IMMEDIATE_METHODS
    stream = session.open_stream(item.id, json=as_json)
    extra = [] if session.session_id is None else [
        (b"mcp-session-id", session.session_id.encode("ascii"))
    ]
    if as_json:
        await session.receive(item)
        # Answered already (an immediate handler, routed from its own task):
        # no disconnect watcher, no wait.
        if not stream.ended and not await until_disconnect(
            receive, partial(wait_ended, stream)
        ):
            return
        if stream.answer is None:
            await respond(send, 204, b"", extra)  # cancelled: never answered
        else:
            await respond_json(send, 200, stream.answer, extra)
        return
    primer = await session.prime(stream)
    await session.receive(item)
    await write_sse(http, session, stream, receive, send, encode_event(
        b"", event_id=primer, retry=http.retry_ms), primer, extra)


async def _refuse_version(send: Send, version: str | None) -> None:
    await fail(send, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")


async def get(
    http: HttpEndpoint, scope: Scope, receive: Receive, send: Send, identity: str | None
) -> None:
    """Open the standalone stream, or resume any stream with ``Last-Event-ID``."""
    if not wants(scope, "text/event-stream"):
        await fail(send, 406, "Not Acceptable: Accept must list text/event-stream")
        return
    if http.stateless:
        await _refuse_stateless(send)
        return
    found = find_session(http, scope, identity)
    if isinstance(found, int):
        await refuse_session(send, found)
        return
    session = found
    last = header(scope, "last-event-id")
    stream = session.standalone
    after = stream.cursor
    if last is not None:
        replay = await session.store.replay_events_after(last)
        known = replay is not None and replay[0] in session.streams
        if replay is None or not known:
            await fail(send, 400, "Bad Request: unknown Last-Event-ID (the events "
                       "after it are gone)")
            return
        stream, after = session.streams[replay[0]], last
    if last is None:
        # A second plain GET is refused; a resume (Last-Event-ID) replaces
        # the old connection, which its client has given up on.
        if stream.attached is not None:
            await fail(send, 409, "Conflict: this session's stream is already open")
            return
        await session.prime(stream)
    session.busy += 1
    try:
        extra = [(b"mcp-session-id", session.session_id.encode("ascii"))] if (
            session.session_id) else []
        await write_sse(http, session, stream, receive, send, encode_retry(http.retry_ms),
                        after, extra)
    finally:
        session.busy -= 1
        session.last_active = trio.current_time()


async def _refuse_stateless(send: Send) -> None:
    """GET and DELETE on a stateless server: 405, only POST is allowed."""
    await fail(send, 405, "Method not allowed: this server is stateless",
               headers=[(b"allow", b"POST")])


async def delete(http: HttpEndpoint, scope: Scope, send: Send, identity: str | None) -> None:
    """End the request's session (200); later requests for it get 404."""
    if http.stateless:
        await _refuse_stateless(send)
        return
    found = find_session(http, scope, identity)
    if isinstance(found, int):
        await refuse_session(send, found)
        return
    audit.info("http session %s deleted", found.session_id)
    await http.end_session(found)
    await respond(send, 200)

