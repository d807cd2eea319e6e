"""The 2026-07-28 dialect of a client connection: the probe, per-request ``_meta``, MRTR retries.

A client chooses its era when it opens (``era=`` of the ``open_*_client``
functions, :func:`choose_client_era`):

* ``"2025-11-25"``: the ``initialize`` handshake, as always;
* ``"2026-07-28"``: ``server/discover`` (whose answer gives the server's
  identity and capabilities); an ``UnsupportedProtocolVersion`` answer
  naming a modern version we speak is retried with it, anything else fails;
* ``"auto"``: the spec's probe: ``server/discover`` first; a result or a
  recognised modern error selects 2026-07-28; any other error, a
  non-modern HTTP 4xx or no answer within the probe timeout falls back to
  ``initialize``. The outcome is remembered per server (:data:`ERA_CACHE`).

Afterwards every request goes through :class:`ModernClient`: the
per-request ``_meta`` is added (``protocolVersion``, ``clientCapabilities``,
``clientInfo``, ``logLevel`` once set), an ``input_required`` result is
answered with the App's own handlers (``on_elicitation``, ``on_sampling``,
``on_roots``) and the request retried with ``inputResponses`` and the
``requestState`` echoed byte for byte, and the modern error codes become
:class:`~trio_mcp.HeaderMismatch`, :class:`~trio_mcp.MissingClientCapability`
and :class:`~trio_mcp.UnsupportedProtocolVersion`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, final

import trio

from ..._errors import (
    HEADER_MISMATCH,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ConnectionClosed,
    HeaderMismatch,
    LocalUsageError,
    MissingClientCapability,
    RemoteError,
    RemoteProtocolError,
    UnsupportedProtocolVersion,
)
from .._features._base import PeerCore
from .._messages import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    CallToolParams,
    CallToolResult,
    Implementation,
    ListTasksResult,
    Request,
    ServerCapabilities,
    Task,
    Tool,
    converter,
    to_wire,
    wire_object,
)
from .._session import ProgressCallback
from .._tasks import TaskHandle
from ._modern_requestor import call_and_follow, get_detailed, modern_handle, reattach
from ._modern_tasks import TASKS_EXTENSION

log = logging.getLogger("trio_mcp.peer")
R = TypeVar("R")

#: The eras a client may ask for.
ERAS: Final = ("auto", "2025-11-25", MODERN_PROTOCOL_VERSION)
#: Seconds ``auto`` waits for the ``server/discover`` probe before it falls back.
DEFAULT_PROBE_TIMEOUT: Final = 5.0
#: Most ``input_required`` rounds one request may take before it fails.
MAX_INPUT_ROUNDS: Final = 16
#: Server key -> era chosen by ``auto`` (the spec: cache it per server).
ERA_CACHE: dict[str, str] = {}
_MODERN_ERRORS: Final = {
    HEADER_MISMATCH: HeaderMismatch,
    MISSING_CLIENT_CAPABILITY: MissingClientCapability,
    UNSUPPORTED_PROTOCOL_VERSION: UnsupportedProtocolVersion,
}
#: Client capability -> the App decorator that declares it (by registering a handler).
_HANDLERS: Final = {"sampling": "on_sampling", "elicitation": "on_elicitation",
                    "roots": "on_roots"}
#: Requests whose answer may be a task (the tasks extension: ``resultType: "task"``).
TASK_RESULT_METHODS: Final = frozenset({"tools/call"})
#: Answered by the client's own handlers when a server asks for input.
_INPUT_METHODS: Final = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})


def typed_error(exc: RemoteError) -> RemoteError:
    """A modern error code as its typed :class:`RemoteError`; others unchanged."""
    kind = _MODERN_ERRORS.get(exc.code)
    if kind is None or isinstance(exc, kind):
        return exc
    typed = kind(exc.code, exc.message, exc.data)
    if isinstance(typed, MissingClientCapability):
        # The server speaks of capabilities; a Python caller needs the handler
        # that declares one (as 2025-11-25's message says).
        handlers = [f"@app.{_HANDLERS[c]}" for c in typed.required if c in _HANDLERS]
        if handlers:
            typed = kind(exc.code, f"{exc.message}; this client declares it when its App "
                                   f"registers {' and '.join(handlers)}", exc.data)
    return typed


def is_modern_error(exc: RemoteError) -> bool:
    """Whether ``exc`` is one only a modern server sends (it identifies the era)."""
    return exc.code in _MODERN_ERRORS


def modern_client_capabilities(peer: PeerCore) -> dict[str, Any]:
    """This client's capabilities as 2026-07-28 has them (no core ``tasks``)."""
    caps = dict(to_wire(peer.app.client_capabilities()))
    caps.pop("tasks", None)
    # The tasks extension: this client follows a task the server makes of a call.
    caps["extensions"] = {**(caps.get("extensions") or {}), TASKS_EXTENSION: {}}
    if isinstance(caps.get("roots"), dict):
        caps["roots"] = {}  # no roots list_changed notification in this revision
    return caps


