"""An MCP server with every 2025-11-25 and 2026-07-28 feature, over stdio, WebSocket or HTTP.

    python examples/everything_server.py                  # stdio
    python examples/everything_server.py --ws 127.0.0.1:8765
    python examples/everything_server.py --http 127.0.0.1:8000   # http://127.0.0.1:8000/mcp

It carries the fixture the official conformance suite's server scenarios
expect (tool, resource and prompt names and payloads: ``test_simple_text``,
``test://static-text``, ``test_prompt_with_arguments``...), plus tools that
exercise what those scenarios do not: resource links, roots, URL-mode
elicitation, list changes and resource updates.

Tools (conformance): test_simple_text, test_image_content, test_audio_content,
test_embedded_resource, test_multiple_content_types, test_tool_with_logging,
test_tool_with_progress, test_error_handling, test_sampling {prompt},
test_elicitation {message}, test_elicitation_sep1034_defaults,
test_elicitation_sep1330_enums, json_schema_2020_12_tool {name?, address?, contactMethod?,
phone?, email?}, test_custom_header_tool {region, query?} (``region`` is ``x-mcp-header``).
Tools (more): test_resource_link, test_list_roots, test_url_elicitation {url},
test_toggle_dynamic_tool, test_update_watched_resource {text}, test_log_levels;
over --http also test_reconnection (closes its SSE stream mid-call: the client
resumes with Last-Event-ID).
Tools (conformance, 2026-07-28 scenarios; each also works in a 2025-11-25
session, where its questions are requests to the client):
test_missing_capability (-32021 unless the client declared sampling),
test_input_required_result_elicitation (asks ``user_name``),
test_input_required_result_sampling (``sample_request``),
test_input_required_result_list_roots (``roots_request``),
test_input_required_result_request_state (``confirm``),
test_input_required_result_multiple_inputs (``user_name``, ``greeting``,
``client_roots`` in one round), test_input_required_result_multi_round
(``step1``, then ``step2``), test_input_required_result_tampered_state
(``confirm``), test_input_required_result_capabilities (``elicit_input``
and/or ``sample_input``, as declared), test_streaming_elicitation (progress),
test_logging_tool, test_trigger_tool_change and test_trigger_prompt_change
(add or remove test_trigger_dynamic_tool / test_trigger_dynamic_prompt: a
list change).
Tools (conformance, the tasks extension ``io.modelcontextprotocol/tasks``;
each also runs as a 2025-11-25 task, ``task: {ttl}``): greet {name} (never a
task), slow_compute {seconds, label?} (optional: a task when the request
declared the extension), failing_job (required; a tool error), protocol_error_job
(required; fails with a JSON-RPC error), confirm_delete {filename} (required; asks
``confirm``), multi_input (required; asks ``first`` and ``second`` at once),
test_tool_with_task (required; asks ``user_name``); and confirm_twice (required;
asks ``confirm`` twice in a row: a task's keys are never reused).
Resources: test://static-text, test://static-binary, test://watched-resource,
template test://template/{id}/data (with completion of ``id``).
Prompts: test_simple_prompt, test_prompt_with_arguments {arg1, arg2} (with
completion; arg2's depends on arg1), test_prompt_with_embedded_resource
{resourceUri}, test_prompt_with_image, test_input_required_result_prompt
(asks ``user_context``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from functools import partial
from typing import Any

import trio

import trio_mcp
from trio_mcp import (
    AudioContent,
    Completion,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceLink,
    TextContent,
)

#: A 1x1 red PNG and a minimal WAV, base64 (the conformance payloads).
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
LOGGER = "everything-server"
#: MCP 2026-07-28's MissingRequiredClientCapabilityError code.
MISSING_CLIENT_CAPABILITY = -32021
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    # SEP-2106: composition and conditional keywords survive tools/list.
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
#: A tool whose ``region`` is mirrored into the ``Mcp-Param-Region`` header (SEP-2243).
CUSTOM_HEADER_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
        "query": {"type": "string", "description": "What to run"},
    },
    "required": ["region"],
}
ARG1_CHOICES = ("alpha", "alpine", "beta", "gamma", "delta")
#: What the content tools return: a list of content blocks is the result's content
#: (``list[Any]`` would be structured output, sent as JSON).
Content = TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink


def _js(value: Any) -> str:
    """JSON as JavaScript's ``JSON.stringify`` writes it (the fixture's texts)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def add_conformance_tools(app: trio_mcp.App) -> None:
    """The tools the conformance suite's ``tools-*`` scenarios call."""

    @app.tool(description="Tests simple text content response",
              annotations=trio_mcp.ToolAnnotations(read_only_hint=True))
    async def test_simple_text() -> str:
        return "This is a simple text response for testing."

    @app.tool(description="Tests image content response")
    async def test_image_content() -> list[Content]:
        return [ImageContent(data=PNG, mime_type="image/png")]

    @app.tool(description="Tests audio content response")
    async def test_audio_content() -> list[Content]:
        return [AudioContent(data=WAV, mime_type="audio/wav")]

    @app.tool(description="Tests embedded resource content response")
    async def test_embedded_resource() -> list[Content]:
        return [EmbeddedResource({"uri": "test://embedded-resource", "mimeType": "text/plain",
                                  "text": "This is an embedded resource content."})]

    @app.tool(description="Tests response with multiple content types (text, image, resource)")
    async def test_multiple_content_types() -> list[Content]:
        return [
            TextContent("Multiple content types test:"),
            ImageContent(data=PNG, mime_type="image/png"),
            EmbeddedResource({"uri": "test://mixed-content-resource",
                              "mimeType": "application/json",
                              "text": _js({"test": "data", "value": 123})}),
        ]

    @app.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: trio_mcp.RequestContext) -> str:
        for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.log("info", text)
        return "Tool with logging executed successfully"

    @app.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: trio_mcp.RequestContext) -> str:
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        token = ctx.progress_token
        return str(token if token is not None else 0)

    @app.tool(description="Tests error response handling")
    async def test_error_handling() -> str:
        raise RuntimeError("This tool intentionally returns an error for testing")

    @app.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(ctx: trio_mcp.RequestContext, prompt: str) -> str:
        try:
            result = await ctx.sample(prompt, max_tokens=100, as_task=False)
        except trio_mcp.TrioMcpError as exc:
            return f"Sampling not supported or error: {exc}"
        return f"LLM response: {result.text or 'No response'}"

    @app.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(ctx: trio_mcp.RequestContext, message: str) -> str:
        schema = trio_mcp.form_schema(
            {"response": trio_mcp.string_field(description="User's response")}, ["response"]
        )
        try:
            result = await ctx.elicit(message, schema)
        except trio_mcp.TrioMcpError as exc:
            return f"Elicitation not supported or error: {exc}"
        return f"User response: action={result.action}, content={_js(result.content or {})}"

    @app.tool(description="Tests elicitation with default values per SEP-1034")
    async def test_elicitation_sep1034_defaults(ctx: trio_mcp.RequestContext) -> str:
        schema = trio_mcp.form_schema({
            "name": trio_mcp.string_field(description="User name", default="John Doe"),
            "age": trio_mcp.number_field(integer=True, description="User age", default=30),
            "score": trio_mcp.number_field(description="User score", default=95.5),
            "status": trio_mcp.enum_field(["active", "inactive", "pending"],
                                          description="User status", default="active"),
            "verified": trio_mcp.boolean_field(description="Verification status", default=True),
        })
        schema["required"] = []
        return await _elicit_summary(ctx, "Please review and update the form fields with defaults",
                                     schema)

    @app.tool(description="Tests elicitation with enum schema improvements per SEP-1330")
    async def test_elicitation_sep1330_enums(ctx: trio_mcp.RequestContext) -> str:
        options = ["option1", "option2", "option3"]
        titles = {"value1": "First Option", "value2": "Second Option", "value3": "Third Option"}
        choices = {"value1": "First Choice", "value2": "Second Choice", "value3": "Third Choice"}
        legacy = {"type": "string", "description": "Select one option (legacy)",
                  "enum": ["opt1", "opt2", "opt3"],
                  "enumNames": ["Option One", "Option Two", "Option Three"]}
        schema = trio_mcp.form_schema({
            "untitledSingle": trio_mcp.enum_field(options, description="Select one option"),
            "titledSingle": trio_mcp.enum_field(titles,
                                                description="Select one option with titles"),
            "legacyEnum": legacy,
            "untitledMulti": trio_mcp.enum_field(options, multiple=True, min_items=1,
                                                 max_items=3,
                                                 description="Select multiple options"),
            "titledMulti": trio_mcp.enum_field(choices, multiple=True, min_items=1, max_items=3,
                                               description="Select multiple options with titles"),
        })
        schema["required"] = []
        return await _elicit_summary(ctx, "Please select options from the enum fields", schema)

    @app.tool(description="Tool with JSON Schema 2020-12 features for conformance testing "
              "(SEP-1613)", input_schema=JSON_SCHEMA_2020_12)
    async def json_schema_2020_12_tool(
        name: str | None = None, address: dict[str, Any] | None = None,
        contactMethod: str | None = None, phone: str | None = None,
        email: str | None = None,
    ) -> str:
        given = (("name", name), ("address", address), ("contactMethod", contactMethod),
                 ("phone", phone), ("email", email))
        arguments = {k: v for k, v in given if v is not None}
        return f"JSON Schema 2020-12 tool called with: {_js(arguments)}"

    @app.tool(description="Runs a query in a region; region is mirrored into the "
              "Mcp-Param-Region HTTP header (SEP-2243)", input_schema=CUSTOM_HEADER_SCHEMA)
    async def test_custom_header_tool(region: str, query: str | None = None) -> str:
        return f"region={region} query={query}"


