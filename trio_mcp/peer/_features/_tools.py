"""The tools feature: ``tools/list`` and ``tools/call`` (plain or as a task).

As a server it lists and runs the App's tools; as a client it lists and calls
the server's, remembering each listed tool's ``execution.taskSupport`` so a
call that the protocol forbids fails locally before anything is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any, Final, final

from ..._errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    McpError,
)
from ..._inline import leave_reader
from .._messages import (
    MODEL_IMMEDIATE_RESPONSE_META,
    CallToolResult,
    ListToolsResult,
    PaginatedParams,
    Request,
    RequestId,
    TextContent,
    Tool,
    call_params_fields,
    from_wire,
    wire_object,
)
from .._session import ProgressCallback
from .._signatures._toolspec import ArgumentError, ToolSpec
from .._tasks import TaskActor, TaskHandle
from .._tasks._rerun import Rerun, RerunTicket, encode_request
from ._base import AppView, Caller, Dialect, PeerCore, Role
from ._context import RequestContext
from ._scopes import check_scopes, identity_of, rule, visible
from ._task_receiver import create_task, hosts

log = logging.getLogger("trio_mcp.peer")

#: Tools per ``tools/list`` page.
TOOLS_PAGE_SIZE: Final = 100


class Tools(PeerCore):
    """Serve the App's tools and call the other side's."""

    _tool_cache: dict[str, Tool]

    def install(self) -> None:
        self._tool_cache = {}
        self.session.request_handlers["tools/list"] = self._on_tools_list
        self.session.request_handlers["tools/call"] = self._on_tools_call
        self.session.inline.add("tools/call")  # answered in the reader unless it waits

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        if not app.tools:
            return {}
        caps: dict[str, Any] = {"tools": {"listChanged": True}}
        if app.host_tasks and any(
            s.tool.task_support != "forbidden" for s in app.tools.values()
        ):
            caps["tasks"] = {"requests": {"tools": {"call": {}}}}
        return caps

    # --- server side -------------------------------------------------------------------

    async def _on_tools_list(self, req: Request) -> ListToolsResult:
        if self.role is not Role.SERVER or not self.app.tools:
            raise McpError(METHOD_NOT_FOUND, "Method not found: tools/list")
        params = PaginatedParams() if not req.params else from_wire(req.params, PaginatedParams)
        tools = visible(self, req, "tool", self.app.tools.values(), _tool_name)
        start = 0
        if params.cursor is not None:
            if not params.cursor.isdigit() or int(params.cursor) > len(tools):
                raise McpError(INVALID_PARAMS, "Invalid cursor")
            start = int(params.cursor)
        end = start + TOOLS_PAGE_SIZE
        return ListToolsResult(
            tools=[s.tool for s in tools[start:end]],
            next_cursor=str(end) if end < len(tools) else None,
        )

    async def _on_tools_call(self, req: Request) -> Any:
        """``tools/call``: started in the reader's task; nothing waits for an inline tool,
        nor for a task created in memory, so those are answered there.
        """
        tools = self.app.tools
        if self.role is not Role.SERVER or not tools:
            raise McpError(METHOD_NOT_FOUND, "Method not found: tools/call")
        name, arguments, task, meta = call_params_fields(req.params)
        dialect = self.dialect_of(req)
        task = dialect.call_task(task)  # (2026-07-28: the server decides, not the params)
        spec: ToolSpec | None = tools.get(name)
        if spec is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name[:100]}")
        if self.app.scope_rules:
            check_scopes(self, req, rule(self.app, "tool", name), f"tool {name!r}")
        support = spec.tool.task_support
        if (task is not None or support == "required") and hosts(self, "tools/call"):
            if task is not None and support == "forbidden":
                raise McpError(
                    METHOD_NOT_FOUND,
                    f"Tool {spec.tool.name!r} does not support task-augmented calls",
                )
            if task is None:
                raise McpError(
                    METHOD_NOT_FOUND, f"Tool {spec.tool.name!r} requires task-augmented execution"
                )

            ticket = self._rerun_ticket(req, dialect, spec.tool.name)  # a re-runnable task's
            work = _ToolWork(self, spec, req.id, meta, arguments, dialect, req.caller)
            immediate = self.app.immediate_response(spec.tool.name)
            response_meta = {MODEL_IMMEDIATE_RESPONSE_META: immediate} if immediate else None
            return await create_task(self, req, task, meta, work, response_meta, rerun=ticket)
        ctx = None
        if spec.context_param:
            ctx = RequestContext(self, req.id, meta, dialect=dialect, caller=req.caller)
        if spec.inline:
            return self._run_tool_now(spec, arguments, ctx)
        return await self._run_tool(spec, arguments, ctx)

    def _rerun_ticket(self, req: Request, dialect: Dialect, name: str) -> RerunTicket | None:
        """What the store keeps to run this tool task again in any process: for a tool
        with ``rerun=``, and for every task of a front process (run by a worker, once).

        Raises:
            McpError: -32602 when the request is bigger than the bound.
        """
        policy = self.app.rerun_policy(name)
        if policy is None:
            if self.app.registry.run_tasks:
                return None
            policy = Rerun(attempts=1)  # a front's task: a worker runs it
        identity = identity_of(self, req)
        who = None
        if identity is not None:
            who = {"subject": identity.subject, "clientId": identity.client_id,
                   "scopes": sorted(identity.scopes)}  # fmt: skip
        request = encode_request(
            era=dialect.protocol_version,
            method=req.method,
            params=req.params,
            context=self.context_of(req),
            principal=self.principal_of(req),
            identity=who,
            transport=self.info_of(req).get("transport"),
            client_capabilities=dialect.stored_capabilities(),
            limit=policy.max_request_bytes,
        )
        return RerunTicket(name, policy.attempts, policy.backoff, request)

    def _bind(
        self, spec: ToolSpec, arguments: dict[str, Any] | None, ctx: RequestContext | None
    ) -> dict[str, Any] | CallToolResult:
        """The function's keyword arguments, or the tool error for arguments that do not fit."""
        try:
            kwargs = spec.bind(arguments or {})
        except ArgumentError as problem:
            # 2025-11-25: input validation errors are tool execution errors.
            return CallToolResult(
                content=[TextContent(f"Invalid arguments for tool {spec.tool.name}: {problem}")],
                is_error=True,
            )
        if spec.context_param is not None:
            kwargs[spec.context_param] = ctx
        return kwargs

    def _run_tool_now(
        self, spec: ToolSpec, arguments: dict[str, Any] | None, ctx: RequestContext | None
    ) -> dict[str, Any]:
        """Run an inline tool here and now (see ``App.tool(inline=True)``): its wire JSON."""
        kwargs = self._bind(spec, arguments, ctx)
        if isinstance(kwargs, CallToolResult):
            return wire_object(kwargs)
        try:
            return spec.to_wire(spec.fn(**kwargs))
        except McpError:
            raise
        except Exception as exc:
            return _tool_failed(spec, exc)

    async def _run_tool(
        self, spec: ToolSpec, arguments: dict[str, Any] | None, ctx: RequestContext | None
    ) -> dict[str, Any]:
        """Run a tool (a plain call's, or a task's work): the result as wire JSON.

        A running task's coroutine chain is actor -> this -> the tool function.
        """
        await leave_reader()  # started inline by the session: the tool may wait
        kwargs = self._bind(spec, arguments, ctx)
        # A running task keeps neither the raw arguments nor the bound
        # keyword arguments (the function's frame has what it needs).
        del arguments, ctx
        if isinstance(kwargs, CallToolResult):
            return wire_object(kwargs)
        try:
            # An async tool is awaited right here (not through spec.call):
            # one coroutine less per call, and per running task.
            call = spec.fn(**kwargs) if spec.is_async else spec.call(kwargs)
            del kwargs
            return spec.to_wire(await call)
        except McpError:
            raise
        except Exception as exc:
            return _tool_failed(spec, exc)

    # --- client side -------------------------------------------------------------------

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        """One page of the server's tools (``tools/list``).

        Raises:
            RemoteError: The server refused (e.g. -32602 for a bad cursor).
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``; nothing else changes.
        """
        result = await self.request(
            "tools/list", PaginatedParams(cursor) if cursor else None, ListToolsResult
        )
        for tool in result.tools:
            self._tool_cache[tool.name] = tool
        return result

    async def list_all_tools(self) -> list[Tool]:
        """Every tool of the server, following ``nextCursor`` to the end.

        Cancellation: as for :meth:`list_tools`.
        """
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            page = await self.list_tools(cursor)
            tools.extend(page.tools)
            if not page.next_cursor:
                return tools
            cursor = page.next_cursor

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> CallToolResult:
        """Call a tool and wait for its result (``tools/call``).

        A tool error comes back as a result with ``is_error`` set, not as an
        exception.

        In 2026-07-28 the server may answer with a task instead (the tasks
        extension, which this client declares): the call then follows it --
        polling ``tasks/get`` at its ``pollIntervalMs``, answering its
        questions with the App's handlers through ``tasks/update`` -- and
        returns its result all the same.

        Args:
            name: The tool.
            arguments: Its arguments.
            progress: Called (sync or ``async``) with each progress update.

        Raises:
            LocalUsageError: The tool (as last listed) requires a task
                (2025-11-25; in 2026-07-28 the server makes that task).
            RemoteError: A protocol error (unknown tool, bad params...); a
                tool that requires a task but was not listed yet (no local
                check) is the server's -32601 with the same hint
                ("use call_tool_task()");
                2026-07-28: :class:`~trio_mcp.TaskFailed` when the task the
                server made failed with a JSON-RPC error.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled``, which stops the
            tool on the server; its result, if any, is dropped. (2026-07-28,
            once the server made a task: sends ``tasks/cancel``, shielded
            and bounded.)
        """
        return await self.client_era.call_tool(
            name, arguments, progress, self._tool_cache.get(name)
        )

    async def call_tool_task(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress: ProgressCallback | None = None,
        meta: dict[str, Any] | None = None,
    ) -> TaskHandle[CallToolResult]:
        """Call a tool as a task; return at once with a handle to follow it.

        In 2026-07-28 the server decides whether the call becomes a task:
        when it answers with the result instead, the handle is already
        ``completed`` (its ``task_id`` is empty) and :meth:`TaskHandle.result`
        returns that result.

        Args:
            name: The tool.
            arguments: Its arguments.
            ttl: Requested retention in ms (the server may lower it). Not
                sent in 2026-07-28, where the server alone chooses it (the
                task's ``ttl``).
            progress: Called (sync or ``async``) with progress for the whole
                life of the task. **2026-07-28**: the tasks extension has no
                progress notifications; while the handle follows the task
                (iterating it, :meth:`TaskHandle.wait`, :meth:`TaskHandle.result`)
                each new ``statusMessage`` of ``tasks/get`` is passed on as
                ``ProgressParams(task_id, n, None, status_message)``: ``n``
                counts the messages, the numbers of ``ctx.report_progress``
                do not travel (a trio-mcp server shows its ``message``, else
                ``"progress/total"``), and updates between two polls are
                missed (at most one per ``pollInterval``).
            meta: More ``_meta`` for the request (e.g. the parent task a
                ``ctx.children()`` scope names).

        Raises:
            LocalUsageError: The server did not declare task support for
                ``tools/call``, or the tool (as last listed) forbids tasks
                (2025-11-25 only).
            RemoteError: The server refused the call.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` for the call; if the
            server had already created the task, it keeps running (list it
            with :meth:`list_tasks` and cancel it with :meth:`cancel_task`).
        """
        return await self.client_era.call_tool_task(
            name, arguments, ttl=ttl, meta=meta, progress=progress,
            known=self._tool_cache.get(name),
        )



