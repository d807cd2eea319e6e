"""The load run: many WebSocket clients running many tasks on loopback.

    python -m tests.reliability.load                  # 50 clients x 200 tasks, WebSocket
    python -m tests.reliability.load --clients 10 --tasks 50 --json out.json
    python -m tests.reliability.load --http llhttp    # the same over Streamable HTTP
    python -m tests.reliability.load --http hypercorn

The server (``tests/reliability/apps.py``, app ``load``) runs in its own
process, so client and server each have a core. Each client authenticates
with its own bearer token (its own identity), then runs its tasks with a
bounded number in flight: create (``tools/call`` with ``task``), poll
``tasks/get`` at the server's ``pollInterval`` until terminal, collect the
result once with ``tasks/result``, and at the end list its tasks with
``tasks/list``. Every result must name its own (client, n): nothing lost,
nothing duplicated, nothing from another identity. Bounded in count and in
time (``--time-limit``). Reports the latency of each operation (p50, p99,
max), throughput and the server's RSS. Not part of the default test run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import trio

import trio_mcp

from .apps import LOAD_TOKEN_PREFIX, rss_kib

ROOT = Path(__file__).resolve().parents[2]


def loadavg() -> str:
    """The machine's 1/5/15-minute load averages (other work skews the figures)."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return round((int(fields[11]) + int(fields[12])) / ticks, 2)


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p90/p99/max of latencies in seconds, reported in milliseconds."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"n": len(ordered), "p50_ms": at(0.50), "p90_ms": at(0.90), "p99_ms": at(0.99),
            "max_ms": round(ordered[-1] * 1000, 2),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 2)}


