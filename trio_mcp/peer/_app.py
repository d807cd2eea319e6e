"""The application: what one side hosts, shared by all its connections.

An :class:`App` holds the tools, the sampling and elicitation handlers and the
task registry. It is role-free: the same App can serve (as an MCP server) and
connect (as an MCP client); the role of each connection only decides who sends
``initialize`` and which half of the capabilities is declared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, final

import attrs

from ._registry import TaskLimits, TaskRegistry, TaskStore
from ._tools import ToolFunction, ToolSpec, make_tool_spec
from ._types import (
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Implementation,
    ServerCapabilities,
)

if TYPE_CHECKING:
    from ._context import RequestContext

F = TypeVar("F", bound=ToolFunction)
SamplingHandler = Callable[["RequestContext", CreateMessageParams], Awaitable[CreateMessageResult]]
ElicitationHandler = Callable[["RequestContext", ElicitParams], Awaitable[ElicitResult]]


@final
@attrs.define(eq=False)
class App:
    """What this side of MCP offers: tools, client-side handlers, and tasks.

    Args:
        name: Implementation name sent as ``serverInfo``/``clientInfo``.
        version: Implementation version.
        instructions: Optional server instructions sent in ``initialize``.
        limits: Task limits (TTL bounds, caps, page size, poll interval).
        host_tasks: Declare and accept task-augmented requests for the
            request types this App can answer (default True).
        store: Where task records live; in memory by default.

    Example::

        app = trio_mcp.App("weather", "1.0")

        @app.tool(task_support="optional")
        async def forecast(ctx: trio_mcp.RequestContext, city: str) -> str:
            await ctx.report_progress(1, 2)
            return f"sunny in {city}"
    """

    name: str
    version: str = "0.0.0"
    instructions: str | None = None
    limits: TaskLimits = attrs.field(factory=TaskLimits)
    host_tasks: bool = True
    store: TaskStore | None = None
    tools: dict[str, ToolSpec] = attrs.field(factory=dict, init=False)
    sampling_handler: SamplingHandler | None = attrs.field(default=None, init=False)
    elicitation_handler: ElicitationHandler | None = attrs.field(default=None, init=False)
    registry: TaskRegistry = attrs.field(init=False)
    _immediate: dict[str, str | None] = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.registry = TaskRegistry(self.limits, store=self.store)

    @property
    def info(self) -> Implementation:
        """This side's ``Implementation`` object."""
        return Implementation(self.name, self.version)

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        task_support: str = "forbidden",
        immediate_response: str | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool: ``async def``, or plain ``def`` (run in a thread).

        Parameters are described by JSON Schemas derived from their type
        hints and from the docstring's ``Args:`` section, and arguments
        arrive structured into those types (see :mod:`trio_mcp.peer._tools`
        for what a sync tool does when cancelled).

        Args:
            name: Tool name; the function's name by default.
            title: Display title.
            description: Description; the function's docstring by default.
            input_schema: JSON Schema of the arguments; derived from the
                signature when omitted.
            output_schema: JSON Schema of ``structuredContent``; derived from
                a structured return annotation when omitted.
            annotations: Tool annotations (hints) as a JSON object.
            task_support: ``"forbidden"`` (default), ``"optional"`` or
                ``"required"``: listed as ``execution.taskSupport``.
            immediate_response: Text put in the ``CreateTaskResult``'s
                ``_meta["io.modelcontextprotocol/model-immediate-response"]``
                when the tool is called as a task.

        Returns:
            A decorator that registers the function and returns it unchanged.

        Raises:
            TypeError: Not a function, or an async generator function.
            ValueError: Bad ``task_support``, or the name is taken.
        """
        from ._context import RequestContext

        def register(fn: F) -> F:
            spec = make_tool_spec(
                fn,
                context_type=RequestContext,
                name=name,
                title=title,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=annotations,
                task_support=task_support,
            )
            if spec.tool.name in self.tools:
                raise ValueError(f"a tool named {spec.tool.name!r} is already registered")
            self.tools[spec.tool.name] = spec
            self._immediate[spec.tool.name] = immediate_response
            return fn

        return register

    def immediate_response(self, tool_name: str) -> str | None:
        """The model-immediate-response text registered for ``tool_name``."""
        return self._immediate.get(tool_name)

    def on_sampling(self, handler: SamplingHandler) -> SamplingHandler:
        """Register the handler that answers ``sampling/createMessage``.

        The client then declares the ``sampling`` capability (and, with
        ``host_tasks``, ``tasks.requests.sampling.createMessage``).
        """
        self.sampling_handler = handler
        return handler

    def on_elicitation(self, handler: ElicitationHandler) -> ElicitationHandler:
        """Register the handler that answers ``elicitation/create`` (form mode).

        The client then declares ``elicitation: {form: {}}`` (and, with
        ``host_tasks``, ``tasks.requests.elicitation.create``).
        """
        self.elicitation_handler = handler
        return handler

    def task_tools(self) -> bool:
        """True when some tool accepts task augmentation."""
        return any(s.tool.task_support != "forbidden" for s in self.tools.values())

    def server_capabilities(self) -> ServerCapabilities:
        """The capabilities this App declares when it is the server."""
        tasks: dict[str, Any] | None = None
        if self.host_tasks and self.task_tools():
            tasks = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        return ServerCapabilities(tools={"listChanged": False} if self.tools else None, tasks=tasks)

    def client_capabilities(self) -> ClientCapabilities:
        """The capabilities this App declares when it is the client."""
        requests: dict[str, Any] = {}
        if self.sampling_handler is not None:
            requests["sampling"] = {"createMessage": {}}
        if self.elicitation_handler is not None:
            requests["elicitation"] = {"create": {}}
        tasks = None
        if self.host_tasks and requests:
            tasks = {"list": {}, "cancel": {}, "requests": requests}
        return ClientCapabilities(
            sampling={} if self.sampling_handler is not None else None,
            elicitation={"form": {}} if self.elicitation_handler is not None else None,
            tasks=tasks,
        )
