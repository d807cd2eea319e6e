"""Streamable HTTP, MCP 2026-07-28 ("modern"), over real sockets on 127.0.0.1 (hypercorn + httpx).

Each modern POST is served on its own: a fresh server peer in the 2026-07-28
dialect, no session, its headers checked against its body. The 2025-11-25
sessions keep working beside it on the same endpoint. Quotes are from the
2026-07-28 specification (basic/transports/streamable-http, basic/index,
basic/versioning).
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp.peer._messages import ALL_PROTOCOL_VERSIONS
from trio_mcp.transports._http_policy import HeaderMismatch, check_modern_headers
from trio_mcp.transports._sse import SSEParser

from tests.http_support import ACCEPT_BOTH, Raw, call, http_client, serving

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("both_http_servers")]
#: Leaving an httpx response stream early leaves its generators to the GC.
drops_a_stream = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning"
)

MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SQL_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "query": {"type": "string"},
        "limit": {"type": ["integer", "null"], "x-mcp-header": "Limit"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
        "options": {
            "type": "object",
            "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
        },
    },
    "required": ["region", "query"],
}


class Probe:
    """What the test App's tools report back to the test."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.cancelled = trio.Event()


def modern_app(probe: Probe | None = None) -> trio_mcp.App:
    """A small App: echo, a header-mirrored tool, an elicitation, progress, a tool-adder."""
    probe = probe or Probe()
    app = trio_mcp.App("http-modern-test", "1.0")

    @app.tool
    async def echo(text: str) -> str:
        """Say it back."""
        return text

    @app.tool(input_schema=SQL_SCHEMA)
    async def execute_sql(
        region: str, query: str, limit: int | None = 0, dry: bool = False,
        options: dict[str, Any] | None = None,
    ) -> str:
        """Run a query in a region."""
        return f"{region}:{query}:{limit}:{dry}:{(options or {}).get('tenant')}"

    @app.tool
    async def ask_name(ctx: trio_mcp.RequestContext) -> str:
        """Ask the user's name."""
        schema = {"type": "object", "properties": {"name": {"type": "string"}},
                  "required": ["name"]}
        result = await ctx.elicit("Your name?", schema)
        return f"Hello, {(result.content or {}).get('name')}!"

    @app.tool
    async def steps(ctx: trio_mcp.RequestContext) -> str:
        """Report progress and log, then finish."""
        for step in (1, 2):
            await ctx.report_progress(step, 2)
        await ctx.log("info", "done stepping")
        return "stepped"

    @app.tool
    async def add_tool(name: str) -> str:
        """Register a new tool (a list change)."""

        async def fresh() -> str:
            return "fresh"

        app.tool(name=name)(fresh)
        return f"added {name}"

    @app.tool
    async def wait_forever() -> str:
        """Wait until cancelled."""
        probe.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            probe.cancelled.set()
            raise
        return "never"

    return app


def meta(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {PV: MODERN, CAPS: {}, INFO: {"name": "http-modern", "version": "0"}}
    out.update(extra)
    return out


def request(request_id: Any, method: str, params: dict[str, Any] | None = None,
            **meta_fields: Any) -> dict[str, Any]:
    """A modern JSON-RPC request: ``params`` plus a valid ``_meta``."""
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**(params or {}), "_meta": meta(**meta_fields)}}


def headers_for(body: dict[str, Any], **override: Any) -> dict[str, Any]:
    """The conformant headers of ``body`` (MCP-Protocol-Version, Mcp-Method, Mcp-Name).

    ``override``: header -> value (underscores for dashes); None removes it.
    """
    out: dict[str, Any] = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json",
                           "MCP-Protocol-Version": MODERN, "Mcp-Method": body["method"]}
    field = NAME_FIELDS.get(body["method"])
    if field is not None and field in body.get("params", {}):
        out["Mcp-Name"] = body["params"][field]
    for key, value in override.items():
        key = key.replace("_", "-")
        out = {k: v for k, v in out.items() if k.lower() != key.lower()}
        if value is not None:
            out[key] = value
    return out


async def post(client: httpx.AsyncClient, url: str, body: dict[str, Any],
               **override: Any) -> httpx.Response:
    return await client.post(url, content=json.dumps(body).encode(),
                             headers=headers_for(body, **override))


def sse_messages(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in SSEParser().feed(body) if e.data]


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def assert_error(response: httpx.Response, status: int, code: int, request_id: Any) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["id"] == request_id and body["error"]["code"] == code, body
    return body["error"]


