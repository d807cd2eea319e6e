"""Fuzzing a live peer with hypothesis, over the in-memory bus and over stdio.

Inputs: arbitrary bytes and lines, random JSON, and structurally valid MCP
messages mutated with wrong types, missing fields, huge numbers, deep nesting,
enormous strings, lone surrogates and invalid UTF-8, cut into arbitrary
chunks (split lines). Invariants checked after every example (see
``tests/fuzz_wire.py``): the peer neither crashes nor hangs, every request
and every undecodable line gets exactly one answer, nothing else is answered,
a ping still answers, and no request is left in flight. After each test: no
handler task leaked (the server's Trio task count is back to its baseline).

One subprocess per stdio test, reused across examples (restarted only after
an example killed it, so hypothesis can shrink that example). Hypothesis runs
in a worker thread and hands each example to the Trio run with
``trio.from_thread.run``.

Budget: a bounded number of examples by default; set
``TRIO_MCP_FUZZ_EXAMPLES=<n>`` for a larger run of the same tests.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_mcp
from trio_mcp.peer._messages import TaskStatus
from trio_mcp.peer._messages._jsonrpc import Request, _dumps, decode_message
from trio_mcp.peer._session import _outbound, open_bus
from trio_mcp.peer._tasks._state import TRANSITIONS

from tests.conftest import RECORDED
from tests.fuzz_wire import SENTINEL, MemoryTarget, StdioTarget, Target
from tests.raw import open_raw
from tests.reliability.apps import trio_task_count

KINDS = ("memory", "stdio")
PARSE, INVALID = trio_mcp.PARSE_ERROR, trio_mcp.INVALID_REQUEST
NOT_FOUND, PARAMS = trio_mcp.METHOD_NOT_FOUND, trio_mcp.INVALID_PARAMS


#: Examples per test for a larger run (``TRIO_MCP_FUZZ_EXAMPLES=2000``); 0: the default budget.
WANTED = int(os.environ.get("TRIO_MCP_FUZZ_EXAMPLES") or 0)
# A larger run takes as long as it takes.
pytestmark = pytest.mark.timeout(0 if WANTED else 120)


def budget(default: int, scale: float = 1.0) -> settings:
    """Hypothesis settings: ``default`` examples, or ``scale`` x TRIO_MCP_FUZZ_EXAMPLES.

    The default run is derandomized (the same examples every time, so CI is
    never flaky); a run with TRIO_MCP_FUZZ_EXAMPLES set explores new ones.
    """
    wanted = int(WANTED * scale)
    return settings(
        max_examples=max(wanted, default) if WANTED else default,
        derandomize=not WANTED,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture(autouse=True)
def record_messages(schema_check: None) -> Any:
    """Record what the peers here *send*, for the schema check; skip what they
    receive (the fuzz input) and anything too big to be worth keeping."""

    def record(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction != "sent":
            return
        try:
            text = _dumps(wire)
        except Exception:  # not JSON: the transport turns it into an error
            return
        if len(text) <= 20_000:
            RECORDED.append((direction, json.loads(text), method))

    _outbound.message_observers.append(record)
    try:
        yield
    finally:
        _outbound.message_observers.remove(record)


@asynccontextmanager
async def open_target(kind: str) -> AsyncIterator[Target]:
    """A started, initialized target; checks for leaked tasks when done."""
    async with trio.open_nursery() as nursery:
        target: Target = MemoryTarget(nursery) if kind == "memory" else StdioTarget()
        await target.start()
        try:
            await target.initialize()
            target.baseline = await target.settle()
            yield target
            if target.broken:
                await target.restart()
            final = await target.settle()
            # No handler or actor task left behind, nothing in flight.
            assert final["trio_tasks"] == target.baseline["trio_tasks"], (target.baseline, final)
            assert final["pending"] == 0 and final["live"] == 0
        finally:
            await target.stop()
            nursery.cancel_scope.cancel()


async def fuzz(target: Target, strategy: st.SearchStrategy[Any],
               check: Callable[[Target, Any], Awaitable[None]], config: settings,
               *, expect: set[str | int]) -> None:
    """Run hypothesis in a worker thread; each example runs here, in Trio.

    ``expect``: answer kinds ("result" or error codes) the run must have
    produced, so a strategy that stops reaching the handlers is noticed.
    """

    @config
    @given(strategy)
    def property_(example: Any) -> None:
        trio.from_thread.run(check, target, example)

    await trio.to_thread.run_sync(property_)
    assert target.examples > 0
    assert expect <= set(target.kinds), dict(target.kinds)


async def check_lines(target: Target, chunks: list[bytes]) -> None:
    await target.exchange(chunks)


# --- strategies ---------------------------------------------------------------------------

def _not_ours(text: str) -> bool:
    return SENTINEL not in text


texts = st.text(max_size=24).filter(_not_ours)
json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(texts, children, max_size=4),
    max_leaves=16,
)
request_ids = st.integers() | texts | st.sampled_from(
    [0, -1, 2**63, -(2**63) - 1, 2**64, 10**300, "", "0", "\u202e", "\x00", "\ud800", "a\udfff"]
)
bad_ids = st.sampled_from([None, True, 1.5, 1e300, [1], {"a": 1}])
TASK_IDS = ["0" * 32, "f" * 32, "", "../../etc/passwd", "x" * 200]

#: Valid requests, notifications and responses of every kind the peer meets.
TEMPLATES: list[dict[str, Any]] = [
    {"method": "ping"},
    {"method": "initialize", "params": dict(json.loads(json.dumps({
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "again", "version": "1"}})))},
    {"method": "tools/list", "params": {}},
    {"method": "tools/list", "params": {"cursor": "1"}},
    {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
    {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    {"method": "tools/call",
     "params": {"name": "add", "arguments": {"a": 1}, "task": {"ttl": 1000}}},
    {"method": "tools/call",
     "params": {"name": "mirror", "arguments": {"value": {"k": [1, {"x": None}]}}}},
    {"method": "tools/call",
     "params": {"name": "nap", "arguments": {"ms": 5}, "_meta": {"progressToken": "p1"}}},
    {"method": "tools/call", "params": {"name": "job", "arguments": {"n": 3}, "task": {}}},
    {"method": "tools/call", "params": {"name": "job", "arguments": {"n": 3}}},
    {"method": "tools/call", "params": {"name": "crash", "arguments": {"message": "m"},
                                        "task": {"ttl": 500}}},
    {"method": "tools/call", "params": {"name": "nosuchtool", "arguments": {}}},
    {"method": "tasks/get", "params": {"taskId": "0" * 32}},
    {"method": "tasks/result", "params": {"taskId": "0" * 32}},
    {"method": "tasks/list", "params": {}},
    {"method": "tasks/list", "params": {"cursor": "1.AAAAAAAAAAAAAAAA"}},
    {"method": "tasks/cancel", "params": {"taskId": "0" * 32}},
    {"method": "sampling/createMessage",
     "params": {"messages": [], "maxTokens": 5, "task": {"ttl": 10}}},
    {"method": "elicitation/create",
     "params": {"message": "m", "requestedSchema": {"type": "object"}}},
    {"method": "completion/complete", "params": {}},
    {"method": "notifications/initialized", "notification": True},
    {"method": "notifications/cancelled", "params": {"requestId": 1, "reason": "r"},
     "notification": True},
    {"method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1},
     "notification": True},
    {"method": "notifications/tasks/status",
     "params": {"taskId": "0" * 32, "status": "completed", "createdAt": "x",
                "lastUpdatedAt": "x", "ttl": None}, "notification": True},
    {"response": {"result": {}}},
    {"response": {"error": {"code": -32603, "message": "m"}}},
]

#: Raw JSON texts that json.dumps cannot produce: out-of-range numbers, over-long ints.
RAW_NUMBERS = ["1e400", "-1e400", "1e-400", "-0", "1E+2", "9" * 4300, "9" * 4301,
               "123456789012345678901234567890", "0.1e1", "2e308"]
SPECIAL_STRINGS = ["\ud800", "\udfff", "a\ud83d", "\x00", "\ufeff", "\u2028", "\\", "\"",
                   "é" * 50]
BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xe2\x82"]


class Raw:
    """A placeholder for raw JSON text spliced in after serialization."""

    def __init__(self, text: str) -> None:
        self.text = text


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out.extend(_paths(child, (*prefix, i)))
    return out


def _set(root: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return root


def _delete(root: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return root
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return root


@st.composite
def extreme_values(draw: st.DrawFn) -> Any:
    """A value at the edges: a huge number, deep nesting, a big or odd string."""
    kind = draw(st.sampled_from(["number", "raw", "nest", "string", "special"]))
    if kind == "number":
        return draw(st.sampled_from([10**300, -(10**300), 2**63, 2**64, -(2**63) - 1,
                                     1.7976931348623157e308, 5e-324, -0.0, 10**4000]))
    if kind == "raw":
        return Raw(draw(st.sampled_from(RAW_NUMBERS)))
    if kind == "nest":
        depth = draw(st.sampled_from([50, 500, 900, 990, 1000, 2000, 50_000]))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        return Raw(opener * depth + "1" + closer * depth)
    if kind == "string":
        size = draw(st.sampled_from([1_000, 65_536, 300_000]))
        return draw(st.sampled_from("a\u00e9\u4e2d\U0001f600")) * size
    return draw(st.sampled_from(SPECIAL_STRINGS))


@st.composite
def mcp_messages(draw: st.DrawFn, *, allow_extremes: bool = True) -> bytes:
    """One MCP message from a template, mutated, serialized (maybe badly)."""
    template = json.loads(json.dumps(draw(st.sampled_from(TEMPLATES))))
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if "response" in template:
        msg["id"] = draw(request_ids)
        msg.update(template["response"])
    else:
        if not template.pop("notification", False):
            msg["id"] = draw(request_ids | bad_ids) if draw(st.integers(0, 9)) == 0 \
                else draw(request_ids)
        msg.update(template)
    msg = copy.deepcopy(msg)  # sampled values are shared objects: never mutate them
    if "params" in msg and draw(st.booleans()):
        # Aim task operations at ids that may exist.
        if "taskId" in msg["params"]:
            msg["params"]["taskId"] = draw(st.sampled_from(TASK_IDS))
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(msg)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(
            ["delete", "retype", "extra", "extreme"] if allow_extremes
            else ["delete", "retype", "extra"]))
        if action == "delete":
            msg = _delete(msg, path) if path else msg
        elif action == "retype":
            msg = _set(msg, path, draw(json_values))
        elif action == "extra":
            target = msg
            for key in path:
                target = target[key]
            if isinstance(target, dict):
                target[draw(texts)] = draw(json_values)
        else:
            msg = _set(msg, path, draw(extreme_values()))
        if not isinstance(msg, dict):
            break
    raws: list[str] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\x00RAW{len(raws) - 1}\x00"
        raise TypeError(type(obj).__name__)

    ensure_ascii = draw(st.booleans())
    try:
        text = json.dumps(msg, ensure_ascii=ensure_ascii, default=default)
    except ValueError:  # a 10**4000 int: the sender could not write it either
        text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{i}\x00"), raw)
    # surrogatepass writes lone surrogates as (invalid) UTF-8 bytes, as a
    # careless sender would; with ensure_ascii they travel as \\ud800 escapes.
    data = text.encode("utf-8", "surrogatepass")
    if allow_extremes and draw(st.integers(0, 7)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(BAD_UTF8)) + data[at:]
    return data.replace(b"\n", b" ")


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """Split ``data`` at ``points`` (any positions: mid-line, mid-character)."""
    marks = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in zip(marks, marks[1:], strict=False) if b > a]


@st.composite
def message_streams(draw: st.DrawFn, *, allow_extremes: bool = True) -> list[bytes]:
    """Several messages as one byte stream, LF or CRLF separated, cut anywhere."""
    messages = draw(st.lists(mcp_messages(allow_extremes=allow_extremes),
                             min_size=1, max_size=6))
    sep = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = b"".join(m + sep for m in messages)
    return cut(data, draw(st.lists(st.integers(0, 1 << 30), max_size=8)))


def as_stream(lines: list[bytes]) -> list[bytes]:
    return [b"".join(line + b"\n" for line in lines)]


# --- the tests ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
async def test_fuzz_arbitrary_bytes(kind: str) -> None:
    """Random bytes (newlines included), then a newline: never a crash or a hang."""
    strategy = st.lists(st.binary(max_size=400), min_size=1, max_size=4).map(
        lambda parts: [*parts, b"\n"])
    async with open_target(kind) as target:
        await fuzz(target, strategy, check_lines, budget(150), expect={PARSE})


@pytest.mark.parametrize("kind", KINDS)
async def test_fuzz_arbitrary_lines_and_random_json(kind: str) -> None:
    """Lines of random JSON values, JSON-RPC-ish objects and text."""
    # Mostly plausible members (so the handlers are reached), sometimes anything.
    envelope = st.fixed_dictionaries({}, optional={
        "jsonrpc": st.just("2.0") | st.just("2.0") | st.sampled_from(["1.0", 2.0, None])
        | json_values,
        "id": request_ids | request_ids | bad_ids | json_values,
        "method": st.sampled_from(["ping", "tools/list", "tasks/get", "tasks/list", "x"])
        | st.sampled_from(["ping", "tools/call", "tasks/result"]) | json_values,
        "params": st.just({}) | json_values,
        "result": json_values,
        "error": json_values | st.fixed_dictionaries({"code": json_values,
                                                      "message": json_values}),
    })
    requests = st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": request_ids,
         "method": st.sampled_from(["ping", "tools/list", "tools/call", "tasks/get",
                                    "tasks/list", "tasks/result", "tasks/cancel", "x"])},
        optional={"params": st.dictionaries(st.sampled_from(
            ["name", "arguments", "taskId", "cursor", "task", "_meta"]), json_values)})
    line = st.one_of(
        json_values.map(lambda v: json.dumps(v).encode()),
        envelope.map(lambda v: json.dumps(v).encode()),
        requests.map(lambda v: json.dumps(v).encode()),
        st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=80),
    ).map(lambda b: b.replace(b"\n", b" "))
    strategy = st.lists(line, min_size=1, max_size=8).map(as_stream)
    async with open_target(kind) as target:
        await fuzz(target, strategy, check_lines, budget(200),
                   expect={PARSE, INVALID, "result", NOT_FOUND, PARAMS})


@pytest.mark.parametrize("kind", KINDS)
async def test_fuzz_mutated_mcp_messages(kind: str) -> None:
    """Valid MCP messages with wrong types, missing fields and edge values, cut at
    arbitrary points (split lines, split UTF-8 characters)."""
    async with open_target(kind) as target:
        await fuzz(target, message_streams(allow_extremes=False), check_lines, budget(200),
                   expect={INVALID, "result", NOT_FOUND, PARAMS})


@pytest.mark.parametrize("kind", KINDS)
async def test_fuzz_extreme_values(kind: str) -> None:
    """Huge numbers, deep nesting, big strings, lone surrogates, invalid UTF-8."""
    async with open_target(kind) as target:
        await fuzz(target, message_streams(), check_lines, budget(120),
                   expect={PARSE, INVALID, "result", NOT_FOUND, PARAMS})


ENORMOUS = [1 << 20, (4 << 20) - 200, 4 << 20, (4 << 20) + 1, 6 << 20]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
async def test_fuzz_enormous_strings(kind: str) -> None:
    """Multi-megabyte strings in every slot, around the 4 MiB line limit."""
    slots = ["text", "name", "id", "method", "taskId", "key", "cursor"]

    @st.composite
    def enormous(draw: st.DrawFn) -> list[bytes]:
        size = draw(st.sampled_from(ENORMOUS))
        char = draw(st.sampled_from("a\u00e9\u4e2d"))
        big = char * (size // len(char.encode()))
        slot = draw(st.sampled_from(slots))
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"text": "x"}}}
        if slot == "text":
            msg["params"]["arguments"]["text"] = big
        elif slot == "name":
            msg["params"]["name"] = big
        elif slot == "id":
            msg["id"] = big
        elif slot == "method":
            msg["method"] = big
        elif slot == "taskId":
            msg = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": big}}
        elif slot == "cursor":
            msg = {"jsonrpc": "2.0", "id": 7, "method": "tasks/list", "params": {"cursor": big}}
        else:
            msg["params"]["arguments"][big] = 1
        data = json.dumps(msg, ensure_ascii=False).encode() + b"\n"
        return cut(data, draw(st.lists(st.integers(0, 1 << 30), max_size=3)))

    async with open_target(kind) as target:
        await fuzz(target, enormous(), check_lines, budget(25, scale=0.1),
                   expect={INVALID, "result"})


# --- task lifecycles: random interleavings on both sides ------------------------------------

TERMINAL = {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}
EDGES = {(src, dst) for (src, _), dst in TRANSITIONS.items()}
AUDIT_STATUS = re.compile(r"^task (working|input_required|completed|failed|cancelled) id=(\w+)")
AUDIT_EXPIRED = re.compile(r"^task expired id=(\w+)")

start_step = st.tuples(st.just("start"), st.sampled_from([None, 1_000, 5_000, 60_000]))
step = st.one_of(
    start_step,
    st.tuples(st.just("tell"), st.integers(0, 3),
              st.sampled_from(["input", "complete", "fail", "raise", "mcp_error"])),
    st.tuples(st.just("tell"), st.integers(0, 3), st.just("input")),
    st.tuples(st.just("answer"), st.sampled_from(["accept", "decline", "error"])),
    st.tuples(st.just("answer"), st.just("accept")),
    st.tuples(st.just("cancel"), st.integers(0, 3)),
    st.tuples(st.just("get"), st.integers(0, 3)),
    st.tuples(st.just("follow"), st.integers(0, 3)),
    st.tuples(st.just("result"), st.integers(0, 3)),
    st.tuples(st.just("advance"), st.sampled_from([0.01, 0.5, 2, 10, 100])),
    st.tuples(st.just("disconnect")),
)


class _Audit(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class Interleaving:
    """One random script: tasks driven on the receiver, followed by the requestor."""

    def __init__(self, steps: list[tuple[Any, ...]]) -> None:
        self.steps = steps
        self.inboxes: dict[int, trio.MemorySendChannel[str]] = {}
        self.answers_send, self.answers_recv = trio.open_memory_channel[str](math.inf)
        self.handles: list[trio_mcp.TaskHandle[trio_mcp.CallToolResult]] = []
        self.ids: list[str] = []
        #: (task index, kind, outcome) for every follower and result collector.
        self.outcomes: list[tuple[int, str, Any]] = []
        self.cancels: list[tuple[int, Any]] = []
        self.server = self._server_app()
        self.client = self._client_app()

    def _server_app(self) -> trio_mcp.App:
        app = trio_mcp.App("scripted", limits=trio_mcp.TaskLimits(
            default_ttl=30_000, max_ttl=30_000, poll_interval=500))
        inboxes: dict[int, trio.MemoryReceiveChannel[str]] = {}
        self.server_inboxes = inboxes

        @app.tool(task_support="required")
        async def scripted(ctx: trio_mcp.RequestContext, k: int) -> Any:
            async for cmd in inboxes[k]:
                if cmd == "input":
                    await ctx.elicit(f"input for {k}?", {"type": "object", "properties": {
                        "ok": {"type": "boolean"}}})
                elif cmd == "complete":
                    return f"done {k}"
                elif cmd == "fail":
                    return trio_mcp.CallToolResult(
                        content=[trio_mcp.TextContent(f"failed {k}")], is_error=True)
                elif cmd == "raise":
                    raise RuntimeError(f"crash {k}")
                elif cmd == "mcp_error":
                    raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, f"bad {k}")
            return "inbox closed"  # pragma: no cover

        return app

    def _client_app(self) -> trio_mcp.App:
        app = trio_mcp.App("follower")

        @app.on_elicitation
        async def answer(ctx: trio_mcp.RequestContext,
                         params: trio_mcp.ElicitParams) -> trio_mcp.ElicitResult:
            reply = await self.answers_recv.receive()
            if reply == "error":
                raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "no answer")
            return trio_mcp.ElicitResult(action=reply, content={"ok": True}
                                         if reply == "accept" else None)

        return app

    async def _follow(self, k: int, handle: trio_mcp.TaskHandle[Any]) -> None:
        seen: list[TaskStatus] = []
        try:
            async for task in handle:
                seen.append(task.status)
            self.outcomes.append((k, "follow", seen))
        except (trio_mcp.ConnectionClosed, trio_mcp.RemoteError) as exc:
            self.outcomes.append((k, "follow", (seen, exc)))

    async def _result(self, k: int, handle: trio_mcp.TaskHandle[Any]) -> None:
        try:
            outcome: Any = await handle.result()
        except (trio_mcp.ConnectionClosed, trio_mcp.RemoteError) as exc:
            outcome = exc
        self.outcomes.append((k, "result", outcome))

    async def run(self) -> None:
        audit = _Audit()
        logger = logging.getLogger("trio_mcp.audit")
        old_level = logger.level
        logger.setLevel(logging.DEBUG)
        logger.addHandler(audit)
        try:
            await self._run()
        finally:
            logger.removeHandler(audit)
            logger.setLevel(old_level)
        self.check(audit.lines)

    async def _run(self) -> None:
        baseline = trio_task_count()
        registry = self.server.registry
        async with registry.running(), trio.open_nursery() as background, \
                contextlib.AsyncExitStack() as stack:
            client, server = await stack.enter_async_context(
                trio_mcp.open_memory_pair(self.server, self.client, client_context="alice"))
            for item in self.steps:
                client, server = await self._step(item, client, server, stack, background)
                await trio.testing.wait_all_tasks_blocked()
            # Finish every task still running, answering any question it asks.
            for inbox in self.inboxes.values():
                inbox.send_nowait("complete")
            for _ in range(2 * len(self.inboxes)):
                self.answers_send.send_nowait("accept")
            await trio.sleep(120)
            for k, task_id in enumerate(self.ids):
                record = registry.records.get(task_id)
                assert record is None or record.status in TERMINAL, (k, record)
                # The requestor agrees with the receiver.
                if record is not None:
                    got = await client.get_task(task_id)
                    assert got.status is record.status
            assert registry.live_count() == 0 and not list(registry.actors())
            assert not server.session._inflight and not client.session.pending._pending
            assert not len(client.task_waiters), client.task_waiters
            await stack.aclose()
            background.cancel_scope.cancel()
        assert trio_task_count() == baseline

    async def _step(self, item: tuple[Any, ...], client: trio_mcp.Peer, server: trio_mcp.Peer,
                    stack: contextlib.AsyncExitStack, background: trio.Nursery
                    ) -> tuple[trio_mcp.Peer, trio_mcp.Peer]:
        kind = item[0]
        if kind == "start":
            if len(self.handles) >= 4:
                return client, server
            k = len(self.handles)
            send, recv = trio.open_memory_channel[str](math.inf)
            self.inboxes[k], self.server_inboxes[k] = send, recv
            handle = await client.call_tool_task("scripted", {"k": k}, ttl=item[1])
            self.handles.append(handle)
            self.ids.append(handle.task_id)
            return client, server
        if kind == "answer":
            self.answers_send.send_nowait(item[1])
            return client, server
        if kind == "advance":
            await trio.sleep(item[1])
            return client, server
        if kind == "disconnect":
            await stack.aclose()
            client, server = await stack.enter_async_context(
                trio_mcp.open_memory_pair(self.server, self.client, client_context="alice"))
            # Follow the same tasks by id over the new connection.
            self.handles = [client.task_handle(i, trio_mcp.CallToolResult) for i in self.ids]
            return client, server
        if not self.handles:
            return client, server
        k = item[1] % len(self.handles)
        handle = self.handles[k]
        if kind == "tell":
            self.inboxes[k].send_nowait(item[2])
        elif kind == "cancel":
            try:
                task = await handle.cancel()
                assert task.status is TaskStatus.CANCELLED
                self.cancels.append((k, task.status))
            except trio_mcp.RemoteError as exc:
                assert exc.code == trio_mcp.INVALID_PARAMS, exc
                self.cancels.append((k, exc))
        elif kind == "get":
            try:
                await handle.status()
            except trio_mcp.RemoteError as exc:
                assert exc.code == trio_mcp.INVALID_PARAMS, exc
                assert "Task not found" in exc.message or "expired" in exc.message, exc
        elif kind == "follow":
            background.start_soon(self._follow, k, handle)
        elif kind == "result":
            background.start_soon(self._result, k, handle)
        return client, server

    def check(self, audit: list[str]) -> None:
        """The receiver's path (from the audit log) and what the requestor saw agree."""
        paths: dict[str, list[TaskStatus]] = {i: [TaskStatus.WORKING] for i in self.ids}
        expired: set[str] = set()
        for line in audit:
            if match := AUDIT_EXPIRED.match(line):
                expired.add(match[1])
                continue
            match = AUDIT_STATUS.match(line)
            if match is None:
                continue
            task_id = match[2]
            assert task_id not in expired, f"{task_id} changed after it expired"
            path = paths[task_id]
            new = TaskStatus(match[1])
            # Only the table's edges, and nothing after a terminal status.
            assert (path[-1], new) in EDGES, (task_id, path, new)
            path.append(new)
        for k, task_id in enumerate(self.ids):
            path = paths[task_id]
            final = path[-1]
            assert sum(s in TERMINAL for s in path) <= 1
            assert final in TERMINAL or task_id in expired, (k, path)
            for kk, outcome in self.cancels:
                if kk == k and outcome is TaskStatus.CANCELLED:
                    assert final is TaskStatus.CANCELLED, (k, path)
            for kk, what, outcome in self.outcomes:
                if kk != k:
                    continue
                if what == "follow":
                    seen = outcome[0] if isinstance(outcome, tuple) else outcome
                    # What the requestor saw happened, in that order.
                    it = iter(path)
                    assert all(s in it for s in seen), (k, seen, path)
                    if not isinstance(outcome, tuple):
                        assert seen and seen[-1] is final, (k, seen, path)
                    else:
                        exc = outcome[1]
                        assert isinstance(exc, trio_mcp.ConnectionClosed) or (
                            exc.code == trio_mcp.INVALID_PARAMS and task_id in expired)
                    continue
                if isinstance(outcome, trio_mcp.ConnectionClosed):
                    continue
                if isinstance(outcome, trio_mcp.RemoteError):
                    assert outcome.code == trio_mcp.INVALID_PARAMS, outcome
                    assert (final is TaskStatus.CANCELLED and "cancelled" in outcome.message) \
                        or (final is TaskStatus.FAILED and outcome.message == f"bad {k}") \
                        or task_id in expired, (k, path, outcome)
                    continue
                assert isinstance(outcome, trio_mcp.CallToolResult)
                if final is TaskStatus.COMPLETED:
                    assert not outcome.is_error and outcome.text == f"done {k}"
                else:
                    assert final is TaskStatus.FAILED and outcome.is_error, (k, path, outcome)


