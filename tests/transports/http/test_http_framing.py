"""Streamable HTTP framing: an answer ready at once is one body with its Content-Length.

A 2025-11-25 POST's answer is JSON or an SSE stream (priming event with an id
and no data, then the response). When the handler answered before the first
byte is written (an inline tool), the whole answer is sent as one body with
``Content-Length``; when it answers later, the SSE stream is chunked as it
goes. The events are the same either way (2025-11-25
basic/transports#sending-messages-to-the-server).
"""

from __future__ import annotations

import sys

import pytest
import trio
import trio.lowlevel

import trio_mcp

from tests.helpers import EXAMPLES
from tests.helpers import serving as serving_process
from tests.http_support import Raw, call, events_of, http_client, messages_of, serving

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("both_http_servers")]


def framing_app() -> trio_mcp.App:
    app = trio_mcp.App("framing", "1.0")

    @app.tool(inline=True)
    def now(text: str) -> str:
        """Answered in the task that read the request."""
        return text

    @app.tool
    async def later(text: str) -> str:
        """Answered from a task of its own, after a schedule point."""
        await trio.lowlevel.checkpoint()
        return text

    return app


@pytest.mark.parametrize("json_response", [False, True])
async def test_http_answer_ready_at_once_has_content_length(json_response: bool) -> None:
    """'If the input is a JSON-RPC request, the server MUST either return
    Content-Type: text/event-stream ... or Content-Type: application/json': both, framed
    with Content-Length when complete at once; a later SSE answer streams (chunked)."""
    async with serving(framing_app(), json_response=json_response) as (url, _), \
            http_client() as client:
        raw = Raw(client, url)
        await raw.initialize()
        for request_id, tool in ((1, "now"), (2, "later")):
            response = await raw.post(call(request_id, tool, {"text": tool}))
            assert response.status_code == 200, response.text
            if json_response:
                assert response.headers["content-type"] == "application/json"
                assert int(response.headers["content-length"]) == len(response.content)
                message = response.json()
            else:
                assert response.headers["content-type"] == "text/event-stream"
                events = events_of(response.content)
                assert events[0].id and not events[0].data  # the priming event
                message = messages_of(response.content)[-1]
                if tool == "now":
                    assert int(response.headers["content-length"]) == len(response.content)
                    assert "transfer-encoding" not in response.headers
                else:
                    assert response.headers["transfer-encoding"] == "chunked"
                    assert "content-length" not in response.headers
            assert message["id"] == request_id
            assert message["result"]["content"][0]["text"] == tool



async def test_http_a_post_refused_from_its_headers_keeps_or_closes_its_connection_openly(
    both_http_servers: str,
) -> None:
    """A POST refused from its headers (406: Accept lacks text/event-stream) whose body
    arrives late: the server reads the body before it answers and keeps the connection,
    or answers first and says ``Connection: close`` (RFC 9112 section 9.6: a server that
    closes "SHOULD send a 'close' connection option"). Never a silent close: a client
    that reuses the connection (httpx, so the Python SDK) fails its next request with
    "Server disconnected without sending a response" (hypercorn did this)."""
    argv = [sys.executable, str(EXAMPLES / "everything_server.py"), "--http", "127.0.0.1:0",
            "--http-server", both_http_servers]
    async with serving_process(argv) as (_, words):
        host, port = words[0].split("//")[1].split("/")[0].rsplit(":", 1)
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n"
                f"Content-Type: application/json\r\nMCP-Protocol-Version: 2025-11-25\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(head)
            answer = b""
            with trio.move_on_after(0.5):  # answered from the headers alone (all of it)?
                while not _complete(answer):
                    answer += await stream.receive_some(65536)
            if answer:
                await trio.sleep(0.2)  # the server done with its answer, then the body
            await stream.send_all(body)  # the body, late
            with trio.fail_after(10):
                while not _complete(answer):
                    answer += await stream.receive_some(65536)
            status, _, rest = answer.partition(b"\r\n")
            assert status.split()[1] == b"406", answer
            if b"\r\nconnection: close\r\n" in rest.lower():
                return  # closing, and saying so
            # Kept: it stays open (no EOF in a while) and serves the next request.
            with trio.move_on_after(1):
                while True:
                    assert await stream.receive_some(65536) != b"", "closed without saying so"
            await stream.send_all(head + body)
            more = b""
            with trio.fail_after(10):
                while b"HTTP/1.1 406 " not in more:
                    data = await stream.receive_some(65536)
                    assert data, "closed without saying so"
                    more += data


def _complete(response: bytes) -> bool:
    """Whether ``response`` holds a whole HTTP/1.1 response (Content-Length or chunked)."""
    head, found, body = response.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.lower().split(b"\r\n")[1:]:
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return body.endswith(b"0\r\n\r\n")

