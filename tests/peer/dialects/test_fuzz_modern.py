"""Fuzzing the MCP 2026-07-28 ("modern") dialect of a live server, over stdio and Streamable HTTP.

The server is ``examples/everything_server.py`` as a real subprocess (stdio, and
``--http 127.0.0.1:0``). Hypothesis draws batches of modern requests, each
aimed at one part of the dialect:

* per-request ``_meta``: missing, not an object, ``protocolVersion`` of every
  JSON type and unknown strings, ``clientCapabilities`` missing or malformed,
  bogus ``logLevel``, malformed ``clientInfo`` (each -32602);
* multi round-trip requests (the ``test_input_required_result_*`` tools):
  ``requestState`` forged (random text, Base64 garbage, a well-formed body
  with a made-up MAC), a real state truncated, bit-flipped (in its text or in
  its decoded bytes), replayed on another tool or with other arguments;
  ``inputResponses`` of every JSON type, with thousands of keys, deep nesting
  and large strings;
* unknown and removed methods (``ping``, ``logging/setLevel``, ``tasks/*``,
  ``initialize`` after the era is chosen...), notifications, truncated lines;
* ``subscriptions/listen`` with malformed filters (a valid one is
  acknowledged, then cancelled).

Invariants, for every request: exactly one answer (a listen: its error or its
acknowledgement), which is a JSON-RPC error with a code of the dialect
(-32602, -32022, -32021, -32601, -32600, -32700) or a result with
``resultType``; the code the request deserves when the harness can tell
(:func:`expected`); no traceback text; no request from the server. After the
run the same connection still answers a plain ``tools/call test_simple_text``,
the process is alive, its RSS stayed under a generous bound, and it wrote no
traceback to stderr.

Over HTTP each POST also gets wrong, missing, duplicated and non-ASCII headers
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-Region``
of ``test_custom_header_tool``, Base64 sentinels, ``Accept``,
``Content-Type``): every answer is one of 200, 202, 400, 404, 405, 406, 413,
415, a 4xx carries a JSON-RPC error whose code fits the status (400: -32602,
-32020, -32021, -32022, -32600, -32700; 404: -32601), and a valid request
still works at the end.

Budgets: >= 2,000 messages per test by default (derandomized: the same
examples every run); ``-m slow`` runs the same tests with 5x the budget;
``TRIO_MCP_FUZZ_EXAMPLES=<n>`` explores new examples (as ``tests/test_fuzz.py``).
"""

from __future__ import annotations

import base64
import collections
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from trio_mcp.transports._framing import LineBuffer
from trio_mcp.transports._mcp_headers import header_value, param_headers, standard_headers
from trio_mcp.transports._sse import SSEParser

from tests.fuzz_wire import (
    UNCERTAIN_DEPTH,
    StdioTarget,
    TargetDied,
    expected_answers,
    id_key,
    nesting_depth,
)
from tests.helpers import EXAMPLES, HTTP_SERVERS, ROOT
from tests.test_fuzz import WANTED, budget, json_values, texts

EVERYTHING_SERVER = EXAMPLES / "everything_server.py"
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SUB_ID = "io.modelcontextprotocol/subscriptionId"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

PARSE, INVALID, NOT_FOUND, PARAMS = -32700, -32600, -32601, -32602
MISMATCH, MISSING_CAP, UNSUPPORTED = -32020, -32021, -32022
#: Every error code a modern answer may carry.
CODES = frozenset({PARAMS, UNSUPPORTED, MISSING_CAP, NOT_FOUND, INVALID, PARSE})
#: Outcomes of a request that may succeed.
DONE, ASKED, LISTENING = "complete", "input_required", "listening"
OK = frozenset({DONE, ASKED})

#: The HTTP statuses a modern POST may get, and the codes each 4xx may carry.
HTTP_STATUSES = frozenset({200, 202, 400, 404, 405, 406, 413, 415})
HTTP_CODES = {
    400: frozenset({PARAMS, MISMATCH, MISSING_CAP, UNSUPPORTED, INVALID, PARSE}),
    404: frozenset({NOT_FOUND}),
    405: frozenset({INVALID}), 406: frozenset({INVALID}), 413: frozenset({INVALID}),
    415: frozenset({INVALID}),
}

#: Messages per test, at least (the issue's bar), and the slow run's factor.
MIN_MESSAGES = 2_000
SLOW_FACTOR = 5
#: A generous bound of the server's resident memory after a run.
MAX_RSS = 1 << 30

pytestmark = [
    pytest.mark.timeout(0 if WANTED else 300),
    # Leaving an httpx response stream early (a listen) leaves its generators to the GC.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning",
                               "ignore::ResourceWarning"),
]


@pytest.fixture(autouse=True)
def record_messages() -> Iterator[None]:
    """Nothing to record: the server is another process (and speaks 2026-07-28)."""
    yield


#: The larger runs: skipped unless ``-m`` names ``slow``.
only_when_slow = pytest.mark.skipif("'slow' not in (config.option.markexpr or '')",
                                    reason="a larger budget: run with -m slow")


# --- the MRTR fixture -------------------------------------------------------------------------

ELICIT = "test_input_required_result_elicitation"
MULTI_ROUND = "test_input_required_result_multi_round"
MULTIPLE = "test_input_required_result_multiple_inputs"
TAMPERED = "test_input_required_result_tampered_state"
MRTR_TOOLS = (ELICIT, MULTI_ROUND, MULTIPLE, TAMPERED)
#: The keys each tool asks, in order, and answers that fit them.
ANSWERS: dict[str, dict[str, Any]] = {
    "user_name": {"action": "accept", "content": {"name": "Alice"}},
    "step1": {"action": "accept", "content": {"name": "Alice"}},
    "step2": {"action": "accept", "content": {"color": "blue"}},
    "confirm": {"action": "accept", "content": {"ok": True}},
    "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"},
                 "model": "m", "stopReason": "endTurn"},
    "client_roots": {"roots": [{"uri": "file:///r", "name": "r"}]},
}
KEYS = {ELICIT: ["user_name"], MULTI_ROUND: ["step1", "step2"],
        MULTIPLE: ["user_name", "greeting", "client_roots"], TAMPERED: ["confirm"]}
#: The real states the harness holds: (tool, arguments, answers sent to get it).
STATE_SOURCES: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {
    "elicit": (ELICIT, {}, None),
    "round1": (MULTI_ROUND, {}, None),
    "round2": (MULTI_ROUND, {}, {"step1": ANSWERS["step1"]}),
    "multiple": (MULTIPLE, {}, None),
    "tampered": (TAMPERED, {}, None),
    "args-a": ("test_elicitation", {"message": "a"}, None),
}


