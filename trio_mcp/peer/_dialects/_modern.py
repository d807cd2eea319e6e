"""The 2026-07-28 dialect of a server connection: per-request ``_meta``, envelopes, MRTR.

The features and the task runtime are written once, in the 2025-11-25 shape.
This module is the edge where a modern request becomes one of those calls
and its outcome becomes a modern answer:

* ``_era.read_request_meta`` checks the request's ``_meta`` (``-32602`` for a
  missing ``protocolVersion`` or ``clientCapabilities``, ``-32022`` for a
  version this side does not speak) into a ``ModernRequest``, which is
  the current :class:`~trio_mcp.peer._features._dialect.Dialect` while the
  handler runs: what ``RequestContext``, the logging feature and task
  creation read and ask instead of the connection's handshake;
* :func:`become_modern` replaces a connection's handler tables by wrapped
  ones: only the methods the revision has, each answered with
  ``resultType``, ``serverInfo`` and, for cacheable results, ``ttlMs`` and
  ``cacheScope``; a handler stopped by :class:`~._mrtr.InputRequired` ends
  with ``resultType: "input_required"``;
* :func:`choose_era` is the connection's first-request switch: ``initialize``
  keeps the 2025-11-25 path untouched, a request with modern ``_meta``
  selects this dialect, ``server/discover`` is answered in either state.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from functools import partial
from typing import Any, Final, final

import attrs

from ..._errors import (
    INVALID_PARAMS,
    McpError,
)
from .._features._base import PeerCore, current_dialect
from .._messages import (
    ALL_PROTOCOL_VERSIONS,
    META_SERVER_INFO,
    MODERN_PROTOCOL_VERSION,
    ErrorData,
    Request,
    to_wire,
    wire_object,
)
from .._session import Reply, RequestHandler
from ._era import (
    ModernRequest,
    RoundState,
    is_modern_shaped,
    read_request_meta,
    unsupported_version,
)
from ._modern_tasks import (
    TASKS_EXTENSION,
    prepare_call,
    run_prelude,
    tasks_cancel,
    tasks_get,
    tasks_update,
)
from ._mrtr import (
    InputRequired,
    RecordedRound,
    StateCodec,
    read_input_responses,
    request_digest,
)
from ._subscriptions import listen

#: Requests a modern client may send to this server (besides the extensions').
MODERN_METHODS: Final = frozenset({
    "server/discover", "subscriptions/listen", "tools/list", "tools/call",
    "resources/list", "resources/templates/list", "resources/read",
    "prompts/list", "prompts/get", "completion/complete",
})
#: Requests that may end with ``input_required`` (MRTR).
MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Results that carry ``ttlMs`` and ``cacheScope`` (``CacheableResult``).
CACHEABLE_METHODS: Final = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list",
    "resources/templates/list", "resources/read",
})
#: The 2025-11-25 "resource not found" code, which 2026-07-28 must not emit.
_LEGACY_NOT_FOUND: Final = -32002
_LEGACY_URL_ELICITATION: Final = -32042


@final
@attrs.frozen
class CacheHint:
    """A cacheable result's ``ttlMs`` and ``cacheScope``.

    Attributes:
        ttl_ms: How long a client may reuse the result, in milliseconds.
        scope: ``"public"`` (no per-user data) or ``"private"``.
    """

    ttl_ms: int = 0
    scope: str = "public"


#: The defaults: lists are the same for everyone; a resource's contents may
#: be personal. Both are stale at once unless the App says otherwise.
DEFAULT_CACHE_HINTS: Final = {
    "resources/read": CacheHint(0, "private"),
}


_PUBLIC: Final = CacheHint()
_PRIVATE: Final = CacheHint(0, "private")


def server_info_meta(peer: PeerCore) -> dict[str, Any]:
    """``{"io.modelcontextprotocol/serverInfo": ...}`` for a result's ``_meta``."""
    return {META_SERVER_INFO: _server_info(peer)}


