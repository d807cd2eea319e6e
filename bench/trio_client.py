"""The trio-mcp benchmark client: ``python -m bench.trio_client WORKLOAD PARAMS SERVER...``.

Spawns the server command over stdio (or, for ``ws``, as a WebSocket server
on a free port), runs one workload, prints one JSON line of results.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio

import trio_mcp
from bench._common import TASK_TTL_MS, cpu_seconds, emit, parse_argv, percentile

TEXT = {"text": "hello"}


def _check_echo(result: trio_mcp.CallToolResult) -> None:
    text = result.content[0].text if result.content else None  # type: ignore[union-attr]
    if text != "hello":
        raise RuntimeError(f"echo returned {result!r}")


async def _windowed(n: int, window: int, fn: Callable[[int], Awaitable[None]]) -> None:
    """Run ``fn(0..n-1)`` with at most ``window`` calls in flight."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await fn(i)

    async with trio.open_nursery() as nursery:
        for _ in range(min(window, n)):
            nursery.start_soon(worker)


async def _timed_sequential(
    peer: trio_mcp.Peer,
    p: dict[str, Any],
    op: Callable[[], Awaitable[object]],
    warm: Callable[[], Awaitable[object]] | None = None,
) -> dict[str, Any]:
    """Warm up with ``warm`` (default ``op``), then time ``op`` back to back."""
    for _ in range(p["warmup"]):
        await (warm or op)()
    lat: list[float] = []
    async with CpuMeter(peer) as cpu:
        start = time.perf_counter()
        deadline = start + p["duration"]
        while True:
            t0 = time.perf_counter()
            await op()
            t1 = time.perf_counter()
            lat.append(t1 - t0)
            if t1 >= deadline:
                break
        elapsed = time.perf_counter() - start
    return {
        **cpu.per_op(len(lat)),
        "ops": len(lat),
        "seconds": elapsed,
        "rate": len(lat) / elapsed,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
    }


async def plain_seq(peer: trio_mcp.Peer, p: dict[str, Any]) -> dict[str, Any]:
    async def checked() -> None:
        _check_echo(await peer.call_tool("echo", TEXT))

    return await _timed_sequential(peer, p, lambda: peer.call_tool("echo", TEXT), checked)


async def plain_concurrent(peer: trio_mcp.Peer, p: dict[str, Any]) -> dict[str, Any]:
    for _ in range(p["warmup"]):
        _check_echo(await peer.call_tool("echo", TEXT))
    ops = 0
    deadline = 0.0

    async def worker() -> None:
        nonlocal ops
        while time.perf_counter() < deadline:
            await peer.call_tool("echo", TEXT)
            ops += 1

    async with CpuMeter(peer) as cpu:
        start = time.perf_counter()
        deadline = start + p["duration"]
        async with trio.open_nursery() as nursery:
            for _ in range(p["concurrency"]):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
    return {"ops": ops, "seconds": elapsed, "rate": ops / elapsed, **cpu.per_op(ops)}


async def _task_roundtrip(peer: trio_mcp.Peer) -> None:
    handle = await peer.call_tool_task("noop", {}, ttl=TASK_TTL_MS)
    result = await handle.result()
    if result.is_error:
        raise RuntimeError(f"noop failed: {result!r}")


async def task_roundtrip(peer: trio_mcp.Peer, p: dict[str, Any]) -> dict[str, Any]:
    return await _timed_sequential(peer, p, lambda: _task_roundtrip(peer))


async def _stats(peer: trio_mcp.Peer) -> dict[str, float]:
    result = await peer.call_tool("stats", {})
    return json.loads(result.content[0].text)  # type: ignore[union-attr,no-any-return]


class CpuMeter:
    """CPU time used by this client and by the server over a measured window."""

    def __init__(self, peer: trio_mcp.Peer) -> None:
        self.peer = peer

    async def __aenter__(self) -> CpuMeter:
        self.server0 = (await _stats(self.peer))["cpu"]
        self.client0 = cpu_seconds()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.client = cpu_seconds() - self.client0
        self.server = (await _stats(self.peer))["cpu"] - self.server0

    def per_op(self, ops: int) -> dict[str, float]:
        return {
            "client_cpu_us": self.client / ops * 1e6,
            "server_cpu_us": self.server / ops * 1e6,
        }


async def _walk(peer: trio_mcp.Peer, page_times: list[float]) -> tuple[int, int]:
    pages = tasks = 0
    cursor: str | None = None
    while True:
        t0 = time.perf_counter()
        page = await peer.list_tasks(cursor)
        page_times.append(time.perf_counter() - t0)
        pages += 1
        tasks += len(page.tasks)
        cursor = page.next_cursor
        if not cursor:
            return pages, tasks