scripts = st.tuples(st.lists(start_step, min_size=1, max_size=3),
                    st.lists(step, min_size=1, max_size=30)).map(lambda t: t[0] + t[1])


@budget(200)
@given(steps=scripts)
def test_fuzz_task_lifecycle_interleavings(steps: list[tuple[Any, ...]]) -> None:
    """complete/fail/raise/cancel/input/answer/expire/disconnect in any order, with
    the requestor polling, following and collecting results meanwhile: only the
    table's transitions happen, exactly one terminal status, the requestor sees
    a subsequence of the receiver's path, every waiter gets an answer or a clear
    error, and nothing is left running."""
    trio.run(Interleaving(steps).run, clock=trio.testing.MockClock(autojump_threshold=0))


# --- the requestor against a receiver that answers nonsense ----------------------------------

GOOD_TASK = {"taskId": "t-1", "status": "working", "createdAt": "2025-01-01T00:00:00Z",
             "lastUpdatedAt": "2025-01-01T00:00:00Z", "ttl": 60_000, "pollInterval": 100}
STATUSES = ["working", "input_required", "completed", "failed", "cancelled"]


@st.composite
def task_snapshots(draw: st.DrawFn) -> Any:
    """A Task object, usually plausible, sometimes wrong in one or two ways."""
    task: dict[str, Any] = dict(GOOD_TASK)
    task["status"] = draw(st.sampled_from(STATUSES))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(GOOD_TASK)))
        action = draw(st.sampled_from(["delete", "retype", "edge"]))
        if action == "delete":
            task.pop(key, None)
        elif action == "retype":
            task[key] = draw(json_values)
        else:
            task[key] = draw(st.sampled_from(
                ["t-2", "", "bogus", None, -1, 0, 2**63, 10**300, 1e300, "\ud800"]))
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    return task


