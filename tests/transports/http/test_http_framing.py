"""Streamable HTTP framing: an answer ready at once is one body with its Content-Length.

A 2025-11-25 POST's answer is JSON or an SSE stream (priming event with an id
and no data, then the response). When the handler answered before the first
byte is written (an inline tool), the whole answer is sent as one body with
``Content-Length``; when it answers later, the SSE stream is chunked as it
goes. The events are the same either way (2025-11-25
basic/transports#sending-messages-to-the-server).
"""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel

import trio_mcp

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
