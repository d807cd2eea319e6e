"""Server-sent events, sans-IO: encode events for a server, parse a byte stream for a client.

Both halves follow the WHATWG "event stream interpretation" rules that MCP's
Streamable HTTP transport relies on: ``id`` sets the last event id (also for
an event whose data is empty, which is how a server primes a client to
resume), ``retry`` sets the reconnection delay, comment lines (``:``) are
ignored, and lines end with CRLF, LF or CR.

Nothing here does I/O; the HTTP transports feed bytes in and write bytes out.
"""

from __future__ import annotations

import re
from typing import Final, final

import attrs

_FIELD_SEP: Final = ":"
_EOL: Final = re.compile(rb"\r\n|\r|\n")


def encode_event(
    data: bytes | str = b"", *, event_id: str | None = None, retry: int | None = None
) -> bytes:
    """Encode one event.

    Args:
        data: The payload (one JSON-RPC message, which never holds a raw line
            break, or empty for a priming event).
        event_id: The ``id`` field, when the event can be resumed from.
        retry: The ``retry`` field: milliseconds a client waits before it
            reconnects.

    Returns:
        The UTF-8 bytes of the event, ending with the blank line that
        dispatches it.

    Raises:
        ValueError: ``event_id`` holds a line break or NUL (it could not be
            read back).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    out = bytearray()
    if event_id is not None:
        if any(c in event_id for c in "\r\n\0"):
            raise ValueError("an SSE event id cannot hold CR, LF or NUL")
        out += b"id: " + event_id.encode("utf-8") + b"\n"
    if retry is not None:
        out += b"retry: %d\n" % retry
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    for line in lines:
        out += b"data: " + line + b"\n" if line else b"data:\n"
    out += b"\n"
    return bytes(out)


def encode_retry(retry: int) -> bytes:
    """Encode a ``retry`` field alone: the reconnection delay, in ms, with no event."""
    return b"retry: %d\n\n" % retry


def encode_comment(text: str = "") -> bytes:
    """Encode a comment line: clients ignore it; it keeps idle connections alive."""
    return b": " + text.replace("\r", " ").replace("\n", " ").encode("utf-8") + b"\n\n"


@final
@attrs.frozen
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        data: The payload, lines joined by LF (empty for a priming event).
        event: The ``event`` field ("message" when absent).
        id: The last event id after this event ("" when none was ever set).
        retry: The ``retry`` value carried by this event, if any.
    """

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None


@final
@attrs.define(eq=False)
class SSEParser:
    """Turn the bytes of an event stream into :class:`ServerSentEvent` values.

    Feed it what arrives, in any chunking; it keeps a partial line until the
    rest comes. ``last_event_id`` and ``retry`` persist across events, as a
    client needs them to reconnect.

    Attributes:
        last_event_id: The id to send as ``Last-Event-ID`` when resuming.
        retry: The last reconnection delay the server asked for, in ms.
    """

    last_event_id: str = ""
    retry: int | None = None
    _buffer: bytearray = attrs.field(factory=bytearray, init=False)
    _data: list[str] = attrs.field(factory=list, init=False)
    _event: str = attrs.field(default="", init=False)
    _event_retry: int | None = attrs.field(default=None, init=False)
    _has_data: bool = attrs.field(default=False, init=False)
    _pending_cr: bool = attrs.field(default=False, init=False)
    _started: bool = attrs.field(default=False, init=False)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume ``chunk``; return the events it completed, in order."""
        data = bytes(chunk)
        if self._pending_cr:
            # A CR ended the previous chunk: an LF right after it belongs to it.
            self._pending_cr = False
            if data.startswith(b"\n"):
                data = data[1:]
        buf = self._buffer
        # Only the new bytes can hold a line end: what was kept holds none.
        scan_from = len(buf)
        buf += data
        events: list[ServerSentEvent] = []
        start = 0
        for match in _EOL.finditer(buf, scan_from):
            line = bytes(buf[start:match.start()])
            start = match.end()
            if start == len(buf) and match.group() == b"\r":
                self._pending_cr = True
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buf[:start]
        return events

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not self._started:
            self._started = True
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        line = raw.decode("utf-8", errors="replace")
        if not line:
            return self._dispatch()
        if line.startswith(_FIELD_SEP):
            return None
        name, sep, value = line.partition(_FIELD_SEP)
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = self._event_retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        has_data, retry = self._has_data, self._event_retry
        data, event = "\n".join(self._data), self._event or "message"
        self._data, self._event, self._has_data, self._event_retry = [], "", False, None
        if not has_data:
            # WHATWG: an event with no data is not dispatched (its id and
            # retry fields still took effect above).
            return None
        return ServerSentEvent(data, event, self.last_event_id, retry)
