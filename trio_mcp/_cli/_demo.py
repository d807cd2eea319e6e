"""``trio-mcp demo``: two agents calling each other's tasks, with a live view.

This module runs the demo: both agents in this process (``--transport
memory``), or agent B in a child process serving WebSocket on loopback
(``--transport ws``), in either era of MCP (``--era``: A chooses it when it
connects; B serves both). The story itself is in :mod:`._demo_scenario`, what
is shown in :mod:`._demo_view`.

Each agent reports the tasks *it hosts* as events (dicts): straight to the
:class:`~._demo_view.Board` when both run in this process, or as JSON lines
on stdout when B runs in its own process, which A reads back.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ..transports._memory import open_memory_pair
from ..transports._websocket_client import open_websocket_client
from ..transports._websocket_server import serve_websocket
from ._demo_scenario import (
    ERAS,
    LEGACY_ERA,
    Event,
    Host,
    build_agent_a,
    build_agent_b,
    run_scenario,
)
from ._demo_view import Board, RichView, _plain_summary
from ._terminal import Terminal, rich_console

if TYPE_CHECKING:
    from rich.console import Console

#: Agent B's bearer token travels to its process in this environment variable.
TOKEN_ENV: Final = "TRIO_MCP_DEMO_TOKEN"
#: The directory holding the trio_mcp package, for agent B's process.
PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])


class DemoError(Exception):
    """The demo could not run (e.g. agent B's process did not start)."""


# --- running the demo ---------------------------------------------------------------------------


def run_demo(
    *, transport: str, interactive: bool, plain: bool, pace: float, era: str = LEGACY_ERA
) -> int:
    """Run the demo and return its exit status (0 when the story went as told).

    Args:
        era: The MCP version A speaks to B: a key of :data:`~._demo_scenario.ERAS`.
    """
    console = None if plain else rich_console(sys.stdout)
    try:
        problems = trio.run(partial(_demo, transport, interactive, console, pace, era))
    except DemoError as exc:
        print(f"trio-mcp demo: {exc}", file=sys.stderr)
        return 2
    if problems:
        for problem in problems:
            print(f"trio-mcp demo: unexpected: {problem}", file=sys.stderr)
        return 1
    return 0


async def _demo(
    transport: str,
    interactive: bool,
    console: Console | None,
    pace: float,
    era: str = LEGACY_ERA,
) -> list[str]:
    if era not in ERAS:
        raise DemoError(f"no such era: {era} (choose one of {', '.join(ERAS)})")
    title = f"trio-mcp demo: agent A ⇄ agent B over {transport}"
    view: RichView | None = None
    if console is None:
        board = Board(on_line=lambda line: print(line, flush=True))
        print(title, flush=True)
        print(ERAS[era], flush=True)
    else:
        board = Board()
        view = RichView(board, console, title, ERAS[era])
    pause: Callable[[], AbstractContextManager[Any]] = view.pause if view else nullcontext
    terminal = Terminal(pause) if interactive else None
    host_a = Host("A", board.apply, pace)
    app_a = build_agent_a(host_a, terminal)
    host_a.registry = app_a.registry
    async with trio.open_nursery() as nursery:
        if view is not None:
            nursery.start_soon(view.run)
        nursery.start_soon(host_a.watch)
        if transport == "ws":
            async with (
                _agent_b_process(board, pace) as (url, token),
                open_websocket_client(url, app_a, token=token, era=era) as peer,
            ):
                problems = await run_scenario(peer, host_a)
                host_a.flush()
        else:
            host_b = Host("B", board.apply, pace)
            app_b = build_agent_b(host_b)
            host_b.registry = app_b.registry
            nursery.start_soon(host_b.watch)
            async with open_memory_pair(app_b, app_a, era=era) as (peer, _):
                problems = await run_scenario(peer, host_a)
                host_a.flush()
                host_b.flush()
        nursery.cancel_scope.cancel()
    if view is not None:
        view.summary()
    else:
        _plain_summary(board, sys.stdout)
    return problems


@final
class _Lines:
    """Reads newline-terminated lines from a stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> bytes | None:
        """The next line without its newline, or ``None`` at end of stream."""
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(65_536)
            if not data:
                return None
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


async def _pump_events(lines: _Lines, board: Board, done: trio.Event) -> None:
    try:
        while (line := await lines.next()) is not None:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("op") == "bye":
                break
            board.apply(event)
    finally:
        done.set()


@asynccontextmanager
async def _agent_b_process(board: Board, pace: float) -> AsyncIterator[tuple[str, str]]:
    """Run agent B in a child process serving WebSocket on loopback; yield (url, token).

    B's events arrive as JSON lines on its stdout. On exit B's stdin is
    closed: B reports its last changes, says bye, and exits.
    """
    token = secrets.token_urlsafe(16)
    env = dict(os.environ)
    env[TOKEN_ENV] = token
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "trio_mcp", "demo-agent-b", "--port", "0",
            "--pace", str(pace)]
    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        lines = _Lines(proc.stdout)
        with trio.move_on_after(30):
            first = await lines.next()
        try:
            port = int(json.loads(first or b"{}")["port"])
        except (KeyError, TypeError, ValueError):
            raise DemoError("agent B's process did not start") from None
        board.apply({"op": "say", "who": "B",
                      "text": f"serves over WebSocket on 127.0.0.1:{port} (pid {proc.pid})"})
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump_events, lines, board, done)
            yield f"ws://127.0.0.1:{port}/", token
            await proc.stdin.aclose()  # B reports its last changes, says bye, exits
            with trio.move_on_after(10):
                await done.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await proc.stdin.aclose()
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


# --- agent B's process (--transport ws) ------------------------------------------------------


def run_agent_b_process(*, port: int, pace: float) -> int:
    """Run agent B alone, serving on 127.0.0.1, until stdin closes."""
    try:
        trio.run(_agent_b, port, pace)
    except KeyboardInterrupt:  # Ctrl-C reaches both processes; A reports it
        return 130
    return 0


def _emit_json(event: Event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


async def _agent_b(port: int, pace: float) -> None:
    host = Host("B", _emit_json, pace)
    app = build_agent_b(host)
    host.registry = app.registry
    token = os.environ.get(TOKEN_ENV)
    tokens = {token: "agent-a"} if token else None
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(serve_websocket, app, "127.0.0.1", port, tokens=tokens)
        )
        _emit_json({"op": "listening", "port": address.port})
        nursery.start_soon(host.watch)
        async with stdin:
            while await stdin.receive_some(4096):
                pass
        host.flush()
        _emit_json({"op": "bye"})
