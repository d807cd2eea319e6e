"""The reading side, sans-IO: llhttp's callbacks, the limits and framing checks, parsed requests.

:class:`RequestReader` is fed the bytes a connection reads and keeps the
requests parsed so far, in order; a refusal (a limit, bad framing) becomes a
:class:`Request` with ``refusal`` set, after which nothing more is parsed.
"""

from __future__ import annotations

import collections
import re
from typing import Final, final

import attrs
import httptools

from ._answer import Answer
from ._settings import HttpServerSettings

#: Requests parsed ahead of the one being answered (pipelining) before reading pauses.
MAX_AHEAD: Final = 8
#: Bytes of pipelined request bodies kept ahead before reading pauses.
MAX_AHEAD_BYTES: Final = 256 * 1024
#: A ``Host`` value: a reg-name, IPv4 or IP-literal, and an optional port (RFC 3986 §3.2.2).
_HOST: Final = re.compile(rb"(\[[0-9A-Fa-f:.vV]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(:[0-9]*)?")


class Refusal(Exception):
    """Raised inside a parser callback: answer ``status`` and close."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@final
@attrs.define(eq=False, slots=True)
class Request:
    """One request as parsed so far; the app reads its body through ``receive``.

    Attributes:
        chunks: Body bytes parsed and not yet given to the app.
        buffered: Their size.
        size: Body bytes parsed in all.
        complete: The whole message is parsed.
        refusal: A status (and reason) to answer instead of the app's, then close.
        close_after: The connection closes after this request's answer.
        delivered: The app has had the end of the body (``more_body`` false).
        answer: The answer's state, once the app runs.
    """

    method: str
    target: bytes
    headers: list[tuple[bytes, bytes]]
    version: str
    keep_alive: bool
    expect_continue: bool = False
    upgrade: bool = False
    chunks: collections.deque[bytes] = attrs.field(factory=collections.deque)
    buffered: int = 0
    size: int = 0
    complete: bool = False
    refusal: tuple[int, str] | None = None
    close_after: bool = False
    delivered: bool = False
    answer: Answer = attrs.field(factory=Answer)


@final
@attrs.define(eq=False)
class RequestReader:
    """llhttp (strict) plus the checks it leaves to its user; the parsed requests in order.

    Attributes:
        queue: Requests whose head is parsed, oldest (being answered) first.
        stopped: Parsing has failed or the protocol switched: nothing more is fed.
        in_head: A request head is being parsed.
        raw_head_bytes: Bytes read between messages or in a head since one last ended.
    """

    settings: HttpServerSettings
    queue: collections.deque[Request] = attrs.field(factory=collections.deque)
    stopped: bool = False
    in_head: bool = False
    raw_head_bytes: int = 0
    parser: httptools.HttpRequestParser = attrs.field(init=False)
    _parsing: Request | None = None
    _head_bytes: int = 0
    #: Counts heads and messages ended: tells ``feed`` that one ended inside its data.
    _epoch: int = 0
    _target: bytearray = attrs.field(factory=bytearray)
    _headers: list[tuple[bytes, bytes]] = attrs.field(factory=list)
    _max_headers: int = attrs.field(init=False)
    _max_head: int = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self._max_headers = self.settings.max_headers
        self._max_head = self.settings.max_header_bytes

    def feed(self, data: bytes) -> None:
        """Parse ``data``; a framing error or a limit becomes the refusal of its request."""
        if self.stopped:
            return
        epoch = self._epoch
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # CONNECT was refused in on_headers_complete; an Upgrade is ignored: what
            # follows it is not HTTP/1.1, so the connection closes after that answer.
            self.stopped = True
            if self.queue:
                self.queue[-1].close_after = True
        except httptools.HttpParserCallbackError as error:
            refused = error.__context__
            if not isinstance(refused, Refusal):
                raise
            self.refuse(refused.status, refused.reason)
        except httptools.HttpParserError as error:
            # llhttp refuses versions other than 0.9, 1.x and 2.0 ("Invalid HTTP
            # version"); it stops at an HTTP/2 preface ("PRI * HTTP/2.0").
            version = self.parser.get_http_version()
            status = 505 if str(error) == "Invalid HTTP version" or version == "2.0" else 400
            reason = "HTTP Version Not Supported" if status == 505 else "Bad Request"
            self.refuse(status, f"{reason}: {error}")
        else:
            if epoch != self._epoch:
                self.raw_head_bytes = 0  # a head or message ended inside ``data``
            elif self.in_head or self._parsing is None:
                self.raw_head_bytes += len(data)
                if self.raw_head_bytes > self._max_head:
                    self.refuse(431, "Request Header Fields Too Large")

    def refuse(self, status: int, reason: str) -> None:
        """The request being parsed gets ``status``; nothing more is parsed."""
        self.stopped = True
        request = self._parsing
        if request is None or request.complete:
            request = Request("GET", b"/", [], "1.1", False)
            self.queue.append(request)
        request.refusal = (status, reason)
        request.close_after = True
        self._parsing = None

    def may_read_ahead(self) -> bool:
        """Whether reading on for pipelined requests stays within bounds."""
        if len(self.queue) > MAX_AHEAD:
            return False
        return sum(r.buffered for r in self.queue) <= MAX_AHEAD_BYTES

    # --- llhttp's callbacks (run inside feed_data) ------------------------------------------

    def on_message_begin(self) -> None:
        self.in_head = True
        self._head_bytes = 0
        self._target = bytearray()
        self._headers = []

    def on_url(self, url: bytes) -> None:
        self._target += url
        if len(self._target) > self.settings.max_request_target:
            raise Refusal(414, "URI Too Long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.in_head:
            return  # a trailer field of a chunked body: dropped
        headers = self._headers
        headers.append((name.lower(), value))
        self._head_bytes += len(name) + len(value) + 4
        if len(headers) > self._max_headers:
            raise Refusal(431, "Request Header Fields Too Large: too many fields")
        if self._head_bytes + len(self._target) > self._max_head:
            raise Refusal(431, "Request Header Fields Too Large")

    def on_headers_complete(self) -> None:
        self.in_head = False
        self._epoch += 1
        parser = self.parser
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise Refusal(505, "HTTP Version Not Supported")
        method = parser.get_method().decode("ascii")
        request = Request(method, bytes(self._target), self._headers, version,
                          parser.should_keep_alive())
        self._parsing = request
        self.queue.append(request)
        hosts = 0
        length: int | None = None
        chunked = False
        for name, value in self._headers:
            if name == b"host":
                hosts += 1
                if _HOST.fullmatch(value) is None:
                    raise Refusal(400, "Bad Request: invalid Host")
            elif name == b"content-length":
                length = int(value)  # llhttp has checked its digits and that it is alone
            elif name == b"transfer-encoding":
                chunked = True
                if version == "1.0":  # RFC 9112 §6.1: the framing is faulty
                    raise Refusal(400, "Bad Request: Transfer-Encoding in HTTP/1.0")
            elif name == b"expect":
                if value.strip().lower() != b"100-continue":
                    raise Refusal(417, "Expectation Failed")
                request.expect_continue = version == "1.1"
            elif name == b"upgrade":
                request.upgrade = True
        if hosts > 1 or (hosts == 0 and version == "1.1"):
            raise Refusal(400, "Bad Request: exactly one Host header is required")
        if method == "CONNECT":
            raise Refusal(501, "Not Implemented: CONNECT")
        limit = self.settings.max_body
        if limit is not None and length is not None and length > limit:
            raise Refusal(413, "Content Too Large")
        if not (chunked or length):
            request.expect_continue = False

    def on_body(self, body: bytes) -> None:
        request = self._parsing
        assert request is not None
        request.size += len(body)
        limit = self.settings.max_body
        if limit is not None and request.size > limit:
            raise Refusal(413, "Content Too Large")
        request.chunks.append(body)
        request.buffered += len(body)

    def on_message_complete(self) -> None:
        request = self._parsing
        assert request is not None
        request.complete = True
        self._parsing = None
        self._epoch += 1
