"""The floor: a minimal Trio NDJSON echo over the same stdio pipes.

``python -m bench.echo server`` copies every line from stdin to stdout.
``python -m bench.echo client WORKLOAD PARAMS SERVER...`` spawns it and sends
JSON-RPC-shaped ``tools/call`` lines (``json.dumps`` out, ``json.loads`` back,
matched by id), so the numbers are what any JSON-RPC peer on Trio pays for
the pipe, the scheduler and the JSON, and nothing else. Workloads:
``plain-seq`` and ``plain-concurrent``, as for the MCP peers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import trio

from bench._common import cpu_seconds, emit, parse_argv, percentile

_READ = 65_536


async def serve() -> None:
    receive = trio.lowlevel.FdStream(sys.stdin.fileno())
    send = trio.lowlevel.FdStream(sys.stdout.fileno())
    pending = b""
    while data := await receive.receive_some(_READ):
        pending += data
        end = pending.rfind(b"\n") + 1
        if end:
            await send.send_all(pending[:end])
            pending = pending[end:]


class EchoClient:
    """Just enough of a JSON-RPC client: ids, one reader, one event per request, a write lock."""

    def __init__(self, proc: trio.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.send = proc.stdin
        self.send_lock = trio.StrictFIFOLock()
        self.receive = proc.stdout
        self.next_id = 0
        self.waiting: dict[int, trio.Event] = {}
        self.results: dict[int, Any] = {}

    async def read_loop(self) -> None:
        pending = b""
        while data := await self.receive.receive_some(_READ):
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                msg = json.loads(line)
                self.results[msg["id"]] = msg["params"]
                self.waiting.pop(msg["id"]).set()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.next_id += 1
        request_id = self.next_id
        event = self.waiting[request_id] = trio.Event()
        line = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        async with self.send_lock:
            await self.send.send_all(line.encode() + b"\n")
        await event.wait()
        return self.results.pop(request_id)


async def run_client(workload: str, p: dict[str, Any], server: list[str]) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        proc = await trio.lowlevel.open_process(
            server, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        client = EchoClient(proc)
        nursery.start_soon(client.read_loop)
        args = {"text": "hello"}
        for _ in range(p["warmup"]):
            await client.call("echo", args)
        cpu0 = cpu_seconds()
        if workload == "plain-seq":
            lat: list[float] = []
            start = time.perf_counter()
            deadline = start + p["duration"]
            while True:
                t0 = time.perf_counter()
                await client.call("echo", args)
                t1 = time.perf_counter()
                lat.append(t1 - t0)
                if t1 >= deadline:
                    break
            elapsed = time.perf_counter() - start
            ops = len(lat)
            extra = {"p50_ms": percentile(lat, 50) * 1e3, "p99_ms": percentile(lat, 99) * 1e3}
        elif workload == "plain-concurrent":
            ops = 0

            async def worker() -> None:
                nonlocal ops
                while time.perf_counter() < deadline:
                    await client.call("echo", args)
                    ops += 1

            start = time.perf_counter()
            deadline = start + p["duration"]
            async with trio.open_nursery() as workers:
                for _ in range(p["concurrency"]):
                    workers.start_soon(worker)
            elapsed = time.perf_counter() - start
            extra = {}
        else:
            raise SystemExit(f"the echo floor has no workload {workload!r}")
        client_cpu = cpu_seconds() - cpu0
        await proc.stdin.aclose()  # type: ignore[union-attr]
        await proc.wait()
        nursery.cancel_scope.cancel()
    return {
        "ops": ops,
        "seconds": elapsed,
        "rate": ops / elapsed,
        "client_cpu_us": client_cpu / ops * 1e6,
        **extra,
    }


def main() -> None:
    if sys.argv[1:2] == ["server"]:
        trio.run(serve)
        return
    workload, params, server = parse_argv(sys.argv[2:])
    emit(trio.run(run_client, workload, params, server))


if __name__ == "__main__":
    main()
