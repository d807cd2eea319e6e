"""What the Streamable HTTP request handlers share: the endpoint they serve, SSE writing.

:class:`HttpEndpoint` is what :mod:`._http_handlers` (2025-11-25 sessions)
and :mod:`._http_modern` (2026-07-28 POSTs) need of a
:class:`StreamableHttpApp` (so neither imports it); :func:`write_sse` writes
one SSE connection of a session's stream for both.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol

import trio

from ..peer import App, RequestServer
from ..peer._messages import Request
from ._http_policy import OncePerClient, Receive, Scope, Send, until_disconnect
from ._http_session import HttpSession
from ._http_stream import SseStream
from ._sse import encode_comment, encode_event, encode_retry

log = logging.getLogger("trio_mcp.transports")

JSON_HEADERS: Final = [(b"content-type", b"application/json")]
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class HttpEndpoint(Protocol):
    """What the request handlers need of the app they serve (:class:`StreamableHttpApp`)."""

    app: App
    sessions: dict[str, HttpSession]
    stateless: bool
    json_response: bool
    retry_ms: int
    sse_close_after: float | None
    max_body: int
    max_sessions: int
    requests: RequestServer  # 2026-07-28 POSTs, each served in its own task
    keepalive: float | None
    unnamed: OncePerClient  # tasks/* without Mcp-Name, logged once per client
    refuse_unscoped: Callable[[Scope, Send, Request], Awaitable[bool]]  # 403: see _http_auth

    async def start_session(
        self, identity: str | None, scope: Scope, *, pre_initialize: bool = False,
        protocol_version: str | None = None,
    ) -> HttpSession:
        """Create and start a session (not yet in ``sessions`` when stateless)."""
        ...

    async def end_session(self, session: HttpSession) -> None:
        """End ``session`` and forget it."""
        ...


async def respond_json(
    send: Send, status: int, body: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """Send a whole JSON response, with its ``Content-Length`` (no chunked framing)."""
    headers = [*JSON_HEADERS, (b"content-length", b"%d" % len(body)), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def wait_ended(stream: SseStream) -> None:
    """Return once ``stream`` has ended (its answer is stored).

    Cancellation: nothing changes.
    """
    while not stream.ended:
        await stream.changed.wait()


async def write_sse(
    http: HttpEndpoint, session: HttpSession, stream: SseStream, receive: Receive, send: Send,
    first: bytes, after: str | None, extra: list[tuple[bytes, bytes]], *, ids: bool = True,
) -> bool:
    """Write one SSE connection of ``stream``, from ``first`` then the events after ``after``.

    A stream that has ended already (an immediate answer, or a resume of a
    finished stream) is written as one body with its ``Content-Length``: the
    same events, one write fewer than chunked framing.

    Returns:
        True when it was written to its end (not cut by the client or a resume).
    """
    headers = [*SSE_HEADERS, *extra]
    complete = stream.ended
    chunks: list[bytes] = []

    async def body(data: bytes) -> None:
        if complete:
            chunks.append(data)
        else:
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def write() -> bool:
        await write_events(
            session, stream, body, after,
            close_after=None if session.stateless else http.sse_close_after, ids=ids,
            first=first,
        )
        return True

    if not complete:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
    previous, stream.attached = stream.attached, trio.CancelScope()
    if previous is not None:
        previous.cancel()  # the client resumed: the old connection is dead to it
    attached = stream.attached
    completed = False
    try:
        with attached:
            # Every event stored already: no disconnect watcher.
            completed = await (write() if complete else until_disconnect(receive, write))
        if completed and complete:
            data = b"".join(chunks)
            headers.append((b"content-length", b"%d" % len(data)))
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": data})
        elif completed:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        if stream.attached is attached:
            stream.attached = None
    return completed


async def write_events(
    session: HttpSession,
    stream: SseStream,
    send: Callable[[bytes], Awaitable[None]],
    after: str | None,
    *,
    close_after: float | None = None,
    ids: bool = True,
    first: bytes = b"",
) -> None:
    """Write ``session``'s ``stream``: its events after event id ``after`` to one connection.

    Returns when the stream has ended and everything is written, when
    ``close_after`` seconds have passed (the stream goes on: the client
    reconnects after ``retry``), or when the events after ``after`` are
    no longer kept (the client cannot resume). ``ids=False`` writes
    events without their ids (a stream that cannot be resumed).
    ``first`` goes before them. The events ready at once go out in one
    write (the priming event and an immediate answer: one chunk).

    Cancellation: stops writing; the stream and its events stay, for a
        resume.
    """
    cursor = after
    deadline = trio.current_time() + close_after if close_after is not None else None
    out = [first] if first else []
    while True:
        changed = stream.changed
        if cursor is None:
            events: list[tuple[str, bytes]] = []
        else:
            found = await session.store.replay_events_after(cursor)
            if found is None:
                if session.closed:
                    return  # the session ended and its events with it
                log.warning("session %s: events of stream %s are gone", session.session_id,
                            stream.stream_id)
                return
            events = found[1]
        for event_id, data in events:
            # Empty data: a priming event, written too so that the client
            # learns its id (it dispatches no message for it).
            if ids or data:
                out.append(encode_event(data, event_id=event_id if ids else None))
            cursor = event_id
        if out:
            await send(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
        if stream is session.standalone:
            stream.cursor = cursor
        if stream.ended and not changed.is_set():
            return
        if stream.poll and not changed.is_set():
            stream.poll = False
            await send(encode_retry(session.retry_ms))
            return
        if changed.is_set():
            continue
        limit = session.keepalive if session.keepalive is not None else float("inf")
        if deadline is not None:
            limit = min(limit, deadline - trio.current_time())
        with trio.move_on_after(max(limit, 0)):
            await changed.wait()
            continue
        if deadline is not None and trio.current_time() >= deadline:
            # Close the connection, not the stream: the client polls.
            await send(encode_retry(session.retry_ms))
            return
        await send(encode_comment("keep-alive"))
