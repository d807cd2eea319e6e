"""``trio-mcp demo``: two agents calling each other's tasks, with a live view.

The story, about 12 seconds long:

* Agent **B** hosts three task tools: ``write_report``, ``crunch_numbers``
  and ``check_links``.
* Agent **A** connects to B as an MCP client that hosts sampling and
  elicitation, as tasks when asked (``App(host_tasks=True)``).
* A calls all three tools on B as tasks. ``write_report`` asks A's "model"
  for a draft: the sampling request runs **as a task hosted by A**, which B
  polls. Then it asks A whether to publish (elicitation), and sits in
  ``input_required`` until A answers (automatically, or the user with
  ``--interactive``). ``check_links`` fails on purpose, and A cancels
  ``crunch_numbers`` midway.
* A summary lists every task on both sides: id, status and duration.

Each agent reports the tasks *it hosts* as events (dicts): straight to the
:class:`Board` when both run in this process, or as JSON lines on stdout
when B runs in its own process (``--transport ws``), which A reads back.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from . import __version__
from ._errors import RemoteError
from ._terminal import Terminal, rich_console
from .peer._features import App, Peer, RequestContext
from .peer._messages import (
    CallToolResult,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    TaskStatus,
    TextContent,
)
from .peer._tasks import TaskHandle, TaskLimits, TaskRegistry
from .transports._memory import open_memory_pair
from .transports._websocket import open_websocket_client, serve_websocket

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

Event = dict[str, Any]
Emit = Callable[[Event], None]

#: Agent B's bearer token travels to its process in this environment variable.
TOKEN_ENV: Final = "TRIO_MCP_DEMO_TOKEN"
#: The directory holding the trio_mcp package, for agent B's process.
PACKAGE_ROOT: Final = str(Path(__file__).resolve().parent.parent)
#: How often each agent looks at its registry for status changes (seconds).
WATCH_INTERVAL: Final = 0.05
TOPIC: Final = "tasks in trio-mcp"
EXPECTED: Final = {
    "write_report": TaskStatus.COMPLETED,
    "check_links": TaskStatus.FAILED,
    "crunch_numbers": TaskStatus.CANCELLED,
}
PUBLISH_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "publish": {"type": "boolean", "description": "publish it now"},
        "note": {"type": "string", "description": "a note for the changelog"},
    },
    "required": ["publish"],
}


class DemoError(Exception):
    """The demo could not run (e.g. agent B's process did not start)."""


# --- what each agent reports -----------------------------------------------------------------


def _seconds_between(start: str, end: str) -> float | None:
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


@final
class Host:
    """One agent's reporter: tells the board about the tasks this agent hosts.

    Handlers call :meth:`hosted` when they start running as a task and
    :meth:`progress` as they go; :meth:`watch` follows the registry for
    status changes (``working``, ``input_required``, terminal).

    Args:
        name: ``"A"`` or ``"B"``.
        emit: Where events go.
        pace: Multiplies every delay of the story.
    """

    def __init__(self, name: str, emit: Emit, pace: float) -> None:
        self.name = name
        self.emit = emit
        self.pace = pace
        self.registry: TaskRegistry | None = None
        self._labels: dict[str, str] = {}
        self._seen: dict[str, tuple[str, str | None]] = {}

    def say(self, text: str) -> None:
        """Log a line of the story, as this agent."""
        self.emit({"op": "say", "who": self.name, "text": text})

    async def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` times the pace. Cancellation: returns early, as trio.sleep."""
        await trio.sleep(seconds * self.pace)

    def hosted(self, ctx: RequestContext, label: str) -> None:
        """Announce that the request of ``ctx`` runs here as a task."""
        if ctx.task_id is None:
            self.say(f"runs {label} (not as a task)")
            return
        self._labels[ctx.task_id] = label
        self.emit({"op": "task", "host": self.name, "id": ctx.task_id, "label": label,
                   "status": TaskStatus.WORKING.value})
        self.check(ctx.task_id)

    async def progress(
        self, ctx: RequestContext, done: float, total: float, message: str
    ) -> None:
        """Report progress to the requestor (if it asked) and to the board."""
        await ctx.report_progress(done, total, message)
        if ctx.task_id is not None:
            self.emit({"op": "progress", "host": self.name, "id": ctx.task_id,
                       "progress": done, "total": total, "message": message})

    def check(self, task_id: str) -> None:
        """Emit the task's status if it changed since last seen."""
        record = self.registry.store.get(task_id) if self.registry is not None else None
        if record is None:
            return
        key = (record.status.value, record.status_message)
        if self._seen.get(task_id) == key:
            return
        self._seen[task_id] = key
        duration = (
            _seconds_between(record.created_at, record.last_updated_at)
            if record.status.is_terminal else None
        )
        self.emit({"op": "task", "host": self.name, "id": task_id,
                   "label": self._labels[task_id], "status": record.status.value,
                   "message": record.status_message, "duration": duration})

    def flush(self) -> None:
        """Emit every status change not reported yet."""
        for task_id in list(self._labels):
            self.check(task_id)

    async def watch(self) -> None:
        """Report status changes until cancelled."""
        while True:
            self.flush()
            await trio.sleep(WATCH_INTERVAL)


# --- the two agents -----------------------------------------------------------------------------


def _limits(pace: float) -> TaskLimits:
    # Short poll intervals keep the story moving; the default is one second.
    return TaskLimits(poll_interval=max(50, int(250 * pace)))


def build_agent_b(host: Host) -> App:
    """Agent B: hosts three task tools. Its ``write_report`` calls back into A."""
    app = App("agent-b", __version__, instructions="Agent B of the trio-mcp demo.",
              limits=_limits(host.pace))

    async def step(ctx: RequestContext, done: int, total: int, what: str, secs: float) -> None:
        await host.pause(secs)
        await host.progress(ctx, done, total, what)

    @app.tool(task_support="required")
    async def write_report(ctx: RequestContext, topic: str) -> str:
        """Write a report on `topic`: drafted by the caller's model, published if it agrees."""
        host.hosted(ctx, f"write_report: {topic}")
        await step(ctx, 1, 5, "collecting notes", 2.0)
        await step(ctx, 2, 5, "outlining", 1.5)
        host.say("asks A's model for a draft (sampling, as a task hosted by A)")
        draft = await ctx.sample(f"Draft two sentences about {topic}.", max_tokens=120,
                                 as_task=True)
        await host.progress(ctx, 3, 5, "draft received")
        host.say("asks A whether to publish (elicitation): its task is input_required")
        answer = await ctx.elicit(f"Publish the report on {topic}?", PUBLISH_SCHEMA)
        content = answer.content or {}
        if answer.action != "accept" or content.get("publish") is not True:
            host.say(f"keeps the report as a draft (A answered {answer.action})")
            return f"kept as a draft: {draft.text}"
        await step(ctx, 4, 5, "publishing", 1.5)
        await step(ctx, 5, 5, "published", 0.5)
        note = f" (note: {content['note']})" if content.get("note") else ""
        return f"published{note}: {draft.text}"

    @app.tool(task_support="required")
    async def crunch_numbers(ctx: RequestContext, rows: int) -> str:
        """Crunch `rows` rows, slowly, reporting progress for each."""
        host.hosted(ctx, f"crunch_numbers: {rows} rows")
        for row in range(1, rows + 1):
            await step(ctx, row, rows, f"row {row}", 0.4)
        return f"crunched {rows} rows"

    @app.tool(task_support="optional")
    async def check_links(ctx: RequestContext, count: int) -> CallToolResult:
        """Check `count` links; some are always broken (an isError result)."""
        host.hosted(ctx, f"check_links: {count} links")
        for link in range(1, count + 1):
            await step(ctx, link, count, f"link {link}", 0.25)
        broken = max(1, count // 6)
        return CallToolResult(
            content=[TextContent(f"{broken} of {count} links are broken")], is_error=True
        )

    return app


DRAFT: Final = (
    "Tasks let either side of an MCP connection start long work, follow it, and fetch "
    "the result later. In trio-mcp each task is a Trio actor with its own cancel scope."
)


def build_agent_a(host: Host, terminal: Terminal | None) -> App:
    """Agent A: hosts sampling and elicitation (as tasks when asked) for B.

    Args:
        host: A's reporter.
        terminal: Asks the user to answer B's question; ``None`` answers
            automatically.
    """
    app = App("agent-a", __version__, host_tasks=True, limits=_limits(host.pace))

    @app.on_sampling
    async def draft(ctx: RequestContext, params: CreateMessageParams) -> CreateMessageResult:
        host.hosted(ctx, "sampling: a draft for B")
        for step, what in enumerate(("reading the prompt", "thinking", "writing", "polishing"),
                                    start=1):
            await host.pause(0.75)
            await host.progress(ctx, step, 4, what)
        return CreateMessageResult(role="assistant", content={"type": "text", "text": DRAFT},
                                   model="demo-model")

    @app.on_elicitation
    async def decide(ctx: RequestContext, params: ElicitParams) -> ElicitResult:
        if terminal is not None:
            host.say(f"B asks: {params.message} (answer on the terminal)")
            answer = await terminal.elicit(params, asker="Agent B")
        else:
            host.say(f"B asks: {params.message} — answering yes in a moment "
                     "(--interactive to answer yourself)")
            await host.pause(2.5)
            answer = ElicitResult(action="accept",
                                  content={"publish": True, "note": "approved by the demo"})
        host.say(f"answers B: {answer.action} {json.dumps(answer.content or {})}")
        return answer

    return app


async def run_scenario(peer: Peer, host: Host) -> list[str]:
    """Agent A's side of the story, over a connected client ``peer``.

    Returns:
        What did not go as expected (empty when all went well).
    """
    tools = await peer.list_all_tools()
    name = peer.remote_info.name if peer.remote_info else "B"
    host.say(f"connected to {name}; its tools: {', '.join(t.name for t in tools)}")
    handles: dict[str, TaskHandle[CallToolResult]] = {}

    async def start(tool: str, arguments: dict[str, Any]) -> None:
        handle = await peer.call_tool_task(tool, arguments)
        handles[tool] = handle
        host.say(f"calls B's {tool} as a task: {handle.task_id[:8]}")

    async def follow(tool: str) -> None:
        handle = handles[tool]
        await handle.wait()  # polls tasks/get; opens tasks/result when input is needed
        try:
            result = await handle.result()
        except RemoteError as exc:
            host.say(f"{tool} ended {handle.task.status.value}: {exc.message}")
            return
        outcome = "returned an error" if result.is_error else "returned"
        host.say(f"{tool} {outcome}: {result.text}")

    async def cancel_midway(tool: str) -> None:
        await host.pause(5.0)
        host.say(f"changes its mind and cancels {tool} (tasks/cancel)")
        task = await handles[tool].cancel()
        host.say(f"{tool} is now {task.status.value}")

    await start("write_report", {"topic": TOPIC})
    await start("crunch_numbers", {"rows": 40})
    await host.pause(0.5)
    await start("check_links", {"count": 12})
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow, "write_report")
        nursery.start_soon(follow, "check_links")
        nursery.start_soon(cancel_midway, "crunch_numbers")

    listed = {task.task_id: task async for task in peer.iter_tasks()}
    host.say("tasks/list on B: " + ", ".join(
        f"{task_id[:8]} {task.status.value}" for task_id, task in listed.items()))
    problems = []
    for tool, expected in EXPECTED.items():
        seen = listed.get(handles[tool].task_id)
        if seen is None or seen.status is not expected:
            got = "missing" if seen is None else seen.status.value
            problems.append(f"{tool}: expected {expected.value}, got {got}")
    return problems


# --- the board and its two views -------------------------------------------------------------


@final
@attrs.define(eq=False)
class Row:
    """One task on the board."""

    host: str
    task_id: str
    label: str
    status: str = TaskStatus.WORKING.value
    message: str | None = None
    progress: float | None = None
    total: float | None = None
    note: str | None = None
    duration: float | None = None


@final
class Board:
    """The state of the demo: every task of both agents and the story so far.

    Args:
        on_line: Called with a plain-text line for each change (the plain
            view prints them).
    """

    def __init__(self, on_line: Callable[[str], None] | None = None) -> None:
        self.rows: dict[tuple[str, str], Row] = {}
        self.log: list[str] = []
        self.started = trio.current_time()
        self.on_line = on_line

    def elapsed(self) -> float:
        """Seconds since the demo started."""
        return trio.current_time() - self.started

    def apply(self, event: Event) -> None:
        """Apply one event from an agent."""
        match event.get("op"):
            case "say":
                self._line(f"{event['who']}: {event['text']}", story=True)
            case "task":
                key = (event["host"], event["id"])
                row = self.rows.get(key)
                if row is None:
                    row = self.rows[key] = Row(event["host"], event["id"], event["label"])
                    self._line(f"{row.host} hosts task {row.task_id[:8]} ({row.label})")
                changed = row.status != event["status"] or row.message != event.get("message")
                row.status = event["status"]
                row.message = event.get("message")
                row.duration = event.get("duration")
                if changed:
                    note = f" — {row.message}" if row.message else ""
                    self._line(f"{row.host} task {row.task_id[:8]} {row.status}{note}")
            case "progress":
                row = self.rows.get((event["host"], event["id"]))
                if row is not None:
                    before = row.progress or 0.0
                    row.progress, row.total = event["progress"], event["total"]
                    row.note = event.get("message")
                    if not _worth_a_line(before, row.progress, row.total):
                        return
                    self._line(f"{row.host} task {row.task_id[:8]} progress "
                               f"{row.progress:g}/{row.total:g} {row.note or ''}".rstrip())

    def _line(self, text: str, *, story: bool = False) -> None:
        if story:
            self.log.append(text)
        if self.on_line is not None:
            self.on_line(f"[{self.elapsed():5.1f}s] {text}")


def _worth_a_line(before: float, now: float | None, total: float | None) -> bool:
    """Plain lines for every step of short tasks, every quarter of long ones."""
    if now is None or not total or total <= 10:
        return True
    return int(4 * now / total) != int(4 * before / total)


def _duration(row: Row) -> str:
    return "-" if row.duration is None else f"{row.duration:.1f}s"


def _plain_summary(board: Board, out: Any) -> None:
    rows = list(board.rows.values())
    print(f"\nSummary: {len(rows)} tasks on both agents", file=out)
    header = ("HOST", "TASK ID", "WHAT", "STATUS", "DURATION")
    table = [header] + [
        (f"{r.host}", r.task_id, r.label, r.status, _duration(r)) for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
              .rstrip(), file=out)


_STYLES: Final = {
    "working": "yellow",
    "input_required": "bold magenta",
    "completed": "green",
    "failed": "red",
    "cancelled": "dim",
}


@final
class RichView:
    """A live table of both agents' tasks and the last lines of the story."""

    def __init__(self, board: Board, console: Console, title: str) -> None:
        self.board = board
        self.console = console
        self.title = title
        self._live: Live | None = None

    def _bar(self, row: Row) -> str:
        if row.progress is None or not row.total:
            return ""
        filled = round(10 * min(1.0, row.progress / row.total))
        return f"{'█' * filled}{'░' * (10 - filled)} {row.progress:g}/{row.total:g}"

    def render(self, *, final: bool = False) -> RenderableType:
        """The table (and, while running, the story panel)."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table

        if final:
            summary = Table(title="Summary: every task on both agents")
            summary.add_column("host")
            summary.add_column("task id", no_wrap=True)
            for column in ("what", "status", "duration"):
                summary.add_column(column)
            for row in self.board.rows.values():
                summary.add_row(row.host, row.task_id, row.label,
                                f"[{_STYLES.get(row.status, '')}]{row.status}[/]",
                                _duration(row))
            return summary
        table = Table(title=f"{self.title} — {self.board.elapsed():.1f}s")
        for column in ("host", "task", "what", "status", "progress", "note"):
            table.add_column(column)
        for row in self.board.rows.values():
            table.add_row(row.host, row.task_id[:8], row.label,
                          f"[{_STYLES.get(row.status, '')}]{row.status}[/]", self._bar(row),
                          row.message or row.note or "")
        story = "\n".join(self.board.log[-8:]) or "starting…"
        return Group(table, Panel(story, title="story", title_align="left"))

    @contextmanager
    def pause(self) -> Iterator[None]:
        """Stop redrawing while a prompt is open."""
        live = self._live
        if live is None:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            live.start()

    async def run(self) -> None:
        """Redraw until cancelled, then leave the last frame on screen."""
        from rich.live import Live

        with Live(self.render(), console=self.console, auto_refresh=False) as live:
            self._live = live
            try:
                while True:
                    live.update(self.render(), refresh=True)
                    await trio.sleep(0.1)
            finally:
                live.update(self.render(), refresh=True)
                self._live = None

    def summary(self) -> None:
        """Print the final table with full ids and durations."""
        self.console.print()
        self.console.print(self.render(final=True))


# --- running the demo ---------------------------------------------------------------------------


def run_demo(*, transport: str, interactive: bool, plain: bool, pace: float) -> int:
    """Run the demo and return its exit status (0 when the story went as told)."""
    console = None if plain else rich_console(sys.stdout)
    try:
        problems = trio.run(partial(_demo, transport, interactive, console, pace))
    except DemoError as exc:
        print(f"trio-mcp demo: {exc}", file=sys.stderr)
        return 2
    if problems:
        for problem in problems:
            print(f"trio-mcp demo: unexpected: {problem}", file=sys.stderr)
        return 1
    return 0


async def _demo(
    transport: str, interactive: bool, console: Console | None, pace: float
) -> list[str]:
    title = f"trio-mcp demo: agent A ⇄ agent B over {transport}"
    view: RichView | None = None
    if console is None:
        board = Board(on_line=lambda line: print(line, flush=True))
        print(title, flush=True)
    else:
        board = Board()
        view = RichView(board, console, title)
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
                open_websocket_client(url, app_a, token=token) as peer,
            ):
                problems = await run_scenario(peer, host_a)
                host_a.flush()
        else:
            host_b = Host("B", board.apply, pace)
            app_b = build_agent_b(host_b)
            host_b.registry = app_b.registry
            nursery.start_soon(host_b.watch)
            async with open_memory_pair(app_b, app_a) as (peer, _):
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
        nursery.cancel_scope.cancel()
