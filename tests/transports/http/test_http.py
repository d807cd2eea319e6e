"""The Streamable HTTP server, over real sockets on 127.0.0.1 (hypercorn + httpx).

Raw tests speak HTTP with httpx and pin status codes, headers and SSE events;
the client's own behaviours are in ``test_http_client.py``.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio

import trio_mcp
from trio_mcp.transports._sse import SSEParser

from tests.helpers import client_app, example_app
from tests.http_support import (
    INITIALIZE,
    TOKENS,
    Raw,
    call,
    events_of,
    http_client,
    messages_of,
    raw_session,
    serving,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("both_http_servers")]
#: Leaving an httpx response stream early (to drop a connection on purpose)
#: leaves httpx's nested async generators to the garbage collector.
drops_a_stream = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning"
)


# --- POST answers ------------------------------------------------------------------------------


async def test_http_initialize_answers_json_with_a_visible_ascii_session_id() -> None:
    async with serving() as (url, _), http_client() as client:
        raw = Raw(client, url)
        response = await raw.post(INITIALIZE)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        session_id = response.headers["mcp-session-id"]
        assert len(session_id) >= 32 and all(0x21 <= ord(c) <= 0x7E for c in session_id)
        assert response.json()["result"]["protocolVersion"] == "2025-11-25"
        # Each initialize makes a new session.
        again = await raw.post(INITIALIZE)
        assert again.headers["mcp-session-id"] != session_id


async def test_http_request_gets_a_primed_sse_stream_ending_with_the_response() -> None:
    async with raw_session() as (raw, _):
        response = await raw.post(call(1, "sleep", {"seconds": 0.01, "steps": 2},
                                       _meta={"progressToken": "p"}))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = events_of(response.content)
        first = events[0]
        assert first.data == "" and first.id and first.retry == 1000
        messages = [json.loads(e.data) for e in events[1:]]
        assert [m.get("method") for m in messages] == [
            "notifications/progress", "notifications/progress", None]
        assert messages[-1]["id"] == 1 and "result" in messages[-1]
        ids = [e.id for e in events]
        assert len(set(ids)) == len(ids)
        assert all(i.split("-")[0] == ids[0].split("-")[0] for i in ids)  # one stream


async def test_http_notification_and_response_get_202_without_body() -> None:
    async with raw_session() as (raw, _):
        response = await raw.post({"jsonrpc": "2.0", "method": "notifications/whatever"})
        assert response.status_code == 202 and response.content == b""
        response = await raw.post({"jsonrpc": "2.0", "id": 99, "result": {}})
        assert response.status_code == 202 and response.content == b""


@pytest.mark.parametrize("method", ["tasks/get", "tasks/list", "ping"])
async def test_http_immediate_methods_answer_json(method: str) -> None:
    async with raw_session() as (raw, _):
        params = {"taskId": "nope"} if method == "tasks/get" else {}
        response = await raw.post({"jsonrpc": "2.0", "id": 5, "method": method,
                                   "params": params})
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json()["id"] == 5


async def test_http_json_response_option_answers_every_request_with_json() -> None:
    async with raw_session(json_response=True) as (raw, _):
        response = await raw.post(call(2, "echo", {"text": "hi"}))
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["content"][0]["text"] == "hi"


async def _raw_exchange(stream: trio.SocketStream, request: bytes) -> bytes:
    """Send one HTTP/1.1 request on ``stream``; its whole response (by Content-Length or
    to the last chunk), or what arrived before the server closed the connection."""
    await stream.send_all(request)
    data = b""
    while not _complete(data):
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
    return data


def _complete(response: bytes) -> bool:
    head, blank, body = response.partition(b"\r\n\r\n")
    if not blank:
        return False
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return body.endswith(b"0\r\n\r\n")  # chunked: the last chunk


async def test_http_keeps_an_idle_connection_longer_than_httpx_reuses_one() -> None:
    """An idle keep-alive connection outlives the time clients keep one for reuse (httpx,
    and so the Python SDK: ``keepalive_expiry``, 5 s). Were it the same (hypercorn's
    default, 5 s), a request sent on a connection idle for about that long would cross
    the server's close and fail with "connection reset"; here, a request after one
    second more than httpx would wait is still answered on the same connection."""
    async with serving() as (url, _):
        netloc = httpx.URL(url).netloc.decode()
        host, port = httpx.URL(url).host, httpx.URL(url).port
        assert port is not None
        request = f"GET /.well-known/nothing HTTP/1.1\r\nHost: {netloc}\r\n\r\n".encode()
        async with await trio.open_tcp_stream(host, port) as stream:
            assert (await _raw_exchange(stream, request)).startswith(b"HTTP/1.1 404 ")
            idle = httpx.Limits().keepalive_expiry
            assert idle is not None
            await trio.sleep(idle + 1)
            again = await _raw_exchange(stream, request)
            assert again.startswith(b"HTTP/1.1 404 "), again


# --- refusals ----------------------------------------------------------------------------------


async def test_http_wrong_accept_is_406_and_wrong_content_type_is_415() -> None:
    async with raw_session() as (raw, _):
        response = await raw.post(call(3, "echo", {"text": "x"}), accept="application/json")
        assert response.status_code == 406
        assert response.json()["error"]["code"] == trio_mcp.INVALID_REQUEST
        response = await raw.post(call(3, "echo", {"text": "x"}), content_type="text/plain")
        assert response.status_code == 415
        response = await raw.client.get(raw.url, headers=raw.h(accept="application/json"))
        assert response.status_code == 406


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', trio_mcp.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', trio_mcp.PARSE_ERROR),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', trio_mcp.INVALID_REQUEST),
    ],
)
async def test_http_batch_or_malformed_body_is_400_with_a_jsonrpc_error(
    body: bytes, code: int
) -> None:
    async with raw_session() as (raw, _):
        response = await raw.post(body)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == code


async def test_http_session_id_missing_is_400_unknown_is_404_deleted_is_404() -> None:
    async with raw_session() as (raw, http_app):
        session_id = raw.session_id
        assert session_id in http_app.sessions
        raw.session_id = None
        response = await raw.post(call(4, "echo", {"text": "x"}))
        assert response.status_code == 400 and response.json()["id"] == 4
        raw.session_id = "no-such-session"
        assert (await raw.post(call(4, "echo", {"text": "x"}))).status_code == 404
        raw.session_id = session_id
        assert (await raw.client.delete(raw.url, headers=raw.h())).status_code == 200
        assert session_id not in http_app.sessions
        assert (await raw.post(call(5, "echo", {"text": "x"}))).status_code == 404
        response = await raw.client.get(raw.url, headers=raw.h(accept="text/event-stream"))
        assert response.status_code == 404


@pytest.mark.parametrize(("version", "status"), [
    ("2025-03-26", 200), ("2025-06-18", 200), ("2025-11-25", 200), ("2024-11-05", 400),
    ("garbage", 400),
])
async def test_http_protocol_version_header(version: str, status: int) -> None:
    async with raw_session() as (raw, _):
        response = await raw.post({"jsonrpc": "2.0", "id": 6, "method": "ping"},
                                  mcp_protocol_version=version)
        assert response.status_code == status


async def test_http_unknown_path_is_404_and_other_methods_405() -> None:
    async with serving() as (url, _), http_client() as client:
        assert (await client.post(url + "/other", content=b"{}")).status_code == 404
        response = await client.put(url, content=b"{}")
        assert response.status_code == 405 and "POST" in response.headers["allow"]


async def test_http_refuses_foreign_origin_and_host() -> None:
    async with raw_session() as (raw, _):
        ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
        response = await raw.post(ping, origin="http://evil.example")
        assert response.status_code == 403 and "Origin" in response.json()["error"]["message"]
        response = await raw.post(ping, host="evil.example")
        assert response.status_code == 403 and "Host" in response.json()["error"]["message"]
        assert (await raw.post(ping, origin="http://localhost:5173")).status_code == 200
        assert (await raw.post(ping, host="localhost:1234")).status_code == 200


async def test_http_allowed_origins_and_hosts_widen_the_defaults() -> None:
    policy = trio_mcp.HttpPolicy(allowed_origins=["https://app.example"],
                                 allowed_hosts=["mcp.example"])
    async with raw_session(policy=policy) as (raw, _):
        ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
        response = await raw.post(ping, origin="https://app.example", host="mcp.example")
        assert response.status_code == 200
        assert (await raw.post(ping, host="127.0.0.1")).status_code == 200
        assert (await raw.post(ping, host="other.example")).status_code == 403


async def test_http_bearer_tokens_identity_and_session_binding() -> None:
    metadata = {"resource": "http://127.0.0.1/mcp",
                "authorization_servers": ["https://auth.example"]}
    policy = trio_mcp.HttpPolicy(tokens=TOKENS, resource_metadata=metadata)
    async with serving(policy=policy) as (url, http_app), http_client() as client:
        raw = Raw(client, url)
        response = await raw.post(INITIALIZE)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        document_url = challenge.split('resource_metadata="')[1].rstrip('"')
        assert (await client.get(document_url)).json() == metadata
        raw.headers["Authorization"] = "Bearer wrong"
        assert (await raw.post(INITIALIZE)).status_code == 401
        raw.headers["Authorization"] = "Bearer token-alice"
        await raw.initialize()
        session = http_app.sessions[raw.session_id or ""]
        assert session.identity == "alice"
        assert session.peer is not None and session.peer.context == "identity:alice"
        # Bob cannot use Alice's session: it does not exist for him.
        raw.headers["Authorization"] = "Bearer token-bob"
        response = await raw.post({"jsonrpc": "2.0", "id": 8, "method": "ping"})
        assert response.status_code == 404


# --- GET streams, resumption -------------------------------------------------------------------


async def test_http_get_stream_is_one_per_session() -> None:
    async with raw_session() as (raw, _):
        headers = raw.h(accept="text/event-stream")
        async with raw.client.stream("GET", raw.url, headers=headers) as first:
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            second = await raw.client.get(raw.url, headers=headers)
            assert second.status_code == 409


@drops_a_stream
async def test_http_get_stream_gets_unrelated_server_messages_and_keepalives() -> None:
    async with raw_session(keepalive=0.05) as (raw, http_app):
        session = http_app.sessions[raw.session_id or ""]
        assert session.peer is not None
        # Sent before any GET: kept for the first one.
        await session.peer.notify("notifications/message", {"level": "info", "data": "early"})
        parser = SSEParser()
        seen: list[dict[str, Any]] = []
        keepalive = False
        async with raw.client.stream("GET", raw.url,
                                     headers=raw.h(accept="text/event-stream")) as response:
            async with aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    keepalive = keepalive or b": keep-alive" in chunk
                    seen += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
                    if seen and keepalive:
                        break
        assert seen[0]["params"]["data"] == "early"
        assert parser.retry == 1000 and parser.last_event_id


@drops_a_stream
async def test_http_dropped_stream_loses_no_work_and_resumes_without_duplicates() -> None:
    async with raw_session() as (raw, _):
        parser = SSEParser()
        first: list[dict[str, Any]] = []
        body = call(9, "sleep", {"seconds": 0.6, "steps": 3}, _meta={"progressToken": "t"})
        async with raw.client.stream("POST", raw.url, content=json.dumps(body),
                                     headers=raw.h()) as response:
            async with aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    first += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
                    if first:
                        break  # drop the connection after the first progress event
        assert [m["params"]["progress"] for m in first] == [1]
        # The work went on; resuming gets the rest, once each.
        rest: list[dict[str, Any]] = []
        while not rest or "result" not in rest[-1]:
            headers = raw.h(accept="text/event-stream", last_event_id=parser.last_event_id)
            async with raw.client.stream("GET", raw.url, headers=headers) as response:
                assert response.status_code == 200
                async for chunk in response.aiter_bytes():
                    rest += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
        progress = [m["params"]["progress"] for m in first + rest if "method" in m]
        assert progress == [1, 2, 3]
        assert rest[-1]["id"] == 9 and rest[-1]["result"]["content"][0]["text"].startswith("slept")
        # A resume replays only that stream: the session's other traffic stays out.
        assert all(m.get("id") in (None, 9) for m in rest)


async def test_http_unknown_last_event_id_is_400() -> None:
    async with raw_session() as (raw, _):
        headers = raw.h(accept="text/event-stream", last_event_id="77-12345")
        assert (await raw.client.get(raw.url, headers=headers)).status_code == 400


async def test_http_client_follows_server_closed_streams_with_retry() -> None:
    """The server closes each SSE connection quickly; the client polls with Last-Event-ID."""
    updates: list[trio_mcp.ProgressParams] = []
    async with serving(sse_close_after=0.05, retry_ms=10) as (url, _):
        async with trio_mcp.open_http_client(url, client_app()) as client:
            result = await client.call_tool("sleep", {"seconds": 0.5, "steps": 5},
                                            progress=updates.append)
    assert result.text == "slept 0.5 seconds"
    assert [u.progress for u in updates] == [1, 2, 3, 4, 5]


async def test_http_server_closes_a_stream_mid_call_and_the_client_resumes() -> None:
    app = example_app()
    box: list[trio_mcp.StreamableHttpApp] = []

    @app.tool()
    async def reconnect(ctx: trio_mcp.RequestContext) -> str:
        closed = box[0].close_sse_stream(ctx.peer.bus.info["session_id"], ctx.request_id)
        await trio.sleep(0.1)
        return f"closed={closed}"

    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with serving(app, retry_ms=20) as (url, http_app):
        box.append(http_app)
        async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(10, read=None),
                                     event_hooks={"request": [record]}) as hc:
            async with trio_mcp.open_http_client(url, http_client=hc) as client:
                assert (await client.call_tool("reconnect")).text == "closed=True"
    resumes = [r for r in sent if r.method == "GET" and "last-event-id" in r.headers]
    assert len(resumes) == 1


async def test_http_cancel_notification_ends_the_stream_without_answer() -> None:
    async with raw_session() as (raw, http_app):
        session = http_app.sessions[raw.session_id or ""]
        async with trio.open_nursery() as nursery:
            answers: list[bytes] = []

            async def long_call() -> None:
                response = await raw.post(call(10, "sleep", {"seconds": 30}))
                answers.append(response.content)

            nursery.start_soon(long_call)
            while not session.request_in_flight(10):  # noqa: ASYNC110 - server-side state
                await trio.sleep(0.01)
            response = await raw.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": 10}})
            assert response.status_code == 202
        assert [m for m in messages_of(answers[0]) if m.get("id") == 10] == []
        assert await raw.post({"jsonrpc": "2.0", "id": 11, "method": "ping"})


@drops_a_stream
async def test_http_get_resume_replays_the_standalone_stream_after_the_id_only() -> None:
    async with raw_session() as (raw, http_app):
        session = http_app.sessions[raw.session_id or ""]
        assert session.peer is not None
        parser = SSEParser()
        headers = raw.h(accept="text/event-stream")
        seen: list[dict[str, Any]] = []
        async with raw.client.stream("GET", raw.url, headers=headers) as response:
            await session.peer.notify("notifications/message", {"level": "info", "data": 1})
            async with aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    seen += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
                    if seen:
                        break
        # Sent while no GET is open; the resume gets it, and not the first one again.
        await session.peer.notify("notifications/message", {"level": "info", "data": 2})
        headers = raw.h(accept="text/event-stream", last_event_id=parser.last_event_id)
        async with raw.client.stream("GET", raw.url, headers=headers) as response:
            async with aclosing(response.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    seen += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
                    if len(seen) == 2:
                        break
        assert [m["params"]["data"] for m in seen] == [1, 2]


async def test_http_limits_body_size_and_session_count() -> None:
    async with raw_session(max_body=1000, max_sessions=1) as (raw, _):
        response = await raw.post(call(1, "echo", {"text": "x" * 2000}))
        assert response.status_code == 413
        raw.session_id = None
        response = await raw.post(INITIALIZE)
        assert response.status_code == 503


async def test_http_server_request_travels_on_the_originating_post_stream() -> None:
    """Sampling asked from inside tools/call comes on that POST's SSE stream, not on GET."""
    async with serving() as (url, _), http_client() as client:
        raw = Raw(client, url)
        init = json.loads(json.dumps(INITIALIZE))
        init["params"]["capabilities"] = {"sampling": {}}
        response = await raw.post(init)
        raw.session_id = response.headers["mcp-session-id"]
        await raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        parser = SSEParser()
        seen: list[dict[str, Any]] = []
        body = call(1, "summarize", {"text": "long"})
        async with client.stream("POST", url, content=json.dumps(body),
                                 headers=raw.h()) as stream:
            async with aclosing(stream.aiter_bytes()) as chunks:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        if not event.data:
                            continue
                        msg = json.loads(event.data)
                        seen.append(msg)
                        if msg.get("method") == "sampling/createMessage":
                            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {
                                "role": "assistant", "model": "m",
                                "content": {"type": "text", "text": "on the POST stream"}}}
                            assert (await raw.post(answer)).status_code == 202
        assert [m.get("method") for m in seen] == ["sampling/createMessage", None]
        assert seen[-1]["result"]["content"][0]["text"] == "on the POST stream"
