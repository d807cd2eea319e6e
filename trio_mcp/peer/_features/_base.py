"""What every MCP feature builds on: :class:`PeerCore` and the :class:`AppView` it serves.

A feature is a mixin class deriving from :class:`PeerCore`: its
``_install_*`` method (called once per connection) puts its request and
notification handlers into the JSON-RPC session's tables, its
``server_capabilities`` / ``client_capabilities`` class methods add what it
declares, and its public methods are the requestor API (``call_tool``...).
:class:`trio_mcp.Peer` is the sum of the features (``_peer.py``).

Features never import the :class:`~trio_mcp.App` class or the ``Peer``
class (that would be an import cycle): they see the app through
:class:`AppView`, the part of an App that features read.

Where the eras differ, the features ask Protocols declared here, which the
dialects (``trio_mcp.peer._dialects``, wired in by ``Peer``) implement: the
:class:`Dialect` of a request (every request has one: its own when it carries
its era, a 2026-07-28 request's ``Request.dialect``, else its connection's
:attr:`PeerCore.dialect`, 2025-11-25's handshake), :class:`ClientEra` for
a client's requests, :class:`ChangeListener` for ``subscriptions/listen``.
:data:`current_dialect` is only for what has no request in hand: a log
message sent through Python ``logging`` or ``Peer.send_log_message`` while a
2026-07-28 request's handler runs is weighed against that request's level.
"""

from __future__ import annotations

import contextvars
import enum
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeAlias, TypeVar, final

import attrs
import trio

from .._messages import (
    CallToolResult,
    ClientCapabilities,
    CreateMessageParams,
    ElicitParams,
    Implementation,
    ListTasksResult,
    Request,
    ServerCapabilities,
    Task,
    TaskMetadata,
    Tool,
    from_answer,
    to_wire,
)
from .._session import MessageBus, ProgressCallback, Session
from .._tasks import (
    StatusWaiters,
    TaskActor,
    TaskConnection,
    TaskHandle,
    TaskQuestions,
    TaskRecord,
    TaskRegistry,
)
from .._tasks._rerun import Rerun

T = TypeVar("T")
R = TypeVar("R")

#: Asks a child task's question (its method, params and, 2026-07-28, its key) of someone
#: else and returns the raw answer: how a children scope carries its children's questions up.
QuestionForwarder = Callable[[str, dict[str, Any], str | None], Awaitable[dict[str, Any]]]

#: Distinguishes this process's connections from an earlier one's: a task of
#: an anonymous connection, kept by a durable store, can never be reached by a
#: new connection that happens to get the same number after a restart.
_INSTANCE: Final = secrets.token_hex(4)
#: The requestor context of an unauthenticated stateless (2026-07-28 HTTP) request.
ANONYMOUS_CONTEXT: Final = "anonymous"


class Role(enum.Enum):
    """Which side of the MCP lifecycle a connection plays."""

    CLIENT = "client"
    SERVER = "server"


@final
@attrs.frozen
class Caller:
    """Who sent a request that came without a connection of its own.

    A 2026-07-28 Streamable HTTP POST is one request and nothing else: the
    transport puts what it knows of the sender on the request
    (``Request.caller``), where a connection's requests take it from their
    connection (:attr:`PeerCore.context`, ``bus.context``, ``bus.info``).

    Attributes:
        context: The requestor context its tasks belong to (``identity:<owner>``,
            or :data:`ANONYMOUS_CONTEXT` without an authenticated identity).
        principal: The authenticated owner (``Identity.owner``), else ``None``.
        info: The transport's facts, as a connection's ``bus.info`` has them
            (``transport``, ``path``, ``remote``, the verified ``identity``).
    """

    context: str
    principal: str | None
    info: Mapping[str, Any]

    @classmethod
    def of(cls, principal: str | None, info: Mapping[str, Any]) -> Caller:
        """The caller authenticated as ``principal`` (``None``: anonymous)."""
        context = ANONYMOUS_CONTEXT if principal is None else f"identity:{principal}"
        return cls(context, principal, info)


