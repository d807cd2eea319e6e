"""Streamable HTTP workload: the same client against three servers, a Markdown table.

    python bench/http_workload.py [--calls 300] [--clients 50] [--per-client 20] [--tasks 100]

Servers, each in its own process on 127.0.0.1:

* trio-mcp: ``serve_http`` with ``examples/task_server.py``'s tools (``echo``; ``sleep``
  with ``seconds=0`` as the task);
* TypeScript SDK 1.32.2: ``StreamableHTTPServerTransport`` (``tests/interop/node/ts_server.mjs
  --http``: ``echo``; ``slow`` with ``ms=0`` as the task);
* Python SDK ``mcp`` 1.30.0: its low-level ``Server`` from ``tests/interop/py/mcp_server.py``
  behind ``StreamableHTTPSessionManager`` under uvicorn (``echo``; ``slow`` with
  ``seconds=0`` as the task), run by ``.interop/mcp130``.

The client is the same for all, in this file: httpx + a few lines of JSON-RPC and SSE
(initialize, the session header, a POST per request, the answer read as JSON or from the
SSE stream). Measured: plain ``tools/call`` per second, sequential on one session and from
``--clients`` concurrent sessions; task round trips per second (``tools/call`` with ``task``,
then ``tasks/result``, which blocks until the task is done), sequential. A server that is
not installed (node, the mcp130 venv) is left out with a note. Figures depend on the
machine and its load: compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "tests" / "interop" / "node"
PY_DIR = ROOT / "tests" / "interop" / "py"
MCP130_PYTHON = ROOT / ".interop" / "mcp130" / "bin" / "python"

SERVE_OURS = """
import sys
from functools import partial
import trio
import trio_mcp
from tests.helpers import example_app
trio.run(partial(trio_mcp.serve_http, example_app(), "127.0.0.1", int(sys.argv[1])))
"""

SERVE_MCP130 = """
import contextlib, sys
sys.path.insert(0, sys.argv[2])
import mcp_server
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Mount

manager = StreamableHTTPSessionManager(app=mcp_server.server)

@contextlib.asynccontextmanager
async def lifespan(app):
    async with manager.run():
        yield

app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


# --- the one client ------------------------------------------------------------------------


class RpcError(Exception):
    pass