@st.composite
def receiver_scripts(draw: st.DrawFn) -> dict[str, Any]:
    created = draw(task_snapshots())
    created_result = {"task": created} if draw(st.integers(0, 5)) else draw(json_values)
    return {
        "create": created_result,
        "gets": draw(st.lists(task_snapshots(), max_size=6)),
        "result": draw(st.one_of(
            st.just({"content": [{"type": "text", "text": "ok"}]}),
            st.fixed_dictionaries({"content": json_values}),
            json_values,
            st.just({"error": {"code": -32602, "message": "no"}}),
        )),
        "cancel": draw(task_snapshots()),
    }


class FakeReceiver:
    """A server that answers the requestor's task calls from a script."""

    def __init__(self, script: dict[str, Any], ends: Any) -> None:
        self.script = script
        self.ends = ends
        self.gets = list(script["gets"])

    def answer(self, req: Request) -> Any:
        if req.method == "initialize":
            return {"protocolVersion": "2025-11-25", "serverInfo": {"name": "fake", "version": "0"},
                    "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {},
                                                            "requests": {"tools": {"call": {}}}}}}
        if req.method == "tools/call":
            return self.script["create"]
        if req.method == "tasks/get":
            if self.gets:
                return self.gets.pop(0)
            return {**GOOD_TASK, "status": "completed"}
        if req.method == "tasks/result":
            return self.script["result"]
        if req.method == "tasks/cancel":
            return self.script["cancel"]
        return {}

    async def run(self) -> None:
        async for msg in self.ends.from_peer:
            if not isinstance(msg, Request):
                continue
            out = self.answer(msg)
            wire: dict[str, Any] = {"jsonrpc": "2.0", "id": msg.id}
            if isinstance(out, dict) and set(out) == {"error"}:
                wire["error"] = out["error"]
            else:
                wire["result"] = out  # not always an object: a broken receiver
            # Decoded from JSON text, exactly as a transport would.
            await self.ends.to_peer.send(decode_message(json.dumps(wire)))


