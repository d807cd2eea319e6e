"""``ctx.children()`` in one process: relays (``examples/relay_server.py``'s App) and test
tools served on real loopback Streamable HTTP in this process, so the tests can reach each
hop's registry: a tool that raises cancels its children, a detached child is left running,
the opt-outs, the orphan watchdog (``TaskLimits.orphan_after``, on a virtual clock), 100
trees with random cancels leaving nothing behind, and one trace over three hops.

Every message these in-process peers send is checked against its era's schema (conftest).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import pytest
import trio

import trio_mcp

from tests.relay_support import CONFIRM, answering_app, relay_module, wait_status

E25, E26 = "2025-11-25", "2026-07-28"


@attrs.define(eq=False)
class Hop:
    """One relay served in this process."""

    app: trio_mcp.App
    url: str
    token: str
    upstream: Any = None


@asynccontextmanager
async def chain(*eras: str, extra_tools: Callable[[trio_mcp.App], None] | None = None,
                ) -> AsyncIterator[list[Hop]]:
    """Relays C <- ... <- A (``eras``: what each hop speaks to the next, top first);
    yields them top first (A, B, C)."""
    module = relay_module()
    hops: list[Hop] = []
    async with trio.open_nursery() as nursery:
        below: Hop | None = None
        for i, era in enumerate([None, *reversed(eras)]):
            upstream = None
            if below is not None:
                assert era is not None
                upstream = module.Upstream(below.url, below.token, era)
                await nursery.start(upstream.run)
            where: dict[str, str] = {}
            app = module.build_app(upstream, whereabouts=where, orphan_after=0)
            if extra_tools is not None and i == len(eras):
                extra_tools(app)
            token = f"tok-{i}"
            address = await nursery.start(partial(
                trio_mcp.serve_http, app, "127.0.0.1", 0, tokens={token: "relay-caller"}
            ))
            where["url"] = address.url
            below = Hop(app, address.url, token, upstream)
            hops.insert(0, below)
        yield hops
        nursery.cancel_scope.cancel()


async def until(check: Callable[[], bool], bound: float = 30) -> None:
    """Wait (polling, at most ``bound`` s) until ``check()``."""
    with trio.fail_after(bound):
        while True:
            if check():
                return
            await trio.sleep(0.02)


def status_of(hop: Hop, task_id: str) -> str:
    """A task's status in the hop's registry (read in this process)."""
    return hop.app.registry.lookup("identity:relay-caller", task_id).status.value


def only_child(hop: Hop, task_id: str) -> str:
    actor = hop.app.registry.running_actor(task_id)
    assert actor is not None and actor.tree is not None and actor.tree.children
    return actor.tree.children[0].task_id


async def test_children_a_tool_that_raises_cancels_its_children() -> None:
    asked = trio.Event()
    b_peer: dict[str, trio_mcp.Peer] = {}
    hop_b: dict[str, Hop] = {}
    child_ids: list[str] = []

    def tools(app: trio_mcp.App) -> None:
        @app.tool(task_support="required")
        async def boom(ctx: trio_mcp.RequestContext) -> str:
            """Start relay(1) on B as a child, then raise once its question reached us."""
            async with ctx.children() as kids:
                child = await kids.call_tool_task(b_peer["b"], "relay",
                                                  {"depth": 1, "seconds": 0.0})
                child_ids.append(child.task_id)
                await asked.wait()  # C asked: B's child on C is known now
                child_ids.append(only_child(hop_b["b"], child.task_id))
                raise RuntimeError("boom")

    async with chain(E25, E26, extra_tools=tools) as (a, b, c):
        hop_b["b"] = b
        # (its App declares elicitation, so that B may ask A: the scope forwards it up)
        async with trio_mcp.open_http_client(b.url, answering_app([]), token=b.token) as to_b:
            b_peer["b"] = to_b
            app = trio_mcp.App("client")

            @app.on_elicitation
            async def elicit(
                ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
            ) -> trio_mcp.ElicitResult:
                asked.set()
                await trio.sleep_forever()
                raise AssertionError("unreachable")

            async with trio_mcp.open_http_client(a.url, app, token=a.token) as peer:
                handle = await peer.call_tool_task("boom", {})
                with trio.fail_after(30):
                    final = await handle.wait()
                assert final.status.value == "failed"
                b_task, c_task = child_ids
                # Seen with tasks/get on B and C, with the relays' own tokens.
                await wait_status(b.url, b.token, b_task, "cancelled")
                await wait_status(c.url, c.token, c_task, "cancelled")
                await until(lambda: not b.app.registry.running_ids())
                await until(lambda: not c.app.registry.running_ids())


async def test_children_a_child_started_outside_the_scope_stays_detached() -> None:
    b_peer: dict[str, trio_mcp.Peer] = {}
    child_ids: list[str] = []

    def tools(app: trio_mcp.App) -> None:
        @app.tool(task_support="required")
        async def detach(ctx: trio_mcp.RequestContext) -> str:
            """Start relay(0, 60) on B without a children scope, then wait."""
            child = await b_peer["b"].call_tool_task("relay", {"depth": 0, "seconds": 60.0})
            child_ids.append(child.task_id)
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    async with chain(E25, extra_tools=tools) as (a, b):
        async with trio_mcp.open_http_client(b.url, token=b.token) as to_b:
            b_peer["b"] = to_b
            async with trio_mcp.open_http_client(a.url, token=a.token) as peer:
                handle = await peer.call_tool_task("detach", {})
                await until(lambda: bool(child_ids))
                await handle.cancel()
                await until(lambda: not a.app.registry.running_ids())
                # Today's behaviour, kept: the detached child runs on.
                assert status_of(b, child_ids[0]) == "working"
                await to_b.cancel_task(child_ids[0])


async def test_children_failure_raises_where_awaited_and_forwarding_can_be_turned_off() -> None:
    b_peer: dict[str, trio_mcp.Peer] = {}

    def tools(app: trio_mcp.App) -> None:
        @app.tool(task_support="required")
        async def probe(ctx: trio_mcp.RequestContext) -> str:
            """A failing child, then a child whose question B's own client App answers."""
            async with ctx.children(forward_questions=False) as kids:
                bad = await kids.call_tool_task(b_peer["b"], "relay", {"depth": 0, "seconds": -1})
                try:
                    await bad.result()
                except trio_mcp.TaskFailed as exc:
                    failed = f"failed {exc.code}"
                ok = await kids.call_tool_task(b_peer["b"], "relay", {"depth": 0, "seconds": 0})
                text = (await ok.result()).text
            return f"{failed}; {text}"

    async with chain(E25, extra_tools=tools) as (a, b):
        declined = trio_mcp.App("upstream-client")

        @declined.on_elicitation
        async def decline(
            ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
        ) -> trio_mcp.ElicitResult:
            return trio_mcp.ElicitResult("decline")

        async with trio_mcp.open_http_client(b.url, declined, token=b.token) as to_b:
            b_peer["b"] = to_b
            asked: list[dict[str, Any]] = []
            async with trio_mcp.open_http_client(a.url, answering_app(asked),
                                                 token=a.token) as peer:
                handle = await peer.call_tool_task("probe", {})
                result = await handle.result()
    assert result.text == f"failed {trio_mcp.INVALID_PARAMS}; relay depth 0: declined"
    assert asked == []  # not forwarded: the client was never asked


