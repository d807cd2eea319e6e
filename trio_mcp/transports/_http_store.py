"""Where the Streamable HTTP server keeps SSE events, so a client can resume a stream.

Each session has its own :class:`EventStore`. Every event the server writes
to an SSE stream goes through it first; a live connection reads from it, and
a client that lost its connection resumes with ``GET`` + ``Last-Event-ID``
and gets exactly the events of that stream after that id. Event ids are
unique within the session and name their stream (``"<stream>-<n>"`` in the
default store), so a ``Last-Event-ID`` alone says which stream to resume.
"""

from __future__ import annotations

import collections
import itertools
from typing import Final, Protocol, final

import attrs

#: Default bound of :class:`MemoryEventStore`: events kept per stream.
DEFAULT_MAX_EVENTS_PER_STREAM: Final = 1_000
#: Default bound of :class:`MemoryEventStore`: streams kept per session.
DEFAULT_MAX_STREAMS: Final = 256


class EventStore(Protocol):
    """The events of one HTTP session, by stream, for resumption.

    Implementations may be remote (a database); every method may wait.
    Messages are stored as the exact bytes of one JSON-RPC message; an
    empty message is a priming event (an id with no data).
    """

    async def store_event(self, stream_id: str, message: bytes) -> str:
        """Keep one event of ``stream_id`` and return its new event id.

        The id must be unique within the session, must not hold CR, LF or
        NUL, and must let :meth:`replay_events_after` find its stream.

        Cancellation: the event may or may not have been stored.
        """
        ...

    async def replay_events_after(
        self, last_event_id: str
    ) -> tuple[str, list[tuple[str, bytes]]] | None:
        """Return the stream of ``last_event_id`` and its events after it, oldest first.

        Returns:
            ``(stream_id, [(event_id, message), ...])``, or ``None`` when the
            id is unknown (never issued, or already forgotten).

        Cancellation: nothing is changed.
        """
        ...

    async def forget(self) -> None:
        """Drop every event: the session ended.

        Cancellation: some events may be left; the store is dropped anyway.
        """
        ...


@final
@attrs.define(eq=False)
class MemoryEventStore:
    """The default :class:`EventStore`: bounded, in memory, one per session.

    Keeps at most ``max_events_per_stream`` events per stream (the oldest go
    first) and ``max_streams`` streams (the stream that has not been written
    to for the longest goes first). A client that falls that far behind, or
    resumes from a forgotten id, cannot resume; nothing else is lost.
    """

    max_events_per_stream: int = DEFAULT_MAX_EVENTS_PER_STREAM
    max_streams: int = DEFAULT_MAX_STREAMS
    _streams: collections.OrderedDict[str, collections.deque[tuple[int, bytes]]] = attrs.field(
        factory=collections.OrderedDict, init=False
    )
    _seq: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def __attrs_post_init__(self) -> None:
        if self.max_events_per_stream < 1 or self.max_streams < 1:
            raise ValueError("the bounds of a MemoryEventStore must be at least 1")

    async def store_event(self, stream_id: str, message: bytes) -> str:
        """Keep one event; see :meth:`EventStore.store_event`. Never waits."""
        return self.store_now(stream_id, message)

    def store_now(self, stream_id: str, message: bytes) -> str:
        """:meth:`store_event` without the ``await`` (for a sender that cannot wait).

        Raises:
            ValueError: ``stream_id`` is empty or contains ``-``.
        """
        if "-" in stream_id or not stream_id:
            raise ValueError(f"bad stream id {stream_id!r}")
        seq = next(self._seq)
        events = self._streams.get(stream_id)
        if events is None:
            events = self._streams[stream_id] = collections.deque(
                maxlen=self.max_events_per_stream
            )
            while len(self._streams) > self.max_streams:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(stream_id)
        events.append((seq, message))
        return f"{stream_id}-{seq}"

    def drop_now(self, stream_id: str) -> None:
        """Drop the events of one stream (it cannot be resumed any more)."""
        self._streams.pop(stream_id, None)

    async def replay_events_after(
        self, last_event_id: str
    ) -> tuple[str, list[tuple[str, bytes]]] | None:
        """See :meth:`EventStore.replay_events_after`. Never waits."""
        stream_id, _, seq_text = last_event_id.rpartition("-")
        if not seq_text.isascii() or not seq_text.isdigit():
            return None
        events = self._streams.get(stream_id)
        seq = int(seq_text)
        if events is None or not events or seq < events[0][0] or seq > events[-1][0]:
            return None
        out = [(f"{stream_id}-{n}", data) for n, data in events if n > seq]
        if not any(n == seq for n, _ in events):
            return None
        return stream_id, out

    async def forget(self) -> None:
        """Drop every event. Never waits."""
        self._streams.clear()