class AppView(Protocol):
    """What the features read from an application (:class:`trio_mcp.App` is one)."""

    @property
    def info(self) -> Implementation:
        """This side's ``Implementation``."""
        ...

    @property
    def instructions(self) -> str | None:
        """Server instructions for ``initialize``."""
        ...

    @property
    def registry(self) -> TaskRegistry:
        """The tasks this side hosts."""
        ...

    @property
    def host_tasks(self) -> bool:
        """Whether task-augmented requests are declared and accepted."""
        ...

    @property
    def tools(self) -> Mapping[str, Any]:
        """Registered tools by name (:class:`~.._signatures._toolspec.ToolSpec` values)."""
        ...

    @property
    def sampling_handler(self) -> Callable[..., Awaitable[Any]] | None:
        """The ``sampling/createMessage`` handler, if any."""
        ...

    @property
    def elicitation_handler(self) -> Callable[..., Awaitable[Any]] | None:
        """The ``elicitation/create`` handler, if any."""
        ...

    @property
    def resources(self) -> Mapping[str, Any]:
        """Fixed resources by URI (:class:`~._resourcespec.ResourceSpec` values)."""
        ...

    @property
    def resource_templates(self) -> Mapping[str, Any]:
        """Resource templates by URI template (:class:`~._resourcespec.TemplateSpec` values)."""
        ...

    @property
    def prompts(self) -> Mapping[str, Any]:
        """Prompts by name (:class:`~._promptspec.PromptSpec` values)."""
        ...

    @property
    def completers(self) -> Mapping[tuple[str, str, str], Callable[..., Awaitable[Any]]]:
        """Completion functions by (``ref/prompt`` or ``ref/resource``, name or URI template,
        argument)."""
        ...

    @property
    def roots_handler(self) -> Callable[..., Awaitable[Any]] | None:
        """What answers ``roots/list`` as a client, if anything."""
        ...

    @property
    def elicitation_modes(self) -> tuple[str, ...]:
        """The elicitation modes the elicitation handler takes (``form``, ``url``)."""
        ...

    @property
    def callbacks(self) -> Any:
        """The notification callbacks (a :class:`~._callbacks.Callbacks`)."""
        ...

    @property
    def listeners(self) -> set[ChangeListener]:
        """The open ``subscriptions/listen`` requests (2026-07-28; see :class:`ChangeListener`)."""
        ...

    @property
    def state_codec(self) -> Any:
        """Signs and checks ``requestState`` (a :class:`~._mrtr.StateCodec`)."""
        ...

    @property
    def modern_task_policy(self) -> bool | Callable[[str], bool]:
        """Whether a 2026-07-28 call of an ``optional`` task tool runs as a task."""
        ...

    @property
    def task_preludes(self) -> set[str]:
        """The tools that run in the request until ``ctx.start_task()`` (2026-07-28)."""
        ...

    @property
    def cache_hints(self) -> Mapping[str, Any]:
        """Method -> :class:`~._modern.CacheHint` for 2026-07-28 cacheable results."""
        ...

    @property
    def scope_rules(self) -> Mapping[tuple[str, str], frozenset[str]]:
        """(``tool``/``resource``/``template``/``prompt``, name) -> the scopes it needs."""
        ...

    @property
    def task_scopes(self) -> frozenset[str]:
        """The scopes every ``tasks/*`` request needs."""
        ...

    @property
    def connections(self) -> set[Any]:
        """The App's open connections (peers); they add and remove themselves."""
        ...

    def immediate_response(self, tool_name: str) -> str | None:
        """The model-immediate-response text of a tool, if any."""
        ...

    def rerun_policy(self, tool_name: str) -> Rerun | None:
        """The tool's ``Rerun`` (it may run again elsewhere), or ``None``."""
        ...

    def server_capabilities(self) -> ServerCapabilities:
        """The capabilities declared as a server."""
        ...

    def client_capabilities(self) -> ClientCapabilities:
        """The capabilities declared as a client."""
        ...