async def test_children_tree_meta_names_parent_and_children() -> None:
    async with chain(E26, E25) as (a, b, c):
        gate = trio.Event()
        asked: list[dict[str, Any]] = []
        async with trio_mcp.open_http_client(a.url, answering_app(asked, gate=gate),
                                             token=a.token, era=E26) as peer:
            handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 0})
            results: list[str] = []
            async with trio.open_nursery() as nursery:

                async def follow() -> None:  # 2026-07-28: the questions are pulled
                    results.append((await handle.result()).text)

                nursery.start_soon(follow)
                await until(lambda: bool(asked))
                b_task = only_child(a, handle.task_id)
                c_task = only_child(b, b_task)
                async with trio_mcp.open_http_client(c.url, token=c.token) as to_c:
                    seen = await to_c.get_task(c_task)
                assert seen.meta is not None
                assert seen.meta[trio_mcp.TREE_PARENT_META] == {"taskId": b_task, "url": b.url}
                assert seen.meta[trio_mcp.TREE_QUESTION_META]["message"] == "confirm"
                top = await peer.get_task(handle.task_id)
                assert top.meta is not None
                (child,) = top.meta[trio_mcp.TREE_CHILDREN_META]
                assert child["taskId"] == b_task and child["url"] == b.url
                gate.set()
            assert results == ["relay depth 2 <- relay depth 1 <- relay depth 0: confirmed"]


