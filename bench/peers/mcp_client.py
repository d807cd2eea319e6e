"""Benchmark client of the Python SDK ``mcp`` (1.30.x with tasks, or 2.x plain only).

    python bench/peers/mcp_client.py WORKLOAD PARAMS_JSON SERVER_ARGV...

Runs under the SDK's own interpreter; spawns the server with the SDK's
``stdio_client`` (or, for ``ws``, starts it on a free port and connects with
``websocket_client``), runs one workload with ``ClientSession`` (and its
``experimental`` tasks API on 1.x) and prints one JSON line of results.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.simplefilter("ignore", DeprecationWarning)  # mcp 1.30 tasks/WebSocket are deprecated

import anyio  # noqa: E402
from _common import (  # noqa: E402
    TASK_TTL_MS,
    cpu_seconds,
    emit,
    free_port,
    parse_argv,
    percentile,
    wait_for_port,
)
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

MAJOR = int(version("mcp").split(".")[0])
if MAJOR == 1:
    import mcp.types as types
else:
    import mcp_types as types  # type: ignore[no-redef]

TEXT = {"text": "hello"}


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def _windowed(n: int, window: int, fn: Callable[[int], Awaitable[None]]) -> None:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await fn(i)

    async with anyio.create_task_group() as tg:
        for _ in range(min(window, n)):
            tg.start_soon(worker)


async def _stats(session: ClientSession) -> dict[str, float]:
    return json.loads(_text(await session.call_tool("stats", {})))  # type: ignore[no-any-return]


class CpuMeter:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def __aenter__(self) -> CpuMeter:
        self.server0 = (await _stats(self.session))["cpu"]
        self.client0 = cpu_seconds()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.client = cpu_seconds() - self.client0
        self.server = (await _stats(self.session))["cpu"] - self.server0

    def per_op(self, ops: int) -> dict[str, float]:
        return {"client_cpu_us": self.client / ops * 1e6, "server_cpu_us": self.server / ops * 1e6}


async def _echo(session: ClientSession) -> None:
    result = await session.call_tool("echo", TEXT)
    if _text(result) != "hello":
        raise RuntimeError(f"echo returned {result!r}")


async def _task_roundtrip(session: ClientSession) -> None:
    created = await session.experimental.call_tool_as_task("noop", {}, ttl=TASK_TTL_MS)
    result = await session.experimental.get_task_result(created.task.taskId, types.CallToolResult)
    if result.isError:
        raise RuntimeError(f"noop failed: {result!r}")


async def _sequential(session: ClientSession, p: dict[str, Any], op: Any) -> dict[str, Any]:
    for _ in range(p["warmup"]):
        await op(session)
    lat: list[float] = []
    async with CpuMeter(session) as cpu:
        start = time.perf_counter()
        deadline = start + p["duration"]
        while True:
            t0 = time.perf_counter()
            await op(session)
            t1 = time.perf_counter()
            lat.append(t1 - t0)
            if t1 >= deadline:
                break
        elapsed = time.perf_counter() - start
    return {
        "ops": len(lat),
        "seconds": elapsed,
        "rate": len(lat) / elapsed,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        **cpu.per_op(len(lat)),
    }


async def plain_seq(session: ClientSession, p: dict[str, Any]) -> dict[str, Any]:
    return await _sequential(session, p, _echo)


async def task_roundtrip(session: ClientSession, p: dict[str, Any]) -> dict[str, Any]:
    return await _sequential(session, p, _task_roundtrip)


async def plain_concurrent(session: ClientSession, p: dict[str, Any]) -> dict[str, Any]:
    for _ in range(p["warmup"]):
        await _echo(session)
    ops = 0
    deadline = 0.0

    async def worker() -> None:
        nonlocal ops
        while time.perf_counter() < deadline:
            await session.call_tool("echo", TEXT)
            ops += 1

    async with CpuMeter(session) as cpu:
        start = time.perf_counter()
        deadline = start + p["duration"]
        async with anyio.create_task_group() as tg:
            for _ in range(p["concurrency"]):
                tg.start_soon(worker)
        elapsed = time.perf_counter() - start
    return {"ops": ops, "seconds": elapsed, "rate": ops / elapsed, **cpu.per_op(ops)}


async def _walk(session: ClientSession, page_times: list[float]) -> tuple[int, int]:
    pages = tasks = 0
    cursor = None
    while True:
        t0 = time.perf_counter()
        page = await session.experimental.list_tasks(cursor)
        page_times.append(time.perf_counter() - t0)
        pages += 1
        tasks += len(page.tasks)
        cursor = page.nextCursor
        if not cursor:
            return pages, tasks


async def _timed_walks(session: ClientSession, walks: int) -> dict[str, Any]:
    """Walk every page ``walks`` times: the median time of one page, pages, tasks."""
    page_times: list[float] = []
    pages = listed = 0
    for _ in range(walks):
        pages, listed = await _walk(session, page_times)
    return {"page_ms": percentile(page_times, 50) * 1e3, "pages": pages, "listed": listed}


async def scale(session: ClientSession, p: dict[str, Any]) -> dict[str, Any]:
    # This SDK's task store scans every task on every call, so this run can take
    # minutes: each phase's results are printed as soon as they are known, and
    # the harness keeps the last line if it has to stop the run.
    n, small, window = p["tasks"], p["small"], p["window"]
    out: dict[str, Any] = {"tasks": n, "partial": True}
    for _ in range(p["warmup"]):
        await _echo(session)
    rss0 = (await _stats(session))["rss"]
    ids = [""] * n

    async def create(i: int) -> None:
        created = await session.experimental.call_tool_as_task("park", {}, ttl=TASK_TTL_MS)
        ids[i] = created.task.taskId

    t0 = time.perf_counter()
    await _windowed(small, window, create)
    out["list_small"] = await _timed_walks(session, p["walks_small"])
    emit(out)
    await _windowed(n - small, window, lambda i: create(small + i))
    out["create_s"] = time.perf_counter() - t0
    rss1 = (await _stats(session))["rss"]
    out.update(rss_before=rss0, rss_after=rss1, rss_per_task=(rss1 - rss0) / n)
    emit(out)
    out["list_large"] = await _timed_walks(session, p["walks_large"])
    emit(out)

    lat: list[float] = []
    rng = random.Random(7)
    for _ in range(p["gets"]):
        task_id = ids[rng.randrange(n)]
        t1 = time.perf_counter()
        task = await session.experimental.get_task(task_id)
        lat.append(time.perf_counter() - t1)
        if task.status != "working":
            raise RuntimeError(f"task {task_id} is {task.status}")
    out.update(get_p50_ms=percentile(lat, 50) * 1e3, get_p99_ms=percentile(lat, 99) * 1e3)
    emit(out)

    errors = 0

    async def cancel(i: int) -> None:
        nonlocal errors
        try:
            task = await session.experimental.cancel_task(ids[i])
            if task.status != "cancelled":
                errors += 1
        except Exception as exc:
            if not errors:
                print(f"cancel failed: {exc!r}", file=sys.stderr)
            errors += 1

    t2 = time.perf_counter()
    await _windowed(n, window, cancel)
    out.update(cancel_s=time.perf_counter() - t2, cancel_errors=errors, partial=False)
    return out


async def stdio_main(workload: str, p: dict[str, Any], server: list[str]) -> dict[str, Any]:
    fn = {
        "plain-seq": plain_seq,
        "plain-concurrent": plain_concurrent,
        "task-roundtrip": task_roundtrip,
        "scale": scale,
    }[workload]
    params = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await fn(session, p)


async def ws_main(p: dict[str, Any], server: list[str]) -> dict[str, Any]:
    from mcp.client.websocket import websocket_client

    port = free_port()
    proc = await anyio.open_process([*server, "--ws", str(port)], stdout=None, stderr=None)
    try:
        await anyio.to_thread.run_sync(wait_for_port, port)
        url = f"ws://127.0.0.1:{port}/"
        clients, per_client = p["clients"], p["per_client"]
        connected = 0
        all_connected = anyio.Event()
        go = anyio.Event()
        ok = 0
        failures: list[str] = []

        async def client() -> None:
            nonlocal connected, ok
            try:
                async with websocket_client(url) as (read, write), ClientSession(
                    read, write
                ) as session:
                    await session.initialize()
                    connected += 1
                    if connected == clients:
                        all_connected.set()
                    await go.wait()
                    for _ in range(per_client):
                        await _task_roundtrip(session)
                        ok += 1
            except Exception as exc:
                failures.append(repr(exc))
                all_connected.set()

        async with anyio.create_task_group() as tg:
            for _ in range(clients):
                tg.start_soon(client)
            await all_connected.wait()
            start = time.perf_counter()
            go.set()
        elapsed = time.perf_counter() - start
    finally:
        proc.terminate()
        await proc.wait()
    total = clients * per_client
    return {
        "clients": clients,
        "per_client": per_client,
        "ok": ok,
        "lost": total - ok,
        "seconds": elapsed,
        "rate": ok / elapsed,
        "failures": failures[:3],
    }


def main() -> None:
    workload, params, server = parse_argv(sys.argv[1:])
    if workload == "ws":
        result = anyio.run(ws_main, params, server)
    else:
        result = anyio.run(stdio_main, workload, params, server)
    emit(result)


if __name__ == "__main__":
    main()