# --- requests and answers ----------------------------------------------------------------------


async def test_modern_discover_answers_json_without_a_session() -> None:
    """'The server answers each request with either a single JSON object or a Server-Sent
    Events (SSE) stream'; 'An Mcp-Session-Id header on a request: ignore it, and do not mint
    or echo session IDs.'"""
    async with serving(modern_app()) as (url, http_app), http_client() as client:
        body = request(1, "server/discover")
        response = await post(client, url, body, Mcp_Session_Id="not-a-session")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert "mcp-session-id" not in response.headers
        result = response.json()["result"]
        assert result["supportedVersions"] == list(ALL_PROTOCOL_VERSIONS)
        assert result["resultType"] == "complete"
        assert http_app.sessions == {}


async def test_modern_tools_call_is_answered_with_a_complete_result() -> None:
    """'Client->>Server: POST tools/call (JSON-RPC request) / Server-->>Client: 200 OK,
    application/json / JSON-RPC response' (Message Flow)."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        response = await post(client, url, request(7, "tools/call",
                                                   {"name": "echo", "arguments": {"text": "hi"}}))
        assert response.status_code == 200
        message = response.json()
        assert message["id"] == 7 and message["result"]["content"][0]["text"] == "hi"
        assert message["result"]["resultType"] == "complete"


async def test_modern_progress_and_log_come_on_the_request_sse_stream() -> None:
    """'The server MAY send JSON-RPC notifications — for example, notifications/progress or
    notifications/message — before the final response. These notifications MUST relate to
    the originating client request'; 'servers SHOULD include the X-Accel-Buffering: no
    header'."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = request(8, "tools/call", {"name": "steps", "arguments": {}},
                       progressToken="p8", **{LOG_LEVEL: "info"})
        response = await post(client, url, body)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["x-accel-buffering"] == "no"
        messages = sse_messages(response.content)
        assert [m.get("method") for m in messages] == [
            "notifications/progress", "notifications/progress", "notifications/message", None]
        assert [m["params"]["progress"] for m in messages[:2]] == [1, 2]
        assert messages[-1]["id"] == 8
        assert messages[-1]["result"]["content"][0]["text"] == "stepped"
        assert b"id:" not in response.content  # not resumable: no event ids


# --- errors and their HTTP status --------------------------------------------------------------


@pytest.mark.parametrize("drop", [None, PV, CAPS])
async def test_modern_missing_meta_is_400_invalid_params(drop: str | None) -> None:
    """'A request missing any required field is malformed; the server MUST reject it with
    JSON-RPC error code -32602 (Invalid params). On HTTP, the response status MUST be 400
    Bad Request.' (basic/index)"""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = request(11, "tools/list")
        if drop is None:
            del body["params"]["_meta"]
        else:
            del body["params"]["_meta"][drop]
        assert_error(await post(client, url, body), 400, trio_mcp.INVALID_PARAMS, 11)


async def test_modern_unsupported_version_is_400_with_supported_versions() -> None:
    """'If the server does not implement the requested protocol version ... it MUST respond
    with 400 Bad Request and an UnsupportedProtocolVersionError listing its supported
    versions.'"""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = request(12, "server/discover")
        body["params"]["_meta"][PV] = "2099-01-01"
        response = await post(client, url, body, MCP_Protocol_Version="2099-01-01")
        error = assert_error(response, 400, -32022, 12)
        assert error["data"] == {"supported": list(ALL_PROTOCOL_VERSIONS),
                                 "requested": "2099-01-01"}


async def test_modern_unknown_and_removed_methods_are_404() -> None:
    """'If the server does not implement the requested RPC method, it MUST respond with 404
    Not Found and a JSON-RPC error with code -32601 (Method not found).'"""
    async with serving(modern_app()) as (url, _), http_client() as client:
        for request_id, method in enumerate(
            ["unknown/method", "ping", "logging/setLevel", "resources/subscribe", "initialize"]
        ):
            response = await post(client, url, request(request_id, method))
            assert_error(response, 404, trio_mcp.METHOD_NOT_FOUND, request_id)


# --- header validation -------------------------------------------------------------------------

TOOL_CALL = request(21, "tools/call", {"name": "echo", "arguments": {"text": "x"}})