@pytest.mark.parametrize("polled_by_parent", [False, True])
async def test_children_orphan_after_cancels_a_child_its_parent_stopped_following(
    autojump_clock: trio.testing.MockClock, polled_by_parent: bool
) -> None:
    """Opt-in ``TaskLimits.orphan_after``: only the parent's own ``tasks/get`` (naming it)
    keeps the child alive; someone else's look does not."""
    app = trio_mcp.App("child-host", limits=trio_mcp.TaskLimits(orphan_after=1_000))

    @app.tool(task_support="required")
    async def park() -> str:
        """Run until cancelled."""
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    parent = {trio_mcp.TREE_PARENT_META: {"taskId": "parent-1"}}
    async with trio_mcp.open_memory_pair(app) as pair:
        handle = await pair.client.call_tool_task("park", {}, meta=parent)
        for _ in range(20):  # 10 s, twice a second
            await trio.sleep(0.5)
            task = await pair.client.get_task(handle.task_id, meta=parent if polled_by_parent
                                              else None)
            if task.status.is_terminal:
                break
        assert task.status.value == ("working" if polled_by_parent else "cancelled")
        if polled_by_parent:
            await handle.cancel()


async def test_children_orphan_after_is_off_by_default(autojump_clock: trio.testing.MockClock
                                                      ) -> None:
    app = trio_mcp.App("child-host")

    @app.tool(task_support="required")
    async def park() -> str:
        """Run until cancelled."""
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with trio_mcp.open_memory_pair(app) as pair:
        handle = await pair.client.call_tool_task(
            "park", {}, meta={trio_mcp.TREE_PARENT_META: {"taskId": "p"}})
        await trio.sleep(200)  # (within the default ttl)
        assert (await pair.client.get_task(handle.task_id)).status.value == "working"
        await handle.cancel()


async def test_children_children_need_a_task() -> None:
    app = trio_mcp.App("plain")

    @app.tool
    async def plain(ctx: trio_mcp.RequestContext) -> str:
        """Not a task: no children scope."""
        try:
            async with ctx.children():
                pass
        except trio_mcp.LocalUsageError as exc:
            return str(exc)
        return "opened"

    async with trio_mcp.open_memory_pair(app) as pair:
        result = await pair.client.call_tool("plain", {})
    assert "needs a tool running as a task" in result.text


async def _one_tree(peer: trio_mcp.Peer, rng: random.Random, outcomes: dict[str, int]) -> None:
    handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": rng.random() * 0.3})
    if rng.random() < 0.5:
        await trio.sleep(rng.random() * 1.0)
        with contextlib.suppress(trio_mcp.RemoteError):  # already terminal: it finished first
            await handle.cancel()
    final = await handle.wait()
    outcomes[final.status.value] = outcomes.get(final.status.value, 0) + 1


async def test_children_20_trees_with_random_cancels_leave_nothing_behind() -> None:
    await _trees_with_random_cancels(20, seed=3420)


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_children_100_trees_with_random_cancels_leave_nothing_behind() -> None:
    await _trees_with_random_cancels(100, seed=34)


async def _trees_with_random_cancels(count: int, seed: int) -> None:
    rng = random.Random(seed)
    async with chain(E25, E26) as hops:
        a = hops[0]
        app = trio_mcp.App("client", limits=trio_mcp.TaskLimits(max_live_per_requestor=4096))

        @app.on_elicitation
        async def elicit(
            ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
        ) -> trio_mcp.ElicitResult:
            await trio.sleep(rng.random() * 0.3)
            return trio_mcp.ElicitResult("accept", CONFIRM)

        outcomes: dict[str, int] = {}
        async with trio_mcp.open_http_client(a.url, app, token=a.token) as peer:
            with trio.fail_after(150):
                async with trio.open_nursery() as nursery:
                    for _ in range(count):
                        nursery.start_soon(_one_tree, peer, rng, outcomes)
        assert sum(outcomes.values()) == count
        assert outcomes.get("cancelled", 0) > count // 10
        assert outcomes.get("completed", 0) > count // 10
        # No orphan left working on any hop: every task terminal, no actor, nothing
        # forwarding questions, no request left pending on the relays' upstream links.
        for hop in hops:
            await until(lambda hop=hop: not hop.app.registry.running_ids())
            records = list(hop.app.registry.records._records.values())
            assert records and all(r.status.is_terminal for r in records)
            if hop.upstream is not None:
                upstream_peer = await hop.upstream.peer()
                assert upstream_peer.task_questions == {}
                await until(lambda p=upstream_peer: not p.session.pending._pending)


