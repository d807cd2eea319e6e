"""The peer router: one class for both roles, over any :class:`MessageBus`.

One receive loop takes each incoming message and ``match``-es on its class:

* a :class:`Request` runs in its own Trio task under its own cancel scope
  (so ``notifications/cancelled`` can stop it); the one place that turns a
  handler's outcome into a wire answer is :meth:`Peer._serve`;
* a :class:`Notification` is dispatched at once (it never blocks);
* a :class:`Response` / :class:`ErrorResponse` wakes the caller waiting on
  that id;
* :class:`Undecodable` input is answered with -32700/-32600.

The loop waits on sending only when :data:`MAX_CONCURRENT_REQUESTS` of the
other side's requests are already being handled: it then answers the next
one with -32000 itself, so a peer that sends without reading is slowed down
instead of costing a task per request. Below that bound it never waits, so
two peers cannot deadlock on each other's full queues. When the bus ends,
every waiter wakes at once with :class:`ConnectionClosed`.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar, final

import attrs
import trio

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_LIMIT,
    ConnectionClosed,
    LocalUsageError,
    McpError,
    RemoteError,
    RemoteProtocolError,
)
from .._util import unwrap_group
from ._app import App
from ._bus import MessageBus
from ._context import RequestContext
from ._convert import converter, from_wire, to_wire, wire_object
from ._handle import TaskHandle
from ._jsonrpc import (
    ErrorData,
    ErrorResponse,
    Message,
    Notification,
    Request,
    Response,
    Undecodable,
    message_to_json,
)
from ._registry import TaskActor
from ._tools import ArgumentError, ToolSpec
from ._types import (
    LATEST_PROTOCOL_VERSION,
    MODEL_IMMEDIATE_RESPONSE_META,
    SUPPORTED_PROTOCOL_VERSIONS,
    CallToolParams,
    CallToolResult,
    ClientCapabilities,
    CreateMessageParams,
    CreateMessageResult,
    CreateTaskResult,
    ElicitParams,
    ElicitResult,
    Implementation,
    InitializeParams,
    InitializeResult,
    ListTasksResult,
    ListToolsResult,
    PaginatedParams,
    ProgressParams,
    ServerCapabilities,
    Task,
    TaskIdParams,
    TaskMetadata,
    TaskStatus,
    TextContent,
    Tool,
    task_capability,
)

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")
P = TypeVar("P")
ProgressCallback = Callable[[ProgressParams], None]
Handler = Callable[[Request], Awaitable[Any]]

#: Callables told of every message a peer sends or receives, as
#: ``(direction, json, method)`` where direction is "sent" or "received" and
#: method is the request's method (also for responses). For tests and tracing;
#: empty by default, and then free.
message_observers: list[Callable[[str, dict[str, Any], str | None], None]] = []

#: Tools per ``tools/list`` page.
TOOLS_PAGE_SIZE: Final = 100
#: Notifications queued for a slow connection before new ones are dropped.
NOTIFICATION_QUEUE: Final = 4_096
#: Requests of the other side handled (or answered) at once. Past this, the
#: receive loop answers a new request with -32000 itself and waits until that
#: answer is on the bus, so a peer that sends without reading is slowed down
#: (backpressure) instead of making this side start a task per request.
MAX_CONCURRENT_REQUESTS = 1_024
_connection_ids = itertools.count(1)


class Role(enum.Enum):
    """Which side of the MCP lifecycle a connection plays."""

    CLIENT = "client"
    SERVER = "server"


@final
@attrs.define(eq=False)
class _Pending:
    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: Response | ErrorResponse | None = None
    malformed: str | None = None


@final
@attrs.frozen
class _Reply:
    """A handler's result plus something to do once it has been sent."""

    result: dict[str, Any]
    after_send: Callable[[], None]


