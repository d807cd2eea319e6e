"""Security: task isolation between identities, unguessable ids, per-identity
limits, the Origin check, no internals in errors, and the audit trail."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

import trio_mcp
from trio_mcp import TaskStatus
from trio_mcp._util import unwrap_group
from trio_mcp.peer._session import _outbound

from tests.conftest import _record
from tests.helpers import ROOT, client_app
from tests.reliability.apps import INTERNAL_PATH, build_fuzz_app

pytestmark = pytest.mark.timeout(60)
TOKENS = {"token-alice": "alice", "token-bob": "bob", "token-alice-2": "alice"}
FAULTS_SERVER = [sys.executable, "-m", "tests.reliability.apps", "faults"]


def secure_app(limits: trio_mcp.TaskLimits | None = None) -> tuple[trio_mcp.App, trio.Event]:
    app = trio_mcp.App("secure", limits=limits or trio_mcp.TaskLimits())
    gate = trio.Event()

    @app.tool(task_support="optional")
    async def gated() -> str:
        await gate.wait()
        return "secret result"

    @app.tool(task_support="optional")
    async def quick() -> str:
        return "quick result"

    return app, gate


@asynccontextmanager
async def identities(kind: str, app: trio_mcp.App,
                     *tokens: str) -> AsyncIterator[list[trio_mcp.Peer]]:
    """One client peer per token, each authenticated as the token's identity."""
    async with AsyncExitStack() as stack:
        if kind == "memory":
            await stack.enter_async_context(app.registry.running())
            peers = [
                (await stack.enter_async_context(trio_mcp.open_memory_pair(
                    app, client_app(), client_context=TOKENS[token])))[0]
                for token in tokens
            ]
        else:
            nursery = await stack.enter_async_context(trio.open_nursery())
            stack.callback(nursery.cancel_scope.cancel)
            address = await nursery.start(partial(trio_mcp.serve_websocket, app, tokens=TOKENS))
            peers = [
                await stack.enter_async_context(
                    trio_mcp.open_websocket_client(address.url, client_app(), token=token))
                for token in tokens
            ]
        yield peers


async def error_of(call: Any) -> tuple[int, str, Any]:
    with pytest.raises(trio_mcp.RemoteError) as got:
        await call()
    return got.value.code, got.value.message, got.value.data


