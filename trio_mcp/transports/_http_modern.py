"""MCP 2026-07-28 over Streamable HTTP: one POST, one request, answered on its own.

A modern POST (see :func:`._http_handlers.post` for how one is told apart)
has its headers checked against its body (400, -32020), then a session and a
peer in the modern dialect answer it: JSON with the status of its error code,
or SSE once the handler sends a notification first. No session id is minted.

Starting a session (a bus, an event store, a ``Peer`` in the modern dialect,
their Trio tasks) and ending it cost more than the request itself, so a
session that answered its POST in full is kept (:class:`~._http_reuse.KeptSessions`) and
serves the next POST of the **same identity**: the tasks of a modern peer
belong to its identity (or to nobody, without one), and nothing else in it
outlives a request. One POST at a time per session: concurrent POSTs take
different sessions. A POST that did not end in full (the client left, the
handler was cancelled or left unanswered, ``subscriptions/listen``) ends its
session, as every modern POST did before. Before a kept session serves again,
its last POST's stream and events are dropped, and ``bus.info`` has the new
request's remote address and verified identity (its token's scopes).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final

from .._errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..peer import App, Message
from ..peer._dialects import unsupported_version
from ..peer._messages import (
    ALL_PROTOCOL_VERSIONS,
    META_CLIENT_INFO,
    MODERN_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    Request,
)
from ._http_endpoint import HttpEndpoint, respond_json, wait_ended, write_sse
from ._http_policy import (
    HeaderMismatch,
    Receive,
    Scope,
    Send,
    check_modern_headers,
    fail,
    header,
    respond,
    until_disconnect,
)
from ._http_session import HttpSession
from ._http_stream import SseStream

log = logging.getLogger("trio_mcp.transports")

#: The HTTP status of a modern (2026-07-28) error answer, by JSON-RPC code; else 200.
MODERN_ERROR_STATUS: Final = {
    INVALID_PARAMS: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    HEADER_MISMATCH: 400,
    METHOD_NOT_FOUND: 404,
}
def _input_schema(app: App, name: str) -> dict[str, Any] | None:
    spec = app.tools.get(name)
    return None if spec is None else spec.tool.input_schema


def _client_of(identity: str | None, params: dict[str, Any]) -> tuple[Any, ...]:
    """Who sent a request, as far as it says: its identity and its ``clientInfo``."""
    meta = params.get("_meta")
    info = meta.get(META_CLIENT_INFO) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return (identity, None, None)
    name, version = info.get("name"), info.get("version")
    return (
        identity, name[:100] if isinstance(name, str) else None,
        version[:100] if isinstance(version, str) else None,
    )


def modern_status(stream: SseStream) -> int:
    """The HTTP status of a modern request's JSON answer (2026-07-28 error codes)."""
    code = stream.error_code
    return 200 if code is None else MODERN_ERROR_STATUS.get(code, 200)


async def modern_post(
    http: HttpEndpoint, scope: Scope, receive: Receive, send: Send, identity: str | None,
    item: Message,
) -> None:
    """Serve one MCP 2026-07-28 POST on a session and peer of its own, ended with it.

    The headers are checked against the body first (400 with -32020, or
    -32022 for a version neither era has); ``Mcp-Session-Id`` and
    ``Last-Event-ID`` are ignored, and no session id is minted.

    Cancellation: the request's handler is cancelled (the session ends).
    """
    if not isinstance(item, Request):
        # This revision defines no client notification over HTTP; a
        # response has no request to go to. Accepted and dropped.
        await respond(send, 202)
        return
    params = item.params if isinstance(item.params, dict) else {}
    try:
        unnamed = check_modern_headers(
            scope, item.method, params, partial(_input_schema, http.app))
    except HeaderMismatch as exc:
        log.info("http modern request %r refused: %s", item.id, exc)
        await fail(send, 400, str(exc), code=HEADER_MISMATCH, request_id=item.id)
        return
    if unnamed:
        client = _client_of(identity, params)
        if http.unnamed.first(client):
            log.debug(
                "http modern %s without the Mcp-Name header accepted (the body's taskId "
                "decides; SEP-2663 asks clients to send it): client %r, logged once per client",
                item.method, client,
            )
    version = header(scope, "mcp-protocol-version") or ""
    if version not in MODERN_PROTOCOL_VERSIONS:
        error = unsupported_version(version)
        await fail(send, 400, error.message, code=error.code, request_id=item.id,
                   data=error.data)
        return
    if item.method == "initialize":
        # Not in this revision: on HTTP an unknown method is 404 and -32601
        # (the peer's -32022 is for a connection that chose its era). The
        # versions are named for the sake of a legacy client's diagnostics.
        await fail(send, 404, "Method not found: initialize (MCP 2026-07-28 has none; a "
                   "2025-11-25 session starts with an initialize that carries no 2026-07-28 "
                   "MCP-Protocol-Version)", code=METHOD_NOT_FOUND, request_id=item.id,
                   data={"supported": list(ALL_PROTOCOL_VERSIONS)})
        return
    # A session kept from an earlier POST of this identity, else a new one.
    session = http.kept.take(identity, scope) or await http.start_session(
        identity, scope, era=MODERN_PROTOCOL_VERSION)
    clean = False
    try:
        clean = await modern_answer(http, session, item, receive, send)
    finally:
        ended = http.kept.keep(session) if clean else session
        if ended is not None:
            await http.end_session(ended)


async def modern_answer(
    http: HttpEndpoint, session: HttpSession, item: Request, receive: Receive, send: Send
) -> bool:
    """Answer a modern request: JSON with its status, or SSE once it sends a notification.

    The answer is held until the handler's first message: the response
    alone goes out as ``application/json`` with the status its error code
    calls for; a notification first starts an SSE stream (200) that ends
    with the response. ``subscriptions/listen`` goes the same way (a
    refused one is a JSON error with its status; an accepted one starts with
    its acknowledgement) and stays open (keep-alive comments) until the
    client closes it.

    Returns:
        True when the request was answered in full (its session may serve again).
    """
    listen = item.method == "subscriptions/listen"
    if http.json_response and not listen:
        json_stream = session.open_stream(item.id, json=True)
        await session.receive(item)
        if not json_stream.ended and not await until_disconnect(
            receive, partial(wait_ended, json_stream)
        ):
            return False
        if json_stream.answer is None:
            await _unanswered(send, item)
            return False
        await respond_json(send, modern_status(json_stream), json_stream.answer)
        return True
    stream = session.open_stream(item.id, json=False)
    cursor = await session.prime(stream)  # where the answer starts; never written
    await session.receive(item)
    first: list[bytes] = []

    async def wait_first() -> bool:
        while True:
            changed = stream.changed
            found = await session.store.replay_events_after(cursor)
            if found is not None:
                first.extend(data for _, data in found[1] if data)
            if found is None or first or stream.ended:
                return True
            await changed.wait()

    # Answered already (an immediate handler): no disconnect watcher.
    if not await (wait_first() if stream.ended else until_disconnect(receive, wait_first)):
        return False
    if not first:
        await _unanswered(send, item)
        return False
    if first[0] == stream.answer:  # the response came first: no notification
        await respond_json(send, modern_status(stream), first[0])
        return not listen
    done = await write_sse(http, session, stream, receive, send, b"", cursor, [], ids=False)
    return done and not listen


async def _unanswered(send: Send, item: Request) -> None:
    await fail(send, 503, "Service unavailable: the request ended unanswered",
               request_id=item.id)
