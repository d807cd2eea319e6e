"""The TypeScript SDK v2 client (``@modelcontextprotocol/client`` 2.4.0) -> our server, 2026-07-28.

``node/ts2_client.mjs`` runs one scenario with the SDK's ``Client`` against
``examples/everything_server.py --http`` (stateless Streamable HTTP) and reports what it
saw: each step's result, its JSON-RPC wire log and the headers of each POST. Two setups:
``versionNegotiation: {mode: {pin: '2026-07-28'}}`` (what this file is about) and
``mode: 'auto'`` (the SDK probes ``server/discover``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ..modern_wire import validate_modern
from . import _support
from ._support import ok, text_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT = _support.NODE_DIR / "ts2_client.mjs"
MODERN = "2026-07-28"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUB_ID = "io.modelcontextprotocol/subscriptionId"


@pytest.fixture(scope="module", params=["pin", "auto"])
def report(request: pytest.FixtureRequest, node: str) -> Iterator[dict[str, Any]]:
    port = _support.free_port()
    argv = [sys.executable, str(_support.EVERYTHING_SERVER), "--http", f"127.0.0.1:{port}"]
    with _support.background_server(argv, port):
        yield _support.run_report([node, str(CLIENT), f"http://127.0.0.1:{port}/mcp",
                                   request.param], cwd=_support.NODE_DIR)


def sent(report: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return _support.requests_in(report["wire"], "out", method)


def answer_to(report: dict[str, Any], request_id: Any) -> dict[str, Any]:
    (msg,) = [e["msg"] for e in report["wire"]
              if e["dir"] == "in" and "method" not in e["msg"] and e["msg"].get("id") == request_id]
    answer: dict[str, Any] = msg
    return answer


def test_negotiated_version_and_headers(report: dict[str, Any]) -> None:
    """The pinned (and the probing) SDK client speaks 2026-07-28 with our server: it learns
    our identity from ``server/discover``, sends every POST with ``MCP-Protocol-Version:
    2026-07-28`` and ``Mcp-Method`` (``Mcp-Name`` for calls, gets and reads), never
    ``initialize``, and gets no session id (stateless)."""
    assert report["protocol_version"] == MODERN
    assert report["server_version"]["name"] == "trio-mcp-everything"
    posts = report["http"]
    assert posts[0]["bodyMethod"] == "server/discover"
    assert "initialize" not in {p["bodyMethod"] for p in posts}
    for post in posts:
        assert post["method"] == "POST" and post["protocolVersion"] == MODERN, post
        assert post["sessionId"] is None
        if post["bodyMethod"].startswith("notifications/"):
            assert post["status"] == 202, post
            continue
        assert post["status"] == 200 and post["mcpMethod"] == post["bodyMethod"], post
    names = {p["mcpName"] for p in posts if p["bodyMethod"] in ("tools/call", "prompts/get",
                                                                "resources/read")}
    assert {"test_simple_text", "test_prompt_with_arguments", "test://static-text"} <= names


def test_tools_list_and_call(report: dict[str, Any]) -> None:
    """tools/list (cache hints, no core ``execution``) and a plain ``test_simple_text``."""
    tools = ok(report["tools"])
    assert tools["ttlMs"] == 0 and tools["cacheScope"] == "public"
    names = {tool["name"] for tool in tools["tools"]}
    assert {"test_simple_text", "test_input_required_result_elicitation"} <= names
    assert all("execution" not in tool for tool in tools["tools"])
    result = ok(report["simple_text"])
    assert text_of(result) == "This is a simple text response for testing."
    assert result["_meta"][SERVER_INFO]["name"] == "trio-mcp-everything"


def test_mrtr_elicitation_through_the_handler(report: dict[str, Any]) -> None:
    """``test_input_required_result_elicitation``: our ``input_required`` answer goes to the
    SDK's ``elicitation/create`` handler; it retries with a new id, ``inputResponses`` keyed
    ``user_name`` and our ``requestState`` verbatim, and ``callTool()`` returns ``Hello,
    Ada!``."""
    assert text_of(ok(report["elicitation"])) == "Hello, Ada!"
    assert report["elicitations"] == [{
        "mode": "form", "message": "What is your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                            "required": ["name"]},
    }]
    calls = [m for m in sent(report, "tools/call")
             if m["params"]["name"] == "test_input_required_result_elicitation"]
    first, retry = calls
    need = answer_to(report, first["id"])["result"]
    assert need["resultType"] == "input_required" and list(need["inputRequests"]) == ["user_name"]
    assert retry["id"] != first["id"]
    assert retry["params"]["requestState"] == need["requestState"]
    assert retry["params"]["inputResponses"] == {
        "user_name": {"action": "accept", "content": {"name": "Ada"}}}
    assert answer_to(report, retry["id"])["result"]["resultType"] == "complete"


def test_prompts(report: dict[str, Any]) -> None:
    """prompts/list, then prompts/get without and with arguments."""
    listed = {p["name"] for p in ok(report["prompts"])["prompts"]}
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= listed
    simple = ok(report["simple_prompt"])
    assert simple["messages"][0]["content"]["text"] == "This is a simple prompt for testing."
    with_args = ok(report["prompt_with_arguments"])
    assert with_args["messages"][0]["content"]["text"] == (
        "Prompt with arguments: arg1='one', arg2='two'")


def test_resources(report: dict[str, Any]) -> None:
    """resources/list, then resources/read of ``test://static-text``."""
    assert "test://static-text" in {r["uri"] for r in ok(report["resources"])["resources"]}
    read = ok(report["static_text"])
    assert read["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                                 "text": "This is the content of the static text resource."}]
    assert read["cacheScope"] == "private"


def test_listen_sees_the_tool_list_change(report: dict[str, Any]) -> None:
    """``client.listen({toolsListChanged: true})`` is acknowledged; ``test_trigger_tool_change``
    then reaches the SDK's ``notifications/tools/list_changed`` handler through the listen
    stream (stamped with the listen request's id); ``close()`` ends it locally."""
    listened = ok(report["listen"])
    assert listened["honored"] == {"toolsListChanged": True}
    assert text_of(listened["triggered"]) == "Mutation triggered"
    assert listened["notified"] == 1
    assert "test_trigger_dynamic_tool" in listened["tools_after"]
    assert listened["closed"] == "local"
    (listen,) = sent(report, "subscriptions/listen")
    notes = [e["msg"] for e in report["wire"] if e["dir"] == "in"
             and e["msg"].get("method") == "notifications/tools/list_changed"]
    assert [n["params"]["_meta"][SUB_ID] for n in notes] == [listen["id"]]


def test_our_messages_validate_against_the_2026_schema(report: dict[str, Any]) -> None:
    """Every message of ours the SDK received is valid against schema-2026-07-28.json."""
    methods = {e["msg"]["id"]: e["msg"]["method"] for e in report["wire"]
               if e["dir"] == "out" and "method" in e["msg"] and "id" in e["msg"]}
    checked = 0
    for entry in report["wire"]:
        if entry["dir"] == "in":
            msg = entry["msg"]
            validate_modern(msg, None if "method" in msg else methods[msg["id"]])
            checked += 1
    assert checked > 10