# --- isolation ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "ws"])
async def test_security_other_identities_cannot_see_a_task_and_cannot_tell_it_exists(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_mcp.audit")
    app, gate = secure_app(trio_mcp.TaskLimits(page_size=2))
    async with identities(kind, app, "token-alice", "token-bob") as (alice, bob):
        running = await alice.call_tool_task("gated", {})
        done = await alice.call_tool_task("quick", {})
        await done.wait()
        extra = await alice.call_tool_task("quick", {})
        unknown = secrets.token_hex(16)

        for task_id in (running.task_id, done.task_id):
            for method in (bob.get_task, bob.task_result, bob.cancel_task):
                # Same code, message and data as for an id that never existed:
                # bob cannot even learn that alice's task exists (nor that it
                # is terminal: cancel does not say "already terminal").
                foreign = await error_of(partial(method, task_id))
                assert foreign == await error_of(partial(method, unknown))
                assert foreign[0] == trio_mcp.INVALID_PARAMS
        # tasks/list: nothing of alice's, and alice's cursor is no use to bob.
        assert (await bob.list_tasks()).tasks == []
        page = await alice.list_tasks()
        assert page.next_cursor and len(page.tasks) == 2
        foreign_cursor = await error_of(partial(bob.list_tasks, page.next_cursor))
        assert foreign_cursor == await error_of(partial(bob.list_tasks, "1.garbage"))
        # Nothing bob did changed alice's tasks.
        assert (await alice.get_task(running.task_id)).status is TaskStatus.WORKING
        gate.set()
        assert (await running.result()).text == "secret result"
        assert (await extra.result()).text == "quick result"
    refused = [r.getMessage() for r in caplog.records if "lookup failed" in r.getMessage()]
    assert len(refused) == 12 and all("context=identity:bob" in m for m in refused)


async def test_security_connections_without_identity_are_isolated_from_each_other() -> None:
    app, _ = secure_app()
    async with app.registry.running(), trio_mcp.open_memory_pair(app) as (one, _), \
            trio_mcp.open_memory_pair(app) as (two, _):
        handle = await one.call_tool_task("quick", {})
        assert await error_of(partial(two.get_task, handle.task_id)) == await error_of(
            partial(two.get_task, "0" * 32))
        assert (await two.list_tasks()).tasks == []


async def test_security_task_ids_are_128_random_bits_from_the_csprng(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 4000
    registry = trio_mcp.TaskRegistry(trio_mcp.TaskLimits(max_live_per_requestor=n + 1))

    async def work(actor: Any) -> dict[str, Any]:
        return {"content": []}

    async with registry.running():
        ids = [(await registry.create("ctx", "tools/call", work, requested_ttl=None,
                                      origin=None)).task_id for _ in range(n)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == n
    bits = [int(i, 16) for i in ids]
    for position in range(128):
        ones = sum((b >> position) & 1 for b in bits)
        assert 0.4 * n < ones < 0.6 * n, position  # ~12 sigma: never by chance
    # Consecutive ids share nothing: about half their bits differ.
    flips = [bin(a ^ b).count("1") for a, b in zip(bits, bits[1:], strict=False)]
    assert 60 < sum(flips) / len(flips) < 68
    # The source is os.urandom (the OS CSPRNG, as for `secrets`), 16 bytes an id,
    # drawn 256 ids at a time.
    from trio_mcp.peer._tasks import _store

    asked: list[int] = []
    monkeypatch.setattr(_store, "_id_pool", [])

    def urandom(k: int) -> bytes:
        asked.append(k)
        return b"\xab" * k

    monkeypatch.setattr(os, "urandom", urandom)
    async with registry.running():
        actor = await registry.create("ctx", "tools/call", work, requested_ttl=None, origin=None)
    assert actor.task_id == "ab" * 16 and asked == [16 * 256]


def test_security_task_ids_differ_across_fork() -> None:
    """A forked child draws its own ids: none repeats the parent's (the pool is per process)."""
    from trio_mcp.peer._tasks._store import new_task_id

    new_task_id()  # the parent's pool holds ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, ",".join(new_task_id() for _ in range(300)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        child = set(f.read().decode().split(","))
    os.waitpid(pid, 0)
    parent = {new_task_id() for _ in range(300)}
    assert len(child) == 300 and not child & parent


# --- limits -------------------------------------------------------------------------------


async def test_security_live_task_cap_is_per_identity_across_connections() -> None:
    app, gate = secure_app(trio_mcp.TaskLimits(max_live_per_requestor=3))
    async with identities("ws", app, "token-alice", "token-alice-2", "token-bob") as (
        laptop, phone, bob
    ):
        handles = [await laptop.call_tool_task("gated", {}) for _ in range(2)]
        handles.append(await phone.call_tool_task("gated", {}))
        code, message, _ = await error_of(partial(phone.call_tool_task, "gated", {}))
        assert code == trio_mcp.RESOURCE_LIMIT
        assert message == "Too many live tasks: at most 3 per requestor"
        code, _, _ = await error_of(partial(laptop.call_tool_task, "quick", {}))
        assert code == trio_mcp.RESOURCE_LIMIT
        assert app.registry.live_count("identity:alice") == 3
        # Another identity is not affected.
        await (await bob.call_tool_task("quick", {})).wait()
        # Finished tasks no longer count.
        gate.set()
        for handle in handles:
            await handle.wait()
        await (await phone.call_tool_task("quick", {})).wait()


async def test_security_ttl_is_capped_at_max_ttl(autojump_clock: trio.abc.Clock) -> None:
    app, _ = secure_app(trio_mcp.TaskLimits(default_ttl=1_000, max_ttl=5_000))
    async with trio_mcp.open_memory_pair(app) as (client, _):
        greedy = await client.call_tool_task("quick", {}, ttl=10**12)
        assert greedy.task.ttl == 5_000
        assert (await client.call_tool_task("quick", {})).task.ttl == 1_000
        assert (await client.call_tool_task("quick", {}, ttl=2_000)).task.ttl == 2_000
        await greedy.wait()
        await trio.sleep(5.001)
        code, message, _ = await error_of(greedy.status)
        assert code == trio_mcp.INVALID_PARAMS and "not found" in message
        assert len(app.registry) == 0


async def test_security_rate_limit_is_per_identity_and_counts_id_guessing(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="trio_mcp.audit")
    app, _ = secure_app(trio_mcp.TaskLimits(rate_per_second=5, rate_burst=5))
    async with identities("memory", app, "token-alice", "token-bob") as (alice, bob):
        handle = await alice.call_tool_task("quick", {})  # 1 (creating counts)
        for _ in range(4):  # 2..5: guessing ids costs the same as using them
            with pytest.raises(trio_mcp.RemoteError):
                await alice.get_task(secrets.token_hex(16))
        for call in (partial(alice.get_task, handle.task_id), alice.list_tasks,
                     partial(alice.call_tool_task, "quick", {})):
            code, message, _ = await error_of(call)
            assert code == trio_mcp.RESOURCE_LIMIT
            assert message == "Rate limit exceeded: at most 5 task operations per second"
        assert len(app.registry) == 1  # the refused creation created nothing
        # bob has his own budget.
        assert (await bob.list_tasks()).tasks == []
        # Tokens come back at the configured rate.
        await trio.sleep(0.2)
        assert (await alice.get_task(handle.task_id)).task_id == handle.task_id
        await error_of(alice.list_tasks)
    limited = [r.getMessage() for r in caplog.records if "rate limited" in r.getMessage()]
    assert len(limited) == 4 and all("context=identity:alice" in m for m in limited)


# --- the WebSocket Origin check -------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost@evil.example", False),  # userinfo trick: host is evil.example
        ("http://evil.example#@localhost", False),
        ("http://evil.example/?localhost", False),
        ("http://localhost:99999", False),  # malformed port
        ("http://127.0.0.2", False),  # loopback, but not the allowed names
        ("http://[::ffff:127.0.0.1]", False),
        ("http://0.0.0.0", False),
        ("ws://localhost", False),
        ("", False),
        ("http://localhost.", False),
        ("https://LOCALHOST:8443/", True),
    ],
)
def test_security_origin_policy_edge_cases(origin: str, allowed: bool) -> None:
    assert trio_mcp.origin_allowed(origin) is allowed


async def test_security_two_origin_headers_are_refused() -> None:
    """A loopback Origin cannot vouch for a second, foreign one."""
    app, _ = secure_app()
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_websocket, app))
        headers = [(b"Origin", b"http://localhost"), (b"Origin", b"http://evil.example")]
        # This test owns the TCP stream: trio-websocket leaves it open on a rejection.
        stream = await trio.open_tcp_stream("127.0.0.1", address.port)
        try:
            with pytest.raises(trio_websocket.ConnectionRejected) as got, unwrap_group():
                async with trio.open_nursery() as inner:
                    await trio_websocket.wrap_client_stream(
                        inner, stream, f"127.0.0.1:{address.port}", "/",
                        subprotocols=["mcp"], extra_headers=headers)
            assert got.value.status_code == 403
        finally:
            await trio.aclose_forcefully(stream)
        nursery.cancel_scope.cancel()


