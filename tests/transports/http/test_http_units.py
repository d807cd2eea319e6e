"""Streamable HTTP pieces without sockets: the SSE codec, the event store, routing, expiry.

The ASGI app is driven in process (no server, no socket), so the
``autojump_clock`` can stand in for half an hour of idleness.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp.peer._messages import Notification, Request
from trio_mcp.transports._http_session import STANDALONE, HttpSession
from trio_mcp.transports._sse import SSEParser, encode_comment, encode_event, encode_retry

from tests.helpers import example_app

# --- SSE ------------------------------------------------------------------------------------------


def test_sse_round_trip_in_any_chunking() -> None:
    wire = (encode_event(b"", event_id="1-1", retry=250) + encode_comment("keep-alive")
            + encode_event(b'{"a":1}', event_id="1-2") + encode_event("two\nlines"))
    for size in (1, 2, 3, 7, len(wire)):
        parser = SSEParser()
        events = []
        for i in range(0, len(wire), size):
            events += parser.feed(wire[i:i + size])
        assert [(e.data, e.id, e.retry) for e in events] == [
            ("", "1-1", 250), ('{"a":1}', "1-2", None), ("two\nlines", "1-2", None)]
        assert parser.retry == 250 and parser.last_event_id == "1-2"


def test_sse_parser_whatwg_corners() -> None:
    parser = SSEParser()
    # CRLF and lone CR line ends (a CR at the end of a chunk), a BOM, no space after
    # the colon, an event with no data (not dispatched, its id still counts),
    # a retry that is not a number (ignored), an id holding NUL (ignored).
    events = parser.feed(b"\xef\xbb\xbfdata:x\r")
    events += parser.feed(b"\nid: 7\r\r")
    events += parser.feed(b"id: 8\n\nretry: soon\nid: a\0b\ndata: y\n\nevent: other\ndata: z\n\n")
    assert [(e.data, e.id, e.event) for e in events] == [
        ("x", "7", "message"), ("y", "8", "message"), ("z", "8", "other")]
    assert parser.retry is None and encode_retry(5) == b"retry: 5\n\n"
    with pytest.raises(ValueError):
        encode_event(b"x", event_id="bad\nid")


# --- the event store -------------------------------------------------------------------------------


async def test_memory_event_store_replays_one_stream_after_an_id() -> None:
    store = trio_mcp.MemoryEventStore()
    a1 = await store.store_event("1", b"a1")
    b1 = await store.store_event("2", b"b1")
    a2 = await store.store_event("1", b"a2")
    assert await store.replay_events_after(a1) == ("1", [(a2, b"a2")])
    assert await store.replay_events_after(b1) == ("2", [])
    assert await store.replay_events_after("1-999") is None
    assert await store.replay_events_after("nonsense") is None
    await store.forget()
    assert await store.replay_events_after(a1) is None


async def test_memory_event_store_is_bounded() -> None:
    store = trio_mcp.MemoryEventStore(max_events_per_stream=2, max_streams=2)
    first = await store.store_event("1", b"x")
    await store.store_event("1", b"y")
    await store.store_event("1", b"z")
    assert await store.replay_events_after(first) is None  # fell out of the window
    kept = await store.store_event("2", b"q")
    await store.store_event("3", b"r")  # a third stream evicts the oldest one
    assert await store.replay_events_after(kept) == ("2", [])
    assert await store.replay_events_after("1-3") is None


# --- routing ---------------------------------------------------------------------------------------


async def test_session_routes_related_messages_to_their_requests_stream() -> None:
    session = HttpSession("s", None, trio_mcp.MemoryEventStore(), {})
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run, example_app())
        post = session.open_stream(7, json=False)
        primer = await session.prime(post)
        await session._deliver(Request("r1", "sampling/createMessage", {}, related_request_id=7))
        await session._deliver(Notification("notifications/message", {}, related_request_id=7))
        await session._deliver(Notification("notifications/message", {"unrelated": True}))
        await session._deliver(Notification("notifications/message", {}, related_request_id=99))
        on_post = await session.store.replay_events_after(primer)
        assert on_post is not None and on_post[0] == post.stream_id
        assert [json.loads(d).get("id") for _, d in on_post[1]] == ["r1", None]
        assert session.standalone.cursor is not None
        standalone = await session.store.replay_events_after(session.standalone.cursor)
        assert standalone is not None and standalone[0] == STANDALONE
        assert len(standalone[1]) == 2
        # After the response the stream ends; related messages then go standalone.
        await session._deliver(trio_mcp.Response(7, {}))
        assert post.ended
        await session._deliver(Notification("notifications/message", {}, related_request_id=7))
        # A late second answer (its stream ended) never reaches the GET stream.
        await session._deliver(trio_mcp.Response(7, {"late": True}))
        await session._deliver(trio_mcp.Response(8, {"unknown": True}))
        standalone = await session.store.replay_events_after(session.standalone.cursor)
        assert standalone is not None and len(standalone[1]) == 3
        assert all("result" not in json.loads(d) for _, d in standalone[1])
        await session.close()


# --- expiry, in process ----------------------------------------------------------------------------


async def asgi(app: Any, method: str, body: Any = None, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """One request through the ASGI app, no socket; returns (status, headers, body)."""
    data = b"" if body is None else json.dumps(body).encode()
    scope = {
        "type": "http", "method": method, "path": "/mcp", "scheme": "http",
        "headers": [(b"host", b"127.0.0.1:1"), (b"accept", b"application/json, text/event-stream"),
                    (b"content-type", b"application/json"),
                    *[(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]],
    }
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": data, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    out_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], out_headers, b"".join(m.get("body", b"") for m in sent[1:])


async def test_http_idle_session_expires(autojump_clock: trio.testing.MockClock) -> None:
    http_app = trio_mcp.StreamableHttpApp(example_app(), session_idle_timeout=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(http_app.run)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}
        _, headers, _ = await asgi(http_app, "POST", init)
        session_id = headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        await trio.sleep(50)
        assert (await asgi(http_app, "POST", ping, mcp_session_id=session_id))[0] == 200
        await trio.sleep(50)  # 50 s since the last request: still alive
        assert (await asgi(http_app, "POST", ping, mcp_session_id=session_id))[0] == 200
        await trio.sleep(90)
        assert (await asgi(http_app, "POST", ping, mcp_session_id=session_id))[0] == 404
        assert http_app.sessions == {}
        nursery.cancel_scope.cancel()
