"""Resources, prompts, completion, logging, roots, list changes, content and
elicitation, each over memory, a real stdio subprocess and a real WebSocket,
against ``examples/everything_server.py``.
"""

from __future__ import annotations

import base64
import json

import pytest
import trio

import trio_mcp

from tests.everything import connect_everything, feature_client
from tests.helpers import load_example

PNG = load_example("everything_server").PNG


async def test_features_capabilities_come_from_what_the_app_registered(transport: str) -> None:
    app, _ = feature_client(roots=["file:///work"])
    async with connect_everything(transport, app) as client:
        caps = client.remote_server_capabilities
        assert caps is not None
        assert caps.resources == {"subscribe": True, "listChanged": True}
        assert caps.prompts == {"listChanged": True}
        assert caps.tools == {"listChanged": True}
        assert caps.logging == {} and caps.completions == {}
    assert app.client_capabilities().roots == {"listChanged": True}
    assert app.client_capabilities().elicitation == {"form": {}, "url": {}}


async def test_features_resources_list_read_text_blob_and_template(transport: str) -> None:
    app, _ = feature_client()
    async with connect_everything(transport, app) as client:
        resources = {r.uri: r for r in await client.list_all_resources()}
        assert set(resources) == {
            "test://static-text", "test://static-binary", "test://watched-resource"
        }
        static = resources["test://static-text"]
        assert static.name == "static-text" and static.mime_type == "text/plain"
        assert static.title == "Static Text Resource"
        assert static.annotations == {"audience": ["user"], "priority": 0.5}
        templates = await client.list_all_resource_templates()
        assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
        assert templates[0].mime_type == "application/json"

        text = await client.read_resource("test://static-text")
        assert text.text == "This is the content of the static text resource."
        assert text.contents[0].mime_type == "text/plain"
        blob = (await client.read_resource("test://static-binary")).contents[0]
        assert isinstance(blob, trio_mcp.BlobResourceContents)
        assert blob.blob == PNG and base64.b64decode(blob.blob).startswith(b"\x89PNG")
        data = await client.read_resource("test://template/12%2F3/data")
        assert data.contents[0].uri == "test://template/12%2F3/data"
        assert json.loads(data.text) == {
            "id": "12/3", "templateTest": True, "data": "Data for ID: 12/3"
        }


async def test_features_unknown_resource_is_32002_with_the_uri(transport: str) -> None:
    app, _ = feature_client()
    async with connect_everything(transport, app) as client:
        for uri in ("test://nope", "test://template/1/other"):
            with pytest.raises(trio_mcp.RemoteError) as info:
                await client.read_resource(uri)
            assert info.value.code == trio_mcp.RESOURCE_NOT_FOUND == -32002
            assert info.value.data == {"uri": uri}
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.subscribe_resource("test://nope")
        assert info.value.code == -32002


async def test_features_resource_updates_reach_subscribers_only(transport: str) -> None:
    app, seen = feature_client()
    async with connect_everything(transport, app) as client:
        await client.subscribe_resource("test://watched-resource")
        result = await client.call_tool("test_update_watched_resource", {"text": "v2"})
        assert result.text == "notified 1 subscriber(s)"
        with trio.fail_after(10):
            await seen.wait_for(lambda: seen.updated)
        assert seen.updated == ["test://watched-resource"]
        assert (await client.read_resource("test://watched-resource")).text == "v2"
        await client.unsubscribe_resource("test://watched-resource")
        result = await client.call_tool("test_update_watched_resource", {"text": "v3"})
        assert result.text == "notified 0 subscriber(s)"
        await client.ping()
        assert seen.updated == ["test://watched-resource"]


async def test_features_prompts_list_and_get_with_every_content_kind(transport: str) -> None:
    app, _ = feature_client()
    async with connect_everything(transport, app) as client:
        prompts = {p.name: p for p in await client.list_all_prompts()}
        assert set(prompts) == {
            "test_simple_prompt", "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource", "test_prompt_with_image",
            "test_input_required_result_prompt",
        }
        with_args = prompts["test_prompt_with_arguments"]
        assert with_args.title == "Prompt With Arguments"
        assert [(a.name, a.required, a.description) for a in with_args.arguments or []] == [
            ("arg1", True, "First test argument"), ("arg2", True, "Second test argument")
        ]
        assert prompts["test_simple_prompt"].arguments is None

        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert got.text == "Prompt with arguments: arg1='a', arg2='b'"
        assert got.messages[0].role == "user"
        image = await client.get_prompt("test_prompt_with_image")
        assert isinstance(image.messages[0].content, trio_mcp.ImageContent)
        assert image.messages[0].content.data == PNG
        embedded = await client.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "test://x"}
        )
        block = embedded.messages[0].content
        assert isinstance(block, trio_mcp.EmbeddedResource)
        assert block.resource["uri"] == "test://x"

        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.get_prompt("test_prompt_with_arguments", {"arg1": "a"})
        assert info.value.code == trio_mcp.INVALID_PARAMS and "arg2" in info.value.message
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.get_prompt("no_such_prompt")
        assert info.value.code == trio_mcp.INVALID_PARAMS


