"""The MCP 2026-07-28 ("modern") dialect of ``examples/everything_server.py``, on the wire.

Every test runs the example server as a real subprocess over stdio and speaks
raw JSON-RPC to it: per-request ``_meta`` instead of a handshake,
``server/discover``, result envelopes (``resultType``, ``serverInfo``,
``ttlMs``/``cacheScope``), multi round-trip requests (``input_required``,
``inputResponses``, ``requestState``), ``subscriptions/listen`` and per-request
log levels. The fixture tools are the ones the official conformance suite's
2026-07-28 scenarios call (src/scenarios/server/input-required-result.ts,
stateless.ts, caching.ts); the same tools also serve a 2025-11-25 session,
where their questions are real server-to-client requests (pinned at the end).

Every message the server sends in the modern era is validated against the
official schema ``spec/schema-2026-07-28.json`` (draft 2020-12): the
JSON-RPC envelope, then the method's own result, error or notification
definition. (The in-process schema recorder of ``conftest.py`` never sees these
messages: they cross a pipe.)

Docstrings quote the requirement each test pins; "schema:" quotes a
description in the 2026-07-28 schema, "SEP-xxxx" the conformance scenario text.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.modern_wire import (
    CAPS,
    LEGACY,
    LOG_LEVEL,
    MODERN,
    PV,
    ROOTS,
    SERVER_INFO,
    SUB_ID,
    Server,
    accept,
    error_code,
    everything,
    form,
    input_required,
    meta,
    sampled,
    text_of,
    validate_modern,
)


def test_the_validator_rejects_a_2025_result() -> None:
    """The schema check has teeth: a 2025-style result (no ``resultType``), a cacheable
    result without ``ttlMs``, and an error -32021 without ``requiredCapabilities`` fail."""
    text = {"content": [{"type": "text", "text": "x"}]}
    with pytest.raises(AssertionError):
        validate_modern({"jsonrpc": "2.0", "id": 1, "result": text}, "tools/call")
    validate_modern({"jsonrpc": "2.0", "id": 1, "result": {**text, "resultType": "complete"}},
                    "tools/call")
    with pytest.raises(AssertionError):
        validate_modern({"jsonrpc": "2.0", "id": 1, "result": {
            "tools": [], "resultType": "complete", "cacheScope": "public"}}, "tools/list")
    with pytest.raises(AssertionError):
        validate_modern({"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32021, "message": "m", "data": {}}}, None)


# --- discovery and envelopes -------------------------------------------------------------


async def test_discover_names_both_eras_and_the_server() -> None:
    """schema (DiscoverResult): ``supportedVersions``, ``capabilities``, ``resultType``,
    ``ttlMs`` and ``cacheScope`` are required; server identity lives in the result
    ``_meta`` (``io.modelcontextprotocol/serverInfo``). server/discover does not choose
    the era: ``initialize`` still works after it."""
    async with everything() as server:
        response = await server.request("server/discover", {"_meta": meta()})
        result = response["result"]
        assert {MODERN, LEGACY} <= set(result["supportedVersions"])
        caps = result["capabilities"]
        assert caps["extensions"] == {} or isinstance(caps["extensions"], dict)
        assert "tasks" not in caps  # the 2025 core tasks are an extension in this revision
        assert caps["tools"]["listChanged"] is True and caps["prompts"]["listChanged"] is True
        assert result["_meta"][SERVER_INFO] == {"name": "trio-mcp-everything", "version": "0.1.0"}
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
        assert result["cacheScope"] in ("public", "private")
        assert result["resultType"] == "complete"
        init = await server.request("initialize", {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}})
        assert init["result"]["protocolVersion"] == LEGACY


async def test_lists_are_cacheable_and_carry_the_fixture() -> None:
    """SEP-2549: servers MUST include ``ttlMs`` (integer >= 0) and ``cacheScope`` ("public" or
    "private") on tools/list, prompts/list, resources/list, resources/templates/list and
    resources/read results. SEP-2322: a server MUST NOT answer input_required to methods other
    than tools/call, prompts/get, resources/read. Tasks are an extension: no core
    ``execution`` on a listed tool."""
    async with everything() as server:
        tools = (await server.request("tools/list", {"_meta": meta()}))["result"]
        names = {tool["name"] for tool in tools["tools"]}
        assert {
            "test_missing_capability", "test_input_required_result_elicitation",
            "test_input_required_result_sampling", "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities", "test_streaming_elicitation",
            "test_logging_tool", "test_trigger_tool_change", "test_trigger_prompt_change",
            "test_simple_text", "json_schema_2020_12_tool",
        } <= names
        assert all("execution" not in tool for tool in tools["tools"])
        prompts = (await server.request("prompts/list", {"_meta": meta()}))["result"]
        assert "test_input_required_result_prompt" in {p["name"] for p in prompts["prompts"]}
        resources = (await server.request("resources/list", {"_meta": meta()}))["result"]
        first = resources["resources"][0]["uri"]  # what the caching scenario reads
        templates = (await server.request("resources/templates/list", {"_meta": meta()}))
        read = await server.request("resources/read", {"_meta": meta(), "uri": first})
        assert read["result"]["contents"][0]["uri"] == first
        for result in (tools, prompts, resources, templates["result"], read["result"]):
            assert result["resultType"] == "complete"
            assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
            assert result["cacheScope"] in ("public", "private")
            assert result["_meta"][SERVER_INFO]["name"] == "trio-mcp-everything"


# --- MRTR: one question, one round -------------------------------------------------------

SINGLE_ROUND = [
    pytest.param(
        "tools/call", "test_input_required_result_elicitation", "user_name",
        {"method": "elicitation/create",
         "params": {"mode": "form", "message": "What is your name?",
                    "requestedSchema": form("name")}},
        accept(name="Alice"), "Hello, Alice!", id="elicitation"),
    pytest.param(
        "tools/call", "test_input_required_result_sampling", "sample_request",
        {"method": "sampling/createMessage",
         "params": {"messages": [{"role": "user", "content": {
             "type": "text", "text": "What is the capital of France?"}}], "maxTokens": 100}},
        sampled("The capital of France is Paris."),
        "Sampling result: The capital of France is Paris.", id="sampling"),
    pytest.param(
        "tools/call", "test_input_required_result_list_roots", "roots_request",
        {"method": "roots/list", "params": {}}, ROOTS, "Found 1 root(s)", id="list_roots"),
    pytest.param(
        "tools/call", "test_input_required_result_request_state", "confirm",
        {"method": "elicitation/create",
         "params": {"mode": "form", "message": "Please confirm",
                    "requestedSchema": form("ok", "boolean")}},
        accept(ok=True), "state-ok: requestState validated", id="request_state"),
    pytest.param(
        "tools/call", "test_input_required_result_tampered_state", "confirm",
        {"method": "elicitation/create",
         "params": {"mode": "form", "message": "Please confirm",
                    "requestedSchema": form("ok", "boolean")}},
        accept(ok=True), "integrity-ok: state verified", id="tampered_state_untampered"),
    pytest.param(
        "prompts/get", "test_input_required_result_prompt", "user_context",
        {"method": "elicitation/create",
         "params": {"mode": "form", "message": "What context should the prompt use?",
                    "requestedSchema": form("context")}},
        accept(context="test context"), "Prompt with context: test context", id="prompt"),
]


@pytest.mark.parametrize(("method", "name", "key", "question", "answer", "text"), SINGLE_ROUND)
async def test_one_question_one_round(
    method: str, name: str, key: str, question: dict[str, Any], answer: dict[str, Any],
    text: str,
) -> None:
    """SEP-2322: a server that needs input answers ``resultType: "input_required"`` with
    ``inputRequests`` (schema: servers implementing this version MUST include
    ``resultType``); the client's retry with ``inputResponses`` and the echoed
    ``requestState`` gets the complete result."""
    async with everything() as server:
        args: dict[str, Any] = {"_meta": meta(), "name": name}
        if method == "tools/call":
            args["arguments"] = {}
        first = input_required(await server.request(method, args))
        assert first["inputRequests"] == {key: question}
        done = await server.request(method, {
            **args, "inputResponses": {key: answer}, "requestState": first["requestState"]})
        assert done["result"]["resultType"] == "complete"
        assert text_of(done) == text
        if method == "tools/call":
            assert done["result"]["isError"] is False


async def test_unanswered_or_extra_responses() -> None:
    """SEP-2322: on inputResponses missing a required key the server SHOULD re-request it
    (a new input_required, not an error); servers SHOULD ignore keys they do not recognize.
    Answers without a ``requestState`` were never asked for: ignored, the question comes
    again; with the state, the asked key is used and the extra ones are ignored."""
    async with everything() as server:
        name = "test_input_required_result_elicitation"
        again = input_required(await server.call(
            name, inputResponses={"wrong_key": accept(data="wrong")}))
        assert list(again["inputRequests"]) == ["user_name"]
        answers = {"user_name": accept(name="Alice"), "unknown_extra_key": accept(foo="bar")}
        unasked = input_required(await server.call(name, inputResponses=answers))
        assert list(unasked["inputRequests"]) == ["user_name"]
        done = await server.call(name, inputResponses=answers,
                                 requestState=unasked["requestState"])
        assert text_of(done) == "Hello, Alice!"


async def test_multiple_inputs_in_one_round() -> None:
    """SEP-2322: one InputRequiredResult may carry several inputRequests of different types
    (elicitation, sampling, roots/list); the retry answering all of them completes."""
    async with everything() as server:
        name = "test_input_required_result_multiple_inputs"
        first = input_required(await server.call(name))
        asked = first["inputRequests"]
        assert set(asked) == {"user_name", "greeting", "client_roots"}
        assert asked["user_name"]["method"] == "elicitation/create"
        assert asked["greeting"] == {"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text",
                                                      "text": "Generate a greeting"}}],
            "maxTokens": 50}}
        assert asked["client_roots"] == {"method": "roots/list", "params": {}}
        done = await server.call(name, requestState=first["requestState"], inputResponses={
            "user_name": accept(name="Alice"), "greeting": sampled("Hello there!"),
            "client_roots": ROOTS})
        assert text_of(done) == "Name: Alice; Greeting: Hello there!; Roots: 1"


async def test_multi_round_keeps_earlier_answers_in_the_state() -> None:
    """SEP-2322: round 2 returns another InputRequiredResult with an updated requestState;
    round 3 (answering only step2, with that state) completes with round 1's answer."""
    async with everything() as server:
        name = "test_input_required_result_multi_round"
        first = input_required(await server.call(name))
        assert list(first["inputRequests"]) == ["step1"]
        second = input_required(await server.call(
            name, requestState=first["requestState"],
            inputResponses={"step1": accept(name="Alice")}))
        assert list(second["inputRequests"]) == ["step2"]
        assert second["inputRequests"]["step2"]["params"]["message"] == \
            "Step 2: What is your favorite color?"
        assert second["requestState"] != first["requestState"]
        done = await server.call(name, requestState=second["requestState"],
                                 inputResponses={"step2": accept(color="blue")})
        assert text_of(done) == "Multi-round complete for Alice who likes blue"


