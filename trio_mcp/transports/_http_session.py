"""One Streamable HTTP session: one bus, one server :class:`Peer`, many SSE streams.

The session runs the peer for its whole life (not per POST) and routes what
the peer sends to the right stream:

* a response goes to the stream of the POST that carried its request, and
  ends that stream;
* a request or notification sent while handling a client request (its
  ``related_request_id``), and a progress notification carrying the
  progress token of a request, go to that request's stream while the
  stream has not ended; anything else goes to the session's standalone
  stream, which a ``GET`` reads.

Every event is kept in the session's :class:`EventStore` before any
connection writes it, so a dropped connection loses nothing: the client
resumes with ``GET`` + ``Last-Event-ID``. A connection going away never
cancels work; only ``notifications/cancelled`` does (and that ends the
cancelled request's stream, which will never get a response).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import Any, Final, final

import attrs
import trio

from .._errors import INVALID_REQUEST
from ..peer import (
    WAKE_WRITER,
    App,
    BusEnds,
    Message,
    MessageBus,
    Peer,
    Role,
    encode_for_wire,
    open_bus,
)
from ..peer._messages import (
    ErrorData,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from ._http_store import EventStore, MemoryEventStore
from ._http_stream import SseStream

log = logging.getLogger("trio_mcp.transports")

#: Ended streams a session remembers, so a client can still resume them.
MAX_ENDED_STREAMS: Final = 64
#: The stream id of the session's standalone (GET) stream.
STANDALONE: Final = "0"
_NO_SERVER_REQUESTS: Final = (
    "Server-to-client requests are not available: this Streamable HTTP server is "
    "stateless, so the client has no stream to receive them on"
)

@final
@attrs.define(eq=False)
class HttpSession:
    """A session's peer, streams and events. Created and driven by the HTTP app.

    Attributes:
        session_id: The ``Mcp-Session-Id`` (None in stateless mode).
        identity: The authenticated identity that created it, if any; every
            later request must carry the same one.
        store: Its events.
        stateless: One POST only: no server-to-client requests, no GET.
        last_active: ``trio.current_time()`` of the last request.
        busy: HTTP requests being served now (an idle session has none).
    """

    session_id: str | None
    identity: str | None
    store: EventStore
    info: dict[str, Any]
    stateless: bool = False
    retry_ms: int = 1_000
    keepalive: float | None = 15.0
    last_active: float = 0.0
    busy: int = 0
    protocol_version: str | None = None
    pre_initialize: bool = True
    peer: Peer | None = attrs.field(default=None, init=False)
    bus: MessageBus = attrs.field(init=False)
    ends: BusEnds = attrs.field(init=False)
    streams: dict[str, SseStream] = attrs.field(factory=dict, init=False)
    by_request: dict[RequestId, SseStream] = attrs.field(factory=dict, init=False)
    by_progress_token: dict[str | int, SseStream] = attrs.field(factory=dict, init=False)
    closed: bool = attrs.field(default=False, init=False)
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    #: The streams open at the last prune, in order (see ``_prune``).
    opened: list[SseStream] = attrs.field(factory=list, init=False)
    #: The router waits on an empty bus (see ``_write_now``).
    _idle: bool = attrs.field(default=False, init=False)
    #: ``store`` when it never waits (a :class:`MemoryEventStore`): events are then
    #: routed from the sender's task, with no router pass (see ``_write_now``).
    _store_now: MemoryEventStore | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.bus, self.ends = open_bus(context=self.identity, info=self.info)
        if isinstance(self.store, MemoryEventStore):
            self._store_now = self.store
        self.streams[STANDALONE] = SseStream(STANDALONE)

    @property
    def standalone(self) -> SseStream:
        """The stream a ``GET`` reads: messages related to no open request."""
        return self.streams[STANDALONE]

    # --- running ---------------------------------------------------------------------

    async def run(self, app: App, *, task_status: trio.TaskStatus[None]) -> None:
        """Run the peer and the outgoing router until :meth:`close` (or cancellation).

        Cancellation: the peer's handlers are cancelled (tasks live on in
            the App's registry); every stream ends.
        """
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._route)
                    # Where the first GET starts: everything the peer sends
                    # before it is kept for it.
                    self.standalone.cursor = await self.store.store_event(STANDALONE, b"")
                    self.peer = Peer(app, self.bus, Role.SERVER)
                    if self.stateless and self.pre_initialize:
                        # No session: each POST stands alone, with its header's version.
                        self.peer.assume_initialized(self.protocol_version)
                    await nursery.start(self.peer.run)
                    task_status.started()
        finally:
            self.closed = True
            for stream in self.streams.values():
                stream.end()
            self._done.set()
            with trio.CancelScope(shield=True):
                await self.store.forget()

    async def close(self) -> None:
        """End the session: stop the peer, end every stream, drop the events.

        Cancellation: the session still ends; the wait for it may be cut short.
        """
        self._scope.cancel()
        await self._done.wait()

    # --- from the client ---------------------------------------------------------------

    def open_stream(self, request_id: RequestId, *, json: bool) -> SseStream:
        """Register the stream that will carry the answer to ``request_id``."""
        stream = SseStream(str(next(self._ids)), request_id, json=json)
        self._prune()
        if not json:
            self.streams[stream.stream_id] = stream
        self.by_request[request_id] = stream
        self.opened.append(stream)
        return stream

    def close_connection(self, request_id: RequestId) -> bool:
        """Close the connection carrying ``request_id``'s stream, not the stream itself.

        The writer sends ``retry`` and closes; the client resumes with
        ``Last-Event-ID`` and gets everything after it. Returns False when
        the request has no open SSE stream.
        """
        stream = self.by_request.get(request_id)
        if stream is None or stream.ended or stream.json:
            return False
        stream.poll = True  # the open connection, or the next one

        stream.wake()
        return True

    def request_in_flight(self, request_id: RequestId) -> bool:
        """True when a stream already waits for the answer to ``request_id``."""
        stream = self.by_request.get(request_id)
        return stream is not None and not stream.ended

    async def receive(self, msg: Message) -> None:
        """Hand one message from the client to the peer, waiting for room.

        Raises:
            trio.ClosedResourceError, trio.BrokenResourceError: The session ended.

        Cancellation: the message may or may not have been handed over.
        """
        if isinstance(msg, Notification) and msg.method == "notifications/cancelled":
            request_id = (msg.params or {}).get("requestId")
            if isinstance(request_id, str | int):
                stream = self.by_request.get(request_id)
                if stream is not None and not stream.ended:
                    # A cancelled request is never answered: end its stream
                    # once the events already routed to it are written.
                    stream.end()
        elif isinstance(msg, Request):
            meta = (msg.params or {}).get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            stream = self.by_request.get(msg.id)
            if isinstance(token, str | int) and stream is not None:
                self.by_progress_token[token] = stream
        # Straight to the peer's dispatch while its receive loop waits on an
        # empty bus: no receive-loop pass (an inline tool answers right here).
        deliver = self.ends.shortcuts.deliver
        if deliver is not None and deliver(msg, None):
            return
        await self.ends.to_peer.send(msg)

    # --- to the client -------------------------------------------------------------------

    async def _send_to_peer(self, msg: Message) -> None:
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await self.ends.to_peer.send(msg)

    async def _route(self) -> None:
        shortcuts = self.ends.shortcuts
        from_peer = self.ends.from_peer
        if self._store_now is not None:
            shortcuts.write_now = self._write_now
        try:
            async with from_peer:
                while True:
                    # As the session's receive loop: take what is queued
                    # without a schedule point.
                    try:
                        msg = from_peer.receive_nowait()
                    except trio.WouldBlock:
                        self._idle = True  # see _write_now
                        try:
                            msg = await from_peer.receive()
                        finally:
                            self._idle = False
                    if msg is not WAKE_WRITER:
                        await self._deliver(msg)
        except trio.EndOfChannel:
            return
        finally:
            if shortcuts.write_now == self._write_now:
                shortcuts.write_now = None

    def _write_now(self, msg: Message) -> bool:
        """The bus's ``write_now`` shortcut: route ``msg`` from the sender's task.

        Only while the router waits on an empty bus (so nothing queued is
        overtaken; a refusal clears that, and the message then goes on the
        bus) and the store never waits (:class:`MemoryEventStore`): an answer
        is on its stream without a router pass.
        """
        if not self._idle or self.closed:
            self._idle = False
            return False
        self._route_now(msg)
        return True

    async def _deliver(self, msg: Message) -> None:
        if self._store_now is not None:
            self._route_now(msg)
            return
        routed = self._routed(msg)
        if routed is None:
            return
        stream, data, is_answer = routed
        await self.store.store_event(stream.stream_id, data)
        if is_answer:
            stream.end()
        else:
            stream.wake()

    def _route_now(self, msg: Message) -> None:
        """Route ``msg`` without waiting (``_store_now`` is set)."""
        routed = self._routed(msg)
        if routed is None:
            return
        stream, data, is_answer = routed
        assert self._store_now is not None
        self._store_now.store_now(stream.stream_id, data)
        if is_answer:
            stream.end()
        else:
            stream.wake()

    def _routed(self, msg: Message) -> tuple[SseStream, bytes, bool] | None:
        """Where ``msg`` goes and its bytes; None when it is done with (no store needed)."""
        if self.stateless and isinstance(msg, Request):
            # Answered from another task: the peer may be waiting on this
            # router to take its next message.
            assert self._nursery is not None
            self._nursery.start_soon(self._send_to_peer, ErrorResponse(
                msg.id, ErrorData(INVALID_REQUEST, _NO_SERVER_REQUESTS)))
            return None
        data = encode_for_wire(msg)
        if data is None:
            log.error("dropped a message that cannot be encoded as JSON: %.200r", msg)
            return None
        stream = self._stream_for(msg)
        if stream is None:
            log.debug("session %s: dropped a response with no open stream", self.session_id)
            return None
        is_answer = isinstance(msg, Response | ErrorResponse) and stream is not self.standalone
        if is_answer:
            # What the POST's answer is, without decoding it again.
            stream.answer = data
            stream.error_code = msg.error.code if isinstance(msg, ErrorResponse) else None
        if stream.json:
            stream.end()
            return None
        if self.stateless and stream is self.standalone:
            log.debug("stateless session: dropped an unrelated %s", type(msg).__name__)
            return None
        return stream, data, is_answer

    async def prime(self, stream: SseStream) -> str:
        """Store a priming event (an id, no data) on ``stream``; return its id."""
        return await self.store.store_event(stream.stream_id, b"")

    def _stream_for(self, msg: Message) -> SseStream | None:
        """The stream ``msg`` goes on (None: a response with no open stream: dropped)."""
        if isinstance(msg, Response | ErrorResponse):
            # A response only ever goes on its request's stream (never on the
            # GET stream); with that stream ended (the request was cancelled),
            # it is dropped.
            stream = self.by_request.get(msg.id) if msg.id is not None else None
            return stream if stream is not None and not stream.ended else None
        related = getattr(msg, "related_request_id", None)
        stream = None
        if isinstance(related, str | int) and not isinstance(related, bool):
            stream = self.by_request.get(related)
        elif isinstance(msg, Notification) and msg.method == "notifications/progress":
            # Progress names its request by the token the request carried.
            token = (msg.params or {}).get("progressToken")
            if isinstance(token, str | int):
                stream = self.by_progress_token.get(token)
        if stream is not None and not stream.ended and not stream.json:
            return stream
        return self.standalone

    def _prune(self) -> None:
        """Keep the latest :data:`MAX_ENDED_STREAMS` ended streams (for resumes) and every live one.

        An ended stream no longer in ``streams`` (a JSON answer's; one pushed
        out) leaves ``by_request`` too. Only the streams open at the last prune
        are looked at (the requests in flight), and the oldest ended ones first:
        a session that keeps its 64 ended streams pays for one, not for 64.
        """
        streams, by_request = self.streams, self.by_request
        still_open = []
        for stream in self.opened:
            if not stream.ended:
                still_open.append(stream)
            elif stream.json and by_request.get(stream.request_id) is stream:  # type: ignore[arg-type]
                del by_request[stream.request_id]  # type: ignore[arg-type]
        self.opened = still_open
        live = sum(1 for stream in still_open if not stream.json)
        excess = len(streams) - 1 - live - MAX_ENDED_STREAMS  # ended ones beyond the bound
        if excess > 0:
            doomed = []
            for stream in streams.values():  # oldest first
                if stream.ended and stream.stream_id != STANDALONE:
                    doomed.append(stream)
                    if len(doomed) == excess:
                        break
            for stream in doomed:
                del streams[stream.stream_id]
                if by_request.get(stream.request_id) is stream:  # type: ignore[arg-type]
                    del by_request[stream.request_id]  # type: ignore[arg-type]
        for token, stream in list(self.by_progress_token.items()):
            if stream.ended:
                del self.by_progress_token[token]
