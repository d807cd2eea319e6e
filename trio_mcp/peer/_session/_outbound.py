"""The calling half of a JSON-RPC session: requests and notifications to the other side.

:class:`Outbound` allocates ids, records what each request waits for, sends
notifications (queued and droppable for the optional ones), and wakes every
waiter when the connection closes. :class:`~._session.Session` adds the
receiving half on top.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
import trio

from ... import _telemetry
from ..._errors import ConnectionClosed, RemoteError, RemoteProtocolError
from .._messages import (
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    from_answer,
    message_to_json,
    to_wire,
)
from ._bus import MessageBus
from ._pending import PendingRequests, ProgressCallback

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")

#: Callables told of every message a session sends or receives, as
#: ``(direction, json, method)`` where direction is "sent" or "received" and
#: method is the request's method (also for responses). For tests and tracing;
#: empty by default, and then free.
message_observers: list[Callable[[str, dict[str, Any], str | None], None]] = []

#: Notifications queued for a slow connection before new ones are dropped.
NOTIFICATION_QUEUE: Final = 4_096
#: Queued notifications one sender carries ahead of its own message when the bus is full.
_NOTES_PER_SEND: Final = 4

#: The id of the incoming request whose handler is running in this Trio task
#: (inherited by the tasks it starts; not by a task's actor, started once the
#: ``CreateTaskResult`` is sent: it outlives the request). Outgoing requests and notifications
#: carry it as ``related_request_id`` so a transport with several streams
#: (Streamable HTTP) can send them on the stream of that request.
current_request_id: contextvars.ContextVar[RequestId | None] = contextvars.ContextVar(
    "trio_mcp_current_request_id", default=None
)

_connection_ids = itertools.count(1)


@attrs.define(eq=False)
class Outbound:
    """Requests and notifications to the other side over a :class:`MessageBus`.

    Attributes:
        bus: The transport's channels.
        gate: While set and not yet triggered, :meth:`request_raw` waits on
            it for every method not in :attr:`gate_exempt`.
        connection_id: A process-unique number for logs and tokens.
        pending: The requests waiting for an answer, and progress callbacks.
    """

    bus: MessageBus
    gate: trio.Event | None = None
    gate_exempt: frozenset[str] = frozenset()
    connection_id: int = attrs.field(factory=lambda: next(_connection_ids))
    pending: PendingRequests = attrs.field(init=False)
    _closed: bool = attrs.field(default=False, init=False)
    #: Notifications in the queue (not yet taken by a sender).
    _queued_notes: int = attrs.field(default=0, init=False)
    _notes_send: trio.MemorySendChannel[Message] = attrs.field(init=False)
    _notes_recv: trio.MemoryReceiveChannel[Message] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.pending = PendingRequests(str(self.connection_id))
        self._notes_send, self._notes_recv = trio.open_memory_channel[Message](NOTIFICATION_QUEUE)

    @property
    def is_open(self) -> bool:
        """False once the connection has closed."""
        return not self._closed

    async def _pump_notifications(self) -> None:
        # Queued notifications also leave ahead of every message sent with
        # send() (see _flush_notes): this pump is for a connection that
        # sends nothing else meanwhile.
        notes = self._notes_recv
        try:
            while True:
                try:
                    msg = notes.receive_nowait()
                except trio.WouldBlock:
                    msg = await notes.receive()
                self._queued_notes -= 1
                if message_observers:
                    self._observe("sent", msg)
                await self._put(msg)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            return

    async def _put(self, msg: Message) -> None:
        # No schedule point while the bus has room: the writer is woken all
        # the same, and it saves a scheduler pass per message.
        # Written from this task when the transport's writer is idle (the
        # bus's write_now shortcut): no writer pass.
        write_now = self.bus.shortcuts.write_now
        if write_now is not None and write_now(msg):
            return
        outgoing = self.bus.outgoing
        try:
            outgoing.send_nowait(msg)
        except trio.WouldBlock:
            await outgoing.send(msg)

    async def _flush_notes(self) -> None:
        """Send queued notifications, oldest first, ahead of the caller's message.

        While the bus has room they all go at once. When it is full and
        other senders wait too (pipelined requests), the lone pump task gets
        one slot per writer round while answers keep queueing new
        notifications, so the queue grew until they were dropped: then each
        sender carries up to :data:`_NOTES_PER_SEND` of them, in order,
        which drains them faster than one answer makes them.
        """
        notes = self._notes_recv
        outgoing = self.bus.outgoing
        carried = 0
        while self._queued_notes:
            stats = outgoing.statistics()
            if stats.current_buffer_used >= stats.max_buffer_size:
                # Full: only help when senders besides the pump compete.
                if stats.tasks_waiting_send <= 1 or carried >= _NOTES_PER_SEND:
                    return
                carried += 1
            try:
                note = notes.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            self._queued_notes -= 1
            if message_observers:
                self._observe("sent", note)
            await self._put(note)

    def _observe(self, direction: str, msg: Message, method: str | None = None) -> None:
        if method is None:
            if isinstance(msg, Request | Notification):
                method = msg.method
            else:
                method = self.pending.method_of(msg.id)
        wire = message_to_json(msg)
        for observer in message_observers:
            observer(direction, wire, method)

    async def send(self, msg: Message, method: str | None = None) -> None:
        """Put one message on the bus, waiting for room.

        Raises:
            ConnectionClosed: The connection is closed.
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        # A cancelled caller sends nothing (as with a plain ``await send``),
        # but while the bus has room there is no schedule point (_put).
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            if self._queued_notes:
                await self._flush_notes()
            if message_observers:
                self._observe("sent", msg, method)
            await self._put(msg)
        except (trio.ClosedResourceError, trio.BrokenResourceError) as exc:
            raise ConnectionClosed("the connection is closed") from exc

    def try_send(self, msg: Message, method: str | None = None, *, soon: bool = False) -> bool:
        """Put one message on the bus if that needs no wait; ``False`` if it would.

        It would wait while the bus is full, or while queued notifications
        must leave first. ``soon``: the sender expects more messages in the
        same scheduler pass (see ``Shortcuts.write_soon``). Nothing goes out
        once the connection is closed (then ``True``: nothing to wait for).
        """
        if self._closed:
            return True
        if self._queued_notes:
            return False
        # Straight onto the bus (or the wire, when the transport's writer
        # is idle), in order with everything sent before; ``soon``: joined
        # with what else is sent before the writer's next pass.
        shortcuts = self.bus.shortcuts
        write_soon = shortcuts.write_soon if soon else None
        write_now = shortcuts.write_now
        try:
            if not (write_soon is not None and write_soon(msg)) and (
                write_now is None or not write_now(msg)
            ):
                self.bus.outgoing.send_nowait(msg)
        except trio.WouldBlock:
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return True
        if message_observers:
            self._observe("sent", msg, method)
        return True

    async def _send_quietly(self, msg: Message) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.send(msg)

    # --- notifications out ---------------------------------------------------------------

    def notify_soon(self, method: str, params: Any = None) -> None:
        """Queue a notification without waiting (ordered with other queued ones).

        Optional notifications (status, progress) go this way: if this
        connection's reader is so slow that :data:`NOTIFICATION_QUEUE` of them
        pile up, newer ones are dropped and a warning is logged.
        """
        if self._closed:
            return
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        msg = Notification(method, wire, related_request_id=current_request_id.get())
        if self.try_send(msg):
            return
        try:
            self._notes_send.send_nowait(msg)
            self._queued_notes += 1
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

        Cancellation: the notification may or may not have been sent.
        """
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        await self.send(Notification(method, wire, related_request_id=current_request_id.get()))

    # --- requests out --------------------------------------------------------------------

    async def request_raw(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancellable: bool = True,
        _traced: bool = False,  # internal: its client span is made (tracing on)
    ) -> dict[str, Any]:
        """Send a request and return its raw result JSON.

        Args:
            method: The JSON-RPC method.
            params: The params object (wire JSON).
            progress: Called (sync or async) with each progress notification.
            cancellable: Send ``notifications/cancelled`` if the caller gives up.

        Raises:
            RemoteError: The peer answered with an error.
            RemoteProtocolError: The answer was malformed.
            ConnectionClosed: The connection closed first.

        Cancellation: sends ``notifications/cancelled`` for the request
            (unless ``cancellable`` is false) and forgets it; a late answer is
            dropped.
        """
        if self._closed:
            # A caller cancelled as the connection closed (its own scope closing
            # the transport) sees the cancellation, not ConnectionClosed.
            await trio.lowlevel.checkpoint_if_cancelled()
            raise ConnectionClosed("the connection is closed")
        if _telemetry.active is not None and not _traced:  # under a client span
            return await _telemetry.active.request(self, method, params, progress, cancellable)
        gate = self.gate
        if gate is not None and method not in self.gate_exempt and not gate.is_set():
            await gate.wait()
            if self._closed:
                raise ConnectionClosed("the connection is closed")
        pending_requests = self.pending
        request_id, pending = pending_requests.add(method)
        token: str | None = None
        if progress is not None:
            token = pending_requests.register_progress(progress)
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": token}
        related = current_request_id.get()
        try:
            await self.send(Request(request_id, method, params, related_request_id=related))
            await pending.done.wait()
        except trio.Cancelled:
            if pending.outcome is None and not self._closed and cancellable:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self._send_quietly(
                        Notification(
                            "notifications/cancelled",
                            {"requestId": request_id, "reason": "cancelled by the caller"},
                            related_request_id=related,
                        )
                    )
            raise
        finally:
            pending_requests.remove(request_id)
            if token is not None:
                pending_requests.forget_progress(token)
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
        cancellable: bool = True,
    ) -> T:
        """Send a request and return its result structured as ``result_type``.

        Args:
            method: The JSON-RPC method.
            params: An attrs object, a dict, or ``None``.
            result_type: The class the answer is typed by (``dict`` for raw JSON).
            progress: Called with each progress notification.
            cancellable: As for :meth:`request_raw`.

        Raises:
            RemoteError: The peer answered with an error.
            RemoteProtocolError: The answer does not fit ``result_type``.
            ConnectionClosed: The connection closed first.

        Cancellation: as for :meth:`request_raw`.
        """
        wire = to_wire(params) if params is not None and attrs.has(type(params)) else params
        raw = await self.request_raw(method, wire, progress=progress, cancellable=cancellable)
        return from_answer(raw, result_type, "the answer to", method)
