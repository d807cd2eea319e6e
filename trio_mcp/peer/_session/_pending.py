"""The requests this side sent and still waits on, and the progress callbacks.

Pure bookkeeping with no I/O: :class:`~._session.Session` allocates an id,
records the method (so a response can be typed by what was asked), and wakes
the waiter when the answer, a malformed answer or the end of the connection
arrives.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, final

import attrs
import trio

from ... import _telemetry
from .._messages import ErrorResponse, RequestId, Response, Undecodable

log = logging.getLogger("trio_mcp.session")

#: A progress callback: a plain function, or an ``async def`` one.
ProgressCallback: TypeAlias = Callable[[Any], None] | Callable[[Any], Awaitable[None]]


@final
@attrs.define(eq=False)
class PendingRequest:
    """One request waiting for its answer.

    Attributes:
        method: The request's method (types the answer; names it in logs).
        done: Set when an outcome arrived or the connection closed.
        outcome: The answer, ``None`` while waiting or after a close.
        malformed: Why the answer could not be read, if it could not.
    """

    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: Response | ErrorResponse | None = None
    malformed: str | None = None


@final
class PendingRequests:
    """Id allocation, the table of unanswered requests, and progress routing.

    Args:
        prefix: Makes progress tokens unique across connections.
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, PendingRequest] = {}
        self._progress: dict[RequestId, ProgressCallback] = {}
        _telemetry.refresh()  # tracing on or off for this connection's messages

    def add(self, method: str) -> tuple[int, PendingRequest]:
        """Allocate an id for a new request of ``method`` and record it."""
        request_id = next(self._ids)
        pending = self._pending[request_id] = PendingRequest(method)
        if _telemetry.active is not None:
            _telemetry.sending(request_id)  # the id of the current client span's request
        return request_id, pending

    def remove(self, request_id: RequestId) -> None:
        """Forget a request (answered, failed or abandoned)."""
        self._pending.pop(request_id, None)

    def method_of(self, request_id: RequestId | None) -> str | None:
        """The method of the pending request ``request_id``, if it is pending."""
        pending = self._pending.get(request_id) if request_id is not None else None
        return pending.method if pending is not None else None

    def resolve(self, msg: Response | ErrorResponse) -> bool:
        """Hand an answer to its waiter; False when nobody waits for that id."""
        pending = self._pending.get(msg.id) if msg.id is not None else None
        if pending is None:
            return False
        pending.outcome = msg
        pending.done.set()
        return True

    def fail_malformed(self, item: Undecodable) -> bool:
        """Fail the waiting request a malformed answer was meant for, if any."""
        if item.response_to is None:
            return False
        pending = self._pending.get(item.response_to)
        if pending is None or pending.done.is_set():
            return False
        log.warning("malformed answer to %s %r: %s", pending.method, item.response_to, item.reason)
        pending.malformed = item.reason
        pending.done.set()
        return True

    def wake_all(self) -> None:
        """Wake every waiter: the connection closed, no answer will come."""
        for pending in self._pending.values():
            pending.done.set()

    # --- progress --------------------------------------------------------------------

    def register_progress(self, callback: ProgressCallback) -> str:
        """Register a progress callback and return its new token."""
        token = f"progress-{self._prefix}-{next(self._ids)}"
        self._progress[token] = callback
        return token

    def forget_progress(self, token: RequestId) -> None:
        """Stop delivering progress for ``token``."""
        self._progress.pop(token, None)

    def progress_callback(self, token: object) -> ProgressCallback | None:
        """The callback registered for ``token``, if any."""
        if isinstance(token, str | int) and not isinstance(token, bool):
            return self._progress.get(token)
        return None


def call_progress(
    callback: ProgressCallback, value: Any, start_soon: Callable[..., None] | None
) -> None:
    """Call a sync or async progress callback with ``value``; never raises.

    An ``async def`` callback is run as a task with ``start_soon`` (the
    connection's nursery), so a slow callback never stalls the receive loop.
    """
    try:
        out = callback(value)
        if inspect.isawaitable(out):
            if start_soon is None:
                out.close() if inspect.iscoroutine(out) else None
                return
            start_soon(_await_quietly, out)
    except Exception:
        log.exception("progress callback failed")


async def _await_quietly(awaitable: Awaitable[None]) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("progress callback failed")