def _flip(state: str) -> str:
    head, _, tail = state.partition(".")
    i = len(head) // 2
    return f"{head[:i]}{'A' if head[i] != 'A' else 'B'}{head[i + 1:]}.{tail}"


async def test_tampered_state_is_rejected() -> None:
    """SEP-2322: on a modified requestState the only acceptable response is a JSON-RPC error
    (-32602) indicating integrity check failure; the server MUST NOT act on it."""
    async with everything() as server:
        name = "test_input_required_result_tampered_state"
        first = input_required(await server.call(name))
        state = first["requestState"]
        answers = {"confirm": accept(ok=True)}
        for bad in (state + "-TAMPERED", _flip(state), "not-a-state", "", 42):
            response = await server.call(name, requestState=bad, inputResponses=answers)
            assert error_code(response) == -32602, (bad, response)
        done = await server.call(name, requestState=state, inputResponses=answers)
        assert text_of(done) == "integrity-ok: state verified"


async def test_state_replayed_on_another_request_is_rejected() -> None:
    """SEP-2322: requestState belongs to the request it was issued for; a server MUST
    verify it, so a state echoed on a different tool, or on the same tool with different
    arguments, is rejected (-32602) instead of answering that request's questions."""
    async with everything() as server:
        first = input_required(await server.call("test_input_required_result_tampered_state"))
        answers = {"confirm": accept(ok=True)}
        other_tool = await server.call("test_input_required_result_request_state",
                                       requestState=first["requestState"],
                                       inputResponses=answers)
        assert error_code(other_tool) == -32602
        asked = input_required(await server.call("test_elicitation", {"message": "a"}))
        (key,) = asked["inputRequests"]
        reply = {key: accept(response="yes")}
        other_args = await server.call("test_elicitation", {"message": "b"},
                                       requestState=asked["requestState"],
                                       inputResponses=reply)
        assert error_code(other_args) == -32602
        same = await server.call("test_elicitation", {"message": "a"},
                                 requestState=asked["requestState"], inputResponses=reply)
        assert text_of(same) == 'User response: action=accept, content={"response":"yes"}'