async def test_features_completion_of_prompt_arguments_and_template_variables(
    transport: str,
) -> None:
    app, _ = feature_client()
    async with connect_everything(transport, app) as client:
        ref = trio_mcp.PromptReference("test_prompt_with_arguments")
        done = await client.complete(ref, "arg1", "al")
        assert done.values == ["alpha", "alpine"] and done.total == 2 and not done.has_more
        many = await client.complete(ref, "arg2", "", context={"arg1": "beta"})
        assert len(many.values) == 100 and many.total == 150 and many.has_more
        assert many.values[0] == "beta-0"
        template = trio_mcp.ResourceTemplateReference("test://template/{id}/data")
        assert (await client.complete(template, "id", "1")).values == ["1", "123"]
        none = await client.complete(trio_mcp.PromptReference("test_simple_prompt"), "x", "")
        assert none.values == [] and none.total == 0
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.complete(trio_mcp.PromptReference("nope"), "x", "")
        assert info.value.code == trio_mcp.INVALID_PARAMS


async def test_features_logging_level_filters_messages(transport: str) -> None:
    app, seen = feature_client()
    async with connect_everything(transport, app) as client:
        result = await client.call_tool("test_tool_with_logging")
        assert result.text == "Tool with logging executed successfully"
        assert [m.data for m in seen.logs] == [
            "Tool execution started", "Tool processing data", "Tool execution completed"
        ]
        assert all(m.level == "info" for m in seen.logs)
        seen.logs.clear()
        await client.set_logging_level("error")
        await client.call_tool("test_log_levels")
        assert [m.level for m in seen.logs] == ["error", "critical", "alert", "emergency"]
        assert seen.logs[0].logger == "everything-server" and seen.logs[0].data == {
            "level": "error"
        }
        seen.logs.clear()
        await client.set_logging_level("debug")
        await client.call_tool("test_log_levels")
        assert [m.level for m in seen.logs] == list(trio_mcp.LOGGING_LEVELS)


async def test_features_roots_listed_and_changes_announced(transport: str) -> None:
    app, seen = feature_client(roots=["file:///work"])
    async with connect_everything(transport, app) as client:
        result = await client.call_tool("test_list_roots")
        assert result.structured_content == {"roots": [{"uri": "file:///work", "name": None}]}
        assert app.set_roots([trio_mcp.Root("file:///tmp", name="tmp")]) == 1
        # The server's callback logs when it hears of the change.
        with trio.fail_after(10):
            await seen.wait_for(lambda: any(m.data == "roots changed" for m in seen.logs))
        result = await client.call_tool("test_list_roots")
        assert result.structured_content == {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}


async def test_features_list_changes_reach_open_connections(transport: str) -> None:
    app, seen = feature_client()
    async with connect_everything(transport, app) as client:
        assert (await client.call_tool("test_toggle_dynamic_tool")).text == "added test_dynamic_tool"
        with trio.fail_after(10):
            await seen.wait_for(lambda: seen.list_changed)
        assert seen.list_changed == ["tools"]
        assert "test_dynamic_tool" in {t.name for t in await client.list_all_tools()}
        assert (await client.call_tool("test_dynamic_tool")).text == "I come and go"
        await client.call_tool("test_toggle_dynamic_tool")
        with trio.fail_after(10):
            await seen.wait_for(lambda: len(seen.list_changed) == 2)
        assert "test_dynamic_tool" not in {t.name for t in await client.list_all_tools()}


