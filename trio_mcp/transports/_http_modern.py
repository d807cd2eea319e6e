"""MCP 2026-07-28 over Streamable HTTP: one POST, one request, answered in its own task.

A modern POST (see :func:`._http_handlers.post` for how one is told apart)
has its headers checked against its body (400, -32020), then the App's
:class:`~trio_mcp.peer.RequestServer` serves it in the POST's own Trio task:
no session, bus or event store, and no session id. Who sent it (its identity
and the transport's facts) goes with the request (a ``Caller``).

The answer is held until the handler's first message: the response alone
goes out as ``application/json`` with the status its error code calls for; a
notification first starts an SSE stream (200) that ends with the response.
``subscriptions/listen`` goes the same way (a refused one is a JSON error
with its status; an accepted one starts with its acknowledgement) and stays
open (keep-alive comments) until the client closes it. The client leaving
cancels the handler.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final, final

import trio

from .._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..peer import Answered, App, Caller, Message, encode_for_wire
from ..peer._dialects import unsupported_version
from ..peer._messages import (
    ALL_PROTOCOL_VERSIONS,
    META_CLIENT_INFO,
    MODERN_PROTOCOL_VERSIONS,
    ErrorResponse,
    Request,
)
from ._http_auth import IDENTITY_KEY, request_facts
from ._http_endpoint import SSE_HEADERS, HttpEndpoint, respond_json
from ._http_policy import (
    HeaderMismatch,
    Receive,
    Scope,
    Send,
    check_modern_headers,
    fail,
    respond,
    until_disconnect,
)
from ._sse import encode_comment, encode_event

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


#: The ``Caller`` of each recent sender, by (identity, path, client address): the POSTs
#: of one connection share one, as a 2025-11-25 session's requests share its ``bus.info``.
_CALLERS: dict[tuple[Any, ...], tuple[Any, Caller]] = {}
_CALLERS_KEPT: Final = 256


def caller_of(identity: str | None, scope: Scope) -> Caller:
    """Who sent a modern POST (its identity and :func:`request_facts`), made once per sender."""
    verified = scope.get(IDENTITY_KEY)
    client = scope.get("client")
    key = (identity, scope.get("path"), client if type(client) is not list else tuple(client))
    kept = _CALLERS.get(key)
    if kept is not None and kept[0] is verified:
        return kept[1]
    caller = Caller.of(identity, request_facts(scope))
    if len(_CALLERS) >= _CALLERS_KEPT:
        _CALLERS.clear()
    _CALLERS[key] = (verified, caller)
    return caller


async def modern_post(
    http: HttpEndpoint, scope: Scope, receive: Receive, send: Send, identity: str | None,
    item: Message, version: str | None,
) -> None:
    """Serve one MCP 2026-07-28 POST in this task (``version``: its ``MCP-Protocol-Version``).

    ``item`` was decoded with its ``Caller`` (:func:`caller_of`) when ``version``
    is a modern one, the only kind served. The headers are checked against
    the body first (400 with -32020, or -32022 for a version neither era
    has); ``Mcp-Session-Id`` and ``Last-Event-ID`` are ignored, and no
    session id is minted.

    Cancellation: the request's handler is cancelled.
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
    if version not in MODERN_PROTOCOL_VERSIONS:
        error = unsupported_version(version or "")
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
    assert item.caller is not None  # (read with it: the version is a modern one)
    await modern_answer(http, item, receive, send)


def modern_status(reply: Message) -> int:
    """The HTTP status of a modern request's JSON answer (2026-07-28 error codes)."""
    if isinstance(reply, ErrorResponse):
        return MODERN_ERROR_STATUS.get(reply.error.code, 200)
    return 200


async def modern_answer(http: HttpEndpoint, item: Request, receive: Receive, send: Send) -> None:
    """Answer a modern request: JSON with its status, or SSE once it sends a notification.

    Answered at once (the handler did not wait): no disconnect watcher, no
    Trio task. Else the handler's rest runs here under a disconnect watcher,
    with an SSE writer beside it (not in ``json_response`` mode, where its
    notifications are dropped).
    """
    listen = item.method == "subscriptions/listen"
    answer = _Answer(send, json=http.json_response and not listen, keepalive=http.keepalive)
    started = http.requests.serve(item, answer)
    after_send = None
    try:
        if type(started) is tuple:
            reply, after_send = started
        else:
            outcome: list[Answered] = []

            async def serve() -> None:
                async with trio.open_nursery() as nursery:
                    if not answer.json:
                        nursery.start_soon(answer.write_notes)
                    try:
                        outcome.append(await started)  # type: ignore[misc]
                    finally:
                        answer.close()

            answered = await until_disconnect(receive, serve)
            if outcome:  # (a task it created starts, even if the client left since)
                reply, after_send = outcome[0]
            if not answered:
                return  # the client left: the handler was cancelled, or its answer is lost
        await answer.finish(reply)
    finally:
        if after_send is not None:
            after_send()  # e.g. a task's work starts


@final
class _Answer:
    """One modern POST's HTTP response: the request's outlet for its notifications.

    Notifications are held (JSON until the first one; then an SSE stream
    whose events carry no ids: a modern request cannot be resumed).
    """

    __slots__ = ("_changed", "_closed", "_notes", "_send", "_started", "json", "keepalive")

    def __init__(self, send: Send, *, json: bool, keepalive: float | None) -> None:
        self._send = send
        self.json = json
        self.keepalive = keepalive
        self._notes: list[bytes] = []
        # Made by the writer when it waits (an answer sent at once never needs one).
        self._changed: trio.Event | None = None
        self._closed = False
        self._started = False  # the SSE response's head is sent

    def deliver(self, data: bytes) -> None:
        """A notification of the request (dropped for a JSON answer)."""
        if self.json or self._closed:
            return
        self._notes.append(encode_event(data))
        if self._changed is not None:
            self._changed.set()

    def close(self) -> None:
        """The handler is done: the writer writes what is held and stops."""
        self._closed = True
        if self._changed is not None:
            self._changed.set()

    async def write_notes(self) -> None:
        """Write the notifications as they come, from the first one on (SSE)."""
        while True:
            if self._notes:
                if not self._started:
                    self._started = True
                    await self._send({"type": "http.response.start", "status": 200,
                                      "headers": SSE_HEADERS})
                data, self._notes = b"".join(self._notes), []
                await self._send({"type": "http.response.body", "body": data,
                                  "more_body": True})
                continue
            if self._closed:
                return
            changed = self._changed = trio.Event()
            if not self._started or self.keepalive is None:
                await changed.wait()
                continue
            with trio.move_on_after(self.keepalive):
                await changed.wait()
                continue
            await self._send({"type": "http.response.body", "body": encode_comment("keep-alive"),
                              "more_body": True})

    async def finish(self, reply: Message) -> None:
        """Send the response: JSON with its status, or the stream's last event."""
        data = encode_for_wire(reply)
        if data is None:  # a result that is not JSON: the handler's bug
            log.error("a 2026-07-28 answer that cannot be encoded as JSON: %.200r", reply)
            await fail(self._send, 500, "Internal error: the answer is not JSON",
                       code=INTERNAL_ERROR, request_id=getattr(reply, "id", None))
            return
        if self._started:
            await self._send({"type": "http.response.body", "body": encode_event(data),
                              "more_body": False})
        elif self._notes:  # the notifications and the answer, complete: one body
            body = b"".join(self._notes) + encode_event(data)
            headers = [*SSE_HEADERS, (b"content-length", b"%d" % len(body))]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
        else:
            await respond_json(self._send, modern_status(reply), data)