@pytest.mark.parametrize(("override", "body_version"), [
    pytest.param({"Mcp_Method": None}, MODERN, id="missing-mcp-method"),
    pytest.param({"Mcp_Method": "tools/list"}, MODERN, id="other-mcp-method"),
    pytest.param({"Mcp_Method": "TOOLS/CALL"}, MODERN, id="mcp-method-case"),
    pytest.param({"Mcp_Name": None}, MODERN, id="missing-mcp-name"),
    pytest.param({"Mcp_Name": "other"}, MODERN, id="other-mcp-name"),
    pytest.param({"Mcp_Name": "=?base64?ZWNobw?="}, MODERN, id="bad-base64-mcp-name"),
    pytest.param({"Mcp_Name": b"ech\xc3\xb6"}, MODERN, id="non-ascii-mcp-name"),
    pytest.param({"MCP_Protocol_Version": None}, MODERN, id="missing-version-header"),
    pytest.param({}, "2099-01-01", id="version-header-vs-meta"),
])
async def test_modern_header_mismatch_is_400_header_mismatch(
    override: dict[str, Any], body_version: str
) -> None:
    """'Servers that process the request body MUST reject requests where the values specified
    in the headers do not match the corresponding values in the request body' with 'HTTP
    status 400 Bad Request' and '-32020 (HeaderMismatch)'; failures include 'A required
    standard header (MCP-Protocol-Version, Mcp-Method, Mcp-Name) is missing' and 'A header
    value contains invalid characters'."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = json.loads(json.dumps(TOOL_CALL))
        body["params"]["_meta"][PV] = body_version
        error = assert_error(await post(client, url, body, **override), 400, -32020, 21)
        assert error["message"].startswith("Header mismatch")


@pytest.mark.parametrize("name", [b64("echo"), "echo"])
async def test_modern_mcp_name_base64_and_whitespace_are_accepted(name: str) -> None:
    """'servers MUST decode an encoded Mcp-Name or Mcp-Param-{Name} value before comparing
    it to the corresponding request body value'; header names are case-insensitive."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        response = await post(client, url, TOOL_CALL, Mcp_Name=None, mcp_name=name,
                              Mcp_Method=None, MCP_METHOD="tools/call")
        assert response.status_code == 200, response.text
        assert response.json()["result"]["content"][0]["text"] == "x"