def meta(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {PV: MODERN, CAPS: ALL_CAPS, INFO: {"name": "fuzz", "version": "0"}}
    out.update(extra)
    return out


class Raw:
    """Raw JSON text spliced in after serialization (deep nesting, odd numbers)."""

    def __init__(self, text: str) -> None:
        self.text = text


class StateRef:
    """A real ``requestState`` of ``source``, changed by ``how`` (resolved at send time)."""

    def __init__(self, source: str, how: str, where: int = 0) -> None:
        self.source, self.how, self.where = source, how, where


class Message:
    """One generated message: its JSON (with placeholders) and what it deserves.

    Attributes:
        body: The message without ``id`` (added when it is a request).
        request: Whether it is a request (gets an id).
        expect: The outcomes allowed (error codes, DONE, ASKED, LISTENING);
            None: any outcome of the dialect.
        truncate: Per mille of the line to keep (a truncated line), or None.
        int_id: Whether its id is a number (else a string).
    """

    def __init__(self, body: dict[str, Any], request: bool = True,
                 expect: frozenset[Any] | None = None, truncate: int | None = None,
                 int_id: bool = False) -> None:
        self.body, self.request, self.expect = body, request, expect
        self.truncate, self.int_id = truncate, int_id

    def __repr__(self) -> str:
        return f"Message({_short(self.body)}, expect={self.expect}, truncate={self.truncate})"


def _short(value: Any) -> str:
    text = json.dumps(value, default=lambda o: f"<{type(o).__name__}>")
    return text if len(text) < 400 else text[:400] + "..."


# --- strategies --------------------------------------------------------------------------------

not_dicts = json_values.filter(lambda v: not isinstance(v, dict))
non_strings = json_values.filter(lambda v: not isinstance(v, str))
odd_versions = st.sampled_from(["2025-11-25", "2025-06-18", "2024-11-05", "2026-07-29", "",
                                " 2026-07-28", "2026-07-28 ", "2026-7-28", "2026-07-28\x00",
                                "\ud800", "9" * 5000]) | texts.filter(lambda t: t != MODERN)
malformed_caps = st.sampled_from([
    {"sampling": 5}, {"elicitation": "form"}, {"roots": []}, {"roots": {"listChanged": "x"}},
    {"tasks": True}, {"experimental": 1}, {"sampling": None, "elicitation": [1]},
]) | st.dictionaries(st.sampled_from(["sampling", "elicitation", "roots", "tasks",
                                      "experimental", "extensions", "x"]), json_values,
                     max_size=3)

#: Modern requests that succeed with a valid _meta (method, params).
PLAIN = [
    ("tools/list", {}),
    ("tools/call", {"name": "test_simple_text", "arguments": {}}),
    ("tools/call", {"name": "test_custom_header_tool", "arguments": {"region": "eu"}}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "test://static-text"}),
    ("server/discover", {}),
]
#: The tasks extension (io.modelcontextprotocol/tasks): -32601 until it is served, then
#: -32021 without the extension declared (or -32602 for an unknown task).
TASKS = ["tasks/get", "tasks/list", "tasks/result", "tasks/cancel", "tasks/update"]
REMOVED = ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
           "sampling/createMessage",
           "elicitation/create", "roots/list", "notifications/initialized", "nosuch/method",
           "tools/call/x", "", "TOOLS/LIST"]


#: ClientCapabilities members of 2026-07-28 -> their members that must be objects
#: (None: all of them, a map of settings objects).
CAPABILITY_MEMBERS: dict[str, tuple[str, ...] | None] = {
    "elicitation": ("form", "url"), "sampling": ("context", "tools"), "roots": (),
    "experimental": None, "extensions": None,
}


def _caps_valid(caps: dict[str, Any]) -> bool:
    """The schema's ClientCapabilities (and ``tasks``, kept from 2025-11-25: an object or null)."""
    for name, inner in CAPABILITY_MEMBERS.items():
        if name in caps:
            member = caps[name]
            if not isinstance(member, dict):
                return False
            keys = member if inner is None else [k for k in inner if k in member]
            if not all(isinstance(member[k], dict) for k in keys):
                return False
    return caps.get("tasks") is None or isinstance(caps["tasks"], dict)


def _info_valid(info: Any) -> bool:
    """The schema's Implementation, for the values drawn here (no optional members)."""
    return (isinstance(info, dict) and isinstance(info.get("name"), str)
            and isinstance(info.get("version"), str))


def _token_valid(token: Any) -> bool:
    """The schema's ProgressToken: a string or an integer (2.0 is one in JSON Schema)."""
    if isinstance(token, bool):
        return False
    return isinstance(token, str | int) or (isinstance(token, float) and token.is_integer())


def predict_meta(value: Any, has_meta: bool = True) -> frozenset[Any] | None:
    """What ``_meta`` alone deserves (None: it is fine), in the server's order of checks:
    every reserved key of the wrong type is -32602 (2026-07-28 ``RequestMetaObject``)."""
    if not has_meta or not isinstance(value, dict):
        return frozenset({PARAMS})
    version = value.get(PV)
    if not isinstance(version, str) or not isinstance(value.get(CAPS), dict):
        return frozenset({PARAMS})
    if version != MODERN:
        return frozenset({UNSUPPORTED})
    bad = (
        not _caps_valid(value[CAPS])
        or (LOG_LEVEL in value and value[LOG_LEVEL] not in LEVELS)
        or (INFO in value and not _info_valid(value[INFO]))
        or ("progressToken" in value and not _token_valid(value["progressToken"]))
    )
    return frozenset({PARAMS}) if bad else None


@st.composite
def meta_faults(draw: st.DrawFn) -> Message:
    """A plain modern request whose ``_meta`` is wrong in one or two ways."""
    method, params = draw(st.sampled_from(PLAIN))
    params = json.loads(json.dumps(params))
    value: Any = meta()
    has_meta = True
    for _ in range(draw(st.integers(1, 2))):
        fault = draw(st.sampled_from([
            "no-meta", "meta-type", "pv-missing", "pv-type", "pv-string", "caps-missing",
            "caps-type", "caps-malformed", "level", "level-ok", "info", "info-missing", "extra",
            "progress",
        ]))
        if fault == "no-meta":
            has_meta = False
        elif fault == "meta-type":
            value = draw(not_dicts)
        elif not isinstance(value, dict):
            continue
        elif fault == "pv-missing":
            value.pop(PV, None)
        elif fault == "pv-type":
            value[PV] = draw(non_strings)
        elif fault == "pv-string":
            value[PV] = draw(odd_versions)
        elif fault == "caps-missing":
            value.pop(CAPS, None)
        elif fault == "caps-type":
            value[CAPS] = draw(not_dicts)
        elif fault == "caps-malformed":
            value[CAPS] = draw(malformed_caps)
        elif fault == "level":
            value[LOG_LEVEL] = draw(json_values.filter(lambda v: v not in LEVELS))
        elif fault == "level-ok":
            value[LOG_LEVEL] = draw(st.sampled_from(LEVELS))
        elif fault == "info":
            value[INFO] = draw(json_values | st.fixed_dictionaries(
                {"name": json_values, "version": json_values}))
        elif fault == "info-missing":
            value.pop(INFO, None)
        elif fault == "progress":
            value["progressToken"] = draw(json_values)
        else:
            value[draw(texts)] = draw(json_values)
    if has_meta:
        params["_meta"] = value
    verdict = predict_meta(value, has_meta)
    if verdict is None:
        expect = frozenset({DONE})
    else:
        expect = frozenset(verdict - {"fine"}) | (frozenset({DONE}) if "fine" in verdict
                                                   else frozenset())
    return Message({"method": method, "params": params}, expect=expect,
                   int_id=draw(st.booleans()))


def nested(depth: int, kind: str) -> Raw:
    opener, closer = ("[", "]") if kind == "list" else ('{"a":', "}")
    return Raw(opener * depth + "1" + closer * depth)