async def _elicit_summary(ctx: trio_mcp.RequestContext, message: str,
                          schema: dict[str, Any]) -> str:
    try:
        result = await ctx.elicit(message, schema)
    except trio_mcp.TrioMcpError as exc:
        return f"Elicitation not supported or error: {exc}"
    return f"Elicitation completed: action={result.action}, content={_js(result.content or {})}"


def add_more_tools(app: trio_mcp.App, state: dict[str, str]) -> None:
    """Tools exercising what the conformance scenarios do not."""

    @app.tool(description="Returns a link to a resource",
              icons=[trio_mcp.Icon(src=f"data:image/png;base64,{PNG}", mime_type="image/png")])
    async def test_resource_link() -> list[Content]:
        return [ResourceLink(uri="test://static-text", name="static-text",
                             mime_type="text/plain", description="The static text resource")]

    @app.tool(description="Lists the client's roots (roots/list)")
    async def test_list_roots(ctx: trio_mcp.RequestContext) -> dict[str, Any]:
        roots = await ctx.list_roots()
        return {"roots": [{"uri": r.uri, "name": r.name} for r in roots]}

    @app.tool(description="URL-mode elicitation, then notifications/elicitation/complete")
    async def test_url_elicitation(
        ctx: trio_mcp.RequestContext, url: str = "https://example.com/consent"
    ) -> str:
        try:
            elicitation_id, result = await ctx.elicit_url("Please open this page", url)
        except trio_mcp.TrioMcpError as exc:
            return f"URL elicitation not supported or error: {exc}"
        if result.action == "accept":
            await ctx.complete_elicitation(elicitation_id)
        return f"URL elicitation: action={result.action}, id={elicitation_id}"

    async def dynamic_tool() -> str:
        return "I come and go"

    @app.tool(description="Adds test_dynamic_tool, or removes it if present (list_changed)")
    async def test_toggle_dynamic_tool() -> str:
        if "test_dynamic_tool" in app.tools:
            app.remove_tool("test_dynamic_tool")
            return "removed test_dynamic_tool"
        app.tool(name="test_dynamic_tool", description="A tool added at run time")(dynamic_tool)
        return "added test_dynamic_tool"

    @app.tool(description="Changes test://watched-resource and notifies its subscribers")
    async def test_update_watched_resource(text: str = "Updated content") -> str:
        state["watched"] = text
        count = app.notify_resource_updated("test://watched-resource")
        return f"notified {count} subscriber(s)"

    @app.tool(description="Logs one message at each RFC 5424 level")
    async def test_log_levels(ctx: trio_mcp.RequestContext) -> str:
        for level in trio_mcp.LOGGING_LEVELS:
            await ctx.log(level, {"level": level}, logger=LOGGER)
        return "logged"