async def test_children_one_trace_over_three_hops() -> None:
    """The trace is one tree across the hops: every hop's ``tools/call relay`` (sent and
    served) and the leaf's question are in the client's trace (SEP-414 ``_meta``)."""
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trio_mcp.configure_tracing(enabled=True, tracer_provider=provider)
    try:
        async with chain(E25, E26) as (a, _b, _c):
            asked: list[dict[str, Any]] = []
            with provider.get_tracer("test").start_as_current_span("agent") as root:
                async with trio_mcp.open_http_client(a.url, answering_app(asked),
                                                     token=a.token) as peer:
                    handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 0})
                    assert (await handle.result()).text.endswith("confirmed")
    finally:
        trio_mcp.configure_tracing()
    spans = exporter.get_finished_spans()
    trace_id = root.get_span_context().trace_id
    served = [s for s in spans if s.name == "tools/call relay" and s.kind == SpanKind.SERVER]
    sent = [s for s in spans if s.name == "tools/call relay" and s.kind == SpanKind.CLIENT]
    asked_spans = [s for s in spans if s.name == "elicitation/create"]
    assert len(served) == 3 and len(sent) == 3, [(s.name, s.kind) for s in spans]
    assert asked_spans
    for span in [*served, *sent, *asked_spans]:
        assert span.context.trace_id == trace_id, span.name


@pytest.mark.parametrize(
    ("client_era", "hop_era", "upstream_hosts_tasks"),
    [(E25, E25, True), (E26, E26, False), (E26, E25, True), (E25, E26, False)],
)
async def test_children_a_childs_sampling_travels_up(
    client_era: str, hop_era: str, upstream_hosts_tasks: bool
) -> None:
    """``sampling/createMessage`` too, in every pairing of eras, also when the parent's side
    hosts the child's sampling as a task (2025-11-25: the child asks for one)."""
    quick = trio_mcp.TaskLimits(poll_interval=100)
    leaf = trio_mcp.App("leaf", limits=quick)

    @leaf.tool(task_support="required")
    async def summarize(ctx: trio_mcp.RequestContext, text: str) -> str:
        """Ask the requestor's model."""
        reply = await ctx.sample(f"summarize: {text}", key="model")
        return f"leaf: {reply.text}"

    below: dict[str, trio_mcp.Peer] = {}
    top = trio_mcp.App("top", limits=quick)

    @top.tool(task_support="required")
    async def delegate(ctx: trio_mcp.RequestContext, text: str) -> str:
        """Have the leaf summarize, as a child task."""
        async with ctx.children() as kids:
            child = await kids.call_tool_task(below["leaf"], "summarize", {"text": text})
            return f"top <- {(await child.result()).text}"

    upstream_app = trio_mcp.App("top-upstream", host_tasks=upstream_hosts_tasks, limits=quick)

    @upstream_app.on_sampling
    async def never(
        ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
    ) -> trio_mcp.CreateMessageResult:
        raise AssertionError("forwarded questions do not reach the upstream App's handler")

    client = trio_mcp.App("person")
    prompts: list[str] = []

    @client.on_sampling
    async def model(
        ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
    ) -> trio_mcp.CreateMessageResult:
        prompts.append(params.messages[0].content["text"])
        return trio_mcp.CreateMessageResult(
            role="assistant", content={"type": "text", "text": "short"}, model="m"
        )

    async with trio.open_nursery() as nursery:
        leaf_at = await nursery.start(partial(trio_mcp.serve_http, leaf, "127.0.0.1", 0))
        top_at = await nursery.start(partial(trio_mcp.serve_http, top, "127.0.0.1", 0))
        async with trio_mcp.open_http_client(leaf_at.url, upstream_app, era=hop_era) as to_leaf:
            below["leaf"] = to_leaf
            async with trio_mcp.open_http_client(top_at.url, client, era=client_era) as peer:
                handle = await peer.call_tool_task("delegate", {"text": "a long text"})
                with trio.fail_after(30):
                    result = await handle.result()
        nursery.cancel_scope.cancel()
    assert result.text == "top <- leaf: short"
    assert prompts == ["summarize: a long text"]