@pytest.mark.parametrize("value", [None, 12345, "x", ["a"]])
async def test_malformed_input_responses_are_invalid_params(value: Any) -> None:
    """SEP-2322: protocol errors in inputResponses (null, not an object, an entry that is
    not an object) SHOULD return a JSON-RPC error, never a complete result; schema:
    InputResponses is an object of result objects (-32602 Invalid params)."""
    async with everything() as server:
        name = "test_input_required_result_elicitation"
        response = await server.call(name, inputResponses=value)
        assert error_code(response) == -32602
        entry = await server.call(name, inputResponses={"user_name": value})
        assert error_code(entry) == -32602


async def test_questions_follow_declared_capabilities() -> None:
    """SEP-2322: the server only sends inputRequests for capabilities the client declared in
    ``io.modelcontextprotocol/clientCapabilities`` (sampling only: no elicitation/create)."""
    async with everything() as server:
        name = "test_input_required_result_capabilities"
        both = input_required(await server.call(name))
        assert set(both["inputRequests"]) == {"elicit_input", "sample_input"}
        done = await server.call(name, requestState=both["requestState"], inputResponses={
            "elicit_input": accept(value="v"), "sample_input": sampled("s")})
        assert text_of(done) == "capabilities-ok: received elicit_input,sample_input"
        sampling_only = input_required(await server.call(name, _meta=meta({"sampling": {}})))
        assert {k: r["method"] for k, r in sampling_only["inputRequests"].items()} == {
            "sample_input": "sampling/createMessage"}
        none = await server.call(name, _meta=meta({}))
        assert text_of(none) == "No supported capabilities declared"


