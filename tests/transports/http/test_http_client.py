"""The Streamable HTTP client (``open_http_client``) and server modes, over loopback sockets."""

from __future__ import annotations

import functools
import gc
import warnings
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import trio_mcp

from tests.helpers import client_app, example_app, seen_by
from tests.http_support import (
    ACCEPT_BOTH,
    INITIALIZE,
    TOKENS,
    Raw,
    call,
    http_client,
    messages_of,
    serving,
)

pytestmark = pytest.mark.timeout(60)


# --- the client ----------------------------------------------------------------------------------


async def test_http_client_sends_the_negotiated_version_and_deletes_on_close() -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with serving() as (url, http_app):
        async with httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(10, read=None),
                                     event_hooks={"request": [record]}) as hc:
            async with trio_mcp.open_http_client(url, http_client=hc) as client:
                await client.ping()
                assert len(http_app.sessions) == 1
        assert http_app.sessions == {}
    init, *rest = sent
    assert "mcp-protocol-version" not in init.headers
    assert "mcp-session-id" not in init.headers
    assert all(r.headers["mcp-protocol-version"] == "2025-11-25" for r in rest)
    assert sent[-1].method == "DELETE"
    posts = [r for r in sent if r.method == "POST"]
    assert all(r.headers["accept"] == ACCEPT_BOTH for r in posts)


async def test_http_client_starts_a_new_session_after_404() -> None:
    async with serving() as (url, http_app):
        async with trio_mcp.open_http_client(url) as client:
            (first,) = http_app.sessions.values()
            await http_app.end_session(first)
            assert (await client.call_tool("echo", {"text": "again"})).text == "again"
            (second,) = http_app.sessions.values()
            assert second.session_id != first.session_id
            # Several requests meeting the 404 at once start one new session.
            await http_app.end_session(second)
            async with trio.open_nursery() as nursery:
                for i in range(4):
                    nursery.start_soon(client.call_tool, "echo", {"text": str(i)})
            (third,) = http_app.sessions.values()
            assert third.session_id not in (first.session_id, second.session_id)


async def test_http_client_refused_initialize_raises_http_status_error() -> None:
    policy = trio_mcp.HttpPolicy(tokens=TOKENS)
    async with serving(policy=policy) as (url, _):
        with pytest.raises(httpx.HTTPStatusError) as info:
            async with trio_mcp.open_http_client(url, token="wrong"):
                pass  # pragma: no cover
        assert info.value.response.status_code == 401
        with pytest.raises(httpx.HTTPStatusError) as info:
            async with trio_mcp.open_http_client(url, token="token-alice",
                                                 headers={"Origin": "http://evil.example"}):
                pass  # pragma: no cover
        assert info.value.response.status_code == 403


async def test_http_client_unreachable_server_raises_transport_error() -> None:
    with trio.socket.socket() as sock:  # a port nothing listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(httpx.TransportError):
        async with trio_mcp.open_http_client(f"http://127.0.0.1:{port}/mcp"):
            pass  # pragma: no cover


async def test_http_server_to_client_sampling_and_elicitation() -> None:
    app = client_app(sampling_text="short", elicit_content={"approve": True})
    async with serving() as (url, _), trio_mcp.open_http_client(url, app) as client:
        assert (await client.call_tool("summarize", {"text": "long"})).text == "short"
        handle = await client.call_tool_task("approve", {"question": "ship?"})
        await handle.wait()
        assert (await handle.result()).text == "approved: ship?"
    assert [kind for kind, _, _ in seen_by(app)] == ["sampling", "elicitation"]