class Load:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.latency: dict[str, list[float]] = {"create": [], "get": [], "result": [],
                                                "list": [], "end_to_end": []}
        self.results: Counter[tuple[int, int]] = Counter()
        self.task_ids: Counter[str] = Counter()
        self.listed: dict[int, set[str]] = {}
        self.own: dict[int, set[str]] = {}
        self.errors: list[str] = []
        self.polls_per_task: list[int] = []
        self.cpu: dict[str, float] = {}
        self.loadavg = loadavg()

    async def timed(self, kind: str, fn: Any, *args: Any) -> Any:
        started = time.perf_counter()
        out = await fn(*args)
        self.latency[kind].append(time.perf_counter() - started)
        return out

    async def one_task(self, client: trio_mcp.Peer, c: int, n: int, rng: random.Random) -> None:
        started = time.perf_counter()
        ms = rng.randint(0, self.args.max_work_ms)
        raw = await self.timed("create", client.request_raw, "tools/call",
                               {"name": "work", "arguments": {"client": c, "n": n, "ms": ms},
                                "task": {"ttl": 600_000}})
        handle = client.handle_from_create_result(raw, trio_mcp.CallToolResult)
        self.task_ids[handle.task_id] += 1
        self.own.setdefault(c, set()).add(handle.task_id)
        polls = 0
        task = handle.task
        while not task.status.is_terminal:
            await trio.sleep((task.poll_interval or 50) / 1000)
            task = await self.timed("get", client.get_task, handle.task_id)
            polls += 1
        self.polls_per_task.append(polls)
        if task.status is not trio_mcp.TaskStatus.COMPLETED:
            self.errors.append(f"client {c} task {n}: {task.status.value}")
            return
        result = await self.timed("result", client.request, "tasks/result",
                                  {"taskId": handle.task_id}, trio_mcp.CallToolResult)
        self.latency["end_to_end"].append(time.perf_counter() - started)
        payload = result.structured_content or {}
        self.results[(payload.get("client", -1), payload.get("n", -1))] += 1
        if payload != {"client": c, "n": n}:
            self.errors.append(f"client {c} task {n}: got {payload}")

    async def one_client(self, url: str, c: int) -> None:
        rng = random.Random(c)
        token = f"{LOAD_TOKEN_PREFIX}{c}"
        async with self.open_client(url, token) as client:
            todo = iter(range(self.args.tasks))

            async def lane() -> None:
                for n in todo:
                    await self.one_task(client, c, n, rng)

            async with trio.open_nursery() as nursery:
                for _ in range(self.args.in_flight):
                    nursery.start_soon(lane)
            listed: set[str] = set()
            started = time.perf_counter()
            async for task in client.iter_tasks():
                listed.add(task.task_id)
            self.latency["list"].append(time.perf_counter() - started)
            self.listed[c] = listed

    async def server_stats(self, url: str) -> dict[str, Any]:
        async with self.open_client(url, f"{LOAD_TOKEN_PREFIX}0") as client:
            result = await client.call_tool("stats", {})
        stats: dict[str, Any] = result.structured_content or {}
        return stats

    def open_client(self, url: str, token: str) -> Any:
        """A client of the load server, over the run's transport, as ``token``'s identity."""
        if self.args.http is None:
            return trio_mcp.open_websocket_client(url, token=token)
        return trio_mcp.open_http_client(url, token=token)

    async def run(self) -> dict[str, Any]:
        args = self.args
        where = ["--ws", "0"] if args.http is None else ["--http", "0", "--http-server", args.http]
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.reliability.apps", "load", *where,
             "--clients", str(args.clients)],
            cwd=str(ROOT), stdout=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            line = b""
            with trio.fail_after(30):
                while not line.endswith(b"\n"):
                    line += await proc.stdout.receive_some(64)
            url = (f"ws://127.0.0.1:{int(line)}/" if args.http is None
                   else f"http://127.0.0.1:{int(line)}/mcp")
            before = await self.server_stats(url)
            server_cpu, client_cpu = cpu_seconds(proc.pid), time.process_time()
            started = time.perf_counter()
            with trio.fail_after(args.time_limit):
                async with trio.open_nursery() as nursery:
                    for c in range(args.clients):
                        nursery.start_soon(self.one_client, url, c)
            elapsed = time.perf_counter() - started
            after = await self.server_stats(url)
            self.cpu = {"server_cpu_s": cpu_seconds(proc.pid) - server_cpu,
                        "client_cpu_s": round(time.process_time() - client_cpu, 2)}
        finally:
            proc.terminate()
            await proc.wait()
        return self.report(elapsed, before, after)

    def report(self, elapsed: float, before: dict[str, Any],
               after: dict[str, Any]) -> dict[str, Any]:
        args = self.args
        expected = {(c, n) for c in range(args.clients) for n in range(args.tasks)}
        lost = expected - set(self.results)
        duplicated = [k for k, v in self.results.items() if v > 1]
        foreign = set(self.results) - expected
        bad_lists = [c for c in range(args.clients) if self.listed.get(c) != self.own.get(c)]
        total = len(expected)
        checks = {
            "every_result_collected_once": not lost and not duplicated and not foreign,
            "task_ids_unique": all(v == 1 for v in self.task_ids.values())
            and len(self.task_ids) == total,
            "each_identity_lists_exactly_its_tasks": not bad_lists,
            "no_errors": not self.errors,
        }
        return {
            "transport": "websocket" if args.http is None else f"http ({args.http})",
            "loadavg_at_start": self.loadavg,
            "clients": args.clients,
            "tasks_per_client": args.tasks,
            "in_flight_per_client": args.in_flight,
            "work_ms": [0, args.max_work_ms],
            "tasks": total,
            "results_collected": sum(self.results.values()),
            "lost": len(lost),
            "duplicated": len(duplicated),
            "seconds": round(elapsed, 2),
            "tasks_per_second": round(total / elapsed, 1),
            "polls_per_task_mean": round(statistics.fmean(self.polls_per_task or [0]), 2),
            "latency": {kind: percentiles(v) for kind, v in self.latency.items()},
            "server_before": before,
            "server_after": after,
            "client_rss_kib": rss_kib(),
            **self.cpu,
            "errors": self.errors[:20],
            "checks": checks,
            "ok": all(checks.values()),
        }


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=200, help="tasks per client")
    parser.add_argument("--in-flight", type=int, default=20, help="tasks in flight per client")
    parser.add_argument("--max-work-ms", type=int, default=50,
                        help="each task's work sleeps 0..this many ms")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds")
    parser.add_argument("--json", metavar="FILE", help="also write the report here")
    parser.add_argument("--http", choices=("llhttp", "hypercorn"),
                        help="Streamable HTTP on this server instead of WebSocket")
    args = parser.parse_args(argv)
    report = trio.run(Load(args).run)
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    print("PASS" if report["ok"] else "FAIL", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(cli())