def _tool_name(spec: ToolSpec) -> str:
    return spec.tool.name


def _tool_failed(spec: ToolSpec, exc: Exception) -> dict[str, Any]:
    """The tool error result (wire JSON) of a tool function that raised ``exc``."""
    log.exception("tool %s raised", spec.tool.name, exc_info=exc)
    # An OSError's text names its files: internal paths the peer must
    # not learn (the log above has them). Keep only the reason.
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    text = f"Tool {spec.tool.name} failed: {type(exc).__name__}: {detail}"[:1000]
    return wire_object(CallToolResult(content=[TextContent(text)], is_error=True))


@final
class _ToolWork:
    """A tool task's work: what it needs of the request, and no more.

    A slotted object rather than a closure (one object instead of a function
    and its cells), kept while the task runs; not the request and its raw
    JSON. Calling it returns the coroutine of :meth:`Tools._run_tool`
    directly, so it adds no coroutine of its own to a running task.
    """

    __slots__ = ("_arguments", "_caller", "_dialect", "_meta", "_request_id", "_spec", "_tools")

    def __init__(
        self,
        tools: Tools,
        spec: ToolSpec,
        request_id: RequestId,
        meta: dict[str, Any] | None,
        arguments: dict[str, Any] | None,
        dialect: Dialect,
        caller: Caller | None,
    ) -> None:
        self._tools = tools
        self._dialect = dialect
        self._caller = caller
        self._spec = spec
        self._request_id = request_id
        self._meta = meta
        self._arguments = arguments

    def __call__(self, actor: TaskActor) -> Awaitable[dict[str, Any]]:
        ctx = None
        if self._spec.context_param is not None:
            ctx = RequestContext(
                self._tools, self._request_id, self._meta, actor, dialect=self._dialect,
                caller=self._caller,
            )
        arguments, self._arguments = self._arguments, None  # called once per task
        return self._tools._run_tool(self._spec, arguments, ctx)