async def test_http_task_survives_the_session_and_is_collected_by_the_same_identity() -> None:
    policy = trio_mcp.HttpPolicy(tokens=TOKENS)
    async with serving(policy=policy) as (url, http_app):
        async with trio_mcp.open_http_client(url, token="token-alice") as client:
            handle = await client.call_tool_task("sleep", {"seconds": 0.3})
            task_id = handle.task_id
            with trio.move_on_after(0.05):
                await client.task_result(task_id)  # the connection drops mid-wait
        assert http_app.sessions == {}  # that session is gone, the task is not
        async with trio_mcp.open_http_client(url, token="token-bob") as bob:
            with pytest.raises(trio_mcp.RemoteError) as info:
                await bob.get_task(task_id)
            assert info.value.code == trio_mcp.INVALID_PARAMS
        async with trio_mcp.open_http_client(url, token="token-alice") as again:
            result = await again.task_result(task_id)
            assert result["content"][0]["text"] == "slept 0.3 seconds"
            assert (await again.get_task(task_id)).status is trio_mcp.TaskStatus.COMPLETED


async def test_http_app_mounts_in_another_asgi_app_started_by_lifespan() -> None:
    """StreamableHttpApp on its own: hypercorn serves a router around it; lifespan starts it."""
    import hypercorn.config
    import hypercorn.trio

    http_app = trio_mcp.StreamableHttpApp(example_app(), path="/tools/mcp")

    async def router(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan" or scope.get("path", "").startswith("/tools/"):
            await http_app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"hello"})

    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(hypercorn.trio.serve, router, config)
        base = binds[0]
        async with http_client() as client:
            assert (await client.get(base + "/")).text == "hello"
        async with trio_mcp.open_http_client(base + "/tools/mcp") as peer:
            assert (await peer.call_tool("echo", {"text": "mounted"})).text == "mounted"
        nursery.cancel_scope.cancel()


# --- stateless ---------------------------------------------------------------------------------


async def test_http_stateless_mode_has_no_sessions_and_no_get() -> None:
    async with serving(stateless=True) as (url, http_app), http_client() as client:
        raw = Raw(client, url)
        response = await raw.post(INITIALIZE)
        assert response.status_code == 200 and "mcp-session-id" not in response.headers
        response = await raw.post(call(1, "echo", {"text": "no session"}))
        assert messages_of(response.content)[-1]["result"]["content"][0]["text"] == "no session"
        response = await client.get(url, headers=raw.h(accept="text/event-stream"))
        assert response.status_code == 405
        assert http_app.sessions == {}


async def test_http_stateless_post_stands_alone_with_its_headers_version() -> None:
    """Stateless mode: a POST without an initialize before it is served with the version
    its MCP-Protocol-Version names and no client capabilities, and no initialize is made
    up on the client's behalf (the peer never receives one)."""
    from trio_mcp.peer._session import message_observers

    app = example_app()

    @app.tool()
    async def era(ctx: trio_mcp.RequestContext) -> str:
        caps = ctx.client_capabilities
        return f"{ctx.era} {caps is not None and caps.sampling is None}"

    received: list[str | None] = []

    def observe(direction: str, _: Any, method: str | None) -> None:
        if direction == "received":
            received.append(method)

    message_observers.append(observe)
    try:
        async with serving(app, stateless=True) as (url, _), http_client() as client:
            raw = Raw(client, url)
            for version in ("2025-06-18", "2025-11-25"):
                response = await raw.post(call(1, "era", {}), mcp_protocol_version=version)
                text = messages_of(response.content)[-1]["result"]["content"][0]["text"]
                assert text == f"{version} True"
    finally:
        message_observers.remove(observe)
    assert received == ["tools/call", "tools/call"]


async def test_http_stateless_server_to_client_request_fails_clearly() -> None:
    app = example_app()

    @app.tool()
    async def ask(ctx: trio_mcp.RequestContext) -> str:
        assert ctx.peer is not None
        try:
            await ctx.peer.request_raw("roots/list")
        except trio_mcp.RemoteError as exc:
            return exc.message
        return "answered?"  # pragma: no cover

    async with serving(app, stateless=True) as (url, _), http_client() as client:
        response = await Raw(client, url).post(call(1, "ask", {}))
        text = messages_of(response.content)[-1]["result"]["content"][0]["text"]
        assert "stateless" in text