async def drive_requestor(script: dict[str, Any]) -> None:
    bus, ends = open_bus()
    fake = FakeReceiver(script, ends)
    allowed = (trio_mcp.RemoteError, trio_mcp.RemoteProtocolError)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake.run)
        async with trio_mcp.open_peer(trio_mcp.App("requestor"), bus,
                                      trio_mcp.Role.CLIENT) as client:
            with trio.fail_after(10**6):
                try:
                    handle = await client.call_tool_task("anything", {})
                except allowed:
                    return
                task_id = handle.task_id
                for step in (handle.wait, handle.result, handle.cancel, handle.status):
                    with contextlib.suppress(allowed):
                        await step()
                    # Whatever the receiver says, the handle follows one task.
                    assert handle.task_id == task_id
            await client.ping()
            assert not client.session.pending._pending and not len(client.task_waiters)
        nursery.cancel_scope.cancel()


@budget(200)
@given(script=receiver_scripts())
def test_fuzz_requestor_handle_against_malformed_receiver_answers(
    script: dict[str, Any],
) -> None:
    """Wrong types, unknown statuses, terminal-then-working, another task's
    snapshot, junk results: the handle raises RemoteError or
    RemoteProtocolError (never anything else), never hangs, and keeps
    following the task it was given."""
    trio.run(drive_requestor, script, clock=trio.testing.MockClock(autojump_threshold=0))