def _form(field: str, kind: str = "string") -> dict[str, Any]:
    """The fixture's one-field form: ``{field: {"type": kind}}``, required."""
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


def _answer(result: trio_mcp.ElicitResult, field: str) -> str:
    """The text the user entered in ``field`` (the fixture's ``'unknown'`` otherwise)."""
    value = (result.content or {}).get(field)
    return value if isinstance(value, str) else "unknown"


def _ask_sampling(text: str, max_tokens: int) -> trio_mcp.CreateMessageParams:
    return trio_mcp.CreateMessageParams(
        messages=[trio_mcp.SamplingMessage("user", {"type": "text", "text": text})],
        max_tokens=max_tokens,
    )


def add_modern_tools(app: trio_mcp.App) -> None:
    """The tools the conformance suite's 2026-07-28 scenarios call (MRTR, stateless, listen).

    Each is written once: in a 2026-07-28 request a question ends the round
    with ``input_required`` and the client's retry answers it; in a
    2025-11-25 session the same question is a request to the client.
    """

    @app.tool(description="Test tool requiring sampling")
    async def test_missing_capability(ctx: trio_mcp.RequestContext) -> str:
        caps = ctx.client_capabilities
        if caps is None or caps.sampling is None:
            raise trio_mcp.McpError(
                MISSING_CLIENT_CAPABILITY, "Missing required client capability: sampling",
                {"requiredCapabilities": {"sampling": {}}},
            )
        return "Success"

    @app.tool(description="MRTR: returns InputRequiredResult with elicitation request")
    async def test_input_required_result_elicitation(ctx: trio_mcp.RequestContext) -> str:
        result = await ctx.elicit("What is your name?", _form("name"), key="user_name")
        return f"Hello, {_answer(result, 'name')}!"

    @app.tool(description="MRTR: returns InputRequiredResult with sampling request")
    async def test_input_required_result_sampling(ctx: trio_mcp.RequestContext) -> str:
        result = await ctx.sample("What is the capital of France?", max_tokens=100,
                                  as_task=False, key="sample_request")
        return f"Sampling result: {result.text or 'no response'}"

    @app.tool(description="MRTR: returns InputRequiredResult with roots/list request")
    async def test_input_required_result_list_roots(ctx: trio_mcp.RequestContext) -> str:
        roots = await ctx.list_roots(key="roots_request")
        return f"Found {len(roots)} root(s)"

    @app.tool(description="MRTR: returns InputRequiredResult with requestState")
    async def test_input_required_result_request_state(ctx: trio_mcp.RequestContext) -> str:
        result = await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
        if result.action == "accept" and (result.content or {}).get("ok") is True:
            return "state-ok: requestState validated"
        return f"state-unconfirmed: action={result.action}"

    @app.tool(description="MRTR: returns InputRequiredResult with multiple input requests")
    async def test_input_required_result_multiple_inputs(ctx: trio_mcp.RequestContext) -> str:
        answers = await ctx.ask_all({
            "user_name": trio_mcp.ElicitParams("What is your name?", _form("name")),
            "greeting": _ask_sampling("Generate a greeting", 50),
            "client_roots": None,
        })
        name = answers["user_name"]
        greeting = answers["greeting"]
        roots = answers["client_roots"]
        assert isinstance(name, trio_mcp.ElicitResult)
        assert isinstance(greeting, trio_mcp.CreateMessageResult) and isinstance(roots, list)
        return (f"Name: {_answer(name, 'name')}; Greeting: {greeting.text or 'Hello there!'}; "
                f"Roots: {len(roots)}")

    @app.tool(description="MRTR: multi-round InputRequiredResult workflow")
    async def test_input_required_result_multi_round(ctx: trio_mcp.RequestContext) -> str:
        name = await ctx.elicit("Step 1: What is your name?", _form("name"), key="step1")
        color = await ctx.elicit("Step 2: What is your favorite color?", _form("color"),
                                 key="step2")
        return f"Multi-round complete for {_answer(name, 'name')} who likes " \
               f"{_answer(color, 'color')}"

    @app.tool(description="MRTR: HMAC-signed requestState integrity test")
    async def test_input_required_result_tampered_state(ctx: trio_mcp.RequestContext) -> str:
        # The runtime signs requestState and rejects an altered one (-32602)
        # before this runs: reaching the answer means the state verified.
        await ctx.elicit("Please confirm", _form("ok", "boolean"), key="confirm")
        return "integrity-ok: state verified"

    @app.tool(description="MRTR: respects client capabilities in inputRequests")
    async def test_input_required_result_capabilities(ctx: trio_mcp.RequestContext) -> str:
        caps = ctx.client_capabilities
        questions: dict[str, trio_mcp.ElicitParams | trio_mcp.CreateMessageParams | None] = {}
        if caps is not None and caps.elicitation is not None:
            questions["elicit_input"] = trio_mcp.ElicitParams("Elicitation input",
                                                              _form("value"))
        if caps is not None and caps.sampling is not None:
            questions["sample_input"] = _ask_sampling("Sample request", 50)
        if not questions:
            return "No supported capabilities declared"
        answers = await ctx.ask_all(questions)
        return f"capabilities-ok: received {','.join(answers)}"

    @app.tool(description="Diagnostic tool validating response progress streams")
    async def test_streaming_elicitation(ctx: trio_mcp.RequestContext) -> str:
        await ctx.report_progress(50, 100, "Streaming")
        return "Streaming complete"

    @app.tool(description="Diagnostic logging validator tool")
    async def test_logging_tool(ctx: trio_mcp.RequestContext) -> str:
        # Sent only when the client asked for log messages (2026-07-28: the
        # request's logLevel; 2025-11-25: logging/setLevel).
        await ctx.log("info", "Diagnostic trace logging activated", logger=LOGGER)
        return "Logging evaluated"

    async def trigger_dynamic_tool() -> str:
        return "I come and go (test_trigger_tool_change)"

    async def trigger_dynamic_prompt() -> str:
        return "I come and go (test_trigger_prompt_change)"

    @app.tool(description="Changes the tool list (adds or removes test_trigger_dynamic_tool)")
    async def test_trigger_tool_change() -> str:
        if "test_trigger_dynamic_tool" in app.tools:
            app.remove_tool("test_trigger_dynamic_tool")
        else:
            app.tool(name="test_trigger_dynamic_tool",
                     description="A tool test_trigger_tool_change adds")(trigger_dynamic_tool)
        return "Mutation triggered"

    @app.tool(description="Changes the prompt list (adds or removes test_trigger_dynamic_prompt)")
    async def test_trigger_prompt_change() -> str:
        if "test_trigger_dynamic_prompt" in app.prompts:
            app.remove_prompt("test_trigger_dynamic_prompt")
        else:
            app.prompt(name="test_trigger_dynamic_prompt",
                       description="A prompt test_trigger_prompt_change adds")(
                trigger_dynamic_prompt)
        return "Mutation triggered"

    @app.prompt(description="MRTR: prompt that requires elicitation input")
    async def test_input_required_result_prompt(ctx: trio_mcp.RequestContext) -> str:
        result = await ctx.elicit("What context should the prompt use?", _form("context"),
                                  key="user_context")
        return f"Prompt with context: {_answer(result, 'context')}"