async def test_missing_capability_is_32021() -> None:
    """basic (2026-07-28): a server MUST NOT rely on capabilities the client has not declared;
    if processing a request requires one, the server MUST return
    MissingRequiredClientCapabilityError (-32021) whose ``data.requiredCapabilities`` is a
    ClientCapabilities object keyed by the missing capability."""
    async with everything() as server:
        response = await server.call("test_missing_capability", _meta=meta({}))
        assert error_code(response) == -32021
        assert response["error"]["data"]["requiredCapabilities"] == {"sampling": {}}
        ok = await server.call("test_missing_capability", _meta=meta({"sampling": {}}))
        assert text_of(ok) == "Success"
        # The runtime's own check: a question for an undeclared capability.
        asked = await server.call("test_input_required_result_elicitation",
                                  _meta=meta({"sampling": {}}))
        assert error_code(asked) == -32021
        assert asked["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}
        roots = await server.call("test_input_required_result_list_roots", _meta=meta({}))
        assert roots["error"]["data"]["requiredCapabilities"] == {"roots": {}}


# --- per-request _meta -------------------------------------------------------------------


async def test_unsupported_version_is_32022() -> None:
    """schema (UnsupportedProtocolVersionError): returned when the request's protocol version
    is unknown or unsupported, with ``data.supported`` (the versions to choose from) and
    ``data.requested``; as the first request and after the era is modern."""
    async with everything() as server:
        for _ in range(2):
            response = await server.request("tools/list", {"_meta": {
                PV: "2099-01-01", CAPS: {}}})
            assert error_code(response) == -32022
            data = response["error"]["data"]
            assert data["requested"] == "2099-01-01"
            assert {MODERN, LEGACY} <= set(data["supported"])
            await server.request("tools/list", {"_meta": meta()})  # now modern


@pytest.mark.parametrize("params", [
    pytest.param({"_meta": {CAPS: {}}}, id="no-protocolVersion"),
    pytest.param({"_meta": {PV: MODERN}}, id="no-clientCapabilities"),
    pytest.param({"_meta": {PV: MODERN, CAPS: "all"}}, id="capabilities-not-an-object"),
    pytest.param({"_meta": {PV: 20260728, CAPS: {}}}, id="version-not-a-string"),
    pytest.param({"_meta": meta(**{LOG_LEVEL: "loud"})}, id="unknown-logLevel"),
])
async def test_malformed_meta_is_invalid_params(params: dict[str, Any]) -> None:
    """basic/index (2026-07-28): every request carries ``_meta`` with
    ``io.modelcontextprotocol/protocolVersion`` and ``clientCapabilities``; a request missing
    any required field is malformed and the server MUST reject it with -32602."""
    async with everything() as server:
        first = await server.request("tools/list", params)  # does not choose the era
        assert error_code(first) == -32602
        await server.request("tools/list", {"_meta": meta()})  # the era is modern
        response = await server.request("tools/list", params)
        assert error_code(response) == -32602
        no_meta = await server.request("tools/list", {})
        assert error_code(no_meta) == -32602
        call = await server.request("tools/call", {**params, "name": "test_simple_text",
                                                   "arguments": {}})
        assert error_code(call) == -32602


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe"])
async def test_removed_methods_are_not_found(method: str) -> None:
    """2026-07-28 changelog: ping, logging/setLevel and resources/(un)subscribe are removed;
    schema (MethodNotFoundError): a server returns -32601 for a method it does not implement."""
    async with everything() as server:
        await server.request("tools/list", {"_meta": meta()})
        params: dict[str, Any] = {"_meta": meta()}
        if method == "logging/setLevel":
            params["level"] = "debug"
        elif method.startswith("resources/"):
            params["uri"] = "test://watched-resource"
        response = await server.request(method, params)
        assert error_code(response) == -32601


async def test_initialize_after_a_modern_request_is_32022() -> None:
    """A connection speaks one era: once a modern request chose 2026-07-28, ``initialize``
    (a 2025-11-25 method) is refused with UnsupportedProtocolVersionError listing the
    supported versions; the modern dialect goes on."""
    async with everything() as server:
        await server.call("test_simple_text")
        response = await server.request("initialize", {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}})
        assert error_code(response) == -32022
        assert LEGACY in response["error"]["data"]["supported"]
        assert response["error"]["data"]["requested"] == LEGACY
        after = await server.call("test_simple_text")
        assert text_of(after) == "This is a simple text response for testing."