# --- regressions: bugs the fuzzing found ------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "stdio", "ws"])
async def test_regression_lone_surrogate_id_is_answered_not_fatal(kind: str) -> None:
    """``{"id": "\\ud800"}`` is valid JSON, but a lone surrogate cannot be UTF-8:
    encoding the answer raised UnicodeEncodeError in the transport's writer,
    which killed the stdio server process (and the WebSocket connection, and
    the in-memory link). Such strings now go back out as \\u escapes."""
    async with open_raw(kind) as raw:
        await raw.initialize()
        await raw.send_line(b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}')
        assert await raw.recv() == {"jsonrpc": "2.0", "id": "\ud800", "result": {}}
        # Not an internal error: the right error, naming the method as sent.
        await raw.send_line(b'{"jsonrpc":"2.0","id":2,"method":"x\\udfff"}')
        msg = await raw.recv()
        assert msg["error"]["code"] == trio_mcp.METHOD_NOT_FOUND
        assert msg["error"]["message"].endswith("x\udfff")
        reply = await raw.request(3, "tools/call",
                                  {"name": "echo", "arguments": {"text": "a\ud83d"}})
        assert reply["result"]["content"][0]["text"] == "a\ud83d"
        assert await raw.ping_ok()


async def test_regression_expired_input_required_task_stays_deleted(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A task that expired while ``input_required`` used to move to ``working``
    after its deletion (its pending question withdrawn as the work was
    cancelled), logging and announcing a status for a task that no longer
    exists. A deleted task now has no transitions at all."""
    caplog.set_level(logging.INFO, logger="trio_mcp.audit")
    app = trio_mcp.App("asker", limits=trio_mcp.TaskLimits(default_ttl=1_000, max_ttl=1_000,
                                                           poll_interval=100))

    @app.tool(task_support="required")
    async def ask(ctx: trio_mcp.RequestContext) -> str:
        await ctx.elicit("?", {"type": "object", "properties": {}})
        return "answered"  # pragma: no cover

    client = trio_mcp.App("silent")

    @client.on_elicitation
    async def never(ctx: trio_mcp.RequestContext,
                    params: trio_mcp.ElicitParams) -> trio_mcp.ElicitResult:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    notes: list[dict[str, Any]] = []

    def spy(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "received" and wire.get("method") == "notifications/tasks/status":
            notes.append(wire["params"])

    _outbound.message_observers.append(spy)
    try:
        async with trio_mcp.open_memory_pair(app, client) as (peer, _):
            handle = await peer.call_tool_task("ask", {})
            await trio.sleep(0.5)
            assert (await handle.status()).status is TaskStatus.INPUT_REQUIRED
            await trio.sleep(1)
            with pytest.raises(trio_mcp.RemoteError):
                await handle.status()
    finally:
        _outbound.message_observers.remove(spy)
    lines = [r.getMessage() for r in caplog.records
             if handle.task_id in r.getMessage() and "lookup failed" not in r.getMessage()]
    assert lines[-1].startswith("task expired"), lines
    assert [n["status"] for n in notes] == ["input_required"]


async def test_regression_following_an_expired_task_leaves_no_status_event(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A follower (``async for`` / ``wait()``) that stopped on an error, such as
    the task expiring, left its wake-up event in the peer's table for the
    connection's lifetime: one leaked entry per such task."""
    app = trio_mcp.App("sleepy", limits=trio_mcp.TaskLimits(default_ttl=1_000, max_ttl=1_000))

    @app.tool(task_support="required")
    async def nap() -> str:
        await trio.sleep(3600)
        return "never"  # pragma: no cover

    async with trio_mcp.open_memory_pair(app) as (peer, _):
        handles = [await peer.call_tool_task("nap", {}) for _ in range(3)]
        for handle in handles:
            with pytest.raises(trio_mcp.RemoteError):
                await handle.wait()
        with trio.move_on_after(0.1):  # a caller giving up also cleans up
            await (await peer.call_tool_task("nap", {})).wait()
        assert len(peer.task_waiters) == 0


async def test_regression_malformed_answer_fails_the_request_instead_of_hanging(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An answer whose ``result`` is not an object (or whose ``error`` has no
    integer code) was dropped as undecodable, and the request waiting for it
    waited forever. It now fails with RemoteProtocolError."""
    script = {"create": None, "gets": [], "result": [], "cancel": None}
    bus, ends = open_bus()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(FakeReceiver(script, ends).run)
        async with trio_mcp.open_peer(trio_mcp.App("r"), bus, trio_mcp.Role.CLIENT) as client:
            with trio.fail_after(60):
                with pytest.raises(trio_mcp.RemoteProtocolError, match="malformed"):
                    await client.call_tool_task("x", {})
                with pytest.raises(trio_mcp.RemoteProtocolError, match="malformed"):
                    await client.task_result("t-1")
                await client.ping()
            assert not client.session.pending._pending
        nursery.cancel_scope.cancel()


async def test_regression_handle_refuses_a_snapshot_of_another_task(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A receiver answering ``tasks/get`` (or ``tasks/cancel``) with another
    task's snapshot silently re-targeted the handle: it then polled, fetched
    and cancelled that other task."""
    other = {**GOOD_TASK, "taskId": "t-2"}
    script = {"create": {"task": GOOD_TASK}, "gets": [other], "result": {"content": []},
              "cancel": other}
    bus, ends = open_bus()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(FakeReceiver(script, ends).run)
        async with trio_mcp.open_peer(trio_mcp.App("r"), bus, trio_mcp.Role.CLIENT) as client:
            handle = await client.call_tool_task("x", {})
            for step in (handle.status, handle.cancel):
                with pytest.raises(trio_mcp.RemoteProtocolError, match="t-2"):
                    await step()
                assert handle.task_id == "t-1"
        nursery.cancel_scope.cancel()
