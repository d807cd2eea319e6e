"""The leak run: create, finish and expire many tasks; churn many connections.

    python -m tests.reliability.leaks                 # 100,000 tasks, 2,000 connections
    python -m tests.reliability.leaks --tasks 20000 --connections 500 --json out.json

Phase 1 (tasks): a client and a server peer in this process, joined by the
in-memory link (every message is encoded to JSON and decoded again). Workers
call a task tool, follow the task to its end with ``tasks/get``, collect the
result with ``tasks/result``; the tasks then expire (short TTL). A warm-up of
the same work sets the baseline. Checks: the RSS after ``gc.collect()`` is
within 10 % of the baseline, the Trio task count is back to its baseline, and
every table is empty again (records, actors, live counts, the expiry heap,
pending requests, in-flight handlers, wake-up events, progress callbacks).

Phase 2 (connections): WebSocket connections on loopback opened and closed
one after another against one server App with rate limiting on; each creates
and collects a task. Checks: RSS, open file descriptors and Trio tasks back
to baseline, no per-connection state left (connections, rate buckets).

Exit status 0 when every check passes. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.lowlevel

import trio_mcp
from trio_mcp.peer._tasks._limits import _BUCKET_SWEEP_MIN

from .apps import rss_kib, trio_task_count
from .load import loadavg

TTL_MS = 500


def fd_count() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def settled_rss() -> int:
    """RSS in KiB after a full garbage collection."""
    gc.collect()
    gc.collect()
    return rss_kib()


def build_app(limits: trio_mcp.TaskLimits) -> trio_mcp.App:
    app = trio_mcp.App("leaks", limits=limits)

    @app.tool(task_support="required")
    async def work(n: int) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return {"n": n}

    return app


async def run_workers(total: int, concurrency: int,
                      one: Callable[[int], Awaitable[None]]) -> None:
    counter = iter(range(total))

    async def worker() -> None:
        for n in counter:
            await one(n)

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)


def tables(app: trio_mcp.App, *peers: trio_mcp.Peer) -> dict[str, int]:
    """Sizes of everything that grows with tasks or connections."""
    registry = app.registry
    sizes = {
        "records": len(registry),
        "actors": len(registry._actors),
        "live": registry.live_count(),
        "expiry_heap": len(registry._expiry),
        "connections": sum(len(p) for p in registry._peers.values()),
        "rate_buckets": len(registry._rate),
    }
    for i, peer in enumerate(peers):
        sizes[f"peer{i}.pending"] = len(peer.session.pending._pending)
        sizes[f"peer{i}.inflight"] = len(peer.session._inflight)
        sizes[f"peer{i}.status_events"] = len(peer.task_waiters)
        sizes[f"peer{i}.progress"] = len(peer._progress)
    return sizes


async def tasks_phase(total: int, concurrency: int, warmup: int) -> dict[str, Any]:
    limits = trio_mcp.TaskLimits(default_ttl=TTL_MS, max_ttl=TTL_MS, poll_interval=50,
                                 max_live_per_requestor=concurrency * 2,
                                 max_tasks=concurrency * 400)
    app = build_app(limits)
    done = 0

    async with trio_mcp.open_memory_pair(app) as (client, server):

        async def one(n: int) -> None:
            nonlocal done
            handle = await client.call_tool_task("work", {"n": n})
            task = await handle.wait()
            assert task.status is trio_mcp.TaskStatus.COMPLETED, task
            result = await handle.result()
            assert result.structured_content == {"n": n}, result
            done += 1

        async def expire_all() -> None:
            await trio.sleep(TTL_MS / 1000 + 0.2)
            assert len(app.registry) == 0, len(app.registry)

        await run_workers(warmup, concurrency, one)
        await expire_all()
        base_rss, base_tasks = settled_rss(), trio_task_count()
        base_tables = tables(app, client, server)
        started = time.perf_counter()
        done = 0
        peak_records = 0

        async def watch() -> None:
            nonlocal peak_records
            while True:
                peak_records = max(peak_records, len(app.registry))
                await trio.sleep(0.05)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await run_workers(total, concurrency, one)
            nursery.cancel_scope.cancel()
        elapsed = time.perf_counter() - started
        busy_rss = rss_kib()
        await expire_all()
        end_rss, end_tasks = settled_rss(), trio_task_count()
        end_tables = tables(app, client, server)
    growth = (end_rss - base_rss) / base_rss
    return {
        "phase": "tasks",
        "tasks": done,
        "concurrency": concurrency,
        "ttl_ms": TTL_MS,
        "seconds": round(elapsed, 1),
        "tasks_per_second": round(done / elapsed),
        "peak_records": peak_records,
        "rss_baseline_kib": base_rss,
        "rss_busy_kib": busy_rss,
        "rss_end_kib": end_rss,
        "rss_growth": round(growth, 4),
        "trio_tasks": [base_tasks, end_tasks],
        "tables_baseline": base_tables,
        "tables_end": end_tables,
        "ok": done == total and abs(growth) <= 0.10 and end_tasks == base_tasks
        and end_tables == base_tables,
    }


async def connections_phase(total: int, warmup: int) -> dict[str, Any]:
    limits = trio_mcp.TaskLimits(default_ttl=TTL_MS, max_ttl=TTL_MS, poll_interval=50,
                                 rate_per_second=50, rate_burst=20)
    app = build_app(limits)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_websocket, app)

        async def one(n: int) -> None:
            async with trio_mcp.open_websocket_client(address.url) as client:
                handle = await client.call_tool_task("work", {"n": n})
                await handle.wait()
                assert (await handle.result()).structured_content == {"n": n}

        async def quiet() -> None:
            # Server-side connection handlers finish just after the clients.
            for _ in range(200):
                if not app.registry._peers:
                    break
                await trio.sleep(0.01)
            await trio.sleep(TTL_MS / 1000 + 0.2)

        for n in range(warmup):
            await one(n)
        await quiet()
        base_rss, base_tasks, base_fds = settled_rss(), trio_task_count(), fd_count()
        base_tables = tables(app)
        started = time.perf_counter()
        for n in range(total):
            await one(n)
        elapsed = time.perf_counter() - started
        await quiet()
        end_rss, end_tasks, end_fds = settled_rss(), trio_task_count(), fd_count()
        end_tables = tables(app)
        nursery.cancel_scope.cancel()
    growth = (end_rss - base_rss) / base_rss
    return {
        "phase": "connections",
        "connections": total,
        "seconds": round(elapsed, 1),
        "connections_per_second": round(total / elapsed),
        "rss_baseline_kib": base_rss,
        "rss_end_kib": end_rss,
        "rss_growth": round(growth, 4),
        "trio_tasks": [base_tasks, end_tasks],
        "fds": [base_fds, end_fds],
        "tables_baseline": base_tables,
        "tables_end": end_tables,
        "ok": abs(growth) <= 0.10 and end_tasks == base_tasks and end_fds == base_fds
        and {**end_tables, "rate_buckets": 0} == {**base_tables, "rate_buckets": 0}
        # Buckets of idle contexts are swept once the table doubles: bounded
        # whatever the number of connections.
        and end_tables["rate_buckets"] <= 2 * _BUCKET_SWEEP_MIN,
    }


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    print(f"load average at start: {loadavg()}", file=sys.stderr)
    if args.tasks:
        with trio.fail_after(args.time_limit):
            reports.append(await tasks_phase(args.tasks, args.concurrency,
                                             max(args.tasks // 20, 500)))
        print(json.dumps(reports[-1], indent=2), flush=True)
    if args.connections:
        with trio.fail_after(args.time_limit):
            reports.append(await connections_phase(args.connections,
                                                   max(args.connections // 10, 50)))
        print(json.dumps(reports[-1], indent=2), flush=True)
    return reports


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--connections", type=int, default=2_000)
    parser.add_argument("--time-limit", type=float, default=900, help="seconds per phase")
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    args = parser.parse_args(argv)
    reports = trio.run(main, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(reports, f, indent=2)
    ok = all(r["ok"] for r in reports)
    print("PASS" if ok else "FAIL", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(cli())