# --- logging and progress ----------------------------------------------------------------


async def test_logs_only_with_a_log_level() -> None:
    """2026-07-28 logging: the client opts in by setting ``io.modelcontextprotocol/logLevel``
    in a request's ``_meta``; no notifications/message for requests that did not set it,
    and none below the level asked."""
    async with everything() as server:
        done = await server.call("test_logging_tool")
        assert text_of(done) == "Logging evaluated"
        assert server.seen == []
        await server.call("test_logging_tool", _meta=meta(**{LOG_LEVEL: "warning"}))
        assert server.seen == []
        await server.call("test_logging_tool", _meta=meta(**{LOG_LEVEL: "info"}))
        assert [n["params"]["data"] for n in server.seen] == ["Diagnostic trace logging activated"]
        assert server.seen[0]["params"]["level"] == "info"
        server.seen.clear()
        await server.call("test_log_levels", _meta=meta(**{LOG_LEVEL: "critical"}))
        assert [n["params"]["level"] for n in server.seen] == ["critical", "alert", "emergency"]
        server.seen.clear()
        await server.call("test_log_levels")
        assert server.seen == []


async def test_progress_then_the_result_and_no_requests() -> None:
    """SEP-2575: a response stream contains only notifications and the result, never an
    independent JSON-RPC request (a modern server asks through input_required); progress
    goes with the request's progressToken."""
    async with everything() as server:
        done = await server.call("test_streaming_elicitation",
                                 _meta=meta({"elicitation": {}}, progressToken="tok"))
        assert text_of(done) == "Streaming complete"
        assert [(n["method"], n["params"]["progressToken"], n["params"]["progress"])
                for n in server.seen] == [("notifications/progress", "tok", 50)]