async def test_features_tool_content_kinds_and_metadata(transport: str) -> None:
    app, _ = feature_client()
    async with connect_everything(transport, app) as client:
        tools = {t.name: t for t in await client.list_all_tools()}
        assert tools["test_simple_text"].annotations == {"readOnlyHint": True}
        assert tools["test_resource_link"].icons == [
            {"src": f"data:image/png;base64,{PNG}", "mimeType": "image/png"}
        ]
        assert tools["json_schema_2020_12_tool"].input_schema["$defs"]["address"]["type"] == (
            "object"
        )
        kinds = {
            "test_image_content": trio_mcp.ImageContent,
            "test_audio_content": trio_mcp.AudioContent,
            "test_embedded_resource": trio_mcp.EmbeddedResource,
            "test_resource_link": trio_mcp.ResourceLink,
        }
        for name, kind in kinds.items():
            result = await client.call_tool(name)
            assert isinstance(result.content[0], kind), name
        mixed = await client.call_tool("test_multiple_content_types")
        assert [b.type for b in mixed.content] == ["text", "image", "resource"]
        error = await client.call_tool("test_error_handling")
        assert error.is_error and "intentionally" in error.text
        args = {"name": "n", "address": {"city": "c"}}
        called = await client.call_tool("json_schema_2020_12_tool", args)
        assert called.text == 'JSON Schema 2020-12 tool called with: {"name":"n","address":{"city":"c"}}'


async def test_features_elicitation_form_defaults_and_enums(transport: str) -> None:
    app, seen = feature_client(answer={"name": "Ann", "age": 31})
    async with connect_everything(transport, app) as client:
        result = await client.call_tool("test_elicitation_sep1034_defaults")
        assert result.text == 'Elicitation completed: action=accept, content={"name":"Ann","age":31}'
        props = (seen.elicitations[0].requested_schema or {})["properties"]
        assert {k: v["default"] for k, v in props.items()} == {
            "name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True
        }
        await client.call_tool("test_elicitation_sep1330_enums")
        props = (seen.elicitations[1].requested_schema or {})["properties"]
        assert props["untitledSingle"]["enum"] == ["option1", "option2", "option3"]
        assert props["titledSingle"]["oneOf"][0] == {"const": "value1", "title": "First Option"}
        assert props["untitledMulti"]["items"] == {
            "type": "string", "enum": ["option1", "option2", "option3"]
        }
        assert props["titledMulti"]["items"]["anyOf"][2] == {
            "const": "value3", "title": "Third Choice"
        }
        assert props["titledMulti"]["minItems"] == 1 and props["titledMulti"]["maxItems"] == 3
        assert seen.elicitations[1].mode == "form"


async def test_features_url_elicitation_and_its_completion(transport: str) -> None:
    app, seen = feature_client()
    async with connect_everything(transport, app) as client:
        result = await client.call_tool("test_url_elicitation", {"url": "https://example.com/x"})
        assert result.text.startswith("URL elicitation: action=accept, id=")
        params = seen.elicitations[0]
        assert params.mode == "url" and params.url == "https://example.com/x"
        assert params.elicitation_id and result.text.endswith(params.elicitation_id)
        with trio.fail_after(10):
            await seen.wait_for(lambda: seen.completed)
        assert seen.completed == [params.elicitation_id]


async def test_features_url_elicitation_needs_the_url_capability(transport: str) -> None:
    app, seen = feature_client(modes=("form",))
    async with connect_everything(transport, app) as client:
        result = await client.call_tool("test_url_elicitation")
        assert "not supported" in result.text and "URL-mode" in result.text
        assert seen.elicitations == []


async def test_request_context_carries_its_requests_era_as_a_value() -> None:
    # Issue 31: a 2026-07-28 request's era, capabilities and questions travel with its
    # RequestContext, not in a context variable: a ctx used outside its handler's context
    # (kept, or handed to another task) still knows the request it belongs to.
    app = trio_mcp.App("era-value")
    kept: list[trio_mcp.RequestContext] = []

    @app.tool()
    async def keep(ctx: trio_mcp.RequestContext) -> str:
        kept.append(ctx)
        return "kept"

    client_app = trio_mcp.App("client")

    @client_app.on_elicitation
    async def reply(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        return trio_mcp.ElicitResult(action="accept", content={})

    async with trio_mcp.open_memory_pair(app, client_app, era="2026-07-28") as pair:
        assert (await pair.client.call_tool("keep")).text == "kept"
    (ctx,) = kept
    assert ctx.era == "2026-07-28"
    caps = ctx.client_capabilities
    assert caps is not None and caps.elicitation is not None  # the request's own _meta
