"""The story of ``trio-mcp demo``: two agents calling each other's tasks.

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

With ``--era 2026-07-28`` the same story runs on the tasks extension
(``io.modelcontextprotocol/tasks``): B, the server, decides that each call
becomes a task; B's questions (the draft, the publish decision) are
``inputRequests`` of its ``write_report`` task, which A pulls with
``tasks/get`` and answers with ``tasks/update`` through its ``on_sampling``
and ``on_elicitation`` handlers, so A hosts no task. ``check_links``'s error
result is then a ``completed`` task whose result has ``isError`` (the
extension keeps ``failed`` for JSON-RPC errors), and the summary asks
``tasks/get`` for each task (there is no ``tasks/list``).

Each agent reports the tasks *it hosts* as events (dicts) through its
:class:`Host`; :mod:`._demo` routes them to the board of :mod:`._demo_view`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, final

import trio

from .. import __version__
from .._errors import RemoteError
from ..peer import App, Peer, RequestContext
from ..peer._messages import (
    MODERN_PROTOCOL_VERSION,
    CallToolResult,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Task,
    TaskStatus,
    TextContent,
)
from ..peer._tasks import TaskHandle, TaskLimits, TaskRegistry
from ._terminal import Terminal

Event = dict[str, Any]
Emit = Callable[[Event], None]

#: How often each agent looks at its registry for status changes (seconds).
WATCH_INTERVAL: Final = 0.05
TOPIC: Final = "tasks in trio-mcp"
LEGACY_ERA: Final = "2025-11-25"
MODERN_ERA: Final = MODERN_PROTOCOL_VERSION
#: The eras the demo runs in, with the line that names each in the view.
ERAS: Final = {
    LEGACY_ERA: "MCP 2025-11-25 (tasks both ways)",
    MODERN_ERA: "MCP 2026-07-28 (tasks extension: questions travel as inputRequests "
                "and tasks/update)",
}
#: How each of B's tasks ends, per era. ``check_links`` fails on purpose with
#: an ``isError`` result: a ``failed`` task in 2025-11-25, a ``completed`` one
#: (its result has ``isError``) in the 2026-07-28 tasks extension.
EXPECTED: Final = {
    LEGACY_ERA: {
        "write_report": TaskStatus.COMPLETED,
        "check_links": TaskStatus.FAILED,
        "crunch_numbers": TaskStatus.CANCELLED,
    },
    MODERN_ERA: {
        "write_report": TaskStatus.COMPLETED,
        "check_links": TaskStatus.COMPLETED,
        "crunch_numbers": TaskStatus.CANCELLED,
    },
}
#: The tools whose result is an error (``isError``) in every era.
ERROR_RESULTS: Final = frozenset({"check_links"})
PUBLISH_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "publish": {"type": "boolean", "description": "publish it now"},
        "note": {"type": "string", "description": "a note for the changelog"},
    },
    "required": ["publish"],
}


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
        self._modern: set[str] = set()  # the tasks created by a 2026-07-28 request
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
        if ctx.era == MODERN_ERA:
            self._modern.add(ctx.task_id)
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
        status = record.status
        if (task_id in self._modern and status is TaskStatus.FAILED
                and isinstance(record.outcome, dict)):
            status = TaskStatus.COMPLETED  # the extension's view of an isError result
        key = (status.value, record.status_message)
        if self._seen.get(task_id) == key:
            return
        self._seen[task_id] = key
        duration = (
            _seconds_between(record.created_at, record.last_updated_at)
            if status.is_terminal else None
        )
        self.emit({"op": "task", "host": self.name, "id": task_id,
                   "label": self._labels[task_id], "status": status.value,
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
        modern = ctx.era == MODERN_ERA
        host.say("asks A's model for a draft (sampling: a question of its task, in tasks/get's "
                 "inputRequests)" if modern else
                 "asks A's model for a draft (sampling, as a task hosted by A)")
        draft = await ctx.sample(f"Draft two sentences about {topic}.", max_tokens=120,
                                 as_task=True)
        await host.progress(ctx, 3, 5, "draft received")
        host.say("asks A whether to publish (elicitation): its task is input_required"
                 + (" until A answers with tasks/update" if modern else ""))
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
        modern = ctx.era == MODERN_ERA
        if modern:  # a question of B's task, pulled with tasks/get: no task of A's
            host.say("drafts an answer to B's sampling question (A hosts no task)")
        else:
            host.hosted(ctx, "sampling: a draft for B")
        for step, what in enumerate(("reading the prompt", "thinking", "writing", "polishing"),
                                    start=1):
            await host.pause(0.75)
            await host.progress(ctx, step, 4, what)
        if modern:
            host.say("answers B's sampling question with the draft (tasks/update)")
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
        via = " (tasks/update)" if ctx.era == MODERN_ERA else ""
        host.say(f"answers B: {answer.action} {json.dumps(answer.content or {})}{via}")
        return answer

    return app


async def run_scenario(peer: Peer, host: Host) -> list[str]:
    """Agent A's side of the story, over a connected client ``peer`` (of either era).

    Returns:
        What did not go as expected (empty when all went well).
    """
    era = MODERN_ERA if peer.protocol_version == MODERN_ERA else LEGACY_ERA
    tools = await peer.list_all_tools()
    name = peer.remote_info.name if peer.remote_info else "B"
    host.say(f"connected to {name}; its tools: {', '.join(t.name for t in tools)}")
    handles: dict[str, TaskHandle[CallToolResult]] = {}
    errors: set[str] = set()

    async def start(tool: str, arguments: dict[str, Any]) -> None:
        handle = await peer.call_tool_task(tool, arguments)
        handles[tool] = handle
        host.say(f"calls B's {tool} as a task: {handle.task_id[:8]}")

    async def follow(tool: str) -> None:
        handle = handles[tool]
        # Polls tasks/get; B's questions are answered through tasks/result
        # (2025-11-25) or tasks/update (2026-07-28).
        await handle.wait()
        try:
            result = await handle.result()
        except RemoteError as exc:
            host.say(f"{tool} ended {handle.task.status.value}: {exc.message}")
            return
        if result.is_error:
            errors.add(tool)
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

    if era == MODERN_ERA:  # no tasks/list in the tasks extension: tasks/get of each
        seen = {handle.task_id: task for handle in handles.values()
                if (task := await _get_task(peer, handle.task_id)) is not None}
        method = "tasks/get"
    else:
        seen = {task.task_id: task async for task in peer.iter_tasks()}
        method = "tasks/list"
    host.say(f"{method} on B: " + ", ".join(
        f"{task_id[:8]} {task.status.value}" for task_id, task in seen.items()))
    problems = []
    for tool, expected in EXPECTED[era].items():
        task = seen.get(handles[tool].task_id)
        if task is None or task.status is not expected:
            got = "missing" if task is None else task.status.value
            problems.append(f"{tool}: expected {expected.value}, got {got}")
        elif tool in ERROR_RESULTS and tool not in errors:
            problems.append(f"{tool}: expected an error result")
    return problems


async def _get_task(peer: Peer, task_id: str) -> Task | None:
    """``tasks/get``; ``None`` when there is no such task (or the server made none)."""
    if not task_id:
        return None
    try:
        return await peer.get_task(task_id)
    except RemoteError:
        return None