async def test_http_open_http_client_against_a_stateless_server() -> None:
    async with serving(stateless=True) as (url, _):
        async with trio_mcp.open_http_client(url) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"


async def test_http_stateless_with_tokens_tasks_span_posts() -> None:
    """Each stateless POST has its own peer; the token's identity still owns the task."""
    policy = trio_mcp.HttpPolicy(tokens=TOKENS)
    async with serving(stateless=True, policy=policy) as (url, _):
        async with trio_mcp.open_http_client(url, token="token-alice") as client:
            handle = await client.call_tool_task("sleep", {"seconds": 0.05})
            result = await client.task_result(handle.task_id)
            assert result["content"][0]["text"] == "slept 0.05 seconds"
        async with trio_mcp.open_http_client(url, token="token-bob") as bob:
            with pytest.raises(trio_mcp.RemoteError):
                await bob.get_task(handle.task_id)


async def test_http_client_stream_left_mid_delivery_leaves_no_httpx_generator_open() -> None:
    """The bus stops taking messages while an SSE answer is being read (the peer closing
    under it): the stream is left with every httpx generator under it finished, not
    suspended for the garbage collector, which Trio warns about (an error in this suite;
    it failed a process test in CI once)."""
    from trio_mcp.peer._session._bus import BusEnds
    from trio_mcp.transports._http_client import _HttpClientTransport
    from trio_mcp.transports._sse import SSEParser

    events = b"".join(
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
        b'"params":{"level":"info","data":%d}}\n\n' % i
        for i in range(3)
    )

    async def sse_forever(stream: trio.SocketStream) -> None:
        await stream.receive_some()
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n"
                              + b"%x\r\n%s\r\n" % (len(events), events))
        await trio.sleep_forever()

    to_peer, unread = trio.open_memory_channel[Any](0)  # nobody reads: delivery blocks
    _, from_peer = trio.open_memory_channel[Any](0)
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(functools.partial(trio.serve_tcp, sse_forever, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/mcp"
        async with http_client() as client:
            transport = _HttpClientTransport(client, url, BusEnds(to_peer, from_peer), {})
            response = await client.send(client.build_request("GET", url), stream=True)
            with trio.CancelScope() as reading:
                nursery.start_soon(_cancel_when_blocked, reading)
                await transport._consume(response, SSEParser(), None)
            assert reading.cancelled_caught  # left while delivering, as the peer closing does
            await response.aclose()
        nursery.cancel_scope.cancel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    del unread  # (kept open until here: a closed receiver would not block the delivery)


async def _cancel_when_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_http_client_post_cancelled_while_sending_leaves_no_httpx_generator_open() -> None:
    """A POST cancelled while its body is being written (a server that reads nothing; a
    task tree cancelled with its hops' requests in flight) leaves no suspended httpx
    generator for the garbage collector: the body is sent from an iterator object, not
    httpx's async generator (``ByteStream.__aiter__``), which httpcore leaves open."""
    from trio_mcp.peer._session._bus import BusEnds
    from trio_mcp.transports._http_client import _HttpClientTransport

    async def reads_nothing(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    to_peer, _ = trio.open_memory_channel[Any](0)
    _, from_peer = trio.open_memory_channel[Any](0)
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(
            functools.partial(trio.serve_tcp, reads_nothing, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/mcp"
        async with http_client() as client:
            transport = _HttpClientTransport(client, url, BusEnds(to_peer, from_peer), {})
            with trio.CancelScope() as sending:
                nursery.start_soon(_cancel_when_blocked, sending)
                # Far more than the socket buffers hold: the write blocks mid-body.
                await transport._open("POST", body=b"x" * (64 << 20))
            assert sending.cancelled_caught
        nursery.cancel_scope.cancel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