@st.composite
def huge_responses(draw: st.DrawFn, tool: str) -> tuple[Any, frozenset[Any] | None]:
    """Big ``inputResponses``: many keys, deep nesting, large strings."""
    kind = draw(st.sampled_from(["keys", "keys", "deep", "string", "string-key", "many-ok"]))
    key = draw(st.sampled_from(KEYS[tool]))
    if kind == "keys":
        n = draw(st.sampled_from([65, 100, 1_000, 5_000]))
        return {f"k{i}": {} for i in range(n)}, frozenset({PARAMS})
    if kind == "many-ok":  # at the limit: 64 keys, unknown ones ignored
        responses = {f"k{i}": {"action": "decline"} for i in range(63)}
        responses[key] = ANSWERS[key]
        return responses, OK | {PARAMS}
    if kind == "deep":
        depth = draw(st.sampled_from([50, 200, 700, 990, 2_000, 50_000]))
        inner = nested(depth, draw(st.sampled_from(["list", "dict"])))
        where = draw(st.sampled_from(["content", "answer", "responses"]))
        if where == "responses":
            return inner, None
        if where == "answer":
            return {key: {"action": "accept", "content": {"name": "n"}, "x": inner}}, None
        return {key: {"action": "accept", "content": {"name": "n", "x": inner}}}, None
    # Up to 4.8 MB of JSON: past the 4 MiB line limit of stdio (-32600, null id).
    size = draw(st.sampled_from([1_000, 100_000, 400_000]))
    big = draw(st.sampled_from("a\u00e9\u4e2d\U0001f600")) * size
    if kind == "string-key":
        return {big: {"action": "accept"}}, OK
    return {key: {"action": "accept", "content": {"name": big}}}, None


def state_mutations() -> st.SearchStrategy[StateRef]:
    return st.builds(
        StateRef,
        st.sampled_from(sorted(STATE_SOURCES)),
        st.sampled_from(["as-is", "truncate", "flip-char", "flip-bit", "insert", "append",
                         "concat", "swap-parts", "case", "urlsafe", "other-tool",
                         "other-args", "extra-arg"]),
        st.integers(0, 1_000_000),
    )