class Session:
    """One MCP session over Streamable HTTP: POST a request, read its answer."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.session_id: str | None = None
        self.next_id = 0

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def notify(self, method: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method}).encode()
        response = await self.http.post(self.url, content=body, headers=self._headers())
        assert response.status_code == 202, response.status_code

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        rid = self.next_id
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
        async with self.http.stream("POST", self.url, content=json.dumps(message).encode(),
                                    headers=self._headers()) as response:
            if response.status_code != 200:
                raise RpcError(f"HTTP {response.status_code}: {(await response.aread())[:200]!r}")
            if self.session_id is None:
                self.session_id = response.headers.get("mcp-session-id")
            kind = response.headers.get("content-type", "").split(";")[0].strip()
            if kind == "application/json":
                return _outcome(json.loads(await response.aread()))
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif line == "" and data:
                    text, data = "\n".join(data), []
                    if not text:  # a priming event: an id, no message
                        continue
                    msg = json.loads(text)
                    if msg.get("id") == rid and "method" not in msg:
                        return _outcome(msg)
        raise RpcError(f"no answer to {method}")

    async def initialize(self) -> None:
        await self.request("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "http-workload", "version": "1.0"}})
        await self.notify("notifications/initialized")

    async def close(self) -> None:
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                await self.http.delete(self.url, headers=self._headers())


def _outcome(msg: dict[str, Any]) -> Any:
    if "error" in msg:
        raise RpcError(str(msg["error"]))
    return msg["result"]


# --- the servers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError("the server did not listen")


@contextlib.contextmanager
def running(argv: list[str], port: int, cwd: Path = ROOT) -> Iterator[None]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def servers() -> list[dict[str, Any]]:
    """Each server: name, how to start it (or why not), its URL, its plain and task tools."""
    out: list[dict[str, Any]] = []
    port = free_port()
    out.append({"name": "trio-mcp `serve_http`", "port": port,
                "argv": [sys.executable, "-c", SERVE_OURS, str(port)],
                "url": f"http://127.0.0.1:{port}/mcp",
                "plain": ("echo", {"text": "hi"}), "task": ("sleep", {"seconds": 0})})
    port = free_port()
    node = shutil.which("node")
    ts_ready = (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir()
    out.append({"name": "TS SDK 1.32.2 `StreamableHTTPServerTransport`", "port": port,
                "argv": [node, str(NODE_DIR / "ts_server.mjs"), "--http", str(port)]
                if node and ts_ready else None,
                "missing": "node or tests/interop/node/node_modules (npm ci) missing",
                "url": f"http://127.0.0.1:{port}/mcp",
                "plain": ("echo", {"text": "hi"}), "task": ("slow", {"ms": 0})})
    port = free_port()
    out.append({"name": "mcp 1.30.0 `StreamableHTTPSessionManager` (uvicorn)", "port": port,
                "argv": [str(MCP130_PYTHON), "-c", SERVE_MCP130, str(port), str(PY_DIR)]
                if MCP130_PYTHON.exists() else None,
                "missing": ".interop/mcp130 missing (see tests/interop/README.md)",
                "url": f"http://127.0.0.1:{port}/mcp/",
                "plain": ("echo", {"text": "hi"}), "task": ("slow", {"seconds": 0})})
    return out


# --- the workload ------------------------------------------------------------------------------


def new_http() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(30), trust_env=False,
                             limits=httpx.Limits(max_connections=None))


async def sequential_calls(server: dict[str, Any], calls: int) -> float:
    name, args = server["plain"]
    async with new_http() as http:
        session = Session(http, server["url"])
        await session.initialize()
        for _ in range(10):  # warm-up
            await session.request("tools/call", {"name": name, "arguments": args})
        start = time.perf_counter()
        for _ in range(calls):
            result = await session.request("tools/call", {"name": name, "arguments": args})
            assert not result.get("isError"), result
        elapsed = time.perf_counter() - start
        await session.close()
    return calls / elapsed


async def concurrent_calls(server: dict[str, Any], clients: int, per_client: int) -> float:
    name, args = server["plain"]
    sessions: list[Session] = []
    async with new_http() as http:

        async def open_one() -> None:
            session = Session(http, server["url"])
            await session.initialize()
            sessions.append(session)

        async with trio.open_nursery() as nursery:
            for _ in range(clients):
                nursery.start_soon(open_one)

        async def run(session: Session) -> None:
            for _ in range(per_client):
                result = await session.request("tools/call", {"name": name, "arguments": args})
                assert not result.get("isError"), result

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(run, session)
        elapsed = time.perf_counter() - start
        for session in sessions:
            await session.close()
    return clients * per_client / elapsed


async def task_round_trips(server: dict[str, Any], tasks: int) -> float:
    name, args = server["task"]
    async with new_http() as http:
        session = Session(http, server["url"])
        await session.initialize()
        start = time.perf_counter()
        for _ in range(tasks):
            created = await session.request(
                "tools/call", {"name": name, "arguments": args, "task": {"ttl": 60_000}})
            task_id = created["task"]["taskId"]
            result = await session.request("tasks/result", {"taskId": task_id})
            assert not result.get("isError"), result
        elapsed = time.perf_counter() - start
        await session.close()
    return tasks / elapsed


async def measure(server: dict[str, Any], args: argparse.Namespace) -> dict[str, str]:
    row = {}
    works: list[tuple[str, Callable[[], Awaitable[float]]]] = [
        ("seq", partial(sequential_calls, server, args.calls)),
        ("conc", partial(concurrent_calls, server, args.clients, args.per_client)),
        ("tasks", partial(task_round_trips, server, args.tasks)),
    ]
    for key, work in works:
        try:
            with trio.fail_after(300):
                row[key] = f"{await work():.0f}"
        except Exception as exc:  # a server that cannot do it: say so in the table
            row[key] = f"failed ({type(exc).__name__}: {str(exc)[:60]})"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="sequential tools/call")
    parser.add_argument("--clients", type=int, default=50, help="concurrent sessions")
    parser.add_argument("--per-client", type=int, default=20, help="tools/call per session")
    parser.add_argument("--tasks", type=int, default=100, help="sequential task round trips")
    args = parser.parse_args()
    rows = []
    for server in servers():
        if server["argv"] is None:
            rows.append((server["name"], {"note": server["missing"]}))
            continue
        with running(server["argv"], server["port"]):
            rows.append((server["name"], trio.run(measure, server, args)))
    with open("/proc/loadavg", encoding="ascii") as f:
        load = " ".join(f.read().split()[:3])
    print(f"Streamable HTTP, one client implementation (httpx) for all; load average {load}\n")
    print(f"| server | tools/call/s, sequential ({args.calls}) | tools/call/s, "
          f"{args.clients} clients x {args.per_client} | task round trips/s, sequential "
          f"({args.tasks}) |")
    print("|---|---:|---:|---:|")
    for name, row in rows:
        if "note" in row:
            print(f"| {name} | {row['note']} | | |")
        else:
            print(f"| {name} | {row['seq']} | {row['conc']} | {row['tasks']} |")


if __name__ == "__main__":
    main()