# --- subscriptions/listen ----------------------------------------------------------------


async def _listen(server: Server, request_id: Any, notifications: dict[str, Any]) -> None:
    await server.send({"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
                       "params": {"_meta": meta(), "notifications": notifications}})
    ack = await server.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert ack["params"]["_meta"][SUB_ID] == request_id
    server.seen.clear()


async def _wait_for(server: Server, method: str) -> dict[str, Any]:
    while True:
        for note in server.seen:
            if note["method"] == method:
                server.seen.remove(note)
                return note
        await server.recv()


async def test_listen_acknowledges_then_sends_what_it_asked_for() -> None:
    """schema (SubscriptionsAcknowledgedNotification): the acknowledgement MUST be the first
    message carrying the subscription's id; SubscriptionFilter: each notification type is
    opt-in, the server MUST NOT send types the client has not requested; listen-stream
    notifications carry ``_meta.io.modelcontextprotocol/subscriptionId``."""
    async with everything() as server:
        await server.send({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen",
                           "params": {"_meta": meta(), "notifications": {
                               "toolsListChanged": True, "promptsListChanged": False,
                               "resourceSubscriptions": ["test://watched-resource"]}}})
        ack = await server.recv()
        assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                       "params": {"_meta": {SUB_ID: "sub"}, "notifications": {
                           "toolsListChanged": True,
                           "resourceSubscriptions": ["test://watched-resource"]}}}
        server.seen.clear()
        assert text_of(await server.call("test_trigger_tool_change")) == "Mutation triggered"
        note = await _wait_for(server, "notifications/tools/list_changed")
        assert note["params"]["_meta"][SUB_ID] == "sub"
        await server.call("test_update_watched_resource", {"text": "new"})
        updated = await _wait_for(server, "notifications/resources/updated")
        assert updated["params"] == {"uri": "test://watched-resource", "_meta": {SUB_ID: "sub"}}
        await server.call("test_trigger_prompt_change")  # not asked for
        await server.call("test_toggle_dynamic_tool")  # asked for
        await _wait_for(server, "notifications/tools/list_changed")
        assert server.seen + await server.quiet() == []
        # Tools are listed anew after the change (the trigger added a tool).
        names = {t["name"] for t in
                 (await server.request("tools/list", {"_meta": meta()}))["result"]["tools"]}
        assert "test_trigger_dynamic_tool" in names


