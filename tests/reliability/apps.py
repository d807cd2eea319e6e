"""Apps and probes shared by the reliability tests and scripts.

``build_fuzz_app()`` is what the fuzz, fault and security tests talk to: every
tool ends quickly whatever its arguments, so "every request gets exactly one
response" can be checked without timeouts. ``build_load_app()`` is the load
run's server. Run either over stdio or WebSocket in a subprocess::

    python -m tests.reliability.apps fuzz            # stdio
    python -m tests.reliability.apps load --ws 0     # WebSocket; prints the port
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import trio
import trio.lowlevel

import trio_mcp

#: Identities of the load run's bearer tokens: token ``load-<n>`` is ``client-<n>``.
LOAD_TOKEN_PREFIX = "load-"


def trio_task_count() -> int:
    """Every Trio task of this run, the root included (call from inside trio.run)."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


def rss_kib(field: str = "VmRSS") -> int:
    """This process's resident set size in KiB, from /proc/self/status
    (``VmHWM`` for its peak so far)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


#: A file that does not exist, under this checkout: its path must never reach a peer.
INTERNAL_PATH = str(Path(__file__).resolve().parent / "no-such-dir" / "secret.txt")


def build_fuzz_app(
    limits: trio_mcp.TaskLimits | None = None, *, faults: bool = False
) -> trio_mcp.App:
    """Tools that always end quickly, plus a ``stats`` probe of the server's insides.

    With ``faults``, also ``slow`` (sleeps for an hour) and ``leaky`` (fails
    opening a file under this checkout), for the fault and security tests;
    the fuzzer never gets them, as it counts on every call ending.
    """
    app = trio_mcp.App(
        "trio-mcp-fuzz",
        "0.1.0",
        limits=limits or trio_mcp.TaskLimits(default_ttl=60_000, max_ttl=60_000),
    )

    @app.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool(task_support="optional")
    async def add(a: int, b: int = 0) -> dict[str, Any]:
        """Add two integers (structured result)."""
        return {"sum": a + b}

    @app.tool(task_support="optional")
    async def mirror(value: dict[str, Any]) -> dict[str, Any]:
        """Return the object as structured content."""
        return value

    @app.tool(task_support="optional")
    async def nap(ms: int = 0) -> str:
        """Sleep at most 20 ms."""
        await trio.sleep(min(max(ms, 0), 20) / 1000)
        return "rested"

    @app.tool(task_support="optional")
    async def crash(message: str = "") -> str:
        """Raise, as a buggy tool would."""
        raise RuntimeError(f"tool crashed: {message[:50]}")

    @app.tool(task_support="required")
    async def job(n: int = 0) -> str:
        """A task-only tool."""
        await trio.lowlevel.checkpoint()
        return f"job {n} done"

    if faults:

        @app.tool(task_support="optional")
        async def slow() -> str:
            """Sleep for an hour."""
            await trio.sleep(3600)
            return "woke up"

        @app.tool(task_support="optional")
        async def leaky() -> str:
            """Fail the way buggy tools do: an OSError naming an internal path."""
            with open(INTERNAL_PATH, encoding="utf-8") as f:  # noqa: ASYNC230 - on purpose
                return f.read()

    @app.tool()
    async def stats(ctx: trio_mcp.RequestContext) -> dict[str, Any]:
        """The server's bookkeeping, for leak checks (this request excluded)."""
        registry = ctx.peer.app.registry
        return {
            "inflight": len(ctx.peer.session._inflight) - 1,
            "pending": len(ctx.peer.session.pending._pending),
            "trio_tasks": trio_task_count(),
            "actors": len(registry._actors),
            "live": registry.live_count(),
            "records": len(registry),
            "rss_kib": rss_kib(),
            "rss_peak_kib": rss_kib("VmHWM"),
        }

    return app


def build_load_app(limits: trio_mcp.TaskLimits | None = None) -> trio_mcp.App:
    """The load run's server: one task tool whose result names the call."""
    app = trio_mcp.App(
        "trio-mcp-load",
        "0.1.0",
        limits=limits
        or trio_mcp.TaskLimits(
            default_ttl=600_000, max_ttl=600_000, poll_interval=50, max_tasks=100_000
        ),
    )

    @app.tool(task_support="required")
    async def work(client: int, n: int, ms: int = 0) -> dict[str, Any]:
        """Sleep ``ms`` then return ``{"client", "n"}``."""
        if ms > 0:
            await trio.sleep(min(ms, 1000) / 1000)
        return {"client": client, "n": n}

    @app.tool()
    async def stats(ctx: trio_mcp.RequestContext) -> dict[str, Any]:
        """Server-side figures for the report."""
        registry = ctx.peer.app.registry
        return {
            "trio_tasks": trio_task_count(),
            "records": len(registry),
            "live": registry.live_count(),
            "rss_kib": rss_kib(),
        }

    return app


BUILDERS = {
    "fuzz": build_fuzz_app,
    "faults": lambda: build_fuzz_app(faults=True),
    "load": build_load_app,
}


async def _serve_ws(app: trio_mcp.App, port: int, tokens: dict[str, str] | None) -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            lambda task_status: trio_mcp.serve_websocket(
                app, "127.0.0.1", port, tokens=tokens, task_status=task_status
            )
        )
        print(address.port, flush=True)


async def _serve_http(
    app: trio_mcp.App, port: int, tokens: dict[str, str] | None, server: str
) -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            lambda task_status: trio_mcp.serve_http(
                app, "127.0.0.1", port, tokens=tokens, server=server,  # type: ignore[arg-type]
                task_status=task_status,
            )
        )
        print(address.port, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="serve a reliability app")
    parser.add_argument("app", choices=sorted(BUILDERS))
    parser.add_argument("--ws", type=int, metavar="PORT", help="serve WebSocket on 127.0.0.1")
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="serve Streamable HTTP on 127.0.0.1 (path /mcp)")
    parser.add_argument("--http-server", choices=("llhttp", "hypercorn"), default="llhttp")
    parser.add_argument("--clients", type=int, default=0,
                        help="accept bearer tokens load-0..load-N-1 (WebSocket, HTTP)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    app = BUILDERS[args.app]()
    tokens = {f"{LOAD_TOKEN_PREFIX}{n}": f"client-{n}" for n in range(args.clients)} or None
    if args.ws is not None:
        trio.run(_serve_ws, app, args.ws, tokens)
    elif args.http is not None:
        trio.run(_serve_http, app, args.http, tokens, args.http_server)
    else:
        trio.run(trio_mcp.serve_stdio, app)


if __name__ == "__main__":
    main()