class ChangeListener(Protocol):
    """An open ``subscriptions/listen`` request (the 2026-07-28 dialect's ``Listener``).

    The App keeps them in :attr:`AppView.listeners`; the features offer each
    change notification to every one (:func:`~._list_changes.offer_all`), the
    listener keeps those its filter names.
    """

    def offer(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Queue the notification if the filter names it; whether it did."""
        ...


class ClientEra(Protocol):
    """How a client connection sends requests and follows tasks in its era.

    A value per client connection (:attr:`PeerCore.client_era`, set by ``Peer``):
    the 2025-11-25 dialect's ``LegacyClient`` until the client chose
    2026-07-28, then ``ModernClient`` (both in ``trio_mcp.peer._dialects``). The
    requestor features ask it where the eras' wires differ, and import neither.
    """

    @property
    def protocol_version(self) -> str | None:
        """The era's protocol version (``None``: a 2025-11-25 connection before its handshake)."""
        ...

    async def request_raw(
        self, method: str, params: dict[str, Any] | None, *,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send ``method`` (2026-07-28: with the per-request ``_meta``, answering its
        questions and retrying); its raw result."""
        ...

    async def ping(self) -> None:
        """A round trip that checks the server answers (2026-07-28 has no ``ping``)."""
        ...

    async def set_log_level(self, level: str) -> None:
        """Ask for log messages at ``level`` and up (2026-07-28: in every request's ``_meta``)."""
        ...

    async def subscribe(self, uri: str | None = None) -> None:
        """Get the updates about ``uri`` (2026-07-28: a ``subscriptions/listen`` kept open,
        also for list changes with ``uri=None``)."""
        ...

    async def unsubscribe(self, uri: str) -> None:
        """Stop the updates about ``uri``."""
        ...

    async def answer(self, requests: dict[str, Any], answered: dict[str, Any]) -> dict[str, Any]:
        """Answer a task's or a result's ``inputRequests`` with this side's handlers.

        Raises:
            RemoteProtocolError: (2025-11-25) questions come as requests there.
        """
        ...

    def task_handle(
        self, raw: dict[str, Any], result_type: type[R], progress: ProgressCallback | None = None
    ) -> TaskHandle[R]:
        """The handle for the answer to a task-augmented call (2026-07-28: a task, or its
        result already completed; ``progress`` gets each new status message).

        Raises:
            RemoteProtocolError: ``raw`` is not a ``CreateTaskResult``.
        """
        ...

    def reattach(self, task_id: str, result_type: type[R]) -> TaskHandle[R]:
        """A handle on a task known only by id."""
        ...

    async def get_task(self, task_id: str, meta: dict[str, Any] | None = None) -> Task:
        """One ``tasks/get`` (``meta``: more ``_meta``): the task's snapshot."""
        ...

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """``tasks/result`` as raw JSON.

        Raises:
            LocalUsageError: (2026-07-28) there is no ``tasks/result``.
        """
        ...

    async def cancel_task(self, task_id: str) -> Task:
        """``tasks/cancel``; the snapshot it answers (2026-07-28: a ``tasks/get`` after)."""
        ...

    async def list_tasks(self, cursor: str | None) -> ListTasksResult:
        """One page of ``tasks/list``.

        Raises:
            LocalUsageError: (2026-07-28) there is no ``tasks/list``.
        """
        ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressCallback | None,
        known: Tool | None,
    ) -> CallToolResult:
        """``tools/call`` and its result (2026-07-28: following the task the server may
        make of it). ``known``: the tool as last listed, if it was.

        Raises:
            LocalUsageError: (2025-11-25) the tool requires a task.
        """
        ...

    async def call_tool_task(
        self, name: str, arguments: dict[str, Any] | None, *, ttl: int | None,
        meta: dict[str, Any] | None, progress: ProgressCallback | None, known: Tool | None,
    ) -> TaskHandle[CallToolResult]:
        """``tools/call`` as a task (2025-11-25: augmented with ``ttl``; 2026-07-28: the
        server decides); a handle on it. ``meta``: more ``_meta`` for the request.

        Raises:
            LocalUsageError: (2025-11-25) the server did not declare tasks for
                ``tools/call``, or the tool forbids them.
        """
        ...


#: One of several questions asked at once: a form, a sampling request, or (``None``) the roots.
Question: TypeAlias = ElicitParams | CreateMessageParams | None


class Asker(Protocol):
    """What a dialect needs of the ``RequestContext`` it asks for."""

    _task: TaskActor | None

    @property
    def dialect(self) -> Dialect:
        """The request's era."""
        ...

    @property
    def peer(self) -> PeerCore:
        """The connection the request came on."""
        ...

    async def _ask(
        self, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Send one question as a request: the task's when in a task, else the request's."""
        ...


class Dialect(Protocol):
    """The era a request is served in: what it means, how its answers look, how it asks.

    Attributes:
        protocol_version: The request's protocol version.
        client_capabilities: The capabilities the client declared (the request's own
            in 2026-07-28, the handshake's in 2025-11-25; ``None`` before one).
    """

    @property
    def protocol_version(self) -> str:
        """The request's protocol version."""
        ...

    @property
    def client_capabilities(self) -> ClientCapabilities | None:
        """The capabilities the client declared."""
        ...

    def lets_log(self, level_rank: int) -> bool:
        """Whether a log message of this rank (``_logging.level_rank``) goes to the client
        for this request."""
        ...

    def call_task(self, requested: TaskMetadata | None) -> TaskMetadata | None:
        """The task a ``tools/call`` runs as, given the ``task`` its params asked for
        (2025-11-25: that one; 2026-07-28: the server's decision); ``None``: a plain call."""
        ...

    def task_created(self, record: TaskRecord, meta: dict[str, Any] | None) -> dict[str, Any]:
        """The answer to a request that became the task ``record``, in this era's shape."""
        ...

    def task_questions(self, actor: TaskActor) -> TaskQuestions:
        """How the questions of the task ``actor`` (created by this request) travel."""
        ...

    def start_task(self, actor: TaskActor) -> None:
        """End the prelude of the task ``actor`` runs, if it has one (``ctx.start_task()``)."""
        ...

    def stored_capabilities(self) -> dict[str, Any] | None:
        """What a re-run must restore of the client's capabilities beside the stored
        request (the handshake's; ``None`` when the request carries its own)."""
        ...

    async def ask(
        self, ctx: Asker, method: str, params: dict[str, Any], result_type: type[T],
        key: str | None, *, as_task: bool = False, ttl: int | None = None,
    ) -> T:
        """Ask the client one question for ``ctx``'s request (or task).

        Raises:
            InputRequired: (2026-07-28 request) not answered yet: the request ends
                asking for it.
            McpError: (2026-07-28) -32021 for an undeclared capability; -32602 for
                a malformed answer.
            LocalUsageError: (2025-11-25) the client did not declare the capability.
            RemoteError, ConnectionClosed: (2025-11-25) as the request failed.
        """
        ...

    async def ask_many(self, ctx: Asker, questions: dict[str, Question]) -> dict[str, Any]:
        """Ask several questions at once (``None``: the roots); key -> answer."""
        ...


#: The dialect of the 2026-07-28 request being handled in this context (``None``: the
#: connection's), read only for log messages sent without a request in hand (see above).
current_dialect: contextvars.ContextVar[Dialect | None] = contextvars.ContextVar(
    "trio_mcp_dialect", default=None
)


class PeerCore:
    """One MCP connection's shared state and its JSON-RPC plumbing.

    Attributes:
        app: What this side offers.
        bus: The transport's channels.
        role: CLIENT or SERVER.
        session: The JSON-RPC session over :attr:`bus`.
        remote_info: The other side's ``Implementation`` after the handshake.
        remote_capabilities: The other side's capabilities after the handshake.
        protocol_version: The negotiated protocol version.
        instructions: The server's instructions (client role), if it sent any.
        task_waiters: Wake-ups for followed tasks (``notifications/tasks/status``).
        task_questions: Followed tasks whose questions go elsewhere (``ctx.children()``).
        client_era: How this side's requests go as a client, in the era it chose
            (:class:`ClientEra`); set by ``Peer``.
        dialect: The era of the connection's requests that carry none of their own
            (2025-11-25: what its handshake fixed); set by ``Peer``.
    """

    dialect: Dialect
    client_era: ClientEra

    def __init__(
        self,
        app: AppView,
        bus: MessageBus,
        role: Role,
        *,
        client_info: Implementation | None = None,
    ) -> None:
        self.app = app
        self.bus = bus
        self.role = role
        self.client_info = client_info
        self.session = Session(bus)
        # Fixed for the connection (the transport's identity does not change).
        self._context = (
            f"identity:{bus.context}"
            if bus.context is not None
            else f"connection:{_INSTANCE}:{self.session.connection_id}"
        )
        self.remote_info: Implementation | None = None
        self.remote_capabilities: ClientCapabilities | ServerCapabilities | None = None
        self.protocol_version: str | None = None
        self.instructions: str | None = None
        #: What this side declared in the handshake: fixed for the connection.
        self.declared_capabilities: ClientCapabilities | ServerCapabilities | None = None
        #: Method -> whether this side hosts it as a task, once declared (see ``hosts``).
        self.hosted: dict[str, bool] = {}
        self.task_waiters = StatusWaiters()
        self.session.on_close.append(self.task_waiters.close)
        #: Followed task id -> who answers its questions instead of the App's handlers
        #: (set by a ``ctx.children()`` scope for the children it forwards).
        self.task_questions: dict[str, QuestionForwarder] = {}

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        remote = self.remote_info.name if self.remote_info is not None else "?"
        return (
            f"<{type(self).__name__} {self.role.value} #{self.connection_id} "
            f"{state}, remote={remote!r}>"
        )

    # --- identity ---------------------------------------------------------------------

    @property
    def connection_id(self) -> int:
        """A process-unique number of this connection."""
        return self.session.connection_id

    @property
    def context(self) -> str:
        """The requestor context tasks from this connection are bound to.

        The authenticated identity when the transport has one, else this
        connection alone.
        """
        return self._context

    def context_of(self, req: Request) -> str:
        """The requestor context ``req``'s tasks belong to: its caller's, else :attr:`context`."""
        caller: Caller | None = req.caller
        return self._context if caller is None else caller.context

    def dialect_of(self, req: Request) -> Dialect:
        """The era ``req`` is served in: its own (a 2026-07-28 request's), else the
        connection's (:attr:`dialect`)."""
        dialect: Dialect | None = req.dialect
        return self.dialect if dialect is None else dialect

    def principal_of(self, req: Request) -> str | None:
        """Who ``req`` is authenticated as (an owner), if anyone: its caller's, else the
        connection's."""
        caller: Caller | None = req.caller
        principal = self.bus.context if caller is None else caller.principal
        return principal if isinstance(principal, str) else None

    def info_of(self, req: Request | None) -> Mapping[str, Any]:
        """The transport's facts about ``req``'s sender: its caller's, else ``bus.info``."""
        caller: Caller | None = None if req is None else req.caller
        return self.bus.info if caller is None else caller.info

    @property
    def is_open(self) -> bool:
        """False once the connection has closed."""
        return self.session.is_open

    @property
    def local_capabilities(self) -> ClientCapabilities | ServerCapabilities:
        """The capabilities this side declares in its role.

        Once the handshake sent them, the ones sent (they are fixed for the
        connection, and rebuilding them cost ~5% of a tasks/* request).
        """
        if self.declared_capabilities is not None:
            return self.declared_capabilities
        if self.role is Role.SERVER:
            return self.app.server_capabilities()
        return self.app.client_capabilities()

    @property
    def remote_client_capabilities(self) -> ClientCapabilities | None:
        """The client's capabilities, when this side is the server."""
        caps = self.remote_capabilities
        return caps if isinstance(caps, ClientCapabilities) else None

    @property
    def remote_server_capabilities(self) -> ServerCapabilities | None:
        """The server's capabilities, when this side is the client."""
        caps = self.remote_capabilities
        return caps if isinstance(caps, ServerCapabilities) else None

    # --- plumbing (delegated to the session) ---------------------------------------------

    async def aclose(self) -> None:
        """Close the connection: stop serving and wake every waiter.

        Cancellation: closing is immediate and cannot be interrupted.
        """
        self.session.close()
        await trio.lowlevel.checkpoint()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in this connection's nursery; it is cancelled at close.

        Raises:
            ConnectionClosed: The connection is closed.
        """
        self.session.start_soon(fn, *args)

    def notify_soon(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting (ordered with other queued ones).

        Status and progress notifications are optional in MCP; if this
        connection's reader is very slow, newer ones are dropped with a warning.
        """
        self.session.notify_soon(method, params)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification, waiting for room on the bus.

        Raises:
            ConnectionClosed: The connection is closed.

        Cancellation: the notification may or may not have been sent.
        """
        await self.session.notify(method, params)

    def register_progress(self, callback: ProgressCallback) -> str:
        """Register a progress callback (sync or async) and return its token."""
        return self.session.pending.register_progress(callback)

    def forget_progress(self, token: str | int) -> None:
        """Stop delivering progress for ``token``."""
        self.session.pending.forget_progress(token)

    async def request_raw(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send a request and return its raw result JSON.

        Args:
            method: The JSON-RPC method.
            params: The params object (wire JSON).
            progress: Called (sync or ``async``) with each
                ``notifications/progress`` for it.

        Raises:
            RemoteError: The peer answered with an error.
            RemoteProtocolError: The answer was malformed.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` for the request
            (except ``initialize``) and forgets it; a late answer is dropped.
        """
        return await self.client_era.request_raw(method, params, progress=progress)

    async def request(
        self,
        method: str,
        params: Any,
        result_type: type[T],
        *,
        progress: ProgressCallback | None = None,
    ) -> T:
        """Send a request and return its result structured as ``result_type``.

        Args:
            method: The JSON-RPC method.
            params: An MCP attrs object, a dict, or ``None``.
            result_type: The result class the answer is typed by (``dict``
                for raw JSON).
            progress: Called with each progress notification.

        Raises:
            RemoteError: The peer answered with an error.
            RemoteProtocolError: The answer does not fit ``result_type``.
            ConnectionClosed: The connection closed first.

        Cancellation: as for :meth:`request_raw`.
        """
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        raw = await self.client_era.request_raw(method, wire, progress=progress)
        return from_answer(raw, result_type, "the answer to", method)

    # --- what a feature overrides -------------------------------------------------------

    def install(self) -> None:
        """Put this feature's handlers into the session's tables (once per connection)."""

    @classmethod
    def declare_server(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        """The capabilities this feature adds as a server (``declared``: so far)."""
        return {}

    @classmethod
    def declare_client(cls, app: AppView, declared: Mapping[str, Any]) -> Mapping[str, Any]:
        """The capabilities this feature adds as a client (``declared``: so far)."""
        return {}


def merge_capabilities(into: dict[str, Any], fragment: Mapping[str, Any]) -> None:
    """Deep-merge one feature's capability ``fragment`` into ``into``."""
    for key, value in fragment.items():
        current = into.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merge_capabilities(current, value)
        else:
            into[key] = value

