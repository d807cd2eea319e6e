"""The Python SDK ``mcp`` 2.3.0 and trio_mcp speaking MCP 2026-07-28, both ways.

* Their ``Client`` -> our ``examples/everything_server.py``: ``py/mcp230_client.py`` runs one
  scenario (tools, ``test_simple_text``, the multi round-trip elicitation of
  ``test_input_required_result_elicitation``, prompts, resources, ``Client.listen()`` with
  ``test_trigger_tool_change``) and prints a JSON report. Four setups: stdio and
  Streamable HTTP, each with the SDK's default ``mode="auto"`` (it probes
  ``server/discover``) and with ``mode="2026-07-28"`` (pinned, no probe).
* Our client (``era="auto"``) -> their ``MCPServer`` (``py/mcp230_server.py``), over stdio and
  Streamable HTTP: the probe selects 2026-07-28, calls work, and their multi round-trip
  elicitations (``Resolve(Elicit(...))`` and an ``InputRequiredResult`` returned by hand)
  are answered by our App's ``on_elicitation``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp

from . import _support
from ._support import ok, text_of

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT = _support.PY_DIR / "mcp230_client.py"
SERVER = _support.PY_DIR / "mcp230_server.py"
MODERN = "2026-07-28"
SIMPLE_TEXT = "This is a simple text response for testing."
DYNAMIC_TOOL = "test_trigger_dynamic_tool"


@contextlib.contextmanager
def http_server(argv: list[str]) -> Iterator[str]:
    """Run ``argv + ["--http", "127.0.0.1:PORT"]`` for the block; yield its ``/mcp`` URL."""
    port = _support.free_port()
    with _support.background_server([*argv, "--http", f"127.0.0.1:{port}"], port):
        yield f"http://127.0.0.1:{port}/mcp"


# --- their client -> our server ------------------------------------------------------------


@pytest.fixture(scope="module", params=[
    ("stdio", "auto"), ("stdio", MODERN), ("http", "auto"), ("http", MODERN),
], ids=lambda p: f"{p[0]}-{p[1]}")
def report(request: pytest.FixtureRequest, mcp230: Path) -> Iterator[dict[str, Any]]:
    transport, mode = request.param
    ours = [sys.executable, str(_support.EVERYTHING_SERVER)]
    if transport == "stdio":
        yield _support.run_report([str(mcp230), str(CLIENT), mode, "stdio", *ours])
        return
    with http_server(ours) as url:
        yield _support.run_report([str(mcp230), str(CLIENT), mode, "http", url])


def test_negotiated_version_is_2026(report: dict[str, Any]) -> None:
    """Both the SDK's probe (``auto``) and its pin end on 2026-07-28 with our server; the
    probe also takes our identity and capabilities from ``server/discover``."""
    assert report["protocol_version"] == MODERN
    if report["mode"] == "auto":
        assert report["server_info"]["name"] == "trio-mcp-everything"
        caps = report["server_capabilities"]
        assert caps["tools"] == {"listChanged": True} and "tasks" not in caps
    else:
        # A pin synthesizes its DiscoverResult: no server identity or capabilities known
        # (SDK behaviour; every result of ours still carries serverInfo in _meta).
        assert report["server_info"] is None and report["server_info_after"] is None


def test_tools_list_and_simple_call(report: dict[str, Any]) -> None:
    """tools/list and tools/call in the modern envelope: ``resultType``, ``serverInfo``
    in ``_meta``, cache hints on the list, no core ``execution.taskSupport``."""
    tools = ok(report["tools"])
    assert tools["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "trio-mcp-everything"
    assert tools["ttlMs"] == 0 and tools["cacheScope"] == "public"
    assert {"test_simple_text", "test_input_required_result_elicitation",
            "test_trigger_tool_change"} <= set(report["tool_names"])
    assert all("execution" not in tool for tool in tools["tools"])
    result = ok(report["simple_text"])
    assert text_of(result) == SIMPLE_TEXT and result["isError"] is False
    assert result["resultType"] == "complete"


def test_mrtr_elicitation_through_the_callback(report: dict[str, Any]) -> None:
    """``test_input_required_result_elicitation`` answers ``input_required``; the SDK hands
    the embedded ``elicitation/create`` to its ``elicitation_callback``, retries with
    ``inputResponses`` and our ``requestState``, and gets ``Hello, Ada!``."""
    assert text_of(ok(report["elicitation"])) == "Hello, Ada!"
    assert report["elicitations"] == [{
        "mode": "form", "message": "What is your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                            "required": ["name"]},
    }]


def test_mrtr_elicitation_by_hand(report: dict[str, Any]) -> None:
    """Driven by hand (``allow_input_required=True``): the first answer is an
    ``InputRequiredResult`` keyed ``user_name`` with a ``requestState``; the retry with the
    response and the state echoed completes."""
    manual = ok(report["elicitation_manual"])
    first = manual["first"]
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["user_name"]
    assert first["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert isinstance(first["requestState"], str) and first["requestState"]
    assert text_of(manual["second"]) == "Hello, Grace!"
    assert manual["second"]["resultType"] == "complete"


def test_prompts(report: dict[str, Any]) -> None:
    """prompts/list, then prompts/get without and with arguments."""
    listed = {p["name"]: p for p in ok(report["prompts"])["prompts"]}
    assert {"test_simple_prompt", "test_prompt_with_arguments"} <= set(listed)
    assert [a["name"] for a in listed["test_prompt_with_arguments"]["arguments"]] == [
        "arg1", "arg2"]
    simple = ok(report["simple_prompt"])
    assert simple["messages"] == [{"role": "user", "content": {
        "type": "text", "text": "This is a simple prompt for testing."}}]
    with_args = ok(report["prompt_with_arguments"])
    assert with_args["messages"][0]["content"]["text"] == (
        "Prompt with arguments: arg1='one', arg2='two'")


def test_resources(report: dict[str, Any]) -> None:
    """resources/list, then resources/read of ``test://static-text`` (private cache scope)."""
    uris = {r["uri"] for r in ok(report["resources"])["resources"]}
    assert "test://static-text" in uris
    read = ok(report["static_text"])
    assert read["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                                 "text": "This is the content of the static text resource."}]
    assert read["cacheScope"] == "private"


def test_subscriptions_listen_sees_the_tool_list_change(report: dict[str, Any]) -> None:
    """``Client.listen(tools_list_changed=True)`` is acknowledged with that filter; a call of
    ``test_trigger_tool_change`` (same client, while listening) reaches the SDK as a
    ``ToolsListChanged`` event on the subscription, and the list changed."""
    listened = ok(report["listen"])
    assert listened["honored"] == {"toolsListChanged": True}
    assert text_of(listened["triggered"]) == "Mutation triggered"
    assert listened["event"] == "ToolsListChanged"
    assert set(listened["tools_after"]) ^ set(report["tool_names"]) == {DYNAMIC_TOOL}


# --- our client -> their server ------------------------------------------------------------


def client_app(asked: list[trio_mcp.ElicitParams]) -> trio_mcp.App:
    app = trio_mcp.App("mcp230-interop-ours", "1.0", host_tasks=False)

    @app.on_elicitation
    async def elicit(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        asked.append(params)
        fields = (params.requested_schema or {}).get("properties", {})
        if "ok" in fields:
            return trio_mcp.ElicitResult(action="accept", content={"ok": True})
        return trio_mcp.ElicitResult(action="accept", content={"name": "Ada"})

    return app


@contextlib.asynccontextmanager
async def our_client(
    transport: str, mcp230: Path, app: trio_mcp.App
) -> AsyncIterator[trio_mcp.Peer]:
    argv = [str(mcp230), str(SERVER)]
    if transport == "stdio":
        async with trio_mcp.open_stdio_client(argv, app, era="auto") as peer:
            yield peer
        return
    with http_server(argv) as url:
        async with trio_mcp.open_http_client(url, app, era="auto") as peer:
            yield peer


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_our_auto_client_against_mcp230_server(mcp230: Path, transport: str) -> None:
    """Our ``era="auto"`` client probes ``server/discover`` on mcp 2.3.0's ``MCPServer`` and
    speaks 2026-07-28 (their server sees it too: ``era`` returns it); tools, prompts and
    resources work; both of their multi round-trip elicitations (``Resolve(Elicit(...))``
    in ``greet``, a hand-made ``InputRequiredResult`` with ``request_state`` in ``confirm``)
    are answered by our App's ``on_elicitation`` and retried with ``inputResponses`` and the
    ``requestState`` echoed verbatim."""
    asked: list[trio_mcp.ElicitParams] = []
    with _support.our_wire() as wire, trio.fail_after(90):
        async with our_client(transport, mcp230, client_app(asked)) as peer:
            assert peer.protocol_version == MODERN
            assert peer.remote_info is not None and peer.remote_info.name == "mcp230-interop"
            names = {tool.name for tool in await peer.list_all_tools()}
            assert names == {"add", "greet", "confirm", "era"}
            assert _text(await peer.call_tool("add", {"a": 2, "b": 3})) == "5"
            assert _text(await peer.call_tool("era", {})) == MODERN
            assert _text(await peer.call_tool("greet", {})) == "Hello, Ada!"
            confirmed = await peer.call_tool("confirm", {"action": "deploy"})
            assert _text(confirmed) == "deploy: yes (state confirm-state-1)"
            prompts = await peer.list_all_prompts()
            assert [p.name for p in prompts] == ["hello"]
            prompt = await peer.get_prompt("hello", {"name": "Bob"})
            content = prompt.messages[0].content
            assert isinstance(content, trio_mcp.TextContent)
            assert content.text == "Say hello to Bob."
            resources = await peer.list_all_resources()
            assert [r.uri for r in resources] == ["test://hello"]
            read = await peer.read_resource("test://hello")
            (contents,) = read.contents
            assert isinstance(contents, trio_mcp.TextResourceContents)
            assert contents.text == "hello from mcp 2.3.0"
    assert [p.message for p in asked] == ["What is your name?", "Really deploy?"]
    assert all(p.mode == "form" for p in asked)
    # The wire: no initialize; the probe was server/discover; each elicitation came back as
    # input_required and was retried with inputResponses and the requestState echoed.
    sent = [e["msg"] for e in wire if e["dir"] == "out" and "method" in e["msg"]]
    assert sent[0]["method"] == "server/discover"
    assert "initialize" not in {m["method"] for m in sent}
    for params in (m["params"] for m in sent):
        assert params["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    answers = {e["msg"]["id"]: e["msg"].get("result") for e in wire
               if e["dir"] == "in" and "id" in e["msg"] and "method" not in e["msg"]}
    calls = [m for m in sent if m["method"] == "tools/call"]
    rounds = {name: [m for m in calls if m["params"]["name"] == name]
              for name in ("greet", "confirm")}
    for name, (first, retry) in rounds.items():
        need = answers[first["id"]]
        assert need["resultType"] == "input_required", name
        assert "inputResponses" not in first["params"]
        # Their server seals its state (even the hand-made one): echoed byte for byte.
        assert retry["params"]["requestState"] == need["requestState"], name
        assert set(retry["params"]["inputResponses"]) == set(need["inputRequests"]), name
        assert retry["id"] != first["id"]
        assert answers[retry["id"]].get("resultType", "complete") == "complete"
    assert rounds["confirm"][1]["params"]["inputResponses"]["confirm"] == {
        "action": "accept", "content": {"ok": True}}


def _text(result: trio_mcp.CallToolResult) -> str:
    assert not result.is_error, result
    return " ".join(c.text for c in result.content if isinstance(c, trio_mcp.TextContent))
