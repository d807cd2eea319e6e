"""The context variables tracing keeps per Trio task (set only while tracing is on)."""

from __future__ import annotations

import contextvars
from typing import Any

#: The server-side record of the incoming request whose handler runs in this
#: context (the span to end when it is answered). Set only while tracing.
server_call: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "trio_mcp_server_call", default=None
)

#: The client span of the request being sent in this context (until its id is known).
client_span: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "trio_mcp_client_span", default=None
)
