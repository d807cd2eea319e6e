"""One logical SSE stream of a Streamable HTTP session (see :mod:`._http_session`)."""

from __future__ import annotations

from typing import final

import attrs
import trio

from ..peer._messages import RequestId


@final
@attrs.define(eq=False)
class SseStream:
    """One logical SSE stream of a session: a POST's answer stream or the standalone one.

    Attributes:
        stream_id: Names the stream inside its event ids.
        request_id: The request whose answer ends it (None: standalone).
        json: The POST asked for a JSON answer: only the response is kept.
        answer: The encoded response, once routed (a JSON stream keeps only it).
        error_code: The JSON-RPC error code of that response, if it is an error.
        ended: No more events will be added.
        cursor: For the standalone stream: the last event id a connection wrote.
        attached: A connection is writing this stream now.
        poll: Close the connection (not the stream) once caught up.
    """

    stream_id: str
    request_id: RequestId | None = None
    json: bool = False
    answer: bytes | None = None
    error_code: int | None = None
    ended: bool = False
    cursor: str | None = None
    attached: trio.CancelScope | None = None
    poll: bool = False
    changed: trio.Event = attrs.field(factory=trio.Event)

    def wake(self) -> None:
        """Wake whoever waits for news on this stream."""
        self.changed.set()
        self.changed = trio.Event()

    def end(self) -> None:
        """No more events: connections finish writing and close."""
        self.ended = True
        self.wake()
