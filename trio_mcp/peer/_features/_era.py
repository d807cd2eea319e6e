"""The current modern (2026-07-28) request: its protocol fields and MRTR answers.

Set by the dialect (``_modern.wrap``) while a modern request's handler runs,
read by whatever behaves differently per era (``RequestContext``, logging,
task creation). Its own module so that every feature may read it without
importing the dialect.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any, Final, final

import attrs

from ..._errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, McpError
from .._messages import (
    ALL_PROTOCOL_VERSIONS,
    LOGGING_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_PROTOCOL_VERSIONS,
    ClientCapabilities,
    Implementation,
    Request,
    converter,
)
from ._mrtr import CAPABILITY_OF, MAX_QUESTIONS, InputRequired, missing_capability


@final
@attrs.define(eq=False)
class RoundState:
    """The answers one run of an MRTR handler may use, and what it used.

    Attributes:
        answers: Key -> answer: the verified earlier rounds', then this request's.
        used: The answers the handler took (recorded in the next ``requestState``).
        asked: How many questions the handler asked so far (names unnamed keys).
    """

    answers: dict[str, Any]
    used: dict[str, Any] = attrs.field(factory=dict)
    asked: int = 0


@final
@attrs.define(eq=False)
class ModernRequest:
    """The per-request protocol fields of one modern request, current while it is handled.

    Attributes:
        method: The request's method.
        protocol_version: ``io.modelcontextprotocol/protocolVersion``.
        client_capabilities: ``io.modelcontextprotocol/clientCapabilities``.
        client_info: ``io.modelcontextprotocol/clientInfo``, if it was well formed.
        log_level: ``io.modelcontextprotocol/logLevel``; ``None``: no log messages.
        round: The MRTR answers (``tools/call``, ``prompts/get``, ``resources/read``),
            set by the dialect once the request's answers are read.
    """

    method: str
    protocol_version: str
    client_capabilities: ClientCapabilities
    client_info: Implementation | None = None
    log_level: str | None = None
    round: RoundState | None = None

    def answer(self, method: str, params: dict[str, Any], key: str | None) -> tuple[str, Any]:
        """The recorded answer to one question, as ``(key, answer)``; ``answer`` is None if new.

        Raises:
            McpError: -32021 if the client did not declare the capability the
                question needs; -32603 outside a request that may ask.
        """
        check_declared(self.client_capabilities, method, params)
        state = self.round
        if state is None:
            raise McpError(
                INVALID_PARAMS, f"Invalid params: {self.method} cannot ask the client for input"
            )
        state.asked += 1
        if state.asked > MAX_QUESTIONS:
            raise McpError(INVALID_PARAMS, "Invalid params: too many questions for one request")
        if key is None:
            key = f"{CAPABILITY_OF[method]}-{state.asked}"
        found = state.answers.get(key)
        if found is not None:
            state.used[key] = found
        return key, found


#: The modern request being handled in this context, if any.
current_request: contextvars.ContextVar[ModernRequest | None] = contextvars.ContextVar(
    "trio_mcp_modern_request", default=None
)




def declared(caps: ClientCapabilities, capability: str) -> bool:
    """Whether ``caps`` declares the client ``capability`` (``sampling``...)."""
    value = getattr(caps, capability, None)
    return value is not None or capability in caps.extra


def check_declared(caps: ClientCapabilities, method: str, params: dict[str, Any]) -> None:
    """-32021 unless ``caps`` lets the server ask ``method`` (and its elicitation mode).

    Raises:
        McpError: -32021 naming the missing capability.
    """
    capability = CAPABILITY_OF[method]
    if not declared(caps, capability):
        raise missing_capability(capability)
    modes = caps.elicitation
    mode = params.get("mode", "form")
    if method == "elicitation/create" and modes and mode not in modes:
        raise missing_capability("elicitation", {mode: {}})


def ask(method: str, params: dict[str, Any], result_type: type[Any], key: str | None) -> Any:
    """Answer one question of a modern handler from the recorded answers, or stop it.

    Raises:
        InputRequired: The question has no answer yet.
        McpError: -32602 when the recorded answer does not fit ``result_type``.
    """
    modern = current_request.get()
    assert modern is not None
    key, found = modern.answer(method, params, key)
    if found is None:
        raise InputRequired({key: {"method": method, "params": params}})
    return structure_answer(key, found, result_type)


def ask_many(questions: Mapping[str, tuple[str, dict[str, Any], type[Any]]]) -> dict[str, Any]:
    """Answer several questions at once; all unanswered ones go out in one round.

    Raises:
        InputRequired: Some question has no answer yet (all of those are asked).
    """
    modern = current_request.get()
    assert modern is not None
    missing: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}
    for key, (method, params, result_type) in questions.items():
        key, found = modern.answer(method, params, key)
        if found is None:
            missing[key] = {"method": method, "params": params}
        else:
            results[key] = structure_answer(key, found, result_type)
    if missing:
        raise InputRequired(missing)
    return results


def structure_answer(key: str, found: Any, result_type: type[Any]) -> Any:
    """``found`` as ``result_type``, or -32602 naming the input response."""
    try:
        return converter.structure(found, result_type)
    except Exception:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: inputResponses[{key[:64]!r}] is not a valid "
            f"{result_type.__name__}",
        ) from None


# --- reading a request -----------------------------------------------------------------


def is_modern_shaped(req: Request) -> bool:
    """Whether ``req`` carries any of the modern per-request ``_meta`` fields."""
    params = req.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and (
        META_PROTOCOL_VERSION in meta or META_CLIENT_CAPABILITIES in meta
    )


def read_request_meta(req: Request) -> ModernRequest:
    """The modern protocol fields of ``req``.

    Raises:
        McpError: -32602 for a missing or malformed required field; -32022
            (with ``data.supported`` and ``data.requested``) for a version
            this side does not speak in this era.
    """
    params = req.params if isinstance(req.params, dict) else {}
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: _meta with {META_PROTOCOL_VERSION} and "
            f"{META_CLIENT_CAPABILITIES} is required",
        )
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise McpError(INVALID_PARAMS, f"Invalid params: _meta.{META_PROTOCOL_VERSION} is required")
    caps = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        raise McpError(
            INVALID_PARAMS, f"Invalid params: _meta.{META_CLIENT_CAPABILITIES} is required"
        )
    if version not in MODERN_PROTOCOL_VERSIONS:
        raise unsupported_version(version)
    capabilities = _capabilities(caps)
    level = meta.get(META_LOG_LEVEL)
    if level is not None and level not in LOGGING_LEVELS:
        raise McpError(INVALID_PARAMS, f"Invalid params: unknown log level {str(level)[:20]!r}")
    raw_info = meta.get(META_CLIENT_INFO)
    info = _client_info(raw_info) if isinstance(raw_info, dict) else None
    return ModernRequest(req.method, version, capabilities, info, level)


#: A client sends the same capabilities and identity with every request: they
#: are structured once (a few hundred entries at most; then the cache restarts).
_CAPS_CACHE: dict[str, ClientCapabilities] = {}
_INFO_CACHE: dict[str, Implementation | None] = {}
_CACHE_SIZE: Final = 256
#: Larger values are structured each time, never kept (memory stays bounded).
_CACHE_KEY_CHARS: Final = 4096


def _capabilities(caps: dict[str, Any]) -> ClientCapabilities:
    key = repr(caps)
    found = _CAPS_CACHE.get(key)
    if found is None:
        try:
            found = converter.structure(caps, ClientCapabilities)
        except Exception:
            raise McpError(
                INVALID_PARAMS, f"Invalid params: _meta.{META_CLIENT_CAPABILITIES} is malformed"
            ) from None
        if len(key) <= _CACHE_KEY_CHARS:  # (a huge one is not kept)
            if len(_CAPS_CACHE) >= _CACHE_SIZE:
                _CAPS_CACHE.clear()
            _CAPS_CACHE[key] = found
    return found


def _client_info(raw: dict[str, Any]) -> Implementation | None:
    key = repr(raw)
    if key not in _INFO_CACHE:
        try:
            info: Implementation | None = converter.structure(raw, Implementation)
        except Exception:
            info = None  # self-reported and for display only: a bad one is ignored
        if len(key) > _CACHE_KEY_CHARS:
            return info
        if len(_INFO_CACHE) >= _CACHE_SIZE:
            _INFO_CACHE.clear()
        _INFO_CACHE[key] = info
    return _INFO_CACHE[key]


def unsupported_version(requested: str) -> McpError:
    """The -32022 error naming every version this side speaks."""
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {requested[:40]!r}",
        {"supported": list(ALL_PROTOCOL_VERSIONS), "requested": requested},
    )


# --- answering ---------------------------------------------------------------------------