# --- no internals in what a peer is told ----------------------------------------------------

LEAKS = ("Traceback", 'File "', "site-packages", ".py", str(ROOT), "/home/", "/root/",
         "no-such-dir", "secret.txt")


@contextmanager
def unrecorded() -> Iterator[None]:
    """Keep requests sent invalid on purpose out of the schema check (conftest.schema_check)."""
    _outbound.message_observers.remove(_record)
    try:
        yield
    finally:
        _outbound.message_observers.append(_record)


def _assert_clean(texts: list[str]) -> None:
    for text in texts:
        for leak in LEAKS:
            assert leak not in text, f"{leak!r} sent to the peer: {text[:300]}"


async def test_security_no_stack_traces_or_paths_reach_the_peer() -> None:
    """Crash everything that can crash, in process, and read every byte the
    server sent: errors are short sentences with no trace, path or address."""
    sent: list[str] = []

    def spy(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "sent":
            sent.append(json.dumps(wire))

    app = build_fuzz_app(faults=True)

    broken_client = trio_mcp.App("broken-client")

    @broken_client.on_sampling
    async def sample(ctx: trio_mcp.RequestContext,
                     params: trio_mcp.CreateMessageParams) -> trio_mcp.CreateMessageResult:
        raise OSError(2, "No such file or directory", INTERNAL_PATH)

    async def crash(req: object) -> object:
        raise ZeroDivisionError(f"{INTERNAL_PATH}")

    _outbound.message_observers.append(spy)
    try:
        async with trio_mcp.open_memory_pair(app, broken_client) as (client, server):
            for name in ("leaky", "crash"):
                assert (await client.call_tool(name, {})).is_error
                handle = await client.call_tool_task(name, {})
                await handle.wait()
                await handle.result()
            server.session.request_handlers["tools/list"] = crash  # a bug in a request handler
            with unrecorded():
                for method, params in (("tools/list", {}), ("tools/call", {"name": 5}),
                                       ("tasks/get", {"taskId": [1]}), ("tasks/result", {}),
                                       ("nope", {})):
                    with pytest.raises(trio_mcp.RemoteError):
                        await client.request_raw(method, params)
            # The client's handler crashing: the client tells the server nothing more.
            with pytest.raises(trio_mcp.RemoteError) as got:
                await server.request_raw("sampling/createMessage",
                                         {"messages": [], "maxTokens": 1})
            assert got.value.message == "Internal error"
    finally:
        _outbound.message_observers.remove(spy)
    assert len(sent) > 20
    _assert_clean(sent)


async def test_security_no_stack_traces_or_paths_over_stdio() -> None:
    """The same over a real server process, reading its stdout (its stderr has
    the traces, for its operator)."""
    texts: list[str] = []

    def spy(direction: str, wire: dict[str, Any], method: str | None) -> None:
        if direction == "received":
            texts.append(json.dumps(wire))

    _outbound.message_observers.append(spy)
    try:
        async with trio_mcp.open_stdio_client(FAULTS_SERVER, cwd=str(ROOT),
                                              stderr=subprocess.DEVNULL) as client:
            for name in ("leaky", "crash"):
                assert (await client.call_tool(name, {})).is_error
                handle = await client.call_tool_task(name, {})
                status = await handle.wait()
                assert status.status is TaskStatus.FAILED
                texts.append(status.status_message or "")
                await handle.result()
            with unrecorded(), pytest.raises(trio_mcp.RemoteError):
                await client.request_raw("tools/call", {"name": {"x": 1}})
    finally:
        _outbound.message_observers.remove(spy)
    _assert_clean(texts)
    assert any("FileNotFoundError" in t for t in texts)


# --- the audit trail ------------------------------------------------------------------------


async def test_security_audit_log_records_every_task_event(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A line for each creation, transition, poll, retrieval, listing, cancel,
    expiry, refused lookup and refused creation, naming the task and the
    requestor context."""
    caplog.set_level(logging.DEBUG, logger="trio_mcp.audit")
    app = trio_mcp.App("audited", limits=trio_mcp.TaskLimits(
        default_ttl=60_000, max_ttl=60_000, max_live_per_requestor=3))
    gate = trio.Event()

    @app.tool(task_support="optional")
    async def asks(ctx: trio_mcp.RequestContext) -> str:
        await ctx.elicit("ok?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return "asked"

    @app.tool(task_support="optional")
    async def fails() -> trio_mcp.CallToolResult:
        return trio_mcp.CallToolResult(content=[trio_mcp.TextContent("no")], is_error=True)

    @app.tool(task_support="optional")
    async def waits() -> str:
        await gate.wait()
        return "waited"

    async with trio_mcp.open_memory_pair(app, client_app(),
                                         client_context="auditor") as (client, _):
        asked = await client.call_tool_task("asks", {})
        assert (await asked.result()).text == "asked"
        failed = await client.call_tool_task("fails", {})
        await failed.wait()
        cancelled = await client.call_tool_task("waits", {})
        kept = await client.call_tool_task("waits", {})
        extra = await client.call_tool_task("waits", {})
        await error_of(partial(client.call_tool_task, "waits", {}))  # over the live cap
        await cancelled.cancel()
        await client.list_tasks()
        await error_of(partial(client.get_task, "x\ntask completed id=forged context=x"))
        gate.set()
        await kept.wait()
        await extra.wait()
        await trio.sleep(61)  # everything expires
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.audit"]
    assert all("\n" not in line for line in lines)  # ids are repr()'d: no forged lines

    def events(task_id: str) -> list[str]:
        return [line.split(" id=")[0] for line in lines if f"id={task_id}" in line]

    ctx = "context=identity:auditor"
    assert all(ctx in line for line in lines if "id=" in line or "context=" in line)
    assert events(asked.task_id) == [
        "task created", "task input_required", "task working", "task completed",
        "task retrieved", "task expired"]
    assert events(failed.task_id)[0] == "task created"
    assert "task failed" in events(failed.task_id) and "task polled" in events(failed.task_id)
    assert events(cancelled.task_id) == [
        "task created", "task cancelled", "task cancel requested", "task expired"]
    assert [e for e in events(kept.task_id) if e != "task polled"] == [
        "task created", "task completed", "task expired"]
    assert "task polled" in events(kept.task_id)
    assert sum("task refused context=identity:auditor reason=live-cap" in x for x in lines) == 1
    assert sum(x.startswith("tasks listed context=identity:auditor") for x in lines) == 1
    assert sum(x.startswith("task lookup failed id='x\\ntask completed") for x in lines) == 1


def test_security_messages_carry_no_secret_of_the_registry() -> None:
    """Cursors are HMACs of (owner, position): they never embed the owner."""
    registry = trio_mcp.TaskRegistry()
    cursor = registry._cursors.make("identity:alice", 7)
    assert "alice" not in cursor and registry._cursors.read("identity:alice", cursor) == 7
    with pytest.raises(trio_mcp.McpError):
        registry._cursors.read("identity:bob", cursor)


async def test_regression_oserror_paths_are_not_sent_to_the_peer() -> None:
    """A tool failing with an OSError used to send ``str(exc)``, which names the
    file (an internal path), in its isError text; now only the reason goes."""
    app = trio_mcp.App("files")

    @app.tool(task_support="optional")
    async def config() -> str:
        raise FileNotFoundError(2, "No such file or directory", "/srv/internal/app.toml")

    async with trio_mcp.open_memory_pair(app) as (client, _):
        result = await client.call_tool("config")
        handle = await client.call_tool_task("config")
        status = await handle.wait()
    assert result.text == "Tool config failed: FileNotFoundError: No such file or directory"
    assert "/srv" not in (status.status_message or "") and status.status is TaskStatus.FAILED


async def test_regression_rate_buckets_of_idle_contexts_are_swept(
    autojump_clock: trio.abc.Clock,
) -> None:
    """With rate limiting on, every context that ever made a task operation kept
    its token bucket forever: one per closed connection (the leak run showed
    300 connections leave 350 buckets). Full buckets are now forgotten when the
    table doubles; a context still short of tokens keeps its bucket."""
    from trio_mcp.peer._tasks._limits import _BUCKET_SWEEP_MIN

    registry = trio_mcp.TaskRegistry(trio_mcp.TaskLimits(rate_per_second=10, rate_burst=2))
    registry.check_rate("identity:greedy")
    registry.check_rate("identity:greedy")  # no token left
    for n in range(2 * _BUCKET_SWEEP_MIN - 1):
        registry.check_rate(f"connection:{n}")  # one token left each: kept by a sweep
    assert len(registry._rate) == 2 * _BUCKET_SWEEP_MIN
    await trio.sleep(0.15)  # the connections' buckets are full again; greedy has 1.5
    for n in range(100):
        registry.check_rate(f"later:{n}")
    assert len(registry._rate) == 101
    registry.check_rate("identity:greedy")  # 1.5 tokens: a fresh bucket would have 2
    with pytest.raises(trio_mcp.McpError):
        registry.check_rate("identity:greedy")
