"""The application: what one side hosts, shared by all its connections.

An :class:`App` holds the tools, the sampling and elicitation handlers and the
task registry. It is role-free: the same App can serve (as an MCP server) and
connect (as an MCP client); the role of each connection only decides who sends
``initialize`` and which half of the capabilities is declared.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar, overload

import attrs

from ._dialects._modern import CacheHint
from ._dialects._mrtr import StateCodec, default_secret
from ._features._app_client import ClientHandlers, RootsHandler
from ._features._app_server import Completer, ServerOffers
from ._features._base import ChangeListener, PeerCore
from ._features._callbacks import Callbacks
from ._features._catalog import declared_client_capabilities, declared_server_capabilities
from ._features._context import RequestContext
from ._features._promptspec import PromptSpec
from ._features._resourcespec import ResourceSpec, TemplateSpec
from ._features._scopes import scope_set
from ._messages import (
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    Icon,
    Implementation,
    ServerCapabilities,
    ToolAnnotations,
    converter,
    to_wire,
)
from ._signatures._toolspec import ToolFunction, ToolSpec, make_tool_spec
from ._tasks import TaskLimits, TaskRegistry, TaskStore
from ._tasks._rerun import Rerun

F = TypeVar("F", bound=ToolFunction)
SamplingHandler = Callable[[RequestContext, CreateMessageParams], Awaitable[CreateMessageResult]]
ElicitationHandler = Callable[[RequestContext, ElicitParams], Awaitable[ElicitResult]]


#: What :meth:`App.require_scopes` sets rules for (its ``kind``).
SCOPE_KINDS: Final = ("tool", "resource", "template", "prompt")


@attrs.define(eq=False)
class App(ServerOffers, ClientHandlers):
    """What this side of MCP offers: tools, resources, prompts, client-side handlers, tasks.

    Tools, resources, prompts and completions are registered with its
    decorators (``tool``, ``resource``, ``prompt``, ``completion``...); a
    client's handlers and notification callbacks with ``on_*``.

    Args:
        name: Implementation name sent as ``serverInfo``/``clientInfo``.
        version: Implementation version.
        instructions: Optional server instructions sent in ``initialize``.
        limits: Task limits (TTL bounds, caps, page size, poll interval).
        host_tasks: Declare and accept task-augmented requests for the
            request types this App can answer (default True).
        store: Where task records live: a :class:`TaskStore` or a URL
            (``"sqlite:///tasks.db"``: durable across restarts); in memory
            by default.
        elicitation_modes: The elicitation modes the client declares and its
            elicitation handler takes: ``("form",)`` by default; add ``"url"``
            for URL mode.
        request_state_secret: The key that signs MCP 2026-07-28
            ``requestState`` (multi round-trip requests). Give every process
            of a deployment the same one (or set ``TRIO_MCP_REQUEST_STATE_SECRET``)
            so a retry may reach any of them; by default a random key of
            this process.
        modern_task_policy: Whether a 2026-07-28 call of an ``optional`` task
            tool runs as a task (the tasks extension: the server decides),
            when the request declared the extension: ``True`` (default),
            ``False``, or a function of the tool's name. ``required`` tools
            always do, ``forbidden`` ones never.
        cache_hints: Method -> :class:`CacheHint` (``ttlMs`` and
            ``cacheScope`` of 2026-07-28 cacheable results); by default 0 ms,
            ``public`` for lists and ``private`` for ``resources/read``
            (lists are ``private`` too once anything has ``scopes``: they
            then differ by caller).
        task_scopes: Scopes every ``tasks/*`` request needs (both eras);
            see :mod:`~._scopes` for how scopes are checked.

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
    store: TaskStore | str | None = None
    elicitation_modes: tuple[str, ...] = attrs.field(default=("form",), converter=tuple)
    request_state_secret: bytes | str | None = attrs.field(default=None, repr=False)
    cache_hints: dict[str, CacheHint] = attrs.field(factory=dict)
    modern_task_policy: bool | Callable[[str], bool] = True
    task_scopes: frozenset[str] = attrs.field(default=frozenset(), converter=scope_set)
    #: (``tool``/``resource``/``template``/``prompt``, name) -> the scopes it needs.
    scope_rules: dict[tuple[str, str], frozenset[str]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    #: The tools registered with ``task_prelude=True``.
    task_preludes: set[str] = attrs.field(factory=set, init=False, repr=False)
    tools: dict[str, ToolSpec] = attrs.field(factory=dict, init=False)
    sampling_handler: SamplingHandler | None = attrs.field(default=None, init=False)
    elicitation_handler: ElicitationHandler | None = attrs.field(default=None, init=False)
    resources: dict[str, ResourceSpec] = attrs.field(factory=dict, init=False)
    resource_templates: dict[str, TemplateSpec] = attrs.field(factory=dict, init=False)
    prompts: dict[str, PromptSpec] = attrs.field(factory=dict, init=False)
    completers: dict[tuple[str, str, str], Completer] = attrs.field(factory=dict, init=False)
    roots_handler: RootsHandler | None = attrs.field(default=None, init=False)
    callbacks: Callbacks = attrs.field(factory=Callbacks, init=False)
    connections: set[PeerCore] = attrs.field(factory=set, init=False, repr=False)
    registry: TaskRegistry = attrs.field(init=False)
    #: The open ``subscriptions/listen`` requests (2026-07-28) of every connection.
    listeners: set[ChangeListener] = attrs.field(factory=set, init=False, repr=False)
    #: Signs and checks ``requestState`` (from :attr:`request_state_secret`).
    state_codec: StateCodec = attrs.field(init=False, repr=False)
    _immediate: dict[str, str | None] = attrs.field(factory=dict, init=False, repr=False)
    _reruns: dict[str, Rerun | None] = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.elicitation_modes or not set(self.elicitation_modes) <= {"form", "url"}:
            raise ValueError(f"elicitation modes are form and/or url, not {self.elicitation_modes}")
        self.registry = TaskRegistry(self.limits, store=self.store)
        secret = self.request_state_secret
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        self.state_codec = StateCodec(secret or default_secret())

    @property
    def info(self) -> Implementation:
        """This side's ``Implementation`` object."""
        return Implementation(self.name, self.version)

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: ToolAnnotations | Mapping[str, Any] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        task_support: str = "forbidden",
        immediate_response: str | None = None,
        inline: bool = False,
        task_prelude: bool = False,
        scopes: Sequence[str] | None = None,
        rerun: Rerun | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | F | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: ToolAnnotations | Mapping[str, Any] | None = None,
        icons: Sequence[Icon | Mapping[str, Any]] | None = None,
        task_support: str = "forbidden",
        immediate_response: str | None = None,
        inline: bool = False,
        task_prelude: bool = False,
        scopes: Sequence[str] | None = None,
        rerun: Rerun | None = None,
    ) -> Callable[[F], F] | F:
        """Register a function as a tool: ``@app.tool`` or ``@app.tool(...)``.

        The function may be ``async def``, or plain ``def`` (run in a worker
        thread). Parameters are described by JSON Schemas derived from their
        type hints and from the docstring's ``Args:`` section, and arguments
        arrive structured into those types (see :mod:`.._signatures._toolspec` for what a
        sync tool does when cancelled).

        Args:
            name: Tool name; the function's name by default. (Used bare,
                ``@app.tool`` receives the function here and registers it
                with the defaults.)
            title: Display title.
            description: Description; the function's docstring by default.
            input_schema: JSON Schema of the arguments; derived from the
                signature when omitted.
            output_schema: JSON Schema of ``structuredContent``; derived from
                a structured return annotation when omitted.
            annotations: Tool annotations (``ToolAnnotations`` or a JSON
                object: readOnlyHint, destructiveHint...).
            icons: Icons (``Icon`` objects or JSON objects).
            task_support: ``"forbidden"`` (default), ``"optional"`` or
                ``"required"``: listed as ``execution.taskSupport``.
            immediate_response: Text put in the ``CreateTaskResult``'s
                ``_meta["io.modelcontextprotocol/model-immediate-response"]``
                when the tool is called as a task.
            inline: Run a plain ``def`` tool on the event loop, in the task
                that read the request, instead of in a worker thread: the
                cheapest call (no thread, no Trio task). Only for quick
                functions that never block: nothing else runs meanwhile.
            task_prelude: (2026-07-28 tasks extension) Run the tool in the
                request until it calls ``ctx.start_task()``: its questions
                before that are multi round-trip questions of the request,
                and the ``CreateTaskResult`` is sent when it starts the task
                (or ends). Without it the task starts before the tool runs.
                Nothing changes in 2025-11-25 (``start_task`` does nothing).
            scopes: OAuth scopes a caller needs: without all of them the tool
                is left out of its ``tools/list`` and its calls are refused
                (HTTP 403 ``insufficient_scope``; elsewhere -32602).
            rerun: The tool's task may run again in another process (or after
                a restart) when the process running it stops: a
                :class:`~trio_mcp.Rerun` (attempts, backoff). Only for
                idempotent or resumable work: ``ctx.attempt`` says which run
                this is, the task id stays the same. Needs ``task_support``
                ``"optional"`` or ``"required"``, and a store that keeps the
                request (Redis, PostgreSQL, SQLite); see the how-to
                "Survive restarts and deploys". Default: off (the task fails
                when its process stops).

        Returns:
            A decorator that registers the function and returns it unchanged
            (or, used bare, the function itself, registered).

        Raises:
            TypeError: Not a function, or an async generator function.
            ValueError: Bad ``task_support``, the name is taken, a
                malformed scope, ``inline`` for an async function, or ``rerun``
                for a tool that forbids tasks or has a ``task_prelude``.
        """
        if callable(name):
            fn, name = name, None
            return self.tool()(fn)
        tool_name = name
        required = scope_set(scopes)
        if rerun is not None and (task_support == "forbidden" or task_prelude):
            raise ValueError(
                "rerun= needs task_support 'optional' or 'required' and no task_prelude"
            )

        def register(fn: F) -> F:
            spec = make_tool_spec(
                fn,
                context_type=RequestContext,
                name=tool_name,
                title=title,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=None if annotations is None else dict(to_wire(annotations)),
                task_support=task_support,
                inline=inline,
            )
            if icons is not None:
                tool = attrs.evolve(spec.tool, icons=[dict(to_wire(i)) for i in icons])
                spec = attrs.evolve(spec, tool=tool)
            if spec.tool.name in self.tools:
                raise ValueError(f"a tool named {spec.tool.name!r} is already registered")
            self.tools[spec.tool.name] = spec
            self.require_scopes("tool", spec.tool.name, required)
            self._immediate[spec.tool.name] = immediate_response
            self._reruns[spec.tool.name] = rerun
            if task_prelude:
                self.task_preludes.add(spec.tool.name)
            else:
                self.task_preludes.discard(spec.tool.name)
            self._list_changed("tools")
            return fn

        return register

    def require_scopes(self, kind: str, name: str, scopes: Iterable[str] | None) -> None:
        """Set the scopes (all of them needed) of a tool, resource, template or prompt.

        ``kind`` and ``name``: ``"tool"`` and its name, ``"resource"`` and its URI,
        ``"template"`` and its URI template (also for the URIs it matches), ``"prompt"``
        and its name. The decorators' ``scopes=`` call it; ``None`` or empty ``scopes``
        remove the rule. (``tasks/*`` have the App's ``task_scopes``.)

        Raises:
            ValueError: An unknown kind, or a malformed scope.
        """
        if kind not in SCOPE_KINDS:
            raise ValueError(f"unknown kind {kind!r}: one of {', '.join(map(repr, SCOPE_KINDS))}")
        required = scope_set(scopes)
        if required:
            self.scope_rules[(kind, name)] = required
        else:
            self.scope_rules.pop((kind, name), None)

    async def drain(self, grace: float = 30.0) -> None:
        """Stop taking task work in this process, ahead of stopping it (SIGTERM).

        The running tasks get ``grace`` seconds to finish; then, with a store
        shared by processes, the re-runnable ones still running are handed to
        the other processes at once (no lease wait: they run again there,
        ``ctx.attempt`` one up). Meanwhile no queued work is claimed here, and
        the tasks created here are queued for the others. What is left when
        the App stops fails, as before. The servers keep answering until the
        caller stops them (:func:`trio_mcp.until_drained` does both).
        """
        await self.registry.drain(grace)

    def rerun_policy(self, tool_name: str) -> Rerun | None:
        """The :class:`~trio_mcp.Rerun` registered for ``tool_name``, if any."""
        return self._reruns.get(tool_name)

    def immediate_response(self, tool_name: str) -> str | None:
        """The model-immediate-response text registered for ``tool_name``."""
        return self._immediate.get(tool_name)

    @overload
    def on_sampling(self, handler: SamplingHandler, /) -> SamplingHandler: ...

    @overload
    def on_sampling(self) -> Callable[[SamplingHandler], SamplingHandler]: ...

    def on_sampling(
        self, handler: SamplingHandler | None = None
    ) -> SamplingHandler | Callable[[SamplingHandler], SamplingHandler]:
        """Register the handler that answers ``sampling/createMessage``.

        Use it bare (``@app.on_sampling``) or called (``@app.on_sampling()``).

        The client then declares the ``sampling`` capability (and, with
        ``host_tasks``, ``tasks.requests.sampling.createMessage``).
        """
        if handler is None:
            return self.on_sampling
        self.sampling_handler = handler
        return handler

    @overload
    def on_elicitation(self, handler: ElicitationHandler, /) -> ElicitationHandler: ...

    @overload
    def on_elicitation(self) -> Callable[[ElicitationHandler], ElicitationHandler]: ...

    def on_elicitation(
        self, handler: ElicitationHandler | None = None
    ) -> ElicitationHandler | Callable[[ElicitationHandler], ElicitationHandler]:
        """Register the handler that answers ``elicitation/create``.

        Use it bare (``@app.on_elicitation``) or called (``@app.on_elicitation()``).

        The client then declares ``elicitation`` with the App's
        ``elicitation_modes`` (form only by default; with ``"url"`` the handler
        also gets URL-mode requests: show ``params.url``, ask the user's
        consent, answer ``accept`` without content) and, with ``host_tasks``,
        ``tasks.requests.elicitation.create``. A request in a mode not
        declared is answered -32602.
        """
        if handler is None:
            return self.on_elicitation
        self.elicitation_handler = handler
        return handler

    def task_tools(self) -> bool:
        """True when some tool accepts task augmentation."""
        return any(s.tool.task_support != "forbidden" for s in self.tools.values())

    def server_capabilities(self) -> ServerCapabilities:
        """The capabilities this App declares when it is the server (from its features)."""
        return converter.structure(declared_server_capabilities(self), ServerCapabilities)

    def client_capabilities(self) -> ClientCapabilities:
        """The capabilities this App declares when it is the client (from its features)."""
        return converter.structure(declared_client_capabilities(self), ClientCapabilities)