async def test_listen_filters_and_parallel_subscriptions() -> None:
    """SubscriptionFilter: the server MUST NOT send notification types the client has not
    requested (SEP-2575 ServerHonorsNotificationFilter: a prompts-only stream gets no
    tools/list_changed); on stdio subscriptions share the channel, each tagged with its id."""
    async with everything() as server:
        await _listen(server, "prompts-only", {"promptsListChanged": True})
        await _listen(server, "tools-only", {"toolsListChanged": True})
        await server.call("test_trigger_tool_change")
        note = await _wait_for(server, "notifications/tools/list_changed")
        assert note["params"]["_meta"][SUB_ID] == "tools-only"
        await server.call("test_trigger_prompt_change")
        note = await _wait_for(server, "notifications/prompts/list_changed")
        assert note["params"]["_meta"][SUB_ID] == "prompts-only"
        assert server.seen + await server.quiet() == []


async def test_cancelled_ends_the_subscription() -> None:
    """2026-07-28 subscriptions: on stdio the client ends a subscription with
    notifications/cancelled for the listen request; the server then sends nothing more on
    it (and, cancelled, does not answer the request)."""
    async with everything() as server:
        await _listen(server, 7, {"toolsListChanged": True})
        await server.call("test_trigger_tool_change")
        await _wait_for(server, "notifications/tools/list_changed")
        await server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 7, "reason": "done"}})
        assert await server.quiet(0.2) == []  # a cancelled request is not answered
        await server.call("test_trigger_tool_change")
        late = server.seen + await server.quiet()
        assert late == [], late


async def test_listen_without_a_filter_is_invalid_params() -> None:
    """schema (SubscriptionsListenRequestParams): ``notifications`` (the filter) is
    required; a request missing a required field is rejected with -32602."""
    async with everything() as server:
        response = await server.request("subscriptions/listen", {"_meta": meta()})
        assert error_code(response) == -32602
        bad = await server.request("subscriptions/listen", {
            "_meta": meta(), "notifications": {"toolsListChanged": "yes"}})
        assert error_code(bad) == -32602


# --- the same fixture in a 2025-11-25 session --------------------------------------------


async def _initialize(server: Server) -> None:
    init = await server.request("initialize", {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}},
                                                    "sampling": {}, "roots": {}},
        "clientInfo": {"name": "raw-legacy", "version": "0"}}, request_id="init")
    assert init["result"]["protocolVersion"] == LEGACY
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def _serve_questions(server: Server, request_id: Any,
                           answers: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """Answer the server's requests by method until ``request_id``'s response."""
    asked: list[str] = []
    while True:
        msg = await server.recv()
        if msg.get("id") == request_id and "method" not in msg:
            return msg, asked
        if "method" in msg and "id" in msg:
            asked.append(msg["method"])
            await server.send({"jsonrpc": "2.0", "id": msg["id"],
                               "result": answers[msg["method"]]})


async def test_initialize_first_keeps_2025_and_questions_are_requests() -> None:
    """lifecycle (2025-11-25): a connection that starts with ``initialize`` is a 2025-11-25
    session: results have no ``resultType``, ping works, and the same fixture tools ask
    real server-to-client requests (elicitation/create, sampling/createMessage, roots/list)
    instead of answering input_required."""
    async with everything() as server:
        await _initialize(server)
        assert (await server.request("ping"))["result"] == {}
        simple = await server.request("tools/call", {"name": "test_simple_text",
                                                     "arguments": {}})
        assert "resultType" not in simple["result"]
        assert text_of(simple) == "This is a simple text response for testing."
        answers = {"elicitation/create": accept(name="Bob"),
                   "sampling/createMessage": sampled("Hi Bob"), "roots/list": ROOTS}
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "test_input_required_result_multiple_inputs", "arguments": {}}})
        done, asked = await _serve_questions(server, 1, answers)
        assert sorted(asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]
        assert text_of(done) == "Name: Bob; Greeting: Hi Bob; Roots: 1"
        await server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "test_input_required_result_multi_round", "arguments": {}}})
        answers["elicitation/create"] = accept(name="Bob", color="red")
        done, asked = await _serve_questions(server, 2, answers)
        assert asked == ["elicitation/create", "elicitation/create"]
        assert text_of(done) == "Multi-round complete for Bob who likes red"
        await server.send({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {
            "name": "test_input_required_result_prompt"}})
        answers["elicitation/create"] = accept(context="legacy")
        done, _ = await _serve_questions(server, 3, answers)
        assert text_of(done) == "Prompt with context: legacy"
        await server.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "test_input_required_result_capabilities", "arguments": {}}})
        answers["elicitation/create"] = accept(value="v")
        done, asked = await _serve_questions(server, 4, answers)
        assert sorted(asked) == ["elicitation/create", "sampling/createMessage"]
        assert text_of(done) == "capabilities-ok: received elicit_input,sample_input"