async def _timed_walks(peer: trio_mcp.Peer, walks: int) -> dict[str, Any]:
    """Walk every page ``walks`` times: the median time of one page, pages, tasks."""
    page_times: list[float] = []
    pages = listed = 0
    for _ in range(walks):
        pages, listed = await _walk(peer, page_times)
    return {"page_ms": percentile(page_times, 50) * 1e3, "pages": pages, "listed": listed}


async def scale(peer: trio_mcp.Peer, p: dict[str, Any]) -> dict[str, Any]:
    n, small, window = p["tasks"], p["small"], p["window"]
    for _ in range(p["warmup"]):
        _check_echo(await peer.call_tool("echo", TEXT))
    rss0 = (await _stats(peer))["rss"]
    ids: list[str] = [""] * n

    async def create(i: int) -> None:
        handle = await peer.call_tool_task("park", {}, ttl=TASK_TTL_MS)
        ids[i] = handle.task_id

    t0 = time.perf_counter()
    await _windowed(small, window, create)
    list_small = await _timed_walks(peer, p["walks_small"])
    await _windowed(n - small, window, lambda i: create(small + i))
    create_s = time.perf_counter() - t0
    rss1 = (await _stats(peer))["rss"]
    list_large = await _timed_walks(peer, p["walks_large"])

    lat: list[float] = []
    rng = random.Random(7)
    for _ in range(p["gets"]):
        task_id = ids[rng.randrange(n)]
        t1 = time.perf_counter()
        task = await peer.get_task(task_id)
        lat.append(time.perf_counter() - t1)
        if task.status.value != "working":
            raise RuntimeError(f"task {task_id} is {task.status.value}")

    errors = 0

    async def cancel(i: int) -> None:
        nonlocal errors
        try:
            task = await peer.cancel_task(ids[i])
            if task.status.value != "cancelled":
                errors += 1
        except trio_mcp.RemoteError:
            errors += 1

    t2 = time.perf_counter()
    await _windowed(n, window, cancel)
    cancel_s = time.perf_counter() - t2
    return {
        "tasks": n,
        "create_s": create_s,
        "rss_before": rss0,
        "rss_after": rss1,
        "rss_per_task": (rss1 - rss0) / n,
        "get_p50_ms": percentile(lat, 50) * 1e3,
        "get_p99_ms": percentile(lat, 99) * 1e3,
        "list_small": list_small,
        "list_large": list_large,
        "cancel_s": cancel_s,
        "cancel_errors": errors,
    }


async def stdio_main(workload: str, p: dict[str, Any], server: list[str]) -> dict[str, Any]:
    fn = {
        "plain-seq": plain_seq,
        "plain-concurrent": plain_concurrent,
        "task-roundtrip": task_roundtrip,
        "scale": scale,
    }[workload]
    async with trio_mcp.open_stdio_client(server) as peer:
        return await fn(peer, p)


async def ws_main(p: dict[str, Any], server: list[str]) -> dict[str, Any]:
    from bench._common import free_port, wait_for_port

    port = free_port()
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            partial(trio.run_process, [*server, "--ws", str(port)], check=False)
        )
        try:
            await trio.to_thread.run_sync(wait_for_port, port)
            result = await _ws_clients(f"ws://127.0.0.1:{port}/", p)
        finally:
            proc.terminate()
    return result


async def _ws_clients(url: str, p: dict[str, Any]) -> dict[str, Any]:
    clients, per_client = p["clients"], p["per_client"]
    connected = 0
    all_connected = trio.Event()
    go = trio.Event()
    ok = 0
    failures: list[str] = []

    async def client() -> None:
        nonlocal connected, ok
        try:
            async with trio_mcp.open_websocket_client(url) as peer:
                connected += 1
                if connected == clients:
                    all_connected.set()
                await go.wait()
                for _ in range(per_client):
                    await _task_roundtrip(peer)
                    ok += 1
        except Exception as exc:
            failures.append(repr(exc))
            if len(failures) == 1:
                all_connected.set()

    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client)
        await all_connected.wait()
        start = time.perf_counter()
        go.set()
    elapsed = time.perf_counter() - start
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
        result = trio.run(ws_main, params, server)
    else:
        result = trio.run(stdio_main, workload, params, server)
    emit(result)


if __name__ == "__main__":
    main()
