"""Three task servers sharing one store: a task created on one process is collected on another.

Run it from the repository root (needs ``redis-server`` on the PATH and the
``redis`` extra: ``pip install -e '.[redis]'``)::

    python examples/cluster.py

It starts a private ``redis-server`` (in a temporary directory, with
``appendonly yes`` and ``maxmemory-policy noeviction``, the settings the README
asks for), three ``examples/task_server.py --ws ... --store redis://...``
processes A, B and C with one bearer token (one identity), and a client that

1. calls ``sleep`` as a task on A,
2. polls it with ``tasks/get`` on B,
3. collects its result with ``tasks/result`` on C,
4. starts a long task on A and cancels it from B; C sees it ``cancelled``.

With ``--store URL`` the servers share that store instead of a private Redis, e.g.
a PostgreSQL database (the ``postgres`` extra)::

    python examples/cluster.py --store postgresql://app@db.example/tasks

Everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import trio

import trio_mcp

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "cluster-demo"


def free_port() -> int:
    """A TCP port on loopback that nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def redis_server(directory: Path) -> AsyncIterator[str]:
    """A private redis-server; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not on the PATH (Debian: apt-get install redis-server)")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
            "--appendonly", "yes", "--maxmemory-policy", "noeviction", "--save", ""]
    proc = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL)
    try:
        with trio.fail_after(10):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        await proc.wait()


@asynccontextmanager
async def task_server(name: str, store: str) -> AsyncIterator[str]:
    """``examples/task_server.py --ws`` on a free port; yields its WebSocket URL."""
    argv = [sys.executable, str(ROOT / "examples/task_server.py"),
            "--ws", "127.0.0.1:0", "--token", TOKEN, "--store", store]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    try:
        seen = b""
        with trio.fail_after(30):
            while b"serving on " not in seen or not seen.split(b"serving on ", 1)[1].count(b"\n"):
                chunk = await proc.stderr.receive_some(4096)
                if not chunk:
                    sys.exit(f"server {name} stopped: {seen.decode(errors='replace')}")
                seen += chunk
        url = seen.decode().split("serving on ", 1)[1].split()[0]
        print(f"server {name}: pid {proc.pid}, {url}")
        yield url
    finally:
        proc.terminate()
        await proc.wait()
        await proc.stderr.aclose()


async def main(shared: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="trio-mcp-cluster-") as tmp:
        async with AsyncExitStack() as stack:
            if shared is None:
                store = await stack.enter_async_context(redis_server(Path(tmp)))
                print(f"redis: {store}")
            else:
                store = shared
                print(f"store: {store}")
            a, b, c = [
                await stack.enter_async_context(task_server(name, store)) for name in "ABC"
            ]
            async with (
                trio_mcp.open_websocket_client(a, token=TOKEN) as on_a,
                trio_mcp.open_websocket_client(b, token=TOKEN) as on_b,
                trio_mcp.open_websocket_client(c, token=TOKEN) as on_c,
            ):
                handle = await on_a.call_tool_task("sleep", {"seconds": 1})
                print(f"created on A: task {handle.task_id}")
                task = await on_b.get_task(handle.task_id)
                print(f"tasks/get on B: {task.status.value}")
                result = await on_c.task_handle(handle.task_id, trio_mcp.CallToolResult).result()
                print(f"tasks/result on C: {result.text!r}")

                long = await on_a.call_tool_task("sleep", {"seconds": 3600})
                print(f"created on A: task {long.task_id} (an hour's sleep)")
                cancelled = await on_b.cancel_task(long.task_id)
                print(f"tasks/cancel on B: {cancelled.status.value}")
                seen = await on_c.get_task(long.task_id)
                print(f"tasks/get on C: {seen.status.value} ({seen.status_message})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", metavar="URL",
                        help="a shared store for the three servers (redis://... or "
                             "postgresql://...) instead of a private redis-server")
    trio.run(main, parser.parse_args().store)