def add_task_tools(app: trio_mcp.App) -> None:
    """The tools the conformance suite's ``tasks-*`` scenarios call (SEP-2663).

    Written once for both eras: in 2026-07-28 the server decides (a
    ``required`` tool always runs as a task, -32021 when the request did not
    declare the extension; an ``optional`` one when it did), and a task's
    questions are shown by ``tasks/get`` and answered by ``tasks/update``;
    in a 2025-11-25 session the client asks for a task (``task: {ttl}``) and
    the questions are requests to the client.
    """

    @app.tool(description="Greets someone, synchronously (never a task)")
    async def greet(name: str) -> str:
        return f"Hello, {name}!"

    @app.tool(description="Sleeps `seconds` seconds, then answers (a task when the client "
              "declared the tasks extension)", task_support="optional")
    async def slow_compute(seconds: float = 1.0, label: str | None = None) -> str:
        await trio.sleep(max(0.0, seconds))
        return f"slow_compute done after {seconds}s" + (f" ({label})" if label else "")

    @app.tool(description="A task that ends in a tool error (isError) after ~1s",
              task_support="required")
    async def failing_job() -> trio_mcp.CallToolResult:
        await trio.sleep(1.0)
        return trio_mcp.CallToolResult(
            content=[TextContent("failing_job failed, as it always does")], is_error=True
        )

    @app.tool(description="A task that fails with a JSON-RPC error (-32603)",
              task_support="required")
    async def protocol_error_job() -> str:
        raise trio_mcp.McpError(-32603, "protocol_error_job: internal error, on purpose")

    @app.tool(description="Asks for confirmation (one elicitation), then 'deletes' the file",
              task_support="required")
    async def confirm_delete(ctx: trio_mcp.RequestContext, filename: str) -> str:
        result = await ctx.elicit(f"Delete {filename}?", _form("confirm", "boolean"),
                                  key="confirm")
        if result.action == "accept" and (result.content or {}).get("confirm") is True:
            return f"Deleted {filename}"
        return f"Kept {filename} (action={result.action})"

    @app.tool(description="Asks two questions at once (two outstanding elicitations)",
              task_support="required")
    async def multi_input(ctx: trio_mcp.RequestContext) -> str:
        answers: dict[str, str] = {}

        async def one(key: str, message: str) -> None:
            result = await ctx.elicit(message, _form("name"), key=key)
            answers[key] = f"{result.action}:{_answer(result, 'name')}"

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "first", "First input?")
            nursery.start_soon(one, "second", "Second input?")
        return f"multi_input: first={answers['first']}, second={answers['second']}"

    @app.tool(description="Asks for confirmation twice in a row, both times as `confirm`",
              task_support="required")
    async def confirm_twice(ctx: trio_mcp.RequestContext) -> str:
        first = await ctx.elicit("Sure?", _form("confirm", "boolean"), key="confirm")
        second = await ctx.elicit("Really sure?", _form("confirm", "boolean"), key="confirm")
        return f"confirm_twice: {first.action}, then {second.action}"

    @app.tool(description="Asks the user's name (an MRTR round), then runs as a task",
              task_support="required", task_prelude=True)
    async def test_tool_with_task(ctx: trio_mcp.RequestContext) -> str:
        # The prelude: a multi round-trip question of the request itself.
        result = await ctx.elicit("What is your name?", _form("name"), key="user_name")
        await ctx.start_task()  # the CreateTaskResult goes now; the rest is the task
        await trio.sleep(0.1)
        return f"Hello, {_answer(result, 'name')}! (from the task)"


