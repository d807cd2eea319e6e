"""The re-run API (issue 32): ``Rerun``, ``@app.tool(rerun=...)``, ``ctx.attempt``, the bound
on a stored request, and what a task's record keeps (both eras, in memory)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import trio
import trio.lowlevel

import trio_mcp
from trio_mcp import RemoteError, Rerun
from trio_mcp.peer._dialects._modern_client import ModernClient
from trio_mcp.peer._tasks._rerun import decode_request, exhausted_message, rerun_message

from tests.helpers import HTTP_SERVERS, serving


def server() -> trio_mcp.App:
    app = trio_mcp.App("rerun-api")

    @app.tool(task_support="optional", rerun=Rerun(attempts=2, max_request_bytes=2000))
    async def resumable(ctx: trio_mcp.RequestContext, text: str) -> str:
        """Echo with the attempt and the task id."""
        await trio.lowlevel.checkpoint()
        return f"{text} {ctx.attempt} {ctx.task_id is not None}"

    @app.tool(task_support="optional")
    async def plain(ctx: trio_mcp.RequestContext) -> str:
        """The attempt of a task that is not re-runnable."""
        return str(ctx.attempt)

    return app


def test_rerun_is_validated_and_exported() -> None:
    assert trio_mcp.Rerun is Rerun and "Rerun" in trio_mcp.__all__
    assert Rerun() == Rerun(attempts=3, backoff=0.0)
    assert Rerun(3, backoff=0.5).delay(2) == 0.5 and Rerun(3, backoff=0.5).delay(4) == 2.0
    with pytest.raises(ValueError, match="attempts"):
        Rerun(attempts=0)
    with pytest.raises(ValueError, match="backoff"):
        Rerun(backoff=-1)
    app = trio_mcp.App("bad")
    with pytest.raises(ValueError, match="rerun= needs task_support"):
        app.tool(rerun=Rerun())(lambda: "x")  # forbids tasks
    with pytest.raises(ValueError, match="task_prelude"):
        app.tool(task_support="optional", task_prelude=True, rerun=Rerun())(lambda: "x")


def test_the_status_messages_name_the_attempts() -> None:
    assert rerun_message(2, 3) == "re-running after its process stopped, attempt 2 of 3"
    assert "3 attempts" in exhausted_message(3)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_rerunnable_task_keeps_its_request_and_runs_as_attempt_1(era: str) -> None:
    app = server()
    async with trio_mcp.open_memory_pair(app, era=era) as (client, _):
        handle = await client.call_tool_task("resumable", {"text": "hi"})
        result = await handle.result()
        assert result.text == "hi 1 True"
        record = await app.registry.store.get(handle.task_id)
        assert record is not None and record.attempt == 1 and record.rerun is not None
        assert (record.rerun.tool, record.rerun.attempts) == ("resumable", 2)
        stored = decode_request(record.rerun.request)
        assert stored["era"] == era and stored["method"] == "tools/call"
        assert stored["params"]["name"] == "resumable"
        assert stored["params"]["arguments"] == {"text": "hi"}
        # tasks/get says which attempt (validated against the era's schema at teardown)
        if era == "2025-11-25":
            raw = await client.request_raw("tasks/get", {"taskId": handle.task_id})
            assert raw["_meta"] == {"io.github.trio-mcp/attempt": 1}
        else:
            era = client.client_era
            assert isinstance(era, ModernClient)
            _, detail = await era.get_detailed(handle.task_id)
            assert detail["_meta"]["io.github.trio-mcp/attempt"] == 1
        plain = await client.call_tool_task("plain", {})
        assert (await plain.result()).text == "1"
        assert (await app.registry.store.get(plain.task_id)).rerun is None  # not opted in


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_request_over_the_bound_is_refused_with_a_clear_error(era: str) -> None:
    app = server()
    async with trio_mcp.open_memory_pair(app, era=era) as (client, _):
        with pytest.raises(RemoteError) as info:
            await client.call_tool_task("resumable", {"text": "x" * 5000})
        assert info.value.code == -32602
        assert "Request too large for a re-runnable task" in info.value.message
        assert json.dumps(info.value.data)  # size and limit
        # the connection keeps working
        handle = await client.call_tool_task("resumable", {"text": "ok"})
        assert (await handle.result()).text == "ok 1 True"


DRAINED = """
import sys

import trio

import trio_mcp

app = trio_mcp.App("drained")


@app.tool(task_support="optional")
async def slow(seconds: float) -> str:
    await trio.sleep(seconds)
    return "done"


app.run("http", port=0, grace=5, server=sys.argv[1])
"""


@pytest.mark.parametrize("http_server", HTTP_SERVERS)
async def test_app_run_drains_on_sigterm_answers_requests_in_flight_and_exits_0(
    tmp_path: Path, http_server: str
) -> None:
    # On both servers: the drain ends when the task does, and the server stops gracefully,
    # so the tasks/result answer written at that moment reaches the client (hypercorn's
    # task had been cancelled, cutting it: "the stream ended before the response").
    script = tmp_path / "server.py"
    script.write_text(DRAINED)
    async with serving([sys.executable, str(script), http_server]) as (proc, words):
        async with trio_mcp.open_http_client(words[0]) as client:
            task = await client.call_tool_task("slow", {"seconds": 1.0})
            async with trio.open_nursery() as nursery:
                answers: list[str] = []

                async def plain_call() -> None:
                    answers.append((await client.call_tool("slow", {"seconds": 0.5})).text)

                nursery.start_soon(plain_call)
                await trio.sleep(0.2)
                proc.send_signal(signal.SIGTERM)  # a request in flight, a task running
            assert answers == ["done"]
            assert (await task.result()).text == "done"  # finished within the grace
        with trio.fail_after(20):
            assert await proc.wait() == 0