@final
@attrs.define(eq=False)
class Peer:
    """One MCP connection, in either role, requestor and receiver at once.

    Create it with :func:`open_peer` (or a transport's ``open_*`` /
    ``serve_*``). As a client it sends ``initialize``; as a server it answers
    it. Either way it answers the other side's requests from its :class:`App`
    and sends its own with the methods below.

    Attributes:
        app: What this side offers.
        bus: The transport's channels.
        role: CLIENT or SERVER.
        remote_info: The other side's ``Implementation`` after the handshake.
        remote_capabilities: The other side's capabilities after the handshake.
        protocol_version: The negotiated protocol version.
    """

    app: App
    bus: MessageBus
    role: Role
    client_info: Implementation | None = None
    remote_info: Implementation | None = attrs.field(default=None, init=False)
    remote_capabilities: ClientCapabilities | ServerCapabilities | None = attrs.field(
        default=None, init=False
    )
    protocol_version: str | None = attrs.field(default=None, init=False)
    connection_id: int = attrs.field(factory=lambda: next(_connection_ids), init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _pending: dict[str | int, _Pending] = attrs.field(factory=dict, init=False)
    _inflight: dict[str | int, trio.CancelScope] = attrs.field(factory=dict, init=False)
    _progress: dict[str | int, ProgressCallback] = attrs.field(factory=dict, init=False)
    _status_events: dict[str, trio.Event] = attrs.field(factory=dict, init=False)
    _tool_cache: dict[str, Tool] = attrs.field(factory=dict, init=False)
    _ready: trio.Event = attrs.field(factory=trio.Event, init=False)
    _initialize_answered: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _replying: int = attrs.field(default=0, init=False)
    _notes_send: trio.MemorySendChannel[Message] = attrs.field(init=False)
    _notes_recv: trio.MemoryReceiveChannel[Message] = attrs.field(init=False)
    _handlers: dict[str, Handler] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._notes_send, self._notes_recv = trio.open_memory_channel[Message](NOTIFICATION_QUEUE)
        self._handlers = {
            "initialize": self._on_initialize,
            "ping": self._on_ping,
            "tools/list": self._on_tools_list,
            "tools/call": self._on_tools_call,
            "sampling/createMessage": self._on_sampling,
            "elicitation/create": self._on_elicitation,
            "tasks/get": self._on_tasks_get,
            "tasks/result": self._on_tasks_result,
            "tasks/list": self._on_tasks_list,
            "tasks/cancel": self._on_tasks_cancel,
        }

    # --- identity -----------------------------------------------------------------

    @property
    def context(self) -> str:
        """The requestor context tasks from this connection are bound to.

        The authenticated identity when the transport has one, else this
        connection alone.
        """
        if self.bus.context is not None:
            return f"identity:{self.bus.context}"
        return f"connection:{self.connection_id}"

    @property
    def is_open(self) -> bool:
        """False once the connection has closed."""
        return not self._closed

    @property
    def local_capabilities(self) -> ClientCapabilities | ServerCapabilities:
        """The capabilities this side declares in its role."""
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

    # --- running --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the bus closes or the caller cancels.

        As a client, performs the ``initialize`` handshake before reporting
        started. Runs the App's task registry if no one else runs it.

        Raises:
            RemoteError, ConnectionClosed, RemoteProtocolError: The
                handshake failed (client role).

        Cancellation: cancels every in-flight handler; pending callers wake
            with :class:`ConnectionClosed`; tasks live on in the registry if
            it is run by someone else.
        """
        registry = self.app.registry
        async with registry.running():
            registry.attach(self.context, self)
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._pump_notifications)
                    await nursery.start(self._receive_loop)
                    if self.role is Role.CLIENT:
                        await self._handshake()
                    task_status.started(self)
            finally:
                registry.detach(self.context, self)
                self._shutdown()

    def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ready.set()
        for pending in self._pending.values():
            pending.done.set()
        for event in self._status_events.values():
            event.set()
        self._notes_send.close()
        self.bus.outgoing.close()

    async def aclose(self) -> None:
        """Close the connection: stop serving and wake every waiter.

        Cancellation: closing is immediate and cannot be interrupted.
        """
        self._shutdown()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        await trio.lowlevel.checkpoint()

    async def _receive_loop(self, *, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            async for item in self.bus.incoming:
                if message_observers and not isinstance(item, Undecodable):
                    self._observe("received", item)
                match item:
                    case Request():
                        if self._overloaded():
                            await self._refuse_overload(item)
                        else:
                            self._on_request(item)
                    case Notification():
                        self._on_notification(item)
                    case Response() | ErrorResponse():
                        self._on_response(item)
                    case Undecodable() if self._answers_pending(item):
                        pass  # a malformed answer: its request failed, nothing to reply
                    case Undecodable():
                        log.info("undecodable input (%d): %s", item.code, item.reason)
                        reply = ErrorResponse(item.id, ErrorData(item.code, item.reason))
                        if self._overloaded():
                            await self._send_quietly(reply)
                        else:
                            self._reply_soon(reply)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            # The other side is gone: wake everyone and stop the handlers.
            self._shutdown()
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    async def _pump_notifications(self) -> None:
        async for msg in self._notes_recv:
            if message_observers:
                self._observe("sent", msg)
            try:
                await self.bus.outgoing.send(msg)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return

    def _observe(self, direction: str, msg: Message, method: str | None = None) -> None:
        if method is None:
            if isinstance(msg, Request | Notification):
                method = msg.method
            elif msg.id is not None and msg.id in self._pending:
                method = self._pending[msg.id].method
        wire = message_to_json(msg)
        for observer in message_observers:
            observer(direction, wire, method)

    async def _send(self, msg: Message, method: str | None = None) -> None:
        if message_observers:
            self._observe("sent", msg, method)
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        try:
            await self.bus.outgoing.send(msg)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise ConnectionClosed("the connection is closed") from exc

    def _overloaded(self) -> bool:
        return len(self._inflight) + self._replying >= MAX_CONCURRENT_REQUESTS

    async def _refuse_overload(self, req: Request) -> None:
        """Answer a request past the concurrency bound, in the receive loop itself.

        Waiting here for room on the bus is the point: it stops reading from
        a peer that sends requests without reading the answers.
        """
        log.warning(
            "connection %d: %d requests in flight, refusing %s",
            self.connection_id, MAX_CONCURRENT_REQUESTS, req.method[:100],
        )
        message = (
            f"Too many concurrent requests: at most {MAX_CONCURRENT_REQUESTS} at once; "
            "retry later"
        )
        await self._send_quietly(ErrorResponse(req.id, ErrorData(RESOURCE_LIMIT, message)))

    def _reply_soon(self, msg: Message) -> None:
        if self._nursery is not None and not self._closed:
            self._replying += 1
            self._nursery.start_soon(self._send_reply, msg)

    async def _send_reply(self, msg: Message) -> None:
        try:
            await self._send_quietly(msg)
        finally:
            self._replying -= 1

    async def _send_quietly(self, msg: Message) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send(msg)

    def start_soon(self, fn: Callable[[], Awaitable[Any]]) -> None:
        """Run ``fn()`` in this connection's nursery; it is cancelled at close.

        Raises:
            ConnectionClosed: The connection is closed.
        """
        if self._nursery is None or self._closed:
            raise ConnectionClosed("the connection is closed")
        self._nursery.start_soon(fn)

    def notify_soon(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting (ordered with other queued ones).

        Status and progress notifications are optional in MCP; if this
        connection's reader is so slow that :data:`NOTIFICATION_QUEUE` of them
        pile up, newer ones are dropped and a warning is logged.
        """
        if self._closed:
            return
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        msg = Notification(method, wire)
        if self._notes_send.statistics().current_buffer_used == 0:
            # Nothing queued: go straight onto the bus, in order with the
            # responses sent meanwhile.
            try:
                self.bus.outgoing.send_nowait(msg)
            except trio.WouldBlock:
                pass
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            else:
                if message_observers:
                    self._observe("sent", msg)
                return
        try:
            self._notes_send.send_nowait(msg)
        except trio.WouldBlock:
            log.warning(
                "connection %d: notification queue full, dropped %s", self.connection_id, method
            )
        except trio.ClosedResourceError:
            pass

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification, waiting for room on the bus.

        Raises:
            ConnectionClosed: The connection is closed.
        """
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        await self._send(Notification(method, wire))

    # --- incoming requests ----------------------------------------------------------

    def _on_request(self, req: Request) -> None:
        if req.id in self._inflight:
            self._reply_soon(
                ErrorResponse(
                    req.id,
                    ErrorData(
                        INVALID_REQUEST, "Invalid request: this id is already in use by a request"
                    ),
                )
            )
            return
        handler = self._handlers.get(req.method)
        if handler is None:
            self._reply_soon(
                ErrorResponse(
                    req.id, ErrorData(METHOD_NOT_FOUND, f"Method not found: {req.method[:100]}")
                )
            )
            return
        if req.method not in ("initialize", "ping") and not self._handshake_done():
            self._reply_soon(
                ErrorResponse(
                    req.id,
                    ErrorData(
                        INVALID_REQUEST, "Invalid request: the session is not initialized yet"
                    ),
                )
            )
            return
        scope = trio.CancelScope()
        self._inflight[req.id] = scope
        assert self._nursery is not None
        self._nursery.start_soon(self._serve, req, handler, scope)

    def _handshake_done(self) -> bool:
        if self.role is Role.SERVER:
            return self._initialize_answered
        return self.protocol_version is not None

    async def _serve(self, req: Request, handler: Handler, scope: trio.CancelScope) -> None:
        """Run one request's handler and answer it: the one place errors become wire errors."""
        reply: Message | None = None
        after_send: Callable[[], None] | None = None
        with scope:
            try:
                out = await handler(req)
            except McpError as exc:
                reply = ErrorResponse(req.id, ErrorData(exc.code, exc.message, exc.data))
            except Exception:
                log.exception("handler for %s failed", req.method)
                reply = ErrorResponse(req.id, ErrorData(INTERNAL_ERROR, "Internal error"))
            else:
                if isinstance(out, _Reply):
                    after_send = out.after_send
                    result = out.result
                else:
                    result = out if isinstance(out, dict) else wire_object(out)
                reply = Response(req.id, result)
        del self._inflight[req.id]
        self._replying += 1  # still counts against MAX_CONCURRENT_REQUESTS
        try:
            if reply is not None and not scope.cancelled_caught:
                # A request the peer cancelled is never answered.
                await self._send(reply, req.method)
        except ConnectionClosed:
            pass
        finally:
            self._replying -= 1
            if after_send is not None:
                after_send()

    # --- notifications ---------------------------------------------------------------

    def _on_notification(self, note: Notification) -> None:
        params = note.params or {}
        match note.method:
            case "notifications/initialized":
                if self.role is Role.SERVER and self._initialize_answered:
                    self._ready.set()
            case "notifications/cancelled":
                request_id = params.get("requestId")
                scope = (
                    self._inflight.get(request_id) if isinstance(request_id, str | int) else None
                )
                if scope is not None and request_id != self._initialize_id:
                    log.debug(
                        "request %r cancelled by the peer: %s", request_id, params.get("reason")
                    )
                    scope.cancel()
            case "notifications/progress":
                token = params.get("progressToken")
                callback = self._progress.get(token) if isinstance(token, str | int) else None
                if callback is not None:
                    try:
                        callback(converter.structure(params, ProgressParams))
                    except Exception:
                        log.exception("progress callback failed")
            case "notifications/tasks/status":
                try:
                    task = converter.structure(params, Task)
                except Exception:
                    log.info("malformed notifications/tasks/status ignored")
                    return
                event = self._status_events.pop(task.task_id, None)
                if event is not None:
                    event.set()
            case _:
                log.debug("notification %s ignored", note.method[:100])

    _initialize_id: str | int | None = attrs.field(default=None, init=False)

    def _status_event(self, task_id: str) -> trio.Event:
        """An event set at the next status notification for ``task_id``."""
        event = self._status_events.get(task_id)
        if event is None:
            event = self._status_events[task_id] = trio.Event()
            if self._closed:
                event.set()
        return event

    # --- responses --------------------------------------------------------------------

    def _answers_pending(self, item: Undecodable) -> bool:
        """Fail the waiting request a malformed response answers, if any."""
        if item.response_to is None:
            return False
        pending = self._pending.get(item.response_to)
        if pending is None or pending.done.is_set():
            return False
        log.warning("malformed answer to %s %r: %s", pending.method, item.response_to, item.reason)
        pending.malformed = item.reason
        pending.done.set()
        return True

    def _on_response(self, msg: Response | ErrorResponse) -> None:
        pending = self._pending.get(msg.id) if msg.id is not None else None
        if pending is None:
            if isinstance(msg, ErrorResponse):
                log.warning(
                    "the peer reported an error: [%d] %s", msg.error.code, msg.error.message[:200]
                )
            else:
                log.debug("response to unknown id %r ignored", msg.id)
            return
        pending.outcome = msg
        pending.done.set()

    # --- outgoing requests ------------------------------------------------------------

    def register_progress(self, callback: ProgressCallback) -> str:
        """Register a progress callback and return the token to send with a request."""
        token = f"progress-{self.connection_id}-{next(self._ids)}"
        self._progress[token] = callback
        return token

    def forget_progress(self, token: str | int) -> None:
        """Stop delivering progress for ``token``."""
        self._progress.pop(token, None)

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
            progress: Called with each ``notifications/progress`` for it.

        Raises:
            RemoteError: The peer answered with an error.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` for the request
            (except ``initialize``) and forgets it; a late answer is dropped.
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        if method not in ("initialize", "ping") and not self._ready.is_set():
            await self._ready.wait()
            if self._closed:
                raise ConnectionClosed("the connection is closed")
        request_id = next(self._ids)
        token: str | None = None
        if progress is not None:
            token = self.register_progress(progress)
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": token}
        pending = _Pending(method)
        self._pending[request_id] = pending
        try:
            await self._send(Request(request_id, method, params))
            await pending.done.wait()
        except trio.Cancelled:
            if pending.outcome is None and not self._closed and method != "initialize":
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self._send_quietly(
                        Notification(
                            "notifications/cancelled",
                            {"requestId": request_id, "reason": "cancelled by the caller"},
                        )
                    )
            raise
        finally:
            del self._pending[request_id]
            if token is not None:
                self._progress.pop(token, None)
        outcome = pending.outcome
        if pending.malformed is not None:
            raise RemoteProtocolError(f"the answer to {method} is malformed: {pending.malformed}")
        if outcome is None:
            raise ConnectionClosed(f"the connection closed before {method} was answered")
        if isinstance(outcome, ErrorResponse):
            raise RemoteError(outcome.error.code, outcome.error.message, outcome.error.data)
        return outcome.result

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
        """
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        raw = await self.request_raw(method, wire, progress=progress)
        if result_type is dict:
            return raw  # type: ignore[return-value]
        try:
            return converter.structure(raw, result_type)
        except Exception as exc:
            raise RemoteProtocolError(
                f"the answer to {method} does not fit {result_type.__name__}"
            ) from exc

    async def _handshake(self) -> None:
        params = InitializeParams(
            protocol_version=LATEST_PROTOCOL_VERSION,
            capabilities=self.app.client_capabilities(),
            client_info=self.client_info or self.app.info,
        )
        result = await self.request("initialize", params, InitializeResult)
        if result.protocol_version not in SUPPORTED_PROTOCOL_VERSIONS:
            await self.aclose()
            raise RemoteProtocolError(
                f"the server chose protocol version {result.protocol_version!r}, "
                f"which this client does not support"
            )
        self.protocol_version = result.protocol_version
        self.remote_info = result.server_info
        self.remote_capabilities = result.capabilities
        self.instructions = result.instructions
        await self._send(Notification("notifications/initialized"))
        self._ready.set()

    instructions: str | None = attrs.field(default=None, init=False)

    # --- the requestor API ----------------------------------------------------------

    async def ping(self) -> None:
        """Send ``ping`` and wait for the answer.

        Raises:
            RemoteError, ConnectionClosed: As for :meth:`request`.
        """
        await self.request_raw("ping")

    async def list_tools(self, cursor: str | None = None) -> ListToolsResult:
        """One page of the server's tools (``tools/list``)."""
        result = await self.request(
            "tools/list", PaginatedParams(cursor) if cursor else None, ListToolsResult
        )
        for tool in result.tools:
            self._tool_cache[tool.name] = tool
        return result

    async def list_all_tools(self) -> list[Tool]:
        """Every tool of the server, following ``nextCursor`` to the end."""
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

        Raises:
            LocalUsageError: The tool (as last listed) requires a task.
            RemoteError: A protocol error (unknown tool, bad params...).
        """
        tool = self._tool_cache.get(name)
        if (
            tool is not None
            and tool.task_support == "required"
            and task_capability(self.remote_server_capabilities, "tools/call")
        ):
            raise LocalUsageError(
                f"tool {name!r} requires task-augmented execution: use call_tool_task()"
            )
        params = CallToolParams(name=name, arguments=arguments)
        return await self.request("tools/call", params, CallToolResult, progress=progress)

    async def call_tool_task(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> TaskHandle[CallToolResult]:
        """Call a tool as a task; return at once with a handle to follow it.

        Args:
            name: The tool.
            arguments: Its arguments.
            ttl: Requested retention in ms (the server may lower it).
            progress: Called with progress for the whole life of the task.

        Raises:
            LocalUsageError: The server did not declare task support for
                ``tools/call``, or the tool (as last listed) forbids tasks.
            RemoteError: The server refused the call.
        """
        if not task_capability(self.remote_server_capabilities, "tools/call"):
            raise LocalUsageError("the server did not declare tasks.requests.tools.call")
        tool = self._tool_cache.get(name)
        if tool is not None and tool.task_support == "forbidden":
            raise LocalUsageError(f"tool {name!r} does not support task-augmented execution")
        params = to_wire(CallToolParams(name=name, arguments=arguments, task=TaskMetadata(ttl)))
        params["task"] = {} if ttl is None else {"ttl": ttl}
        token = None
        if progress is not None:
            token = self.register_progress(progress)
            params["_meta"] = {"progressToken": token}
        try:
            raw = await self.request_raw("tools/call", params)
        except BaseException:
            if token is not None:
                self.forget_progress(token)
            raise
        handle = self.handle_from_create_result(raw, CallToolResult)
        handle.progress_token = token
        return handle

    def handle_from_create_result(self, raw: dict[str, Any], result_type: type[T]) -> TaskHandle[T]:
        """Wrap a raw ``CreateTaskResult`` from this peer in a :class:`TaskHandle`.

        Raises:
            RemoteProtocolError: ``raw`` is not a ``CreateTaskResult``.
        """
        try:
            created = converter.structure(raw, CreateTaskResult)
        except Exception as exc:
            raise RemoteProtocolError("expected a CreateTaskResult") from exc
        return TaskHandle(self, created.task, result_type, meta=created.meta)

    def task_handle(self, task_id: str, result_type: type[T] = dict) -> TaskHandle[T]:  # type: ignore[assignment]
        """A handle on a task known only by id (e.g. after reconnecting)."""
        placeholder = Task(task_id, TaskStatus.WORKING, "", "", None)
        return TaskHandle(self, placeholder, result_type)

    async def get_task(self, task_id: str) -> Task:
        """``tasks/get``: the state of a task hosted by the other side."""
        return await self.request("tasks/get", {"taskId": task_id}, Task)

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """``tasks/result`` as raw JSON (blocks until the task is terminal)."""
        return await self.request_raw("tasks/result", {"taskId": task_id})

    async def cancel_task(self, task_id: str) -> Task:
        """``tasks/cancel``: cancel a task hosted by the other side."""
        return await self.request("tasks/cancel", {"taskId": task_id}, Task)

    async def list_tasks(self, cursor: str | None = None) -> ListTasksResult:
        """One page of ``tasks/list``."""
        return await self.request(
            "tasks/list", {"cursor": cursor} if cursor else None, ListTasksResult
        )

    async def iter_tasks(self) -> AsyncIterator[Task]:
        """Every task the other side lists for us, following cursors to the end."""
        cursor: str | None = None
        while True:
            page = await self.list_tasks(cursor)
            for task in page.tasks:
                yield task
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def create_message(self, params: CreateMessageParams) -> CreateMessageResult:
        """Send ``sampling/createMessage`` to the client (no task)."""
        return await self.request("sampling/createMessage", params, CreateMessageResult)

    async def elicit(self, params: ElicitParams) -> ElicitResult:
        """Send ``elicitation/create`` to the client (no task)."""
        return await self.request("elicitation/create", params, ElicitResult)

    # --- request handlers (receiver side) -----------------------------------------------

    async def _on_initialize(self, req: Request) -> InitializeResult:
        if self.role is not Role.SERVER:
            raise McpError(METHOD_NOT_FOUND, "Method not found: initialize (this side is a client)")
        if self._initialize_answered or self._initialize_id is not None:
            raise McpError(INVALID_REQUEST, "Invalid request: already initialized")
        self._initialize_id = req.id
        params = from_wire(req.params or {}, InitializeParams)
        requested = params.protocol_version
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        self.protocol_version = version
        self.remote_info = params.client_info
        self.remote_capabilities = params.capabilities
        self._initialize_answered = True
        return InitializeResult(
            protocol_version=version,
            capabilities=self.app.server_capabilities(),
            server_info=self.app.info,
            instructions=self.app.instructions,
        )

    async def _on_ping(self, req: Request) -> dict[str, Any]:
        return {}

    def _hosts(self, method: str) -> bool:
        return task_capability(self.local_capabilities, method)

    def _require_tasks(self, feature: str | None = None) -> None:
        tasks = self.local_capabilities.tasks
        if tasks is None or (feature is not None and feature not in tasks):
            raise McpError(METHOD_NOT_FOUND, "Method not found: this side does not host tasks")

    async def _on_tools_list(self, req: Request) -> ListToolsResult:
        if self.role is not Role.SERVER or not self.app.tools:
            raise McpError(METHOD_NOT_FOUND, "Method not found: tools/list")
        params = from_wire(req.params or {}, PaginatedParams)
        tools = list(self.app.tools.values())
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
        if self.role is not Role.SERVER or not self.app.tools:
            raise McpError(METHOD_NOT_FOUND, "Method not found: tools/call")
        params = from_wire(req.params or {}, CallToolParams)
        spec = self.app.tools.get(params.name)
        if spec is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {params.name[:100]}")
        support = spec.tool.task_support
        if self._hosts("tools/call"):
            if params.task is not None and support == "forbidden":
                raise McpError(
                    METHOD_NOT_FOUND,
                    f"Tool {spec.tool.name!r} does not support task-augmented calls",
                )
            if params.task is None and support == "required":
                raise McpError(
                    METHOD_NOT_FOUND, f"Tool {spec.tool.name!r} requires task-augmented execution"
                )
            if params.task is not None:

                async def work(actor: TaskActor) -> dict[str, Any]:
                    ctx = RequestContext(self, req.id, params.meta, actor)
                    return wire_object(await self._run_tool(spec, params.arguments, ctx))

                immediate = self.app.immediate_response(spec.tool.name)
                meta = {MODEL_IMMEDIATE_RESPONSE_META: immediate} if immediate else None
                return await self._create_task(req, params.task, params.meta, work, meta)
        ctx = RequestContext(self, req.id, params.meta)
        return await self._run_tool(spec, params.arguments, ctx)

    async def _run_tool(
        self, spec: ToolSpec, arguments: dict[str, Any] | None, ctx: RequestContext
    ) -> CallToolResult:
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
        try:
            result = spec.to_result(await spec.call(kwargs))
        except McpError:
            raise
        except Exception as exc:
            log.exception("tool %s raised", spec.tool.name)
            # An OSError's text names its files: internal paths the peer must
            # not learn (the log above has them). Keep only the reason.
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            text = f"Tool {spec.tool.name} failed: {type(exc).__name__}: {detail}"[:1000]
            return CallToolResult(content=[TextContent(text)], is_error=True)
        return result

    async def _create_task(
        self,
        req: Request,
        task: TaskMetadata,
        request_meta: dict[str, Any] | None,
        work: Callable[[TaskActor], Awaitable[dict[str, Any]]],
        result_meta: dict[str, Any] | None = None,
    ) -> _Reply:
        registry = self.app.registry
        registry.check_rate(self.context)
        token = (request_meta or {}).get("progressToken")
        actor = await registry.create(
            self.context,
            req.method,
            work,
            requested_ttl=task.ttl,
            origin=self,
            progress_token=token if isinstance(token, str | int) else None,
        )
        result = CreateTaskResult(actor.record.snapshot(), meta=result_meta)
        return _Reply(to_wire(result), actor.announced.set)

    async def _on_sampling(self, req: Request) -> Any:
        return await self._on_client_request(req, self.app.sampling_handler, CreateMessageParams)

    async def _on_elicitation(self, req: Request) -> Any:
        return await self._on_client_request(req, self.app.elicitation_handler, ElicitParams)

    async def _on_client_request(
        self,
        req: Request,
        handler: Callable[[RequestContext, P], Awaitable[Any]] | None,
        params_type: type[P],
    ) -> Any:
        """Answer a server-to-client request (sampling, elicitation), as a task if asked."""
        if self.role is not Role.CLIENT or handler is None:
            raise McpError(METHOD_NOT_FOUND, f"Method not found: {req.method}")
        params = from_wire(req.params or {}, params_type)
        task: TaskMetadata | None = getattr(params, "task", None)
        meta: dict[str, Any] | None = getattr(params, "meta", None)
        if task is not None and self._hosts(req.method):

            async def work(actor: TaskActor) -> dict[str, Any]:
                return wire_object(await handler(RequestContext(self, req.id, meta, actor), params))

            return await self._create_task(req, task, meta, work)
        return await handler(RequestContext(self, req.id, meta), params)

    def _task_id_param(self, req: Request) -> str:
        # The taskId param is the source of truth; related-task _meta is ignored.
        return from_wire(req.params or {}, TaskIdParams).task_id

    async def _on_tasks_get(self, req: Request) -> Task:
        self._require_tasks()
        task_id = self._task_id_param(req)
        self.app.registry.check_rate(self.context)
        return self.app.registry.get(self.context, task_id)

    async def _on_tasks_result(self, req: Request) -> dict[str, Any]:
        self._require_tasks()
        task_id = self._task_id_param(req)
        self.app.registry.check_rate(self.context)
        return await self.app.registry.result(self.context, task_id, self)

    async def _on_tasks_list(self, req: Request) -> ListTasksResult:
        self._require_tasks("list")
        params = from_wire(req.params or {}, PaginatedParams)
        self.app.registry.check_rate(self.context)
        tasks, cursor = self.app.registry.list(self.context, params.cursor)
        return ListTasksResult(tasks, cursor)

    async def _on_tasks_cancel(self, req: Request) -> Task:
        self._require_tasks("cancel")
        task_id = self._task_id_param(req)
        self.app.registry.check_rate(self.context)
        return self.app.registry.cancel(self.context, task_id)


@asynccontextmanager
async def open_peer(
    app: App,
    bus: MessageBus,
    role: Role,
    *,
    client_info: Implementation | None = None,
) -> AsyncIterator[Peer]:
    """Run a :class:`Peer` over ``bus`` for the duration of the block.

    As a client, the block starts after the ``initialize`` handshake.
    Leaving the block closes the connection.

    Raises:
        RemoteError, RemoteProtocolError, ConnectionClosed: The handshake
            failed (client role).
    """
    peer = Peer(app, bus, role, client_info=client_info)
    with unwrap_group():
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            try:
                yield peer
            finally:
                await peer.aclose()
                nursery.cancel_scope.cancel()
