"""The JSON-RPC session: one connection's request/response machinery, knowing no MCP.

One receive loop takes each incoming message and ``match``-es on its class:

* a :class:`Request` goes to its handler in :attr:`Session.request_handlers`
  (one shape: an ``async`` function). The handler of a method in
  :attr:`Session.inline` is started right there, in the dispatching task
  (``trio_mcp._inline``): if it returns without waiting it is answered with no
  Trio task, else the rest of it becomes the request's own task; any other
  handler runs in its own Trio task under its own cancel scope, so
  ``notifications/cancelled`` can stop it. Handler outcomes become wire
  answers in one place, ``_answer`` and ``_failure``;
* a :class:`Notification` is dispatched at once through
  :attr:`Session.notification_handlers` (it never blocks); the session itself
  owns only the JSON-RPC-level ones, cancellation and progress;
* a :class:`Response` / :class:`ErrorResponse` wakes the caller waiting on
  that id;
* :class:`Undecodable` input is answered with -32700/-32600.

The loop waits on sending only when :data:`MAX_CONCURRENT_REQUESTS` of the
other side's requests are already being handled: it then answers the next
one with -32000 itself, so a peer that sends without reading is slowed down
instead of costing a task per request. Below that bound it never waits, so
two peers cannot deadlock on each other's full queues. When the bus ends,
every waiter wakes at once with :class:`ConnectionClosed`.

MCP features fill the handler tables (see ``trio_mcp.peer._features``); this
module never names an MCP method.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from types import CoroutineType
from typing import Any, TypeAlias, TypeVar, final

import attrs
import trio

from ... import _telemetry
from ..._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_LIMIT,
    ConnectionClosed,
    McpError,
)
from ..._inline import Parked, ReaderTask, in_context, run_inline
from .._messages import (
    ErrorData,
    ErrorResponse,
    Incoming,
    Message,
    Notification,
    ProgressParams,
    Request,
    RequestId,
    Response,
    Undecodable,
    converter,
    wire_object,
)
from ._outbound import Outbound, current_request_id, message_observers
from ._pending import call_progress

log = logging.getLogger("trio_mcp.peer")
T = TypeVar("T")

RequestHandler: TypeAlias = Callable[[Request], Awaitable[Any]]
#: A request's answer and what to call once it is sent (or failed to be).
Answered: TypeAlias = tuple[Message, Callable[[], None] | None]
NotificationHandler: TypeAlias = Callable[[Notification], None]
#: Decides whether a request may be served now: ``None`` admits it, an
#: :class:`ErrorData` is sent back instead.
Admission: TypeAlias = Callable[[Request], ErrorData | None]

#: Requests of the other side handled (or answered) at once. Past this, the
#: receive loop answers a new request with -32000 itself and waits until that
#: answer is on the bus, so a peer that sends without reading is slowed down
#: (backpressure) instead of making this side start a task per request.
MAX_CONCURRENT_REQUESTS = 1_024
_ID_IN_USE = "Invalid request: this id is already in use by a request"

@final
@attrs.frozen
class Reply:
    """A handler's result plus something to do once it has been sent.

    Attributes:
        result: The result object (wire JSON).
        after_send: Called after the response is on the bus (or failed to be).
    """

    result: dict[str, Any]
    after_send: Callable[[], None]


@final
@attrs.define(eq=False)
class Session(Outbound):
    """The JSON-RPC half of one connection, over a :class:`MessageBus`.

    Attributes:
        bus: The transport's channels.
        request_handlers: Method name -> handler (``async``); filled by the
            features. A handler returns an attrs object, a JSON dict or a
            :class:`Reply`, or raises :class:`McpError`.
        inline: The methods whose handler is started in the dispatching task:
            it awaits ``leave_reader()`` before anything that may wait, so a
            request it answers without waiting costs no Trio task (the hot
            path of ``tools/call`` and ``tasks/*``).
        notification_handlers: Method name -> handler for notifications
            other than ``notifications/cancelled`` and ``notifications/progress``.
        admit: Called before a known request is served; an :class:`ErrorData`
            refuses it (e.g. "not initialized yet").
        route: While set, called with each request before its handler is looked
            up: it may swap the tables (the dialect) or refuse it (:class:`ErrorData`).
        uncancellable: Ids of incoming requests ``notifications/cancelled`` must not stop.
        on_close: Called once when the connection closes.
    The calling half (:meth:`request`, :meth:`notify`...) is :class:`Outbound`'s.
    """

    request_handlers: dict[str, RequestHandler] = attrs.field(factory=dict)
    inline: set[str] = attrs.field(factory=set)
    notification_handlers: dict[str, NotificationHandler] = attrs.field(factory=dict)
    admit: Admission | None = None
    route: Admission | None = None
    uncancellable: set[RequestId] = attrs.field(factory=set)
    on_close: list[Callable[[], None]] = attrs.field(factory=list)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _inflight: dict[RequestId, trio.CancelScope] = attrs.field(factory=dict, init=False)
    #: The in-flight requests parked on another task's work (see :meth:`_resume`).
    _parked: dict[RequestId, tuple[Request, Parked[Any]]] = attrs.field(
        factory=dict, init=False
    )
    _replying: int = attrs.field(default=0, init=False)
    _idle: bool = attrs.field(default=False, init=False)

    # --- running --------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the bus closes or :meth:`close` is called.

        Reports started once the receive loop runs.

        Cancellation: cancels every in-flight handler; pending callers wake
            with :class:`ConnectionClosed`.
        """
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._pump_notifications)
                nursery.start_soon(self._receive_loop)
                task_status.started()
        finally:
            self.close()

    def close(self) -> None:
        """Close now: wake every waiter, stop the handlers, close the bus."""
        if self._closed:
            return
        self._closed = True
        if self.gate is not None:
            self.gate.set()
        self.pending.wake_all()
        for callback in self.on_close:
            callback()
        self._notes_send.close()
        self.bus.outgoing.close()
        for scope in self._inflight.values():  # those in a reader's task too
            scope.cancel()
        for request_id in list(self._parked):  # they see it now, not when their event is set
            self._unpark(request_id)
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _receive_loop(self) -> None:
        incoming = self.bus.incoming
        shortcuts = self.bus.shortcuts
        shortcuts.deliver = self._deliver
        try:
            while True:
                # Take what is queued without a schedule point: a channel's
                # receive() yields to the scheduler even when an item is
                # ready, which cost a scheduler pass per message whenever
                # requests arrive faster than one at a time (pipelined
                # clients). The reader fills the bounded bus only when it
                # runs, so this still blocks in receive() once it is drained.
                try:
                    item = incoming.receive_nowait()
                except trio.WouldBlock:
                    self._idle = True  # see _deliver
                    try:
                        item = await incoming.receive()
                    finally:
                        self._idle = False
                if isinstance(item, Request) and self._overloaded():
                    if message_observers:
                        self._observe("received", item)
                    await self._refuse_overload(item)
                elif isinstance(item, Undecodable) and self._overloaded():
                    if not self.pending.fail_malformed(item):
                        log.info("undecodable input (%d): %s", item.code, item.reason)
                        await self._send_quietly(
                            ErrorResponse(item.id, ErrorData(item.code, item.reason))
                        )
                else:
                    self._dispatch(item)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            pass
        finally:
            if shortcuts.deliver == self._deliver:
                shortcuts.deliver = None
            # The other side is gone: wake everyone and stop the handlers.
            self.close()

    def _deliver(self, item: Incoming, lent: ReaderTask | None = None) -> bool:
        """The bus's ``deliver`` shortcut: dispatch ``item`` now, in the transport's task
        (``lent``: a request may keep that task, see :class:`ReaderTask`).

        Only while the receive loop waits on an empty bus (``_idle``: so
        nothing queued is overtaken; refusing clears it, as the item then
        goes on the bus) and the item needs no wait (an overloaded session
        answers in the receive loop: its backpressure). Else ``False``.
        """
        if not self._idle or self._closed or (
            isinstance(item, Request | Undecodable) and self._overloaded()
        ):
            self._idle = False
            return False
        self._dispatch(item, lent)
        return True

    def _dispatch(self, item: Incoming, lent: ReaderTask | None = None) -> None:
        """Handle one incoming message without waiting (the overloaded cases aside)."""
        if message_observers and not isinstance(item, Undecodable):
            self._observe("received", item)
        match item:
            case Request() if _telemetry.active is None:
                self._on_request(item, lent)
            case Request():  # under its server span (ended by _answer, _failure, _refuse)
                _telemetry.serve(self, item, partial(self._on_request, lent=lent))
            case Notification():
                self._on_notification(item)
            case Response() | ErrorResponse():
                self._on_response(item)
            case Undecodable() if self.pending.fail_malformed(item):
                pass  # a malformed answer: its request failed, nothing to reply
            case Undecodable():
                log.info("undecodable input (%d): %s", item.code, item.reason)
                self._reply_soon(ErrorResponse(item.id, ErrorData(item.code, item.reason)))

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

    def _reply_soon(
        self, msg: Message, method: str | None = None, after_send: Callable[[], None] | None = None
    ) -> None:
        if self._nursery is not None and not self._closed:
            self._replying += 1
            self._nursery.start_soon(self._send_reply, msg, method, after_send)
        elif after_send is not None:
            after_send()

    async def _send_reply(
        self, msg: Message, method: str | None, after_send: Callable[[], None] | None
    ) -> None:
        try:
            with contextlib.suppress(ConnectionClosed):
                await self.send(msg, method)
        finally:
            self._replying -= 1
            if after_send is not None:
                after_send()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in this connection's nursery; it is cancelled at close.

        Raises:
            ConnectionClosed: The connection is closed.
        """
        if self._nursery is None or self._closed:
            raise ConnectionClosed("the connection is closed")
        self._nursery.start_soon(fn, *args)

    # --- requests in ---------------------------------------------------------------------

    def _on_request(self, req: Request, lent: ReaderTask | None = None) -> None:
        if req.id in self._inflight:
            _refuse(self, req, ErrorData(INVALID_REQUEST, _ID_IN_USE))
            return
        if self.route is not None and _refused(self, self.route, req):
            return
        handler = self.request_handlers.get(req.method)
        if handler is None:
            _refuse(self, req, ErrorData(METHOD_NOT_FOUND, f"Method not found: {req.method[:100]}"))
            return
        if self.admit is not None and _refused(self, self.admit, req):
            return
        if req.method in self.inline:
            later = _answer_at_once(self, req, handler)
            if later is None:
                return
            if type(later) is Parked:  # it waits for another task's work: no task of its own
                # (its scope, never entered, only marks a cancellation: see _resume)
                scope = self._inflight[req.id] = trio.CancelScope()
                self._parked[req.id] = req, later
                later.then(partial(self._resume, req, scope))
                return
            work: Awaitable[Any] = later  # it must wait: the rest is the request's own task
        else:
            work = handler(req)
        # The request's task: the reader's own while it lends it (one that
        # does not wait then costs neither a task nor a cancel scope), else a
        # new one, named by its method (Trio need not format a name per request).
        if lent is not None and lent.free:
            self._inflight[req.id] = lent.scope
            lent.take(self._serve, req, work, None)
        else:
            scope = self._inflight[req.id] = trio.CancelScope()
            assert self._nursery is not None
            self._nursery.start_soon(self._serve, req, work, scope, name=req.method)

    def serve_here(self, req: Request, relate: RequestId) -> Answered | Awaitable[Answered]:
        """Serve ``req`` in the calling task: one that came without a connection.

        The same tables, refusals and answer shaping as a request read from
        the bus, with no in-flight bookkeeping: the caller owns the request
        (cancelling the task that awaits the rest cancels the handler) and
        sends the answer itself. What the handler sends is related to
        ``relate`` (``related_request_id``), so the caller can tell its
        messages apart from those of the other requests it serves at once.

        Returns:
            The answer and what to call once it is sent, when the handler
            did not wait; else an awaitable of them (await it in any task:
            it runs in the context the request started in).
        """
        box: list[Answered | Awaitable[Answered]] = []
        if _telemetry.active is None:
            box.append(self._begin_here(req, relate))
        else:  # under its server span (the rest, awaited later, inherits it)
            _telemetry.serve(self, req, lambda r: box.append(_in_span(self._begin_here(r, relate))))
        return box[0]

    def _begin_here(self, req: Request, relate: RequestId) -> Answered | Awaitable[Answered]:
        for check in (self.route, self.admit):
            refusal = check(req) if check is not None else None
            if refusal is not None:
                reply = ErrorResponse(req.id, refusal)
                if _telemetry.active is not None:
                    _telemetry.answered(req.id, reply)
                return reply, None
        handler = self.request_handlers.get(req.method)
        if handler is None:
            reply = ErrorResponse(
                req.id, ErrorData(METHOD_NOT_FOUND, f"Method not found: {req.method[:100]}")
            )
            if _telemetry.active is not None:
                _telemetry.answered(req.id, reply)
            return reply, None
        if req.method in self.inline:
            started = _start(req, handler, relate)
            if type(started) is tuple:
                return started
            work: Awaitable[Any] = started  # type: ignore[assignment]
        else:
            work = handler(req)
        token = current_request_id.set(relate)
        try:
            return in_context(_finish(req, work))
        finally:
            current_request_id.reset(token)

    def reply_now(
        self, req: Request, reply: Message, after_send: Callable[[], None] | None
    ) -> None:
        """Send the answer to ``req`` without waiting, or from a task if the bus is full."""
        if not self.try_send(reply, req.method):
            self._reply_soon(reply, req.method, after_send)
        elif after_send is not None:
            after_send()

    async def _serve(
        self, req: Request, work: Awaitable[Any], scope: trio.CancelScope | None
    ) -> None:
        """Run one request's handler (``work``) and answer it.

        In a task of its own inside ``scope``; or (``None``) in a reader's
        lent task, inside the scope the reader holds for it
        (:attr:`ReaderTask.scope`, which catches its cancellation).
        """
        current_request_id.set(req.id)
        answered: Answered | None = None
        try:
            if scope is None:
                answered = await _finish(req, work)
            else:
                with scope:
                    answered = await _finish(req, work)
        finally:
            cancelled = self._inflight.pop(req.id).cancel_called
            self.uncancellable.discard(req.id)
        if answered is None:
            return  # cancelled (its scope caught it)
        reply, after_send = answered
        self._replying += 1  # still counts against MAX_CONCURRENT_REQUESTS
        try:
            # A request the peer cancelled is never answered. With other
            # requests in flight, answers are joined into one write.
            if not cancelled and not (
                self._inflight and self.try_send(reply, req.method, soon=True)
            ):
                await self.send(reply, req.method)
        except ConnectionClosed:
            pass
        finally:
            self._replying -= 1
            if after_send is not None:
                current_request_id.set(None)  # e.g. a task's actor: it outlives the request
                after_send()

    def _resume(self, req: Request, scope: trio.CancelScope, parked: Parked[Any]) -> None:
        """Go on with a parked request (see ``trio_mcp._inline.InlineEvent``), in the task
        that set the event it waited for and in the request's context: answer it there
        when it returns without waiting again, as :func:`_answer_at_once` does.

        A request cancelled meanwhile (``notifications/cancelled``, the connection
        closing) was moved at once to a task of its own inside its cancelled
        ``scope`` (:meth:`_unpark`), where it sees the cancellation at the wait, as
        a request waiting in its own task does: a ``tasks/result`` parked on a
        task that runs for an hour is not kept for the hour.
        """
        if self._parked.pop(req.id, None) is None:
            return  # moved to a task of its own meanwhile (its callback was recalled)
        try:
            done, out = parked.step()
        except Exception as exc:
            answered: Answered = (_failure(req, exc), None)
        else:
            if not done:
                if type(out) is Parked:
                    self._parked[req.id] = req, out
                    out.then(partial(self._resume, req, scope))
                else:
                    self._serve_soon(req, out, scope)
                return
            answered = _answer(req, out)
            if _telemetry.active is not None:
                answered = _in_span(answered)  # type: ignore[assignment]
        del self._inflight[req.id]
        self.uncancellable.discard(req.id)
        reply, after_send = answered
        # Answers of one batch, sent one after another, are joined into one write.
        if not self.try_send(reply, req.method, soon=bool(self._inflight)):
            self._reply_soon(reply, req.method, after_send)
        elif after_send is not None:
            current_request_id.set(None)  # e.g. a task's actor: it outlives the request
            after_send()

    def _unpark(self, request_id: RequestId) -> None:
        """Move a parked request, cancelled, to a task of its own now (see :meth:`_resume`)."""
        req, parked = self._parked.pop(request_id)
        parked.recall()
        self._serve_soon(req, parked, self._inflight[request_id])

    def _serve_soon(self, req: Request, work: Awaitable[Any], scope: trio.CancelScope) -> None:
        """The rest of ``req`` in a task of its own (nothing, once the connection is gone)."""
        try:
            assert self._nursery is not None
            self._nursery.start_soon(self._serve, req, work, scope, name=req.method)
        except RuntimeError:  # the nursery is closed: nobody to answer
            self._inflight.pop(req.id, None)
            self.uncancellable.discard(req.id)

    # --- notifications in ----------------------------------------------------------------

    def _on_notification(self, note: Notification) -> None:
        method = note.method
        if method == "notifications/cancelled":
            params = note.params or {}
            request_id = params.get("requestId")
            scope = self._inflight.get(request_id) if isinstance(request_id, str | int) else None
            if scope is not None and request_id not in self.uncancellable:
                log.debug("request %r cancelled by the peer: %s", request_id, params.get("reason"))
                scope.cancel()
                if request_id in self._parked:
                    self._unpark(request_id)
        elif method == "notifications/progress":
            _on_progress(self, note.params or {})
        else:
            handler = self.notification_handlers.get(method)
            if handler is None:
                log.debug("notification %s ignored", method[:100])
                return
            try:
                handler(note)
            except Exception:
                log.exception("handler for notification %s failed", method[:100])

    def start_soon_or_none(self) -> Callable[..., None] | None:
        """This connection's ``nursery.start_soon``, or ``None`` once it is closed."""
        if self._nursery is None or self._closed:
            return None
        return self._nursery.start_soon

    # --- responses in --------------------------------------------------------------------

    def _on_response(self, msg: Response | ErrorResponse) -> None:
        if self.pending.resolve(msg):
            return
        if isinstance(msg, ErrorResponse):
            log.warning(
                "the peer reported an error: [%d] %s", msg.error.code, msg.error.message[:200]
            )
        else:
            log.debug("response to unknown id %r ignored", msg.id)



def _refused(session: Session, check: Admission, req: Request) -> bool:
    """Run an admission ``check``; if it refuses ``req``, answer with its error."""
    refusal = check(req)
    if refusal is None:
        return False
    _refuse(session, req, refusal)
    return True


def _refuse(session: Session, req: Request, error: ErrorData) -> None:
    """Answer ``req`` with ``error`` without serving it."""
    reply = ErrorResponse(req.id, error)
    if _telemetry.active is not None:
        _telemetry.answered(req.id, reply)
    session._reply_soon(reply)


def _answer(req: Request, out: Any) -> tuple[Message, Callable[[], None] | None]:
    """A handler's outcome as the response to ``req``, and what to call once it is sent."""
    after_send = None
    if isinstance(out, Reply):
        reply, after_send = Response(req.id, out.result), out.after_send
    else:
        reply = Response(req.id, out if isinstance(out, dict) else wire_object(out))
    if _telemetry.active is not None:
        _telemetry.answered(req.id, reply)
    return reply, after_send


def _failure(req: Request, exc: Exception) -> ErrorResponse:
    """A handler's exception as the error response to ``req``.

    The one place where errors become wire errors.
    """
    if isinstance(exc, McpError):
        reply = ErrorResponse(req.id, ErrorData(exc.code, exc.message, exc.data))
    else:
        log.exception("handler for %s failed", req.method, exc_info=exc)
        reply = ErrorResponse(req.id, ErrorData(INTERNAL_ERROR, "Internal error"))
    if _telemetry.active is not None:
        _telemetry.answered(req.id, reply)
    return reply


def _start(
    req: Request, handler: RequestHandler, relate: RequestId
) -> Answered | Awaitable[Any]:
    """Start an inline method's handler in this task: the answer, or the rest to await.

    ``relate`` is current (what the handler sends is related to it) while the
    handler runs. Its coroutine is started here (:func:`run_inline`): if it
    returns without waiting, that is the answer; if it leaves the reader to
    wait, the rest is returned.
    """
    token = current_request_id.set(relate)
    try:
        work = handler(req)
        if type(work) is not CoroutineType:
            return work  # an awaitable that is not a coroutine cannot start here
        done, out = run_inline(work)
        if not done:
            return out
    except Exception as exc:
        return _failure(req, exc), None
    finally:
        current_request_id.reset(token)
    # The answer, and what runs once it is sent (a task's actor starts: it
    # outlives the request), belong to no request.
    return _answer(req, out)


def _answer_at_once(
    session: Session, req: Request, handler: RequestHandler
) -> Awaitable[Any] | None:
    """Start an inline method's handler in the dispatching task; send its answer if it
    did not wait.

    Returns the rest of the handler's coroutine to run as the request's task
    when it must wait, else ``None``.
    """
    started = _start(req, handler, req.id)
    if type(started) is tuple:
        session.reply_now(req, *started)
        return None
    return started  # type: ignore[return-value]


def _in_span(started: Answered | Awaitable[Answered]) -> Answered | Awaitable[Answered]:
    """``after_send`` to be called in this context (a task's work span is the child of
    the creating request's server span, current here), whoever calls it later."""
    if type(started) is tuple and started[1] is not None:
        return started[0], partial(contextvars.copy_context().run, started[1])
    return started


async def _finish(req: Request, work: Awaitable[Any]) -> Answered:
    """Await a handler's ``work`` and make its outcome ``req``'s answer.

    Cancellation: the answer is never known (a tracing span ends unanswered).
    """
    try:
        out = await work
    except Exception as exc:
        return _failure(req, exc), None
    except BaseException:
        if _telemetry.active is not None:
            _telemetry.answered(req.id, None)
        raise
    answered = _answer(req, out)
    return answered if _telemetry.active is None else _in_span(answered)  # type: ignore[return-value]


def _on_progress(session: Session, params: dict[str, Any]) -> None:
    """``notifications/progress``: call the callback its token was registered with."""
    callback = session.pending.progress_callback(params.get("progressToken"))
    if callback is not None:
        try:
            value = converter.structure(params, ProgressParams)
        except Exception:
            log.info("malformed notifications/progress ignored")
            return
        call_progress(callback, value, session.start_soon_or_none())
