"""Hot-path microbenchmark: client and server peers in ONE process over OS pipes.

``python -m bench.hotpath [--calls N] [--rounds R] [--only NAME]`` prints the
CPU time per operation (client + server + the pipe syscalls, all on one core)
for plain calls (sequential and 200 in flight), task round trips, and
``tasks/cancel`` of running tasks (200 in flight), best of R rounds.
CPU time of one process is far steadier than wall-clock throughput on a
shared machine, so this is the number to watch while optimizing the hot path;
steadier still is the instruction count under valgrind (see bench/README.md).
``BENCH_NO_ORJSON=1`` hides orjson, to measure the stdlib json codec.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

if os.environ.get("BENCH_NO_ORJSON"):
    sys.modules["orjson"] = None  # type: ignore[assignment]  # measure the json codec

import trio

import trio_mcp
from bench.trio_server import build_app


def _pipe() -> tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    r, w = os.pipe()
    return trio.lowlevel.FdStream(r), trio.lowlevel.FdStream(w)


async def _measure(
    rounds: int, calls: int, op: Callable[[], Awaitable[None]], concurrency: int = 1
) -> float:
    best = float("inf")
    for _ in range(rounds):
        per_worker = calls // concurrency

        async def worker(n: int = per_worker) -> None:
            for _ in range(n):
                await op()

        t0 = time.process_time()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        best = min(best, (time.process_time() - t0) / (per_worker * concurrency))
    return best * 1e6


async def run(calls: int, rounds: int, only: str | None = None) -> dict[str, float]:
    app = build_app()
    c2s_r, c2s_w = _pipe()
    s2c_r, s2c_w = _pipe()
    async with trio.open_nursery() as nursery:
        server_bus = trio_mcp.wrap_stdio_streams(c2s_r, s2c_w, nursery)
        server = trio_mcp.Peer(app, server_bus, trio_mcp.Role.SERVER)
        await nursery.start(server.run)
        client_bus = trio_mcp.wrap_stdio_streams(s2c_r, c2s_w, nursery)
        async with trio_mcp.open_peer(
            trio_mcp.App("hotpath-client"), client_bus, trio_mcp.Role.CLIENT
        ) as peer:

            async def plain() -> None:
                await peer.call_tool("echo", {"text": "hello"})

            async def task() -> None:
                handle = await peer.call_tool_task("noop", {}, ttl=600_000)
                await handle.result()

            for _ in range(200):
                await plain()
                await task()
            async def cancels() -> float:
                # Park `calls` tasks, then cancel them all, 200 at a time.
                best = float("inf")
                for _ in range(rounds):
                    ids: list[str] = []

                    async def park(ids: list[str] = ids) -> None:
                        ids.append((await peer.call_tool_task("park", {}, ttl=600_000)).task_id)

                    await _measure(1, calls, park, 200)

                    pending = iter(ids)

                    async def cancel(pending: Iterator[str] = pending) -> None:
                        await peer.cancel_task(next(pending))

                    best = min(best, await _measure(1, len(ids), cancel, 200))
                return best

            runs: dict[str, Callable[[], Awaitable[float]]] = {
                "plain_seq_us": lambda: _measure(rounds, calls, plain),
                "plain_200_us": lambda: _measure(rounds, calls, plain, 200),
                "task_seq_us": lambda: _measure(rounds, calls, task),
                "cancel_200_us": cancels,
            }
            out: dict[str, Any] = {}
            for name, measure in runs.items():
                if only is None or name.startswith(only):
                    out[name] = await measure()
        nursery.cancel_scope.cancel()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="plain_seq, plain_200, task_seq or cancel_200")
    args = parser.parse_args()
    result = trio.run(run, args.calls, args.rounds, args.only)
    print("  ".join(f"{k}={v:.1f}" for k, v in result.items()))


if __name__ == "__main__":
    main()
