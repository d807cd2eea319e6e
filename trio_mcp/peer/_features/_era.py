"""The current modern (2026-07-28) request: its protocol fields and MRTR answers.

Set by the dialect (``_modern.wrap``) while a modern request's handler runs,
read by whatever behaves differently per era (``RequestContext``, logging,
task creation). Its own module so that every feature may read it without
importing the dialect.
"""

from __future__ import annotations

import contextvars
from typing import Any, final

import attrs

from ..._errors import INVALID_PARAMS, McpError
from .._messages import ClientCapabilities, Implementation
from ._mrtr import CAPABILITY_OF, MAX_QUESTIONS, missing_capability


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
@attrs.frozen
class ModernRequest:
    """The per-request protocol fields of one modern request, current while it is handled.

    Attributes:
        method: The request's method.
        protocol_version: ``io.modelcontextprotocol/protocolVersion``.
        client_capabilities: ``io.modelcontextprotocol/clientCapabilities``.
        client_info: ``io.modelcontextprotocol/clientInfo``, if it was well formed.
        log_level: ``io.modelcontextprotocol/logLevel``; ``None``: no log messages.
        round: The MRTR answers (``tools/call``, ``prompts/get``, ``resources/read``).
    """

    method: str
    protocol_version: str
    client_capabilities: ClientCapabilities
    client_info: Implementation | None = None
    log_level: str | None = None
    round: RoundState | None = None

    def declared(self, capability: str) -> bool:
        """Whether the request declared the client ``capability`` (``sampling``...)."""
        return declared(self.client_capabilities, capability)

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