_SERVER_INFO: weakref.WeakKeyDictionary[Any, tuple[Any, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _server_info(peer: PeerCore) -> dict[str, Any]:
    """The App's ``Implementation`` as wire JSON, made once per App (and identity)."""
    app = peer.app
    key = (getattr(app, "name", None), getattr(app, "version", None))
    cached = _SERVER_INFO.get(app)
    if cached is None or cached[0] != key:
        cached = _SERVER_INFO[app] = (key, to_wire(app.info))
    return cached[1]


def cache_hint(peer: PeerCore, method: str) -> CacheHint:
    """The App's cache hint for ``method``'s results, else the default."""
    hints: Mapping[str, CacheHint] = peer.app.cache_hints
    found = hints.get(method) or DEFAULT_CACHE_HINTS.get(method)
    if found is None and peer.app.scope_rules:
        return _PRIVATE  # lists filtered by the caller's scopes differ by caller
    return found or _PUBLIC


def envelope(peer: PeerCore, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A handler's result (wire JSON) in the modern shape, as a new dict."""
    out = dict(result)
    out.setdefault("resultType", "complete")
    meta = dict(out.get("_meta") or {})
    meta.setdefault(META_SERVER_INFO, _server_info(peer))
    out["_meta"] = meta
    if method in CACHEABLE_METHODS:
        hint = cache_hint(peer, method)
        out.setdefault("ttlMs", hint.ttl_ms)
        out.setdefault("cacheScope", hint.scope)
    if method == "tools/list":
        # Tasks are an extension in this revision: no core ``execution.taskSupport``.
        out["tools"] = [_modern_tool(tool) for tool in out.get("tools", [])]
    return out


def _modern_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if "execution" not in tool:
        return tool
    return {k: v for k, v in tool.items() if k != "execution"}


def modern_capabilities(peer: PeerCore) -> dict[str, Any]:
    """The server capabilities as this revision has them (``server/discover``)."""
    caps = dict(to_wire(peer.app.server_capabilities()))
    caps.pop("tasks", None)  # the core tasks of 2025-11-25 (an extension now)
    extensions = dict(caps.get("extensions") or {})
    if peer.app.host_tasks:
        extensions[TASKS_EXTENSION] = {}
    caps["extensions"] = extensions
    return caps


def codec_of(peer: PeerCore) -> StateCodec:
    """The App's ``requestState`` codec."""
    codec: StateCodec = peer.app.state_codec
    return codec


def _legacy_code(exc: McpError) -> McpError:
    """A 2025-11-25-only error code as its 2026-07-28 counterpart."""
    if exc.code in (_LEGACY_NOT_FOUND, _LEGACY_URL_ELICITATION):
        return McpError(INVALID_PARAMS, exc.message, exc.data)
    return exc


def _begin(peer: PeerCore, method: str, req: Request) -> tuple[ModernRequest, dict[str, Any], bool]:
    """Read a modern request: its protocol fields, its params, whether a prelude runs.

    Raises:
        McpError: -32602 / -32022 / -32021 as :func:`read_request_meta` and the
            MRTR and task checks say.
    """
    params = dict(req.params or {})
    params.pop("task", None)  # core tasks are not part of this revision
    modern = read_request_meta(req)  # its errors come before the MRTR ones
    if method in MRTR_METHODS:
        responses = read_input_responses(params)
        recorded: RecordedRound | None = None
        if "requestState" in params:  # (the digest only when there is a state)
            recorded = codec_of(peer).open(
                params["requestState"], digest=request_digest(method, params),
                principal=peer.principal_of(req),
            )
        modern.round = RoundState(usable_answers(recorded, responses))
    prelude = method == "tools/call" and prepare_call(peer, params, modern)
    return modern, params, prelude


def usable_answers(recorded: RecordedRound | None, responses: dict[str, Any]) -> dict[str, Any]:
    """The answers a retry's handler may use: what was asked, and nothing else.

    The MRTR pattern (2026-07-28, basic/patterns/mrtr): a server ignores
    input it did not request. This server knows what it requested: the
    signed ``requestState`` lists the keys its last ``input_required``
    asked. So without a state no answer is used (the handler asks its first
    question again), and with one only the answers to the keys it asked
    join the earlier rounds' (a key the handler has not reached yet is
    asked when it gets there). A confirmation cannot be skipped by
    answering it before it is shown.
    """
    if recorded is None:
        return {}
    answers = dict(recorded.answers)
    asked = set(recorded.asked)
    answers.update((key, value) for key, value in responses.items() if key in asked)
    return answers


def _finish(peer: PeerCore, method: str, out: Any) -> Any:
    """A handler's outcome in the modern shape (a :class:`Reply` stays one)."""
    if isinstance(out, Reply):
        return Reply(envelope(peer, method, out.result), out.after_send)
    return envelope(peer, method, out if isinstance(out, dict) else wire_object(out))


def wrap(peer: PeerCore, method: str, handler: RequestHandler) -> RequestHandler:
    """``handler`` as a modern handler.

    For an inline method the session starts it in the dispatching task
    (``run_inline``), so an inline tool is still answered there, with no Trio
    task; what waits (the handler's own wait, a task prelude) leaves the reader
    as the handler itself does.
    """

    async def serve(req: Request) -> Any:
        modern, params, prelude = _begin(peer, method, req)
        token = current_dialect.set(modern)
        try:
            out = await handler(
                Request(req.id, req.method, params, dialect=modern, caller=req.caller)
            )
            if prelude and isinstance(out, Reply):
                out = await run_prelude(peer, out, modern)
        except InputRequired as need:
            assert modern.round is not None
            return input_required_result(peer, req, params, modern.round, need)
        except McpError as exc:
            raise _legacy_code(exc) from None
        finally:
            current_dialect.reset(token)
        return _finish(peer, method, out)

    return serve


def input_required_result(
    peer: PeerCore, req: Request, params: dict[str, Any], state: RoundState, need: InputRequired
) -> dict[str, Any]:
    """The ``input_required`` result for ``req``'s handler, stopped by ``need``."""
    sealed = codec_of(peer).seal(
        digest=request_digest(req.method, params), principal=peer.principal_of(req),
        answers=state.used, asked=list(need.requests),
    )
    return {
        "resultType": "input_required",
        "inputRequests": need.requests,
        "requestState": sealed,
        "_meta": server_info_meta(peer),
    }


async def _refuse_initialize(req: Request) -> Any:
    params = req.params if isinstance(req.params, dict) else {}
    requested = params.get("protocolVersion")
    error = unsupported_version(requested if isinstance(requested, str) else "")
    error.message = (
        "Unsupported protocol version: this connection speaks 2026-07-28 (its first "
        "request chose it); open a new connection to use initialize"
    )
    raise error


def become_modern(peer: PeerCore) -> None:
    """Serve ``peer``'s connection in the 2026-07-28 dialect from now on.

    The methods this revision has are wrapped (see :func:`wrap`);
    ``initialize`` is refused with -32022, every other method is -32601.
    """
    session = peer.session
    handlers: dict[str, RequestHandler] = {}
    for method, handler in session.request_handlers.items():
        if method in MODERN_METHODS:
            handlers[method] = handler if method == "server/discover" else wrap(
                peer, method, handler
            )
    handlers["subscriptions/listen"] = wrap(peer, "subscriptions/listen", partial(listen, peer))
    handlers["tasks/get"] = wrap(peer, "tasks/get", partial(tasks_get, peer))
    handlers["tasks/update"] = wrap(peer, "tasks/update", partial(tasks_update, peer))
    handlers["tasks/cancel"] = wrap(peer, "tasks/cancel", partial(tasks_cancel, peer))
    handlers["initialize"] = _refuse_initialize
    session.request_handlers = handlers
    session.inline = {method for method in session.inline if method in MODERN_METHODS}
    # Not a requestor connection of 2025-11-25 tasks: no tasks/status notifications.
    peer.app.registry.detach(peer.context, peer)
    session.admit = None
    session.route = None
    peer.protocol_version = MODERN_PROTOCOL_VERSION


def offer_both_eras(peer: PeerCore) -> None:
    """Make a server connection's first request choose its era.

    Installs :func:`choose_era` as the session's ``route`` and :func:`discover`
    as the ``server/discover`` handler (answered in either state). Called by
    :class:`~trio_mcp.Peer` for every server connection, after the features
    installed their handlers.
    """
    peer.session.route = partial(choose_era, peer)
    peer.session.request_handlers["server/discover"] = partial(discover, peer)


def choose_era(peer: PeerCore, req: Request) -> ErrorData | None:
    """The first-request switch of a server connection (the session's ``route``).

    ``initialize`` selects 2025-11-25 for the connection, as before; a
    request carrying a supported modern ``_meta`` selects 2026-07-28;
    ``server/discover`` (and a modern request with bad ``_meta``) is
    answered without choosing.
    """
    if req.method == "initialize":
        peer.session.route = None
        return None
    if req.method == "server/discover" or not is_modern_shaped(req):
        return None
    try:
        read_request_meta(req)
    except McpError as exc:
        return ErrorData(exc.code, exc.message, exc.data)
    become_modern(peer)
    return None


async def discover(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``server/discover``: versions, capabilities, instructions and identity."""
    read_request_meta(req)
    result: dict[str, Any] = {
        "supportedVersions": list(ALL_PROTOCOL_VERSIONS),
        "capabilities": modern_capabilities(peer),
    }
    if peer.app.instructions is not None:
        result["instructions"] = peer.app.instructions
    return envelope(peer, "server/discover", result)
