"""The writing side, sans-IO: an answer's status line, headers and body framing.

The ASGI app's ``http.response.start`` is kept until its first body chunk,
so that the head goes out with it in one write; an answer complete in that
chunk gets a ``Content-Length``, a longer one is chunked (HTTP/1.1) or ends
with the connection (HTTP/1.0).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable
from typing import Final, final

import attrs

REASONS: Final = {
    100: b"Continue", 200: b"OK", 201: b"Created", 202: b"Accepted", 204: b"No Content",
    301: b"Moved Permanently", 302: b"Found", 304: b"Not Modified",
    307: b"Temporary Redirect", 308: b"Permanent Redirect", 400: b"Bad Request",
    401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found", 405: b"Method Not Allowed",
    406: b"Not Acceptable", 408: b"Request Timeout", 409: b"Conflict", 410: b"Gone",
    411: b"Length Required", 413: b"Content Too Large", 414: b"URI Too Long",
    415: b"Unsupported Media Type", 417: b"Expectation Failed", 421: b"Misdirected Request",
    422: b"Unprocessable Content", 429: b"Too Many Requests",
    431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
    501: b"Not Implemented", 502: b"Bad Gateway", 503: b"Service Unavailable",
    504: b"Gateway Timeout", 505: b"HTTP Version Not Supported",
}
_NO_BODY_STATUS: Final = frozenset({204, 304})
#: Headers of the app's answer this server decides itself.
_HOP_BY_HOP: Final = frozenset({b"connection", b"transfer-encoding", b"keep-alive"})
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


def reason(status: int) -> bytes:
    """The reason phrase of ``status``."""
    return REASONS.get(status, b"Unknown")


def refusal(status: int, text: str, common: bytes, *, head_only: bool = False) -> bytes:
    """A whole plain-text error answer that closes the connection."""
    body = text.encode("utf-8", "replace") + b"\n"
    return b"".join((
        b"HTTP/1.1 %d %s\r\n" % (status, reason(status)), common,
        b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n" % len(body), b"" if head_only else body,
    ))


@final
@attrs.define(eq=False)
class DateHeader:
    """The ``Date`` header line, formatted once a second."""

    second: int = -1
    line: bytes = b""

    def get(self) -> bytes:
        """The line for now (RFC 9110 §6.6.1)."""
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + email.utils.formatdate(now, usegmt=True).encode() + b"\r\n"
        return self.line


@final
@attrs.define(eq=False, slots=True)
class Answer:
    """The state of one answer, and the bytes each ASGI message becomes.

    Attributes:
        started: ``http.response.start`` was sent.
        finished: The last body chunk was sent.
        continued: ``100 Continue`` was sent.
        close_after: The connection closes after this answer.
    """

    started: bool = False
    finished: bool = False
    continued: bool = False
    close_after: bool = False
    head_only: bool = False
    chunked: bool = False
    http10: bool = False
    remaining: int | None = None
    pending_head: bytes = b""

    def start(self, status: int, headers: Iterable[tuple[bytes, bytes]], common: bytes, *,
              head: bool, http10: bool, close: bool) -> None:
        """Keep the head of an answer for its first body chunk.

        Args:
            status: The status code.
            headers: The app's headers (its ``Connection``, ``Keep-Alive`` and
                ``Transfer-Encoding`` are dropped: the server frames).
            common: The ``Date``/``Server`` lines.
            head: The request was ``HEAD``: no body is written.
            http10: The request was HTTP/1.0.
            close: The connection closes after this answer.
        """
        self.started = True
        self.head_only = head or status in _NO_BODY_STATUS or status < 200
        self.http10 = http10
        out = [b"HTTP/1.1 %d %s\r\n" % (status, reason(status)), common]
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-length":
                self.remaining = int(value)
                out.append(b"content-length: %d\r\n" % self.remaining)
            elif lowered not in _HOP_BY_HOP:
                out.append(b"%s: %s\r\n" % (name, value))
        self.close_after = close
        self.pending_head = b"".join(out)

    def body(self, data: bytes, more: bool) -> bytes:
        """The bytes to write for one ``http.response.body`` message.

        Raises:
            RuntimeError: The body is longer than its ``Content-Length``.
        """
        out: list[bytes] = []
        if self.pending_head:
            head = self.pending_head
            self.pending_head = b""
            if self.remaining is None and not self.head_only:
                if not more:
                    head += b"content-length: %d\r\n" % len(data)
                    self.remaining = len(data)
                elif not self.http10:
                    self.chunked = True
                    head += b"transfer-encoding: chunked\r\n"
                else:
                    self.close_after = True  # HTTP/1.0: the answer ends with the connection
            if self.close_after:
                head += b"connection: close\r\n"
            elif self.http10:
                head += b"connection: keep-alive\r\n"
            out.append(head + b"\r\n")
        if data and not self.head_only:
            if self.chunked:
                out.append(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                if self.remaining is not None:
                    if len(data) > self.remaining:
                        raise RuntimeError("ASGI: response body longer than its Content-Length")
                    self.remaining -= len(data)
                out.append(data)
        if not more:
            if self.chunked:
                out.append(b"0\r\n\r\n")
            if self.remaining and not self.head_only:
                self.close_after = True  # shorter than announced: only a close can tell
            self.finished = True
        return b"".join(out)
