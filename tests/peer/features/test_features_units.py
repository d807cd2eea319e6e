"""Units of the features: URI templates, completion answers, form schemas,
pagination, registration rules, the log handler, and the method catalogue
checked against the official schema.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.lowlevel

import trio_mcp
from trio_mcp.peer._features._completion import to_completion
from trio_mcp.peer._features._resourcespec import compile_template

from tests.everything import everything_app, feature_client
from tests.helpers import SCHEMA_PATH
from tests.raw import open_raw

#: Notifications the JSON-RPC session handles itself, for every feature.
SESSION_OWNED = {"notifications/cancelled", "notifications/progress"}


def _methods_of(union: str) -> set[str]:
    defs = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]
    return {
        defs[ref["$ref"].rsplit("/", 1)[1]]["properties"]["method"]["const"]
        for ref in defs[union]["anyOf"]
    }


async def test_every_schema_method_and_notification_is_handled() -> None:
    """Each request a side may receive has a handler on our peer, and each
    notification either a feature's handler or the session's own."""
    defs = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]
    every = {d["properties"]["method"]["const"] for d in defs.values()
             if "const" in d.get("properties", {}).get("method", {})}
    assert len(every) == 31
    unions = {u: _methods_of(u) for u in
              ("ClientRequest", "ServerRequest", "ClientNotification", "ServerNotification")}
    assert set().union(*unions.values()) == every
    client_app, _ = feature_client(roots=["file:///r"])
    async with trio_mcp.open_memory_pair(everything_app(), client_app) as (client, server):
        def handled(session: Any) -> set[str]:
            return set(session.request_handlers)

        missing = {
            "server lacks request": unions["ClientRequest"] - handled(server.session),
            "client lacks request": unions["ServerRequest"] - handled(client.session),
            "server lacks notification": unions["ClientNotification"]
            - set(server.session.notification_handlers) - SESSION_OWNED,
            "client lacks notification": unions["ServerNotification"]
            - set(client.session.notification_handlers) - SESSION_OWNED,
        }
    assert missing == {k: set() for k in missing}


def test_uri_template_level1_matching() -> None:
    pattern, names = compile_template("notes://{user}/{id}.txt")
    assert names == ("user", "id")
    assert pattern.fullmatch("notes://ann/7.txt") is not None
    assert pattern.fullmatch("notes://ann/sub/7.txt") is None  # a variable is one segment
    for bad in ("x://{+a}", "x://{a,b}", "x://{a}/{a}", "x://plain", "x://{a}}", "x://{a*}"):
        with pytest.raises(ValueError):
            compile_template(bad)


def test_completion_answer_is_capped_at_100_with_total_and_has_more() -> None:
    small = to_completion(["a", "b"])
    assert (small.values, small.total, small.has_more) == (["a", "b"], 2, False)
    big = to_completion([str(i) for i in range(250)])
    assert len(big.values) == 100 and big.total == 250 and big.has_more
    own = to_completion(trio_mcp.Completion(values=["x"] * 120, total=1000))
    assert len(own.values) == 100 and own.total == 1000 and own.has_more
    with pytest.raises(TypeError):
        to_completion("abc")


def test_form_schema_helpers_and_check() -> None:
    schema = trio_mcp.form_schema({
        "email": trio_mcp.string_field(format="email", default="a@b.c"),
        "n": trio_mcp.number_field(integer=True, minimum=1, default=2),
        "ok": trio_mcp.boolean_field(default=False),
        "one": trio_mcp.enum_field({"r": "Red", "g": "Green"}, default="r"),
        "many": trio_mcp.enum_field(["a", "b"], multiple=True, default=["a"]),
    }, ["email"])
    assert trio_mcp.check_form_schema(schema) is None
    assert schema["properties"]["one"]["oneOf"] == [
        {"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}
    ]
    assert schema["properties"]["many"] == {
        "type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["a"]
    }
    nested = {"type": "object", "properties": {"x": {"type": "object"}}}
    assert "x" in (trio_mcp.check_form_schema(nested) or "")
    with pytest.raises(ValueError):
        trio_mcp.string_field(format="phone")


async def test_features_lists_paginate_and_reject_bad_cursors() -> None:
    app = trio_mcp.App("many")
    for i in range(230):
        async def read() -> str:
            return "x"

        async def render() -> str:
            return "x"

        app.resource(f"test://r/{i:03d}")(read)
        app.resource_template(f"test://t{i:03d}/{{id}}")(_template_fn())
        app.prompt(f"p{i:03d}")(render)
    async with trio_mcp.open_memory_pair(app) as (client, _):
        first = await client.list_resources()
        assert len(first.resources) == 100 and first.next_cursor
        assert len(await client.list_all_resources()) == 230
        assert len(await client.list_all_resource_templates()) == 230
        assert [p.name for p in await client.list_all_prompts()][-1] == "p229"
        for call in (client.list_resources, client.list_prompts, client.list_resource_templates):
            with pytest.raises(trio_mcp.RemoteError) as info:
                await call("bogus")
            assert info.value.code == trio_mcp.INVALID_PARAMS


def _template_fn() -> Any:
    async def read(id: str) -> str:
        return id

    return read


def test_features_registration_rules() -> None:
    app = trio_mcp.App("rules")

    async def read() -> str:
        return "x"

    app.resource("test://a")(read)
    with pytest.raises(ValueError):
        app.resource("test://a")(read)
    with pytest.raises(TypeError):
        app.resource("test://b")(lambda: "not async")  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="takes no parameter"):
        app.resource_template("test://{id}")(read)
    with pytest.raises(ValueError):
        app.completion(argument="a")
    with pytest.raises(ValueError):
        app.prompt(arguments={"nope": "x"})(read)
    with pytest.raises(ValueError):
        trio_mcp.App("bad", elicitation_modes=("voice",))
    with pytest.raises(ValueError, match="file://"):
        trio_mcp.App("c").set_roots(["https://example.com"])


async def test_features_url_elicitation_required_error_reaches_the_client() -> None:
    app = trio_mcp.App("s")
    needed = {"elicitations": [{"mode": "url", "elicitationId": "e7", "message": "Connect",
                                "url": "https://example.com/connect?e=e7"}]}

    @app.tool()
    async def files() -> str:
        raise trio_mcp.McpError(trio_mcp.URL_ELICITATION_REQUIRED, "Connect first", needed)

    async with trio_mcp.open_memory_pair(app) as (client, _):
        with pytest.raises(trio_mcp.RemoteError) as info:
            await client.call_tool("files")
    assert info.value.code == -32042 and info.value.data == needed


async def test_features_removals_announce_list_changes_and_drop_completers() -> None:
    server = everything_app()
    app, seen = feature_client()
    async with trio_mcp.open_memory_pair(server, app) as (client, _):
        await client.ping()  # the server has seen notifications/initialized
        server.remove_prompt("test_prompt_with_arguments")
        server.remove_resource("test://static-text")
        server.remove_resource_template("test://template/{id}/data")
        server.remove_tool("test_simple_text")
        with trio.fail_after(5):
            await seen.wait_for(lambda: len(seen.list_changed) == 4)
        assert seen.list_changed == ["prompts", "resources", "resources", "tools"]
        assert not any(k[1] == "test_prompt_with_arguments" for k in server.completers)
        with pytest.raises(trio_mcp.RemoteError):
            await client.read_resource("test://template/1/data")


async def test_features_async_callbacks_run_in_the_connection_nursery() -> None:
    app = trio_mcp.App("c")
    got: list[str] = []
    done = trio.Event()

    @app.on_list_changed
    async def changed(peer: trio_mcp.Peer, kind: str) -> None:
        await trio.lowlevel.checkpoint()
        got.append(kind)
        done.set()

    server = everything_app()
    async with trio_mcp.open_memory_pair(server, app) as (client, _):
        await client.ping()

        async def noop() -> str:
            return ""

        server.prompt("late")(noop)
        with trio.fail_after(5):
            await done.wait()
    assert got == ["prompts"]


async def test_features_log_handler_forwards_records_at_the_client_level() -> None:
    server = everything_app()
    logger = logging.getLogger("test.features.forwarded")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = server.log_handler()
    logger.addHandler(handler)
    app, seen = feature_client()
    try:
        async with trio_mcp.open_memory_pair(server, app) as (client, _):
            await client.set_logging_level("warning")
            logger.info("quiet")
            logger.warning("loud %d", 1)
            logger.critical("louder")
            await trio.to_thread.run_sync(logger.error, "from a thread")
            await client.ping()
            with trio.fail_after(5):
                await seen.wait_for(lambda: len(seen.logs) == 3)
    finally:
        logger.removeHandler(handler)
    assert [(m.level, m.data, m.logger) for m in seen.logs] == [
        ("warning", "loud 1", "test.features.forwarded"),
        ("critical", "louder", "test.features.forwarded"),
        ("error", "from a thread", "test.features.forwarded"),
    ]


async def test_features_client_refuses_an_undeclared_elicitation_mode() -> None:
    app, seen = feature_client(modes=("form",))
    async with trio_mcp.open_memory_pair(everything_app(), app) as (_, server):
        with pytest.raises(trio_mcp.RemoteError) as info:
            await server.request_raw("elicitation/create", {
                "mode": "url", "message": "m", "url": "https://x", "elicitationId": "e1"})
        assert info.value.code == trio_mcp.INVALID_PARAMS
        # An unknown id's completion notice is ignored.
        await server.notify_elicitation_complete("e1")
        await server.ping()
    assert seen.elicitations == [] and seen.completed == []


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("resources/read", {"uri": 5}, trio_mcp.INVALID_PARAMS),
        ("resources/read", {}, trio_mcp.INVALID_PARAMS),
        ("prompts/get", {"name": "test_prompt_with_arguments",
                         "arguments": {"arg1": 1, "arg2": "b"}}, trio_mcp.INVALID_PARAMS),
        ("completion/complete", {"ref": {"type": "ref/other"},
                                 "argument": {"name": "a", "value": ""}}, trio_mcp.INVALID_PARAMS),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "test://none/{x}"},
                                 "argument": {"name": "x", "value": ""}}, trio_mcp.INVALID_PARAMS),
        ("resources/unsubscribe", {"uri": []}, trio_mcp.INVALID_PARAMS),
        ("roots/list", {}, trio_mcp.METHOD_NOT_FOUND),
    ],
)
async def test_features_bad_params_get_clear_errors(
    method: str, params: dict[str, Any], code: int
) -> None:
    async with open_raw("memory", everything_app()) as raw:
        await raw.initialize()
        msg = await raw.request(3, method, params)
        assert msg["error"]["code"] == code
        assert await raw.ping_ok()


async def test_features_typed_metadata_and_a_roots_function() -> None:
    app = trio_mcp.App("meta")
    icon = trio_mcp.Icon(src="https://example.com/i.png", mime_type="image/png", sizes=["48x48"])

    @app.resource("test://doc", title="Doc", icons=[icon],
                  annotations=trio_mcp.Annotations(audience=["assistant"], priority=1.0,
                                                   last_modified="2025-01-12T15:00:58Z"))
    async def doc() -> bytes:
        return b"\x00\x01"

    @app.prompt(title="Hello", icons=[{"src": "data:image/png;base64,AA=="}])
    async def hello(ctx: trio_mcp.RequestContext, who: str = "world") -> list[Any]:
        return [trio_mcp.PromptMessage("assistant", trio_mcp.AudioContent("AA==", "audio/wav")),
                f"hello {who} from request {ctx.request_id}"]

    @app.tool(annotations=trio_mcp.ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def peek() -> str:
        return "ok"

    client = trio_mcp.App("c")

    @client.on_roots
    async def roots(ctx: trio_mcp.RequestContext) -> list[trio_mcp.Root]:
        return [trio_mcp.Root("file:///a", name=f"asked by {ctx.peer.remote_info.name}")]  # type: ignore[union-attr]

    @app.tool()
    async def ask(ctx: trio_mcp.RequestContext) -> str:
        return (await ctx.list_roots())[0].name or ""

    async with trio_mcp.open_memory_pair(app, client) as (peer, server):
        resource = (await peer.list_all_resources())[0]
        assert resource.icons == [{"src": "https://example.com/i.png", "mimeType": "image/png",
                                   "sizes": ["48x48"]}]
        assert resource.annotations == {"audience": ["assistant"], "priority": 1.0,
                                        "lastModified": "2025-01-12T15:00:58Z"}
        blob = (await peer.read_resource("test://doc")).contents[0]
        assert isinstance(blob, trio_mcp.BlobResourceContents) and blob.blob == "AAE="
        prompt = (await peer.list_all_prompts())[0]
        assert prompt.title == "Hello" and prompt.icons == [{"src": "data:image/png;base64,AA=="}]
        assert prompt.arguments == [trio_mcp.PromptArgument("who", required=False)]
        got = await peer.get_prompt("hello")
        assert isinstance(got.messages[0].content, trio_mcp.AudioContent)
        assert got.messages[1].content == trio_mcp.TextContent(got.text.splitlines()[-1])
        assert got.text.startswith("hello world from request ")
        tools = {t.name: t for t in await peer.list_all_tools()}
        assert tools["peek"].annotations == {"readOnlyHint": True, "openWorldHint": False}
        assert (await peer.call_tool("ask")).text == "asked by meta"
        assert [r.uri for r in await server.list_roots()] == ["file:///a"]
