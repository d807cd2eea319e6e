"""The Streamable HTTP client's POSTs of 2026-07-28, refusals, and the 2025-11-25 GET stream.

A mixin of the client transport (:mod:`._http_client`), which holds the
state; split out to keep each class small.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import httpx
import trio

from ..peer import Message, decode_message, encode_for_wire
from ..peer._messages import ErrorData, ErrorResponse, Notification, Request, RequestId
from ._failures import POST_FAILED
from ._mcp_headers import param_headers, standard_headers
from ._sse import SSEParser

log = logging.getLogger("trio_mcp.transports")

#: Milliseconds to wait before reconnecting when the server sent no ``retry``.
DEFAULT_RETRY_MS: Final = 1_000
#: Reconnection attempts in a row that bring nothing before a stream is given up.
MAX_RECONNECTS: Final = 5
#: The HTTP statuses a 2026-07-28 server answers JSON-RPC errors with (by code:
#: -32602, -32020/-32021/-32022 with 400, -32601 with 404); no prefix for them.
ERROR_ANSWER_STATUSES: Final = frozenset({400, 404})
#: A refused token (401) or identity (403): the connection failed, in either era.
REFUSED_ACCESS: Final = frozenset({401, 403})


class HttpPosts:
    """Modern POSTs, refused answers and the legacy GET stream (a mixin)."""

    url: str
    extra_headers: dict[str, str]
    fatal: BaseException | None
    _init: Request | None
    _nursery: trio.Nursery | None
    _listening: trio.CancelScope | None
    _stream_ready: trio.Event | None
    _closing: bool
    _inflight: dict[RequestId, trio.CancelScope]
    _tool_lists: set[RequestId]
    _tool_headers: dict[str, dict[str, tuple[str, ...]]]
    _open: Any  # a method of the transport
    _fail: Any  # a method of the transport
    _deliver: Any  # a method of the transport
    _handle: Any  # a method of the transport
    _consume: Any  # a method of the transport

    def _modern_headers(self, msg: Message, version: str, accept: str) -> dict[str, str]:
        """A 2026-07-28 POST's headers: no session; the version and the mirrored body."""
        headers = {**self.extra_headers, "Accept": accept, "MCP-Protocol-Version": version}
        if isinstance(msg, Request | Notification):
            headers.update(standard_headers(msg.method, msg.params))
            if isinstance(msg, Request) and msg.method == "tools/call" and isinstance(
                msg.params, dict
            ):
                header_map = self._tool_headers.get(str(msg.params.get("name")))
                if header_map:
                    headers.update(param_headers(header_map, msg.params.get("arguments")))
        return headers

    async def _send_modern(self, msg: Message, version: str) -> None:
        """POST one 2026-07-28 message; cancelling its request closes the stream."""
        request_id = msg.id if isinstance(msg, Request) else None
        with trio.CancelScope() as scope:
            if request_id is not None:
                self._inflight[request_id] = scope
            try:
                try:
                    response = await self._open("POST", body=encode(msg), modern=(msg, version))
                except httpx.HTTPError as exc:
                    # The request's caller gets the error (below); nothing on stderr.
                    log.debug("POST to %s failed: %s", self.url, exc)
                    if isinstance(msg, Request) and msg.method == "server/discover":
                        self.fatal = exc  # the era's first request: the connection failed
                    if request_id is not None:
                        await self._fail(request_id, f"{POST_FAILED}: {exc}")
                    return
                try:
                    await self._answered(msg, response, True, None)
                finally:
                    with trio.CancelScope(shield=True):
                        await response.aclose()
            finally:
                if request_id is not None:
                    self._inflight.pop(request_id, None)
                    self._tool_lists.discard(request_id)

    async def _answered(
        self, msg: Message, response: httpx.Response, retried: bool, session_id: str | None
    ) -> None:
        """Handle the answer to a POST; one that breaks off (the server went away in the
        middle of the body) fails its request as a POST that could not be made does."""
        try:
            await self._handle(msg, response, retried, session_id)
        except httpx.HTTPError as exc:
            log.debug("reading the answer from %s failed: %s", self.url, exc)
            if isinstance(msg, Request):
                await self._fail(msg.id, f"{POST_FAILED}: {exc}")

    async def _refused(self, msg: Message, response: httpx.Response) -> None:
        body = await response.aread()
        status = response.status_code
        item = decode_message(body)
        error = httpx.HTTPStatusError(
            f"HTTP {status} from {self.url}{refusal_text(item, body)}",
            request=response.request, response=response,
        )
        if msg is self._init or (
            # 2026-07-28 or auto: a refused server/discover without a JSON-RPC
            # error (a 2025-11-25 server's 400...), or with one for a refused
            # token or identity (401, 403), is reported as the HTTP error, as
            # initialize's is (ConnectionFailed with its status_code).
            isinstance(msg, Request) and msg.method == "server/discover"
            and (not isinstance(item, ErrorResponse) or status in REFUSED_ACCESS)
        ):
            self.fatal = error
        log.debug("%s", error)  # the caller gets the error
        if not isinstance(msg, Request):
            return
        data: Any = {"httpStatus": status}
        if isinstance(item, ErrorResponse):
            # The error as the server gave it (the probe must see -32022's
            # data.supported), with the HTTP status added.
            original = item.error.data
            if isinstance(original, dict):
                data = {**original, "httpStatus": status}
            elif original is not None:
                data = original
            # An error answered with the status 2026-07-28 gives its code (400,
            # 404) reads as in 2025-11-25 (``[-32602] bad path``); another
            # status (401, 403, 413...) says what the transport refused.
            message = item.error.message
            if status not in ERROR_ANSWER_STATUSES:
                message = f"HTTP {status}: {message}"
            await self._deliver(ErrorResponse(msg.id, ErrorData(item.error.code, message, data)))
        else:
            # Not a JSON-RPC error (a 2025-11-25 server's refusal of the
            # server/discover probe, say): a non-modern error, so ``auto``
            # falls back to initialize.
            await self._fail(msg.id, f"Streamable HTTP: HTTP {status}", data)

    def _listen(self) -> None:
        if self._nursery is not None and not self._closing:
            if self._listening is not None:
                self._listening.cancel()
            self._listening = trio.CancelScope()
            self._stream_ready = trio.Event()
            self._nursery.start_soon(self._listen_loop, self._listening, self._stream_ready)

    async def _listen_loop(self, scope: trio.CancelScope, ready: trio.Event) -> None:
        """Keep the session's GET stream open, resuming from the last event id."""
        parser = SSEParser()
        failures = 0
        with scope:
            while not self._closing and failures < MAX_RECONNECTS:
                seen = parser.last_event_id
                try:
                    response = await self._open("GET", last_event_id=seen or None)
                except httpx.HTTPError as exc:
                    log.debug("GET stream failed: %s", exc)
                    failures += 1
                    ready.set()
                else:
                    ready.set()
                    try:
                        if response.status_code in (400, 404, 405, 409):
                            return  # no stream for us here
                        if response.status_code != 200:
                            failures += 1
                        else:
                            await self._consume(response, parser, None)
                            failures = 0 if parser.last_event_id != seen else failures + 1
                    finally:
                        await response.aclose()
                retry = parser.retry if parser.retry is not None else DEFAULT_RETRY_MS
                await trio.sleep(retry / 1000)



def refusal_text(item: object, body: bytes) -> str:
    """What a refusal's body says, for its message: ``": "`` and the JSON-RPC error's
    message, or the body's first characters as text (never raw bytes); ``""`` if empty."""
    if isinstance(item, ErrorResponse):
        text = item.error.message
    else:
        text = body[:200].decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return f": {text[:200]}" if text else ""


def encode(msg: Message) -> bytes:
    """``msg`` as wire JSON bytes."""
    data = encode_for_wire(msg)
    if data is None:  # only a message holding non-JSON params
        raise ValueError(f"cannot encode {type(msg).__name__} as JSON")
    return data
