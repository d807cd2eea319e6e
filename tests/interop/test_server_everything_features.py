"""Our client -> ``@modelcontextprotocol/server-everything``: resources, templates,
subscriptions, prompts, completion, logging, roots and list changes, over stdio.

Deviations of server-everything (TS SDK 1.32.2 ``McpServer``) are asserted as observed
and listed in the README: an unknown resource URI is ``-32602`` without ``data`` (the
2025-11-25 spec says ``-32002`` with the URI in ``data``).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

import trio_mcp

from ..everything import Seen, feature_client
from . import _support

pytestmark = pytest.mark.interop

TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


@asynccontextmanager
async def everything(node: str, app: trio_mcp.App) -> AsyncIterator[trio_mcp.Peer]:
    command = [node, str(_support.SERVER_EVERYTHING), "stdio"]
    async with trio_mcp.open_stdio_client(command, app) as peer:
        yield peer


def texts(result: trio_mcp.GetPromptResult) -> list[str]:
    return [m.content.text for m in result.messages
            if isinstance(m.content, trio_mcp.TextContent)]


async def test_features_resources_and_templates(node: str) -> None:
    app, _ = feature_client()
    async with everything(node, app) as peer:
        caps = peer.remote_server_capabilities
        assert caps is not None
        assert caps.resources == {"subscribe": True, "listChanged": True}
        resources = await peer.list_all_resources()
        docs = [r for r in resources if r.uri.startswith("demo://resource/static/document/")]
        assert docs and all(r.mime_type for r in docs)
        read = await peer.read_resource(docs[0].uri)
        assert read.contents[0].uri == docs[0].uri and read.text
        templates = {t.uri_template: t for t in await peer.list_all_resource_templates()}
        assert TEXT_TEMPLATE in templates
        assert "demo://resource/dynamic/blob/{resourceId}" in templates
        text = await peer.read_resource("demo://resource/dynamic/text/7")
        assert text.text.startswith("Resource 7: ")
        blob = (await peer.read_resource("demo://resource/dynamic/blob/2")).contents[0]
        assert isinstance(blob, trio_mcp.BlobResourceContents)
        assert base64.b64decode(blob.blob).startswith(b"Resource 2: ")
        with pytest.raises(trio_mcp.RemoteError) as info:
            await peer.read_resource("demo://nope")
        # DEVIATION (TS SDK McpServer): -32602 and no data, not -32002 with the URI.
        assert info.value.code == trio_mcp.INVALID_PARAMS and info.value.data is None


async def test_features_subscription_updates_and_logging(node: str) -> None:
    app, seen = feature_client()
    async with everything(node, app) as peer:
        await peer.set_logging_level("debug")
        uri = "demo://resource/dynamic/text/1"
        await peer.subscribe_resource(uri)
        await peer.call_tool("toggle-subscriber-updates")
        with trio.fail_after(30):
            await seen.wait_for(lambda: uri in seen.updated)
        await peer.unsubscribe_resource(uri)
        assert any(str(m.data).startswith("Received Subscribe Resource request for URI: " + uri)
                   for m in seen.logs)
        await peer.call_tool("toggle-simulated-logging")
        count = len(seen.logs)
        with trio.fail_after(30):
            await seen.wait_for(lambda: len(seen.logs) > count + 1)
        assert {m.level for m in seen.logs} <= set(trio_mcp.LOGGING_LEVELS)


async def test_features_prompts_and_completion(node: str) -> None:
    app, _ = feature_client()
    async with everything(node, app) as peer:
        prompts = {p.name: p for p in await peer.list_all_prompts()}
        assert {"simple-prompt", "args-prompt", "completable-prompt",
                "resource-prompt"} <= set(prompts)
        args = [(a.name, a.required) for a in prompts["args-prompt"].arguments or []]
        assert args == [("city", True), ("state", False)]
        assert texts(await peer.get_prompt("args-prompt", {"city": "Paris"})) == [
            "What's weather in Paris?"
        ]
        with pytest.raises(trio_mcp.RemoteError) as info:
            await peer.get_prompt("args-prompt", {})
        assert info.value.code == trio_mcp.INVALID_PARAMS
        embedded = await peer.get_prompt("resource-prompt",
                                         {"resourceType": "Text", "resourceId": "3"})
        block = embedded.messages[1].content
        assert isinstance(block, trio_mcp.EmbeddedResource)
        assert block.resource["uri"] == "demo://resource/dynamic/text/3"

        ref = trio_mcp.PromptReference("completable-prompt")
        assert (await peer.complete(ref, "department", "E")).values == ["Engineering"]
        team = await peer.complete(ref, "name", "", context={"department": "Sales"})
        assert team.values == ["David", "Eve", "Frank"]
        template = trio_mcp.ResourceTemplateReference(TEXT_TEMPLATE)
        assert (await peer.complete(template, "resourceId", "3")).values == ["3"]


async def test_features_roots_and_tool_content(node: str) -> None:
    app, seen = feature_client(roots=["file:///work"])
    async with everything(node, app) as peer:
        await peer.set_logging_level("info")
        listed = await peer.call_tool("get-roots-list")
        assert "URI: file:///work" in listed.text
        assert app.set_roots([trio_mcp.Root("file:///tmp", name="tmp")]) == 1
        # server-everything asks roots/list again on the change and logs what it got.
        with trio.fail_after(30):
            await seen.wait_for(lambda: _roots_logs(seen) >= 2)
        assert "URI: file:///tmp" in (await peer.call_tool("get-roots-list")).text
        links = await peer.call_tool("get-resource-links", {"count": 2})
        assert [type(b) for b in links.content[1:]] == [trio_mcp.ResourceLink] * 2
        annotated = await peer.call_tool("get-annotated-message",
                                         {"messageType": "error", "includeImage": True})
        assert annotated.content[0].annotations == {"audience": ["user", "assistant"],
                                                    "priority": 1}
        assert isinstance(annotated.content[1], trio_mcp.ImageContent)
        reference = await peer.call_tool("get-resource-reference",
                                         {"resourceType": "Text", "resourceId": 1})
        assert isinstance(reference.content[1], trio_mcp.EmbeddedResource)


def _roots_logs(seen: Seen) -> int:
    return sum(1 for m in seen.logs if str(m.data).startswith("Roots updated:"))