def add_resources(app: trio_mcp.App, state: dict[str, str]) -> None:
    """The conformance resources and template, and the template's completion."""

    @app.resource("test://static-text", name="static-text", title="Static Text Resource",
                  description="A static text resource for testing", mime_type="text/plain",
                  annotations=trio_mcp.Annotations(audience=["user"], priority=0.5))
    async def static_text() -> str:
        return "This is the content of the static text resource."

    @app.resource("test://static-binary", name="static-binary", title="Static Binary Resource",
                  description="A static binary resource (image) for testing",
                  mime_type="image/png")
    async def static_binary() -> trio_mcp.BlobResourceContents:
        return trio_mcp.BlobResourceContents(uri="test://static-binary", blob=PNG,
                                             mime_type="image/png")

    @app.resource("test://watched-resource", name="watched-resource", title="Watched Resource",
                  description="A resource test_update_watched_resource changes",
                  mime_type="text/plain")
    async def watched() -> str:
        return state["watched"]

    @app.resource_template("test://template/{id}/data", name="template",
                           title="Resource Template",
                           description="A resource template with parameter substitution",
                           mime_type="application/json")
    async def template(id: str) -> str:
        return _js({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @app.completion(resource_template="test://template/{id}/data", argument="id")
    async def complete_id(value: str, context: dict[str, str]) -> list[str]:
        return [i for i in ("1", "2", "3", "123", "456") if i.startswith(value)]


def add_prompts(app: trio_mcp.App) -> None:
    """The conformance prompts and the completion of their arguments."""

    @app.prompt(title="Simple Test Prompt", description="A simple prompt without arguments")
    async def test_simple_prompt() -> str:
        return "This is a simple prompt for testing."

    @app.prompt(title="Prompt With Arguments", description="A prompt with required arguments",
                arguments={"arg1": "First test argument", "arg2": "Second test argument"})
    async def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @app.prompt(title="Prompt With Embedded Resource",
                description="A prompt that includes an embedded resource",
                arguments={"resourceUri": "URI of the resource to embed"})
    async def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
        resource = {"uri": resourceUri, "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}
        return [EmbeddedResource(resource), "Please process the embedded resource above."]

    @app.prompt(title="Prompt With Image", description="A prompt that includes image content")
    async def test_prompt_with_image() -> list[Any]:
        return [
            PromptMessage("user", ImageContent(data=PNG, mime_type="image/png")),
            PromptMessage("user", TextContent("Please analyze the image above.")),
        ]

    @app.completion(prompt="test_prompt_with_arguments", argument="arg1")
    async def complete_arg1(value: str, context: dict[str, str]) -> list[str]:
        return [c for c in ARG1_CHOICES if c.startswith(value)]

    @app.completion(prompt="test_prompt_with_arguments", argument="arg2")
    async def complete_arg2(value: str, context: dict[str, str]) -> Completion:
        base = context.get("arg1", "any")
        values = [f"{base}-{i}" for i in range(150) if f"{base}-{i}".startswith(value)]
        return Completion(values=values)


def add_http_tools(app: trio_mcp.App, http_app: trio_mcp.StreamableHttpApp) -> None:
    """The tools that need the HTTP transport: ``test_reconnection`` (SEP-1699)."""

    @app.tool(description="A tool that triggers SSE stream closure to test client "
                          "reconnection behavior")
    async def test_reconnection(ctx: trio_mcp.RequestContext) -> str:
        session_id = ctx.info.get("session_id")
        closed = session_id is not None and http_app.close_sse_stream(session_id, ctx.request_id)
        await trio.sleep(0.1)  # the client reconnects after the retry delay
        return ("Reconnection test completed" if closed
                else "Reconnection test completed (no SSE stream to close)")


def build_app(store: str | None = None) -> trio_mcp.App:
    """A fresh App with every feature (each App has its own state and tasks).

    Args:
        store: Where tasks live: ``"memory"`` (the default) or
            ``"sqlite:///path/to/tasks.db"``.
    """
    app = trio_mcp.App("trio-mcp-everything", "0.1.0",
                       instructions="Every MCP 2025-11-25 feature, and the conformance fixture.",
                       store=store)
    state = {"watched": "Watched resource content"}
    add_conformance_tools(app)
    add_more_tools(app, state)
    add_resources(app, state)
    add_prompts(app)
    add_modern_tools(app)
    add_task_tools(app)

    @app.on_roots_changed
    def roots_changed(peer: trio_mcp.Peer, _: None) -> None:
        peer.send_log_message_soon("info", "roots changed", logger=LOGGER)

    return app


async def serve_websocket(
    app: trio_mcp.App, host: str, port: int, tokens: dict[str, str] | None = None
) -> None:
    """Serve ``app`` over WebSocket on ``host:port`` until cancelled."""
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(trio_mcp.serve_websocket, app, host, port, tokens=tokens)
        )
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


async def serve_http(
    app: trio_mcp.App, host: str, port: int, tokens: dict[str, str] | None = None,
    server: trio_mcp.HttpServerName | None = None,
) -> None:
    """Serve ``app`` over Streamable HTTP on ``host:port`` (endpoint ``/mcp``) until cancelled."""
    http_app = trio_mcp.StreamableHttpApp(app, policy=trio_mcp.HttpPolicy(tokens=tokens))
    add_http_tools(app, http_app)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_http, http_app, host, port,
                                                   server=server))
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve over the transport it names (stdio by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--ws", metavar="HOST:PORT", help="serve over WebSocket instead of stdio")
    where.add_argument("--http", metavar="HOST:PORT",
                       help="serve over Streamable HTTP (endpoint /mcp) instead of stdio")
    parser.add_argument("--token", help="require this bearer token (WebSocket or HTTP)")
    parser.add_argument("--http-server", choices=("llhttp", "hypercorn"),
                        help="with --http: the HTTP/1.1 server (default: llhttp when httptools "
                             "is installed, else hypercorn)")
    parser.add_argument("--store", metavar="URL",
                        help="where tasks live: memory (default) or sqlite:///path/to/tasks.db")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    args = parser.parse_args(argv)
    if args.token and not (args.ws or args.http):
        parser.error("--token applies to --ws or --http")
    if args.http_server and not args.http:
        parser.error("--http-server applies to --http")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    try:
        app = build_app(args.store)
    except ValueError as exc:  # an unknown store URL
        parser.error(f"--store: {exc}")
    tokens = {args.token: "token-user"} if args.token else None
    if args.ws or args.http:
        host, _, port = (args.ws or args.http).rpartition(":")
        if not port.isdigit():
            parser.error(f"wants HOST:PORT, not {args.ws or args.http!r}")
        serve = serve_websocket if args.ws else partial(serve_http, server=args.http_server)
    try:
        if args.ws or args.http:
            trio.run(serve, app, host or "127.0.0.1", int(port), tokens)
        else:
            trio.run(trio_mcp.serve_stdio, app)
    except* trio_mcp.McpError as group:  # e.g. the task store is unreachable at start
        sys.exit(f"everything_server: {group.exceptions[0]}")


if __name__ == "__main__":
    main()