async def test_modern_tasks_without_mcp_name_are_logged_once_per_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``tasks/*`` POST without ``Mcp-Name`` passes the header check (fastmcp-tasks 4.1.4
    sends none; docs/interop.md F1) and is logged at debug level once per client (its
    identity and ``clientInfo``); one whose ``Mcp-Name`` disagrees with the body is -32020."""
    caplog.set_level(logging.DEBUG, logger="trio_mcp.transports")
    async with serving(modern_app()) as (url, _), http_client() as client:
        for n, client_name in enumerate(["fastmcp", "fastmcp", "other", "fastmcp"]):
            body = request(40 + n, "tasks/get", {"taskId": "t-1"},
                           **{INFO: {"name": client_name, "version": "4.1.4"}})
            response = await post(client, url, body)
            assert response.json()["error"]["code"] in (-32021, -32602), response.text
        body = request(50, "tasks/get", {"taskId": "t-1"})
        assert_error(await post(client, url, body, Mcp_Name="t-2"), 400, -32020, 50)
    logged = [r for r in caplog.records
              if "without the Mcp-Name header accepted" in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.DEBUG, logging.DEBUG]
    assert "'fastmcp'" in logged[0].getMessage() and "'other'" in logged[1].getMessage()


def test_modern_header_values_lose_surrounding_whitespace() -> None:
    """RFC 9110 5.5: 'a field parsing implementation MUST exclude such whitespace prior to
    evaluating the field value' (httpx will not send it, so the check is called directly)."""
    scope = {"headers": [(b"mcp-protocol-version", b" 2026-07-28"),
                         (b"mcp-method", b"tools/call\t"), (b"mcp-name", b"  echo  ")]}
    check_modern_headers(scope, "tools/call", TOOL_CALL["params"], lambda _: None)
    inner = {"headers": [*scope["headers"][:2], (b"mcp-name", b"  ech o ")]}  # a new request
    with pytest.raises(HeaderMismatch):
        check_modern_headers(inner, "tools/call", TOOL_CALL["params"], lambda _: None)


async def test_modern_missing_meta_version_with_header_is_invalid_params_not_mismatch() -> None:
    """'A request missing any required field is malformed; the server MUST reject it with
    JSON-RPC error code -32602': with the header present and no version in _meta there is
    nothing to mismatch."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = request(22, "server/discover")
        del body["params"]["_meta"][PV]
        assert_error(await post(client, url, body), 400, trio_mcp.INVALID_PARAMS, 22)


SQL_ARGS = {"region": "us-west1", "query": "SELECT 1"}


@pytest.mark.parametrize(("arguments", "headers", "expected"), [
    pytest.param(SQL_ARGS, {"Mcp-Param-Region": "us-west1"}, "us-west1:SELECT 1:0:False:None",
                 id="match"),
    pytest.param({**SQL_ARGS, "region": "Hello, 世界"},
                 {"mcp-param-region": b64("Hello, 世界")}, "Hello, 世界:SELECT 1:0:False:None",
                 id="base64-lowercase-name"),
    pytest.param({**SQL_ARGS, "limit": 42, "dry": True, "options": {"tenant": "acme"}},
                 {"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "42.0",
                  "Mcp-Param-Dry": "true", "Mcp-Param-Tenant": "acme"},
                 "us-west1:SELECT 1:42:True:acme", id="integer-boolean-nested"),
    pytest.param({**SQL_ARGS, "limit": None},
                 {"Mcp-Param-Region": "us-west1", "Mcp-Param-Unknown": "ignored"},
                 "us-west1:SELECT 1:None:False:None", id="null-and-unknown-header"),
    pytest.param(SQL_ARGS, {"Mcp-Param-Region": "eu-west1"}, None, id="mismatch"),
    pytest.param(SQL_ARGS, {}, None, id="missing"),
    pytest.param(SQL_ARGS, {"Mcp-Param-Region": "us-west1", "Mcp-Param-Limit": "3"}, None,
                 id="unexpected"),
    pytest.param({**SQL_ARGS, "dry": False},
                 {"Mcp-Param-Region": "us-west1", "Mcp-Param-Dry": "False"}, None,
                 id="boolean-case"),
    pytest.param(SQL_ARGS, {"Mcp-Param-Region": "=?base64?dXMtd2VzdDE?="}, None,
                 id="base64-padding"),
])
async def test_modern_mcp_param_headers_mirror_x_mcp_header_arguments(
    arguments: dict[str, Any], headers: dict[str, str], expected: str | None
) -> None:
    """'Any server that processes the message body MUST validate that encoded header values,
    after decoding if Base64-encoded, match the corresponding values in the request body.
    Servers MUST reject requests with a 400 Bad Request HTTP status and JSON-RPC error code
    -32020 (HeaderMismatch) if any validation fails'; 'Client omits header but value is in
    body ... Server MUST reject the request'; 'Parameter value is null ... Server MUST NOT
    expect the header'; unknown Mcp-Param headers are 'otherwise ignored'."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        body = request(31, "tools/call", {"name": "execute_sql", "arguments": arguments})
        response = await client.post(url, content=json.dumps(body).encode(),
                                     headers={**headers_for(body), **headers})
        if expected is None:
            assert_error(response, 400, -32020, 31)
        else:
            assert response.status_code == 200, response.text
            assert response.json()["result"]["content"][0]["text"] == expected


# --- MRTR ---------------------------------------------------------------------------------------


async def test_modern_mrtr_round_trip_over_http() -> None:
    """'Server-->>Client: InputRequiredResult (inputRequests: elicitation/create) ...
    Client->>Server: POST tools/call (id: 2) (original params + inputResponses) /
    Server-->>Client: Final result' (Message Flow)."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        caps = {CAPS: {"elicitation": {}}}
        first = await post(client, url, request(1, "tools/call",
                                                {"name": "ask_name", "arguments": {}}, **caps))
        assert first.status_code == 200
        result = first.json()["result"]
        assert result["resultType"] == "input_required"
        ((key, asked),) = result["inputRequests"].items()
        assert asked["method"] == "elicitation/create"
        retry = request(2, "tools/call", {
            "name": "ask_name", "arguments": {}, "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"name": "Alice"}}},
        }, **caps)
        done = (await post(client, url, retry)).json()["result"]
        assert done["resultType"] == "complete"
        assert done["content"][0]["text"] == "Hello, Alice!"


# --- subscriptions/listen -----------------------------------------------------------------------


@drops_a_stream
async def test_modern_listen_stream_gets_ack_then_tagged_list_changes() -> None:
    """'Client->>Server: POST subscriptions/listen / Server-->>Client: SSE:
    notifications/subscriptions/acknowledged / note: Stream stays open /
    Server-->>Client: SSE: notifications/tools/list_changed'; list changes are not sent on
    other requests' streams ('Request-scoped notifications ... flow only on the response
    stream of the request they relate to'); 'servers are encouraged to periodically emit an
    SSE comment line ... as a keep-alive'."""
    app = modern_app()
    async with serving(app, keepalive=0.05) as (url, _), http_client() as client:
        body = request("listen-1", "subscriptions/listen",
                       {"notifications": {"toolsListChanged": True}})
        async with client.stream("POST", url, content=json.dumps(body).encode(),
                                 headers=headers_for(body)) as listen:
            assert listen.status_code == 200
            assert listen.headers["content-type"] == "text/event-stream"
            parser, messages, raw = SSEParser(), [], b""
            chunks = listen.aiter_bytes()

            async def read_until(count: int) -> None:
                nonlocal raw
                with trio.fail_after(10):
                    while len(messages) < count:
                        chunk = await chunks.__anext__()
                        raw += chunk
                        messages.extend(json.loads(e.data) for e in parser.feed(chunk) if e.data)

            await read_until(1)
            assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
            assert messages[0]["params"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
            # A tool call that changes the list, on its own POST: its answer is
            # its result alone, the change goes to the listen stream.
            added = await post(client, url, request(5, "tools/call", {
                "name": "add_tool", "arguments": {"name": "brand_new"}}))
            assert added.headers["content-type"] == "application/json"
            assert added.json()["result"]["content"][0]["text"] == "added brand_new"
            await read_until(2)
            assert messages[1]["method"] == "notifications/tools/list_changed"
            assert messages[1]["params"]["_meta"][SUBSCRIPTION_ID] == "listen-1"
            with trio.fail_after(5):
                while b": keep-alive" not in raw:
                    raw += await chunks.__anext__()
            await chunks.aclose()


# --- cancellation by disconnect -----------------------------------------------------------------


async def test_modern_client_disconnect_cancels_the_request() -> None:
    """'Closing the SSE response stream MUST be treated by the server as cancellation of that
    request ... The server SHOULD stop work on the cancelled request as soon as practical'."""
    probe = Probe()
    async with serving(modern_app(probe)) as (url, http_app), http_client() as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, client, url, request(
                41, "tools/call", {"name": "wait_forever", "arguments": {}}))
            with trio.fail_after(10):
                await probe.started.wait()
            nursery.cancel_scope.cancel()  # the client goes away
        with trio.fail_after(10):
            await probe.cancelled.wait()
        assert http_app.sessions == {}
        await trio.testing.wait_all_tasks_blocked()
        assert http_app.requests._outlets == {}  # nothing of the request stays


# --- GET, DELETE and the legacy era beside ------------------------------------------------------


async def test_modern_get_and_delete_are_405_legacy_version_without_session_is_400() -> None:
    """'HTTP GET or DELETE to the MCP endpoint: respond with 405 Method Not Allowed.'
    (Earlier Streamable HTTP Revisions) — for requests that are not a 2025-11-25 session's:
    with a legacy MCP-Protocol-Version and no session id the 2025-11-25 answer (400) stays."""
    async with serving(modern_app()) as (url, _), http_client() as client:
        raw = Raw(client, url)
        await raw.initialize()
        sse = "text/event-stream"
        for method in ("GET", "DELETE"):
            plain = await client.request(method, url, headers={"Accept": sse})
            assert plain.status_code == 405 and plain.headers["allow"] == "POST"
            modern = await client.request(method, url, headers=raw.h(
                accept=sse, mcp_protocol_version=MODERN))
            assert modern.status_code == 405  # even with a valid session id
            legacy = await client.request(method, url, headers={
                "Accept": sse, "MCP-Protocol-Version": "2025-11-25"})
            assert legacy.status_code == 400


async def test_legacy_session_works_beside_modern_requests() -> None:
    """'A dual-era server MAY serve both eras concurrently on the same endpoint or process';
    'An initialize request selects legacy semantics, scoped to ... the session (HTTP)'.
    (basic/versioning)"""
    async with serving(modern_app()) as (url, http_app), http_client() as client:
        raw = Raw(client, url)
        await raw.initialize()
        modern = await post(client, url, request(2, "tools/call",
                                                 {"name": "echo", "arguments": {"text": "new"}}))
        assert modern.json()["result"]["content"][0]["text"] == "new"
        legacy = await raw.post(call(2, "echo", {"text": "old"}))
        assert legacy.status_code == 200
        assert legacy.headers["mcp-session-id"] == raw.session_id
        messages = sse_messages(legacy.content)
        assert messages[-1]["result"]["content"][0]["text"] == "old"
        assert "resultType" not in messages[-1]["result"]  # the 2025-11-25 shape
        assert list(http_app.sessions) == [raw.session_id]