forged_states = st.one_of(
    texts,
    st.binary(max_size=200).map(lambda b: base64.urlsafe_b64encode(b).decode()),
    st.tuples(st.binary(max_size=120), st.binary(max_size=40)).map(
        lambda t: base64.urlsafe_b64encode(t[0]).decode().rstrip("=") + "."
        + base64.urlsafe_b64encode(t[1]).decode().rstrip("=")),
    st.builds(lambda mac: _b64(json.dumps({"v": 1, "d": "0" * 32, "p": None, "e": 2**40,
                                           "a": {"step1": ANSWERS["step1"]},
                                           "k": ["step2"]}).encode()) + "." + _b64(mac),
              st.binary(min_size=32, max_size=32)),
    st.sampled_from(["", ".", "..", "a.b", "=?base64?.?=", "\ud800.\udfff", "x" * 300_000]),
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@st.composite
def mrtr_requests(draw: st.DrawFn) -> Message:
    """A call of an MRTR tool with forged, mutated or replayed state and odd answers."""
    tool = draw(st.sampled_from(MRTR_TOOLS))
    params: dict[str, Any] = {"_meta": meta(), "name": tool, "arguments": {}}
    expect: set[Any] = set(OK)
    sure_bad = False
    state = draw(st.sampled_from(["none", "forged", "type", "real", "real", "real"]))
    if state == "forged":
        params["requestState"] = draw(forged_states)
        sure_bad = True
    elif state == "type":
        params["requestState"] = draw(non_strings)
        sure_bad = True
    elif state == "real":
        ref = draw(state_mutations())
        params["requestState"] = ref
        source_tool, source_args, _ = STATE_SOURCES[ref.source]
        if ref.how in ("other-tool", "other-args", "extra-arg"):
            sure_bad = True
        elif ref.how == "as-is":
            # Its own tool (and arguments): verified; else it belongs to another request.
            params["name"], params["arguments"] = source_tool, dict(source_args)
            tool = source_tool if source_tool in KEYS else tool
        # Other mutations: -32602 unless the text still decodes to the same state
        # (decided when it is resolved, see ModernStdio.resolve).
    responses = draw(st.sampled_from(["none", "valid", "type", "entry-type", "shape",
                                      "random", "huge", "huge"]))
    keys = KEYS.get(tool, ["user_name"])
    if responses == "valid":
        chosen = draw(st.lists(st.sampled_from(keys), unique=True))
        params["inputResponses"] = {k: ANSWERS[k] for k in chosen}
    elif responses == "type":
        params["inputResponses"] = draw(not_dicts)
        sure_bad = True
    elif responses == "entry-type":
        params["inputResponses"] = {draw(st.sampled_from(keys)): draw(not_dicts)}
        sure_bad = True
    elif responses == "shape":
        key = draw(st.sampled_from(keys))
        params["inputResponses"] = {key: draw(st.dictionaries(
            st.sampled_from(["action", "content", "roots", "role", "model", "x"]),
            json_values, max_size=3))}
        expect.add(PARAMS)
    elif responses == "random":
        params["inputResponses"] = draw(st.dictionaries(texts, json_values, max_size=4))
        expect.add(PARAMS)
    elif responses == "huge":
        value, verdict = draw(huge_responses(tool if tool in KEYS else ELICIT))
        params["inputResponses"] = value
        if verdict is None:
            expect |= {PARAMS, INVALID, PARSE}
        elif verdict == {PARAMS}:
            sure_bad = True
        else:
            expect |= verdict
    if draw(st.integers(0, 5)) == 0:  # capabilities that do not cover the questions
        params["_meta"][CAPS] = draw(st.sampled_from([{}, {"sampling": {}}, {"roots": {}}]))
        expect |= {MISSING_CAP, PARAMS}
    return Message({"method": "tools/call", "params": params},
                   expect=frozenset({PARAMS}) if sure_bad else frozenset(expect | {PARAMS}),
                   int_id=draw(st.booleans()))


@st.composite
def method_faults(draw: st.DrawFn) -> Message:
    """Unknown and removed methods, initialize, notifications, envelope faults."""
    kind = draw(st.sampled_from(["removed", "removed", "unknown", "initialize", "notify",
                                 "params-type", "no-params"]))
    if kind == "removed":
        method = draw(st.sampled_from(REMOVED + TASKS))
        expect = {NOT_FOUND, MISSING_CAP, PARAMS} if method in TASKS else {NOT_FOUND}
        return Message({"method": method, "params": {"_meta": meta(), "taskId": "0" * 32}},
                       expect=frozenset(expect))
    if kind == "unknown":
        method = draw(texts.filter(lambda t: t not in {m for m, _ in PLAIN}
                                   | {"subscriptions/listen", "initialize",
                                      "completion/complete"}))
        return Message({"method": method, "params": {"_meta": meta()}},
                       expect=frozenset({NOT_FOUND}))
    if kind == "initialize":
        return Message({"method": "initialize", "params": {
            "protocolVersion": draw(st.sampled_from(["2025-11-25", MODERN]) | json_values),
            "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
            expect=frozenset({UNSUPPORTED}))
    if kind == "notify":
        method = draw(st.sampled_from(["notifications/initialized", "notifications/cancelled",
                                       "notifications/roots/list_changed",
                                       "notifications/progress", "notifications/x"]) | texts)
        return Message({"method": method, "params": draw(st.just({"_meta": meta()})
                                                         | st.dictionaries(texts, json_values,
                                                                           max_size=3))},
                       request=False)
    if kind == "params-type":
        method, _ = draw(st.sampled_from(PLAIN))
        return Message({"method": method, "params": draw(st.lists(json_values, max_size=3)
                                                         | st.sampled_from([1, "x", True]))},
                       expect=frozenset({INVALID}))
    method, _ = draw(st.sampled_from(PLAIN))
    return Message({"method": method}, expect=frozenset({PARAMS}))


@st.composite
def listen_requests(draw: st.DrawFn) -> Message:
    """``subscriptions/listen`` with a filter, usually malformed."""
    kind = draw(st.sampled_from(["missing", "type", "field", "uris", "uri-type", "many-uris",
                                 "valid", "random"]))
    params: dict[str, Any] = {"_meta": meta()}
    expect: frozenset[Any] = frozenset({PARAMS})
    if kind == "type":
        params["notifications"] = draw(not_dicts)
    elif kind == "field":
        params["notifications"] = {draw(st.sampled_from(["toolsListChanged",
                                                         "promptsListChanged",
                                                         "resourcesListChanged"])):
                                   draw(json_values.filter(
                                       lambda v: v is not None and not isinstance(v, bool)))}
    elif kind == "uris":
        params["notifications"] = {"resourceSubscriptions": draw(not_dicts.filter(
            lambda v: v is not None and not isinstance(v, list)))}
    elif kind == "uri-type":
        params["notifications"] = {"resourceSubscriptions": ["test://a", draw(non_strings)]}
    elif kind == "many-uris":
        params["notifications"] = {"resourceSubscriptions": [f"test://{i}"
                                                             for i in range(1_025)]}
    elif kind == "valid":
        params["notifications"] = draw(st.fixed_dictionaries({}, optional={
            "toolsListChanged": st.booleans() | st.none(),
            "promptsListChanged": st.booleans(),
            "resourceSubscriptions": st.lists(texts, max_size=3),
        }))
        expect = frozenset({LISTENING})
    elif kind == "random":
        params["notifications"] = draw(st.dictionaries(texts, json_values, max_size=3))
        expect = frozenset({LISTENING, PARAMS})
    if draw(st.integers(0, 4)) == 0:
        params["_meta"] = draw(not_dicts)
        expect = frozenset({PARAMS})
    return Message({"method": "subscriptions/listen", "params": params}, expect=expect)


def truncated(message: st.SearchStrategy[Message]) -> st.SearchStrategy[Message]:
    return st.tuples(message, st.integers(1, 999)).map(
        lambda t: Message(t[0].body, True, frozenset({PARSE}), truncate=t[1]))


single_messages = st.one_of(meta_faults(), mrtr_requests(), mrtr_requests(), method_faults(),
                            listen_requests(), truncated(meta_faults()))
batches = st.lists(single_messages, min_size=8, max_size=16)


# --- serializing ---------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """JSON text of ``value`` with Raw placeholders spliced in (lone surrogates escaped)."""
    raws: list[str] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\x00RAW{len(raws) - 1}\x00"
        raise TypeError(type(obj).__name__)

    text = json.dumps(value, default=default)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{i}\x00"), raw)
    return text


def lenient_decode(state: str) -> tuple[bytes, bytes] | None:
    """How the server reads a state's two parts (None: not at all)."""
    head, dot, tail = state.partition(".")
    if not dot:
        return None
    try:
        return tuple(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))  # type: ignore[return-value]
                     for p in (head, tail))
    except ValueError:
        return None


class States:
    """The real states the harness got from the server, and their mutations."""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}

    async def fetch(self, call: Any) -> None:
        for source, (tool, arguments, answers) in STATE_SOURCES.items():
            params: dict[str, Any] = {"_meta": meta(), "name": tool, "arguments": arguments}
            if answers:
                first = await call("tools/call", {**params})
                params["requestState"] = first["result"]["requestState"]
                params["inputResponses"] = answers
            answer = await call("tools/call", params)
            assert answer["result"]["resultType"] == ASKED, answer
            self.real[source] = answer["result"]["requestState"]

    def resolve(self, ref: StateRef, params: dict[str, Any]) -> tuple[str, bool]:
        """The state text for ``ref``, and whether the server must accept it here."""
        real = self.real[ref.source]
        tool, arguments, _ = STATE_SOURCES[ref.source]
        own = params.get("name") == tool and params.get("arguments") == arguments
        how, where = ref.how, ref.where
        rng = random.Random(where)
        text = real
        if how == "truncate":
            text = real[: where % len(real)]
        elif how == "flip-char":
            i = where % len(real)
            text = real[:i] + rng.choice("AZaz09-_.=+/!~ \u00e9") + real[i + 1:]
        elif how == "flip-bit":
            head, _, tail = real.partition(".")
            parts = [bytearray(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
                     for p in (head, tail)]
            part = parts[where % 2]
            bit = where // 2 % (len(part) * 8)
            part[bit // 8] ^= 1 << (bit % 8)
            text = f"{_b64(bytes(parts[0]))}.{_b64(bytes(parts[1]))}"
        elif how == "insert":
            i = where % (len(real) + 1)
            text = real[:i] + rng.choice(["!", "!!!!", "====", ".", " ", "\n", "\ud800"]) + real[i:]
        elif how == "append":
            text = real + rng.choice(["A", "AAAA", "=", "-TAMPERED", ".x", "\x00"])
        elif how == "concat":
            text = real + real
        elif how == "swap-parts":
            head, _, tail = real.partition(".")
            text = f"{tail}.{head}"
        elif how == "case":
            text = real.swapcase()
        elif how == "urlsafe":
            text = real.replace("-", "+").replace("_", "/")
        elif how == "other-tool":
            others = [t for t in MRTR_TOOLS if t != tool]
            params["name"] = rng.choice(others)
            params["arguments"] = {}
            own = False
        elif how == "other-args":
            params["name"] = tool
            params["arguments"] = {"message": "b"} if arguments else {"x": 1}
            own = False
        elif how == "extra-arg":
            params["name"] = tool
            params["arguments"] = {**arguments, "extra": rng.randint(0, 9)}
            own = False
        same = lenient_decode(text) == lenient_decode(real)
        return text, own and same


# --- stdio ---------------------------------------------------------------------------------------


class ModernStdio(StdioTarget):
    """``examples/everything_server.py`` over its pipes, spoken to in 2026-07-28."""

    kind = "stdio-modern"

    def __init__(self) -> None:
        super().__init__()
        self.states = States()
        self.messages = 0  # fuzz messages sent (lines)
        self.requests = 0
        self.uncertain: set[str] = set()
        self.first_failure: str | None = None
        self.rss = (0, 0)
        self.late: collections.Counter[str] = collections.Counter()
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by run_stdio

    async def start(self) -> None:
        self.proc = await trio.lowlevel.open_process(
            [sys.executable, str(EVERYTHING_SERVER)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, cwd=str(ROOT))
        self.buffer = LineBuffer(64 * 1024 * 1024)
        self.lines = collections.deque()

    async def read(self) -> dict[str, Any]:
        msg = await super().read()
        if "method" in msg:
            assert "id" not in msg, f"a modern server sent a request: {_short(msg)}"
        return msg

    async def call(self, method: str, params: Any = None, other: Any = None) -> dict[str, Any]:
        return await super().call(method, params, other or self._stray)

    def _stray(self, msg: dict[str, Any]) -> None:
        raise AssertionError(f"an answer nobody asked for: {_short(msg)}")

    async def initialize(self) -> None:
        """Choose the modern era (the first request), then hold real states."""
        answer = await self.call("tools/list", {"_meta": meta()})
        assert answer["result"]["resultType"] == DONE, answer
        await self.states.fetch(self.call)

    def materialize(self, example: list[Message]) -> tuple[bytes, dict[str, frozenset[Any]],
                                                            set[Any]]:
        """The example as bytes; the outcomes allowed per id key; the listen ids."""
        lines: list[bytes] = []
        expects: dict[str, frozenset[Any]] = {}
        listens: set[Any] = set()
        for message in example:
            body = _copy(message.body)
            msg: dict[str, Any] = {"jsonrpc": "2.0"}
            expect = message.expect
            if message.request:
                rid = self.next_id("m")
                msg["id"] = self.seq if message.int_id else rid
            msg.update(body)
            params = msg.get("params")
            if isinstance(params, dict) and isinstance(params.get("requestState"), StateRef):
                text, accepted = self.states.resolve(params["requestState"], params)
                params["requestState"] = text
                if not accepted:  # forged, altered, or another request's
                    expect = frozenset({PARAMS})
            line = dumps(msg).encode("utf-8", "surrogatepass")
            if message.truncate is not None:
                line = line[: max(1, len(line) * message.truncate // 1000)]
                line = line[: len(line) - 1] if line.endswith(b"}") else line
                expect = None  # a cut that still decodes is another message
            if "id" in msg and message.truncate is None:
                expects[id_key(msg["id"])] = expect if expect is not None else frozenset()
                if nesting_depth(line) >= UNCERTAIN_DEPTH:
                    # Whether it parses depends on the stack depth of each parser (the
                    # server's may succeed where expected_answers' gives up).
                    self.uncertain.add(id_key(msg["id"]))
                if msg.get("method") == "subscriptions/listen":
                    listens.add(msg["id"])
            lines.append(line.replace(b"\n", b" ") + b"\n")
        self.messages += len(lines)
        return b"".join(lines), expects, listens

    async def exchange_modern(self, data: bytes, expects: dict[str, frozenset[Any]],
                              listens: set[Any]) -> None:
        """Send one batch; check every answer; cancel the subscriptions acknowledged."""
        exact, maybe = expected_answers(data)
        if os.environ.get("FUZZ_STDIO_LOG"):
            with open(os.environ["FUZZ_STDIO_LOG"], "a") as log:  # noqa: ASYNC230
                log.write(f"START exact {dict(exact)} maybe {dict(maybe)}\n{data!r}\n")
        for key in self.uncertain:
            exact.pop(key, None)
            maybe[key] = 1
        self.uncertain.clear()
        # Answers allowed but not owed by earlier batches may still come.
        maybe.update(self.late)
        listen_keys = {id_key(i) for i in listens}
        for key in listen_keys:  # owed an answer (an error) or an acknowledgement
            exact.pop(key, None)
        self.examples += 1
        sentinel = self.next_id("discover")
        got: dict[str, int] = {}
        settled: set[str] = set()
        acked: list[Any] = []
        done = False
        try:
            with trio.fail_after(60):
                await self.write(data)
                await self.send({"jsonrpc": "2.0", "id": sentinel, "method": "server/discover",
                                 "params": {"_meta": meta()}})
                while not done or any(got.get(k, 0) < n for k, n in exact.items()) or \
                        settled != listen_keys:
                    msg = await self.read()
                    if msg.get("method") == "notifications/subscriptions/acknowledged":
                        sid = msg["params"]["_meta"][SUB_ID]
                        key = id_key(sid)
                        assert key in listen_keys and key not in settled, (
                            f"an acknowledgement for {key} (listens of this batch: "
                            f"{listen_keys}, settled: {settled}): {msg}")
                        assert expects[key] in (frozenset({LISTENING}),
                                                frozenset({LISTENING, PARAMS})), \
                            f"acknowledged a listen that deserved {expects[key]}: {msg}"
                        settled.add(key)
                        acked.append(sid)
                        self.kinds[LISTENING] += 1
                        continue
                    if "method" in msg:
                        continue  # log messages, progress
                    if msg.get("id") == sentinel:
                        assert msg["result"]["resultType"] == DONE, msg
                        done = True
                        continue
                    key = id_key(msg.get("id"))
                    got[key] = got.get(key, 0) + 1
                    allowed = exact.get(key, 0) + maybe.get(key, 0) + (key in listen_keys)
                    assert got[key] <= allowed, \
                        f"answer #{got[key]} for id {key[:80]} (owed {allowed}): {_short(msg)}"
                    if key in listen_keys:
                        assert key not in settled, msg
                        settled.add(key)
                    self.check_answer(msg, expects.get(key))
        except trio.TooSlowError:
            missing = {k: n - got.get(k, 0) for k, n in exact.items() if got.get(k, 0) < n}
            raise TargetDied(f"hung; still owed {missing}, listens {listen_keys - settled}, "
                             f"sentinel={done}") from None
        self.late = collections.Counter({
            k: n - max(0, got.get(k, 0) - exact.get(k, 0)) for k, n in maybe.items()})
        self.late = +self.late
        if os.environ.get("FUZZ_STDIO_LOG"):
            with open(os.environ["FUZZ_STDIO_LOG"], "a") as log:  # noqa: ASYNC230
                log.write(f"batch {self.examples}: listens {sorted(listen_keys)} acked {acked} "
                          f"got {got}\n{data[:20000]!r}\n")
        for sid in acked:
            await self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": sid, "reason": "fuzz"}})

    def check_answer(self, msg: dict[str, Any], expect: frozenset[Any] | None) -> None:
        assert ("result" in msg) != ("error" in msg), msg
        if "error" in msg:
            error = msg["error"]
            code = error.get("code")
            assert code in CODES, f"code {code}: {_short(msg)}"
            assert isinstance(error.get("message"), str) and error["message"], msg
            assert "Traceback" not in error["message"], msg
            self.kinds[code] += 1
            outcome: Any = code
        else:
            result = msg["result"]
            outcome = result.get("resultType")
            assert outcome in OK, f"no resultType: {_short(msg)}"
            if outcome == ASKED:
                assert isinstance(result.get("requestState"), str), msg
                assert isinstance(result.get("inputRequests"), dict) and result["inputRequests"]
            self.kinds[outcome] += 1
        if expect:
            assert outcome in expect, f"got {outcome}, expected one of {set(expect)}: " \
                                      f"{_short(msg)}"


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def rss_of(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


async def stdio_batch(target: ModernStdio, example: list[Message]) -> None:
    if target.first_failure is not None:
        # Hypothesis replays a failing example to report it; on this connection the
        # replay would only see the first one's leftovers.
        raise AssertionError(f"the first failure: {target.first_failure}")
    data, expects, listens = target.materialize(example)
    try:
        await target.exchange_modern(data, expects, listens)
    except BaseException as exc:
        target.first_failure = f"{exc!r}"[:5000]
        raise


async def run_stdio(examples: int) -> ModernStdio:
    target = ModernStdio()
    await target.start()
    try:
        await target.initialize()
        baseline = rss_of(target.proc.pid)  # type: ignore[union-attr]

        # No shrinking: a failed batch leaves the connection out of step with the next.
        @settings(budget(examples), phases=[Phase.explicit, Phase.reuse, Phase.generate])
        @given(batches)
        def property_(example: list[Message]) -> None:
            trio.from_thread.run(stdio_batch, target, example)

        await trio.to_thread.run_sync(property_)
        # The same connection still serves a plain call.
        answer = await target.call("tools/call", {"_meta": meta(), "name": "test_simple_text",
                                                  "arguments": {}})
        assert answer["result"]["content"][0]["text"] == \
            "This is a simple text response for testing.", answer
        assert target.proc is not None and target.proc.poll() is None
        target.rss = (baseline, rss_of(target.proc.pid))
        assert target.rss[1] < MAX_RSS, target.rss
    finally:
        await target.stop()
        target.stderr.seek(0)
        errors = target.stderr.read().decode("utf-8", "replace")
        target.stderr.close()
    assert "Traceback" not in errors, errors[-3000:]
    return target


STDIO_EXAMPLES = 400


def _report(what: str, count: int, kinds: Any, seconds: float, extra: str = "") -> None:
    print(f"\n{what}: {count} messages in {seconds:.1f} s; {dict(kinds)} {extra}")


async def _stdio_test(examples: int) -> None:
    started = time.monotonic()
    target = await run_stdio(examples)
    _report("stdio", target.messages, target.kinds, time.monotonic() - started,
            f"rss {target.rss[0] >> 20} -> {target.rss[1] >> 20} MiB")
    assert target.messages >= MIN_MESSAGES, target.messages
    # Every part of the dialect was reached.
    assert {PARAMS, UNSUPPORTED, MISSING_CAP, NOT_FOUND, INVALID, PARSE, DONE, ASKED,
            LISTENING} <= \
        set(target.kinds), dict(target.kinds)


async def test_fuzz_modern_stdio() -> None:
    """>= 2,000 modern messages on one stdio connection: each answered once, with the
    right code; the connection, the process and its memory survive."""
    await _stdio_test(STDIO_EXAMPLES)


@pytest.mark.slow
@only_when_slow
async def test_fuzz_modern_stdio_large() -> None:
    """The same, 5x the budget (``-m slow``)."""
    await _stdio_test(STDIO_EXAMPLES * SLOW_FACTOR)


# --- Streamable HTTP -----------------------------------------------------------------------------

HEADERS = ("MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region")
ACCEPT_BOTH = "application/json, text/event-stream"
#: Header values, good and bad: printable, non-ASCII (as raw bytes), Base64 sentinels.
header_values = st.one_of(
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=30),
    st.sampled_from([MODERN, "2025-11-25", "2099-01-01", "tools/call", "tools/list",
                     "subscriptions/listen", "test_simple_text", "eu", "=?base64??=",
                     "=?base64?!!!?=", "=?base64?/w==?=", "=?base64?ZXU=?=", "=?base64?ZXU?=",
                     "=?BASE64?ZXU=?=", "=?base64?" + "QUFB" * 2000 + "?="]),
    st.binary(min_size=1, max_size=12).map(
        lambda b: bytes(c for c in b if c >= 0x80 or 0x21 <= c <= 0x7E) or b"\xe9"),
    st.sampled_from(["é".encode("latin-1"), "中".encode(), b"caf\xc3\xa9", b"\xff\xfe"]),
)


@st.composite
def header_plans(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Changes to a POST's correct headers (none, half the time)."""
    if draw(st.booleans()):
        return []
    plan: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["drop", "set", "set", "dup", "case", "method-wrong",
                                     "b64-right", "pad", "accept", "content-type",
                                     "oversize"]))
        name = draw(st.sampled_from(HEADERS))
        if what in ("set", "dup"):
            plan.append((what, name, draw(header_values)))
        elif what == "accept":
            plan.append((what, draw(st.sampled_from(["application/json", "text/event-stream",
                                                     "*/*", "text/*, application/*", "",
                                                     "application/xml"]))))
        elif what == "content-type":
            plan.append((what, draw(st.sampled_from(["text/plain", "application/json; "
                                                     "charset=utf-8", "", "application/jsonx",
                                                     "APPLICATION/JSON"]))))
        elif what == "oversize":
            if draw(st.integers(0, 9)) == 0:  # 4 MiB bodies: now and then
                plan.append((what,))
        else:
            plan.append((what, name))
    return plan


http_batches = st.lists(st.tuples(single_messages, header_plans()), min_size=6, max_size=12)


def _as_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("latin-1", "replace")


def correct_headers(body: Any) -> dict[str, str]:
    """The headers a conformant client sends for ``body`` (the client's own code)."""
    method = body.get("method") if isinstance(body, dict) else None
    params = body.get("params") if isinstance(body, dict) else None
    out = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json",
           "MCP-Protocol-Version": MODERN}
    if isinstance(method, str):
        out.update(standard_headers(method, params))
        task_id = params.get("taskId") if isinstance(params, dict) else None
        if method in ("tasks/get", "tasks/update", "tasks/cancel") and isinstance(task_id, str):
            out["Mcp-Name"] = task_id  # the tasks extension's Mcp-Name (SEP-2663)
        if method == "tools/call" and isinstance(params, dict) and \
                params.get("name") == "test_custom_header_tool":
            out.update(param_headers({"Region": ("region",)}, params.get("arguments")))
    return out


def apply_plan(headers: dict[str, str], plan: list[tuple[Any, ...]], method: Any
               ) -> tuple[list[tuple[bytes, bytes]], set[str]]:
    """The header list after ``plan``, and what kind of changes it made."""
    items: list[tuple[bytes, bytes]] = [(k.encode(), v.encode("ascii", "replace"))
                                        for k, v in headers.items()]
    kinds: set[str] = set()

    def without(name: str) -> list[tuple[bytes, bytes]]:
        return [(k, v) for k, v in items if k.lower() != name.lower().encode()]

    for step in plan:
        what = step[0]
        if what == "drop":
            if any(k.lower() == step[1].lower().encode() for k, _ in items):
                kinds.add("wrong")
            items = without(step[1])
        elif what == "set":
            old = headers.get(step[1])
            new = _as_bytes(step[2])
            items = [*without(step[1]), (step[1].encode(), new)]
            if old is None or new != old.encode():
                kinds.add("wrong")
        elif what == "dup":
            items.append((step[1].encode(), _as_bytes(step[2])))
            kinds.add("wrong")
        elif what == "case":
            items = [(k.swapcase() if k.lower() == step[1].lower().encode() else k, v)
                     for k, v in items]
        elif what == "method-wrong":
            items = [*without("Mcp-Method"), (b"Mcp-Method", b"tools/list"
                                               if method != "tools/list" else b"tools/call")]
            kinds.add("method-wrong")
        elif what == "b64-right":  # a value as a Base64 sentinel: fine for Mcp-Name/Param
            name = step[1]
            if name in ("Mcp-Name", "Mcp-Param-Region") and name in headers:
                value = headers[name]
                if not value.startswith("=?base64?"):
                    encoded = "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
                    items = [*without(name), (name.encode(), encoded.encode())]
        elif what == "pad":  # surrounding whitespace is not part of the value
            name = step[1]
            items = [(k, b" " + v + b"\t" if k.lower() == name.lower().encode() else v)
                     for k, v in items]
        elif what == "accept":
            items = [*without("Accept"), (b"Accept", step[1].encode())]
        elif what == "content-type":
            items = [*without("Content-Type"), (b"Content-Type", step[1].encode())]
        elif what == "oversize":
            kinds.add("oversize")
    # Mcp-Method, Accept and Content-Type as they ended up (a later step may undo an
    # earlier one: a "set" back to the right method after "method-wrong").
    methods = [v for k, v in items if k.lower() == b"mcp-method"]
    if isinstance(method, str) and methods == [method.encode("ascii", "replace")]:
        kinds.discard("method-wrong")
    kinds -= {"accept", "content-type"}
    accepts = [v.decode("latin-1") for k, v in items if k.lower() == b"accept"]
    listed = {a.split(";")[0].strip().lower() for v in accepts for a in v.split(",")}
    if not (listed & {"application/json", "application/*", "*/*"}
            and listed & {"text/event-stream", "text/*", "*/*"}):
        kinds.add("accept")
    types = [v.decode("latin-1") for k, v in items if k.lower() == b"content-type"]
    if ",".join(types).split(";")[0].strip().lower() != "application/json":
        kinds.add("content-type")
    return items, kinds


def http_expect(message: Message, body: Any, expect: frozenset[Any] | None,
                kinds: set[str]) -> tuple[frozenset[int], frozenset[Any]] | None:
    """The statuses and outcomes a POST deserves (None: any that pair up correctly)."""
    if "accept" in kinds or "content-type" in kinds:
        return frozenset({400, 406, 415}), frozenset({INVALID})
    if "oversize" in kinds:
        return frozenset({400, 413}), frozenset({INVALID})
    if message.truncate is not None:
        return None  # a cut body: a parse error, or a request (another message)
    if not message.request:
        return (frozenset({202}), frozenset()) if not kinds else None
    method = body.get("method")
    if isinstance(method, str) and header_value(method) != method:
        # Our client sends such a method as a Base64 sentinel, which the server's
        # Mcp-Method check does not decode (-32020 instead of -32601).
        return None
    if kinds:
        if kinds == {"method-wrong"}:
            # A body that is no request (params not an object...) is refused first.
            return frozenset({400}), frozenset({MISMATCH} | (expect or set()) & {INVALID})
        return None
    params = body.get("params")
    meta_value = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta_value, dict) and isinstance(meta_value.get(PV), str) and \
            meta_value[PV] != MODERN:
        return frozenset({400}), frozenset({MISMATCH})  # header and body disagree
    if body.get("method") == "initialize":
        return frozenset({404}), frozenset({NOT_FOUND})
    if expect is None or not expect:
        return None
    statuses = {HTTP_STATUS_OF.get(outcome, 200) for outcome in expect}
    return frozenset(statuses), expect


#: The server's largest POST body (StreamableHttpApp's default).
MAX_BODY = 4 * 1024 * 1024
HTTP_STATUS_OF = {PARAMS: 400, MISSING_CAP: 400, UNSUPPORTED: 400, MISMATCH: 400,
                  NOT_FOUND: 404, INVALID: 400, PARSE: 400}


class ModernHttp:
    """``examples/everything_server.py --http`` as a subprocess, POSTed to in 2026-07-28
    (``server``: its ``--http-server``; empty: the default server)."""

    def __init__(self, nursery: trio.Nursery, server: str = "") -> None:
        self.nursery = nursery
        self.server = server
        self.states = States()
        self.seq = 0
        self.messages = 0
        self.examples = 0
        self.statuses: collections.Counter[int] = collections.Counter()
        self.kinds: collections.Counter[Any] = collections.Counter()
        self.stderr = bytearray()
        self.url = ""
        self.client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        self.proc = await trio.lowlevel.open_process(
            [sys.executable, str(EVERYTHING_SERVER), "--http", "127.0.0.1:0",
             *(["--http-server", self.server] if self.server else [])],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            cwd=str(ROOT))
        ready = trio.Event()

        async def drain() -> None:
            assert self.proc.stderr is not None
            while data := await self.proc.stderr.receive_some(1 << 16):
                self.stderr += data
                found = re.search(rb"serving on (http://\S+)", self.stderr)
                if found and not ready.is_set():
                    self.url = found[1].decode()
                    ready.set()

        self.nursery.start_soon(drain)
        with trio.fail_after(30):
            await ready.wait()
        self.client = httpx.AsyncClient(
            trust_env=False, timeout=httpx.Timeout(30),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8))

    async def stop(self) -> None:
        with trio.CancelScope(shield=True):
            if self.client is not None:
                await self.client.aclose()
            if self.proc.returncode is None:
                self.proc.terminate()
                with trio.move_on_after(5):
                    await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        """A correct modern POST; its JSON answer."""
        self.seq += 1
        body = {"jsonrpc": "2.0", "id": f"h-{self.seq}", "method": method, "params": params}
        assert self.client is not None
        response = await self.client.post(self.url, content=json.dumps(body).encode(),
                                          headers=correct_headers(body))
        assert response.status_code == 200, response.text
        out: dict[str, Any] = response.json()
        return out

    def materialize(self, message: Message) -> tuple[bytes, Any, frozenset[Any] | None]:
        body = _copy(message.body)
        msg: dict[str, Any] = {"jsonrpc": "2.0"}
        expect = message.expect
        if message.request:
            self.seq += 1
            msg["id"] = self.seq if message.int_id else f"p-{self.seq}"
        msg.update(body)
        params = msg.get("params")
        if isinstance(params, dict) and isinstance(params.get("requestState"), StateRef):
            text, accepted = self.states.resolve(params["requestState"], params)
            params["requestState"] = text
            if not accepted:
                expect = frozenset({PARAMS})
        data = dumps(msg).encode("utf-8", "surrogatepass")
        if message.truncate is not None:
            data = data[: max(1, len(data) * message.truncate // 1000)]
            data = data[: len(data) - 1] if data.endswith(b"}") else data
        return data, msg, expect

    async def post_one(self, message: Message, plan: list[tuple[Any, ...]]) -> None:
        data, msg, expect = self.materialize(message)
        items, kinds = apply_plan(correct_headers(msg), plan, msg.get("method"))
        if "oversize" in kinds:
            data = data[:-1] + b', "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}' \
                if data.endswith(b"}") else data + b"x" * (4 * 1024 * 1024)
        if len(data) > MAX_BODY:
            kinds.add("oversize")
        verdict = http_expect(message, msg, expect, kinds)
        if verdict is not None and nesting_depth(data) >= UNCERTAIN_DEPTH:
            verdict = (verdict[0] | {400}, verdict[1] | {PARSE})  # may be too deep to parse
        assert self.client is not None
        listen = msg.get("method") == "subscriptions/listen"
        if os.environ.get("FUZZ_HTTP_LOG"):
            with open(os.environ["FUZZ_HTTP_LOG"], "a") as log:  # noqa: ASYNC230
                log.write(f"{time.monotonic():.4f} {len(data)} {items} {data[:300]!r}\n")
        try:
            async with self.client.stream("POST", self.url, content=data,
                                          headers=items) as response:
                answer, outcome = await self.read_answer(response, msg.get("id"), listen)
        except httpx.LocalProtocolError:
            self.kinds["refused by the client"] += 1  # h11 would not send these headers
            return
        except httpx.TransportError as exc:
            await trio.sleep(0.5)
            raise AssertionError(
                f"{exc!r} on POST ({len(data)} bytes: {data[-300:]!r}) {_short(msg)[:300]} "
                f"headers {items}; server exit "
                f"{self.proc.poll()}; stderr: {self.stderr[-3000:].decode('utf-8', 'replace')}"
            ) from None
        status = response.status_code
        self.messages += 1
        self.statuses[status] += 1
        self.kinds[outcome] += 1
        where = f"POST {_short(msg)[:300]} headers {items} -> {status} {_short(answer)}"
        assert status in HTTP_STATUSES, where
        if outcome == "legacy initialize":
            assert msg.get("method") == "initialize" and kinds, where
        if status >= 400:
            assert isinstance(answer, dict) and "error" in answer, where
            assert outcome in HTTP_CODES[status], where
            assert answer.get("id") in (None, msg.get("id")), where
        if verdict is not None:
            statuses, outcomes = verdict
            assert status in statuses, f"expected status {set(statuses)}: {where}"
            assert not outcomes or outcome in outcomes, \
                f"expected one of {set(outcomes)}: {where}"

    async def read_answer(self, response: httpx.Response, request_id: Any,
                          listen: bool) -> tuple[Any, Any]:
        """The JSON-RPC answer in ``response`` and its outcome (a code, resultType...)."""
        kind = response.headers.get("content-type", "")
        if response.status_code == 202:
            assert not await response.aread()
            return None, "accepted"
        if kind.startswith("text/event-stream"):
            assert response.status_code == 200
            parser = SSEParser()
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    if not event.data:
                        continue
                    msg = json.loads(event.data)
                    if msg.get("method") == "notifications/subscriptions/acknowledged":
                        assert listen and msg["params"]["_meta"][SUB_ID] == request_id, msg
                        return msg, LISTENING  # leaving the stream ends the subscription
                    if "method" in msg:
                        assert "id" not in msg, f"a modern server sent a request: {msg}"
                        continue
                    assert msg.get("id") == request_id, msg
                    return msg, self.outcome(msg)
            raise AssertionError(f"an SSE stream ended without an answer to {request_id!r}")
        body = await response.aread()
        assert kind.startswith("application/json"), (response.status_code, kind, body[:300])
        msg = json.loads(body)
        return msg, self.outcome(msg)

    @staticmethod
    def outcome(msg: dict[str, Any]) -> Any:
        assert ("result" in msg) != ("error" in msg), msg
        if "error" in msg:
            error = msg["error"]
            assert isinstance(error.get("message"), str) and "Traceback" not in error["message"]
            code = error.get("code")
            assert code in CODES | {MISMATCH}, f"code {code}: {_short(msg)}"
            return code
        result = msg["result"]
        if "resultType" not in result and result.get("protocolVersion") == "2025-11-25":
            # An initialize whose headers do not say 2026-07-28: a 2025-11-25 session.
            return "legacy initialize"
        assert result.get("resultType") in OK, f"no resultType: {_short(msg)}"
        return result["resultType"]


async def http_batch(target: ModernHttp, example: list[tuple[Message, list[Any]]]) -> None:
    target.examples += 1
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for message, plan in example:
                nursery.start_soon(target.post_one, message, plan)


async def _http_test(examples: int, server: str) -> None:
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        target = ModernHttp(nursery, server)
        await target.start()
        try:
            await target.states.fetch(target.call)
            baseline = rss_of(target.proc.pid)

            # No shrinking: each step is a batch of real POSTs; the failure says it all.
            @settings(budget(examples), phases=[Phase.explicit, Phase.reuse, Phase.generate])
            @given(http_batches)
            def property_(example: list[tuple[Message, list[Any]]]) -> None:
                trio.from_thread.run(http_batch, target, example)

            await trio.to_thread.run_sync(property_)
            answer = await target.call("tools/call", {"_meta": meta(), "name": "test_simple_text",
                                                      "arguments": {}})
            assert answer["result"]["content"][0]["text"] == \
                "This is a simple text response for testing.", answer
            region = await target.call("tools/call", {
                "_meta": meta(), "name": "test_custom_header_tool",
                "arguments": {"region": "eu-\u4e2d", "query": "q"}})
            assert region["result"]["content"][0]["text"] == "region=eu-\u4e2d query=q", region
            assert target.proc.poll() is None
            rss = (baseline, rss_of(target.proc.pid))
            assert rss[1] < MAX_RSS, rss
        finally:
            await target.stop()
            nursery.cancel_scope.cancel()
    errors = target.stderr.decode("utf-8", "replace")
    assert "Traceback" not in errors, errors[-3000:]
    _report("http", target.messages, target.kinds, time.monotonic() - started,
            f"statuses {dict(target.statuses)}; rss {rss[0] >> 20} -> {rss[1] >> 20} MiB")
    assert target.messages >= MIN_MESSAGES, target.messages
    assert {200, 202, 400, 404, 406, 413, 415} <= set(target.statuses), dict(target.statuses)
    # (-32022 is rare over HTTP: a body version the header does not repeat is -32020.)
    assert {PARAMS, MISMATCH, MISSING_CAP, NOT_FOUND, PARSE, INVALID, DONE, ASKED,
            LISTENING} <= set(target.kinds), dict(target.kinds)


HTTP_EXAMPLES = int(os.environ.get("FUZZ_HTTP_EXAMPLES", 400))


@pytest.mark.parametrize("server", HTTP_SERVERS)
async def test_fuzz_modern_http(server: str) -> None:
    """>= 2,000 modern POSTs with wrong, missing, duplicated and non-ASCII headers and the
    bodies of the stdio test: each gets an allowed status whose JSON-RPC code fits it, and
    the server keeps serving (on each HTTP/1.1 server)."""
    await _http_test(HTTP_EXAMPLES, server)


@pytest.mark.slow
@only_when_slow
@pytest.mark.parametrize("server", HTTP_SERVERS)
async def test_fuzz_modern_http_large(server: str) -> None:
    """The same, 5x the budget (``-m slow``)."""
    await _http_test(HTTP_EXAMPLES * SLOW_FACTOR, server)


# --- regressions: what the fuzzing found ---------------------------------------------------------


@asynccontextmanager
async def stdio_server() -> AsyncIterator[ModernStdio]:
    target = ModernStdio()
    await target.start()
    try:
        answer = await target.call("tools/list", {"_meta": meta()})
        assert answer["result"]["resultType"] == DONE
        yield target
    finally:
        await target.stop()
        target.stderr.close()


async def test_regression_a_state_the_server_issued_is_accepted_back() -> None:
    """Found by the fuzzing (fixed in d0d96af): the state was sealed without a size check
    but refused past 256 KiB when it came back. multi_round: step1 answered with a 200,000-character name (well under the 4 MiB
    line limit) gives input_required for step2 and a requestState; that state, echoed
    with step2's answer, must complete the request (or the big answer must be refused up
    front with -32602) -- not issue a state the server itself will refuse."""
    async with stdio_server() as server:
        first = await server.call("tools/call", {"_meta": meta(), "name": MULTI_ROUND,
                                                 "arguments": {}})
        big = {"action": "accept", "content": {"name": "x" * 200_000}}
        second = await server.call("tools/call", {
            "_meta": meta(), "name": MULTI_ROUND, "arguments": {},
            "requestState": first["result"]["requestState"], "inputResponses": {"step1": big}})
        if "error" in second:  # refused up front: fine
            assert second["error"]["code"] == PARAMS
            return
        assert second["result"]["resultType"] == ASKED
        done = await server.call("tools/call", {
            "_meta": meta(), "name": MULTI_ROUND, "arguments": {},
            "requestState": second["result"]["requestState"],
            "inputResponses": {"step2": ANSWERS["step2"]}})
        assert "result" in done, done
        assert done["result"]["resultType"] == DONE


async def test_regression_an_altered_state_text_is_refused() -> None:
    """Found by the fuzzing (fixed in d0d96af): the state was decoded leniently
    (base64.urlsafe_b64decode), so another spelling of the same bytes passed. The state's text with '-' as '+' and '_' as '/' (or 4 characters outside the
    Base64url alphabet inserted) is not the text the server issued: -32602."""
    async with stdio_server() as server:
        first = await server.call("tools/call", {"_meta": meta(), "name": TAMPERED,
                                                 "arguments": {}})
        state = first["result"]["requestState"]
        head, _, tail = state.partition(".")
        altered = [f"{head}.{tail[:4]}!!!!{tail[4:]}"]
        if "-" in state or "_" in state:
            altered.append(state.replace("-", "+").replace("_", "/"))
        for text in altered:
            assert text != state
            answer = await server.call("tools/call", {
                "_meta": meta(), "name": TAMPERED, "arguments": {}, "requestState": text,
                "inputResponses": {"confirm": ANSWERS["confirm"]}})
            assert "error" in answer and answer["error"]["code"] == PARAMS, (text, answer)


async def test_regression_refused_listen_over_http_is_400() -> None:
    """Found by the fuzzing (fixed in d0d96af): a refused subscriptions/listen was a 200
    SSE stream carrying its -32602; it is a 400 JSON error like every modern request."""
    async with trio.open_nursery() as nursery:
        target = ModernHttp(nursery)
        await target.start()
        try:
            body = {"jsonrpc": "2.0", "id": "l-1", "method": "subscriptions/listen",
                    "params": {"_meta": meta(), "notifications": 5}}
            assert target.client is not None
            async with target.client.stream("POST", target.url, content=json.dumps(body),
                                            headers=correct_headers(body)) as response:
                answer, outcome = await target.read_answer(response, "l-1", True)
            assert outcome == PARAMS, answer
            assert response.status_code == 400
            assert response.headers["content-type"] == "application/json"
        finally:
            await target.stop()
            nursery.cancel_scope.cancel()