async def test_2025_session_missing_capability_and_logging() -> None:
    """The fixture in a 2025-11-25 session: the capabilities are the handshake's
    (test_missing_capability: -32021 without sampling); log messages follow
    logging/setLevel."""
    async with everything() as server:
        init = await server.request("initialize", {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "raw-legacy", "version": "0"}})
        assert init["result"]["protocolVersion"] == LEGACY
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        missing = await server.request("tools/call", {"name": "test_missing_capability",
                                                      "arguments": {}})
        assert error_code(missing) == -32021
        assert missing["error"]["data"]["requiredCapabilities"] == {"sampling": {}}
        none = await server.request("tools/call", {
            "name": "test_input_required_result_capabilities", "arguments": {}})
        assert text_of(none) == "No supported capabilities declared"
        await server.request("logging/setLevel", {"level": "info"})
        server.seen.clear()
        await server.request("tools/call", {"name": "test_logging_tool", "arguments": {}})
        assert [n["params"]["data"] for n in server.seen
                if n["method"] == "notifications/message"] == [
            "Diagnostic trace logging activated"]


# --- runtime bugs these tests found (fixed) ---------------------------------------------


async def test_form_question_needs_form_mode() -> None:
    """client capabilities (ClientCapabilities.elicitation has ``form`` and ``url``): a
    server MUST NOT rely on capabilities the client has not declared, so a form-mode
    question to a URL-only client is MissingRequiredClientCapabilityError (-32021), not an
    input request the client cannot answer."""
    async with everything() as server:
        response = await server.call("test_input_required_result_elicitation",
                                     _meta=meta({"elicitation": {"url": {}}}))
        assert error_code(response) == -32021
        assert "elicitation" in response["error"]["data"]["requiredCapabilities"]


async def test_2025_ask_all_respects_undeclared_sampling() -> None:
    """lifecycle (2025-11-25): both parties MUST only use capabilities that were successfully
    negotiated; a client that did not declare ``sampling`` gets no sampling/createMessage,
    even when the question is one of several asked at once (``ctx.ask_all``)."""
    async with everything() as server:
        init = await server.request("initialize", {
            "protocolVersion": LEGACY, "capabilities": {"elicitation": {}, "roots": {}},
            "clientInfo": {"name": "raw-legacy", "version": "0"}})
        assert init["result"]["protocolVersion"] == LEGACY
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "test_input_required_result_multiple_inputs", "arguments": {}}})
        answers = {"elicitation/create": accept(name="Bob"), "roots/list": ROOTS,
                   "sampling/createMessage": sampled("unexpected")}
        done, asked = await _serve_questions(server, 1, answers)
        assert "sampling/createMessage" not in asked
        assert done["result"]["isError"] is True