@final
class ModernClient:
    """How a client connection sends requests once it speaks 2026-07-28.

    Attributes:
        peer: The connection.
        version: The modern protocol version in use.
        log_level: Sent as ``io.modelcontextprotocol/logLevel`` when set.
        max_rounds: Most ``input_required`` rounds per request.
    """

    def __init__(self, peer: PeerCore, version: str = MODERN_PROTOCOL_VERSION) -> None:
        self.peer = peer
        self.version = version
        self.log_level: str | None = None
        self.max_rounds = MAX_INPUT_ROUNDS
        self._caps = modern_client_capabilities(peer)
        client_info = peer.client_info or peer.app.info
        self._info = to_wire(client_info)
        self._uris: set[str] = set()
        self._listening: trio.CancelScope | None = None
        self._acknowledged = trio.Event()

    @property
    def protocol_version(self) -> str:
        """The modern protocol version in use (:attr:`version`)."""
        return self.version

    # --- subscriptions (subscriptions/listen) ------------------------------------------

    async def subscribe(self, uri: str | None = None) -> None:
        """Keep a ``subscriptions/listen`` open for list changes (and ``uri``'s updates).

        One listen request carries the whole filter; a new URI replaces it
        with a wider one. Returns once the server acknowledged it.

        Raises:
            ConnectionClosed: The connection closed first.
        """
        if uri is not None:
            self._uris.add(uri)
        await self._relisten()

    async def unsubscribe(self, uri: str) -> None:
        """Stop the updates about ``uri`` (the listen request is replaced without it)."""
        self._uris.discard(uri)
        await self._relisten()

    async def _relisten(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
        self._acknowledged = trio.Event()
        self.peer.start_soon(self._listen, self._acknowledged)
        with trio.move_on_after(10):
            await self._acknowledged.wait()

    async def _listen(self, acknowledged: trio.Event) -> None:
        scope = self._listening = trio.CancelScope()
        wanted: dict[str, Any] = {
            "toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True,
        }
        if self._uris:
            wanted["resourceSubscriptions"] = sorted(self._uris)
        session = self.peer.session
        previous = session.notification_handlers.get("notifications/subscriptions/acknowledged")

        def on_ack(note: Any) -> None:
            acknowledged.set()
            if previous is not None:
                previous(note)

        session.notification_handlers["notifications/subscriptions/acknowledged"] = on_ack
        with scope:
            try:
                await session.request_raw(
                    "subscriptions/listen", self.with_meta({"notifications": wanted})
                )
            except (RemoteError, ConnectionClosed) as exc:
                log.info("subscriptions/listen ended: %s", exc)
            finally:
                acknowledged.set()

    def meta(self) -> dict[str, Any]:
        """The per-request ``_meta`` fields."""
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.version,
            META_CLIENT_CAPABILITIES: self._caps,
            META_CLIENT_INFO: self._info,
        }
        if self.log_level is not None:
            meta[META_LOG_LEVEL] = self.log_level
        return meta

    def with_meta(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """``params`` with the per-request ``_meta`` added (its own keys kept)."""
        out = dict(params or {})
        out["_meta"] = {**(out.get("_meta") or {}), **self.meta()}
        return out

    async def request_raw(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send a modern request; answer its questions and retry until it completes.

        Raises:
            RemoteError: The server answered with an error (typed for -32020..-32022).
            RemoteProtocolError: An unknown ``resultType``, a malformed
                ``input_required``, or more than :attr:`max_rounds` rounds.
            ConnectionClosed: The connection closed first.

        Cancellation: the request in flight is withdrawn (``notifications/cancelled``
            on stdio and WebSocket, the response stream closed on HTTP).
        """
        base = self.with_meta(params)
        current = base
        answered: dict[str, Any] = {}
        retried = False
        for _ in range(self.max_rounds + 1):
            try:
                raw = await self.peer.session.request_raw(method, current, progress=progress)
            except RemoteError as exc:
                error = typed_error(exc)
                mutual = [v for v in getattr(error, "supported", ()) if
                          v in MODERN_PROTOCOL_VERSIONS] if not retried else []
                if not mutual:
                    raise error from None
                # The spec: retry once with a mutually supported version.
                retried, self.version = True, mutual[0]
                base = self.with_meta(params)
                current = {**current, "_meta": base["_meta"]}
                continue
            kind = raw.get("resultType", "complete")
            if kind == "complete" or (kind == "task" and method in TASK_RESULT_METHODS):
                return raw
            if kind != "input_required":
                raise RemoteProtocolError(
                    f"the answer to {method} has an unknown resultType {str(kind)[:40]!r}"
                )
            requests = raw.get("inputRequests") or {}
            if not isinstance(requests, dict):
                raise RemoteProtocolError(f"the answer to {method} has malformed inputRequests")
            responses = await self.answer(requests, answered)
            current = dict(base)
            if responses:
                current["inputResponses"] = responses
            if "requestState" in raw:
                current["requestState"] = raw["requestState"]
        raise RemoteProtocolError(
            f"{method} still needed input after {self.max_rounds} rounds; giving up"
        )

    async def answer(
        self, requests: dict[str, Any], answered: dict[str, Any]
    ) -> dict[str, Any]:
        """Answer each input request with the App's handler (each key once per request)."""
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            if key in answered:
                responses[key] = answered[key]
                continue
            if not isinstance(request, dict) or request.get("method") not in _INPUT_METHODS:
                raise RemoteProtocolError(f"input request {str(key)[:64]!r} is malformed")
            method = request["method"]
            params = request.get("params")
            handler = self.peer.session.request_handlers.get(method)
            if handler is None:
                raise RemoteProtocolError(f"no handler of this client answers {method}")
            req = Request(f"input:{key}", method, params if isinstance(params, dict) else {})
            result = await handler(req)
            responses[key] = answered[key] = (
                result if isinstance(result, dict) else wire_object(result)
            )
        return responses

    def task_handle(
        self, raw: dict[str, Any], result_type: type[R], progress: ProgressCallback | None = None
    ) -> TaskHandle[R]:
        """The handle for the answer to a call (see :func:`._modern_requestor.modern_handle`)."""
        return modern_handle(self.peer, raw, result_type, progress)

    def reattach(self, task_id: str, result_type: type[R]) -> TaskHandle[R]:
        """A handle on a task known only by id."""
        return reattach(self.peer, task_id, result_type)

    async def get_detailed(
        self, task_id: str, meta: dict[str, Any] | None = None
    ) -> tuple[Task, dict[str, Any]]:
        """One ``tasks/get`` (``meta``: more ``_meta``): the snapshot and its detail."""
        return await get_detailed(self.peer, task_id, meta)

    async def get_task(self, task_id: str, meta: dict[str, Any] | None = None) -> Task:
        """One ``tasks/get``: the snapshot of the detailed task."""
        task, _ = await get_detailed(self.peer, task_id, meta)
        return task

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """Never: the tasks extension has no ``tasks/result``.

        Raises:
            LocalUsageError: Always.
        """
        raise _not_here("there is no tasks/result; use task(task_id).result()")

    async def cancel_task(self, task_id: str) -> Task:
        """``tasks/cancel`` (only acknowledged), then ``tasks/get``."""
        return await reattach(self.peer, task_id, dict).cancel()

    async def list_tasks(self, cursor: str | None) -> ListTasksResult:
        """Never: the tasks extension has no ``tasks/list``.

        Raises:
            LocalUsageError: Always.
        """
        raise _not_here("there is no tasks/list; a client keeps the ids of its tasks")

    async def ping(self) -> None:
        """No ``ping`` in 2026-07-28: a ``server/discover`` round trip."""
        await self.request_raw("server/discover", None)

    async def set_log_level(self, level: str) -> None:
        """Sent from now on in every request's ``_meta`` (:attr:`log_level`)."""
        self.log_level = level
        await trio.lowlevel.checkpoint()

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, progress: ProgressCallback | None,
        known: Tool | None,
    ) -> CallToolResult:
        """``tools/call``, following the task the server may make of it (see
        :func:`._modern_requestor.call_and_follow`); ``known`` is not needed here."""
        params = to_wire(CallToolParams(name=name, arguments=arguments))
        return await call_and_follow(self.peer, params, progress)

    async def call_tool_task(
        self, name: str, arguments: dict[str, Any] | None, *, ttl: int | None,
        meta: dict[str, Any] | None, progress: ProgressCallback | None, known: Tool | None,
    ) -> TaskHandle[CallToolResult]:
        """``tools/call``; the server decides whether it becomes a task (``ttl`` is not
        sent: the server alone chooses it), the handle follows either answer."""
        params = to_wire(CallToolParams(name=name, arguments=arguments))
        if meta:
            params["_meta"] = dict(meta)
        raw = await self.peer.request_raw("tools/call", params, progress=progress)
        return self.task_handle(raw, CallToolResult, progress)


def _not_here(what: str) -> LocalUsageError:
    """The error for a 2025-11-25 task method used on a 2026-07-28 connection."""
    return LocalUsageError(f"not in 2026-07-28: {what}")


def adopt_discover(peer: PeerCore, result: dict[str, Any]) -> None:
    """Take the server's identity, capabilities and instructions from ``server/discover``."""
    try:
        peer.remote_capabilities = converter.structure(
            result.get("capabilities") or {}, ServerCapabilities
        )
    except Exception:
        raise RemoteProtocolError("server/discover answered malformed capabilities") from None
    info = (result.get("_meta") or {}).get(META_SERVER_INFO)
    if isinstance(info, dict):
        try:
            peer.remote_info = converter.structure(info, Implementation)
        except Exception:
            peer.remote_info = None
    instructions = result.get("instructions")
    peer.instructions = instructions if isinstance(instructions, str) else None


async def open_modern(peer: PeerCore, *, strict: bool) -> ModernClient:
    """Send ``server/discover`` as a modern client; retry once with a mutual version.

    Raises:
        RemoteError: The server refused (typed for the modern codes).
        RemoteProtocolError: The answer is malformed or names no version we speak.
    """
    client = ModernClient(peer)
    for _ in range(2):
        try:
            result = await peer.session.request_raw("server/discover", client.with_meta(None))
        except RemoteError as exc:
            error = typed_error(exc)
            if isinstance(error, UnsupportedProtocolVersion):
                mutual = [v for v in error.supported if v in MODERN_PROTOCOL_VERSIONS]
                if mutual:  # the spec: retry with a mutually supported version
                    client.version = mutual[0]
                    continue
            raise error from None
        versions = result.get("supportedVersions")
        if strict and isinstance(versions, list) and client.version not in versions:
            raise RemoteProtocolError(
                f"the server does not list {client.version} in supportedVersions"
            )
        adopt_discover(peer, result)
        peer.protocol_version = client.version
        return client
    raise RemoteProtocolError("the server rejected every modern version this client speaks")


async def choose_client_era(
    peer: PeerCore,
    era: str,
    handshake: Callable[[], Awaitable[None]],
    *,
    server_key: str | None = None,
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
) -> ModernClient | None:
    """Open a client connection in ``era``; the :class:`ModernClient` if it is modern.

    Args:
        peer: The client connection.
        era: ``"auto"``, ``"2025-11-25"`` or ``"2026-07-28"``.
        handshake: Performs the 2025-11-25 ``initialize`` handshake.
        server_key: Names the server for :data:`ERA_CACHE` (``auto`` only).
        probe_timeout: Seconds ``auto`` waits for the probe's answer.

    Raises:
        ValueError: ``era`` is not one of :data:`ERAS`.
        RemoteError, RemoteProtocolError, ConnectionClosed: Opening failed.
    """
    if era not in ERAS:
        raise ValueError(f"era must be one of {', '.join(ERAS)}, not {era!r}")
    if era == "auto" and server_key is not None:
        era = ERA_CACHE.get(server_key, era)
    if era == "2025-11-25":
        await handshake()
        return None
    if era != "auto":
        client = await open_modern(peer, strict=True)
        _finish_modern(peer)
        return client
    chosen: ModernClient | None = None
    with trio.move_on_after(probe_timeout):
        try:
            chosen = await open_modern(peer, strict=False)
        except RemoteError as exc:
            if is_modern_error(exc):
                raise
            log.debug("server/discover probe: %s; falling back to initialize", exc)
        except RemoteProtocolError as exc:
            log.debug("server/discover probe answered oddly (%s); falling back", exc)
    if chosen is not None:
        if server_key is not None:
            ERA_CACHE[server_key] = MODERN_PROTOCOL_VERSION
        _finish_modern(peer)
        return chosen
    if not peer.is_open:
        await trio.lowlevel.checkpoint_if_cancelled()  # cancelled: that, not the closing
        raise ConnectionClosed("the connection closed during the server/discover probe")
    await handshake()
    if server_key is not None:
        ERA_CACHE[server_key] = "2025-11-25"
    return None


def _finish_modern(peer: PeerCore) -> None:
    session = peer.session
    session.admit = None
    if session.gate is not None:
        session.gate.set()
