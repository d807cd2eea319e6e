"""``subscriptions/listen`` (MCP 2026-07-28): a request whose answer is a stream of notifications.

A modern client opts in to list changes and resource updates with a filter;
the server acknowledges (``notifications/subscriptions/acknowledged``, the
first message of the subscription), then sends only the notifications the
filter names, each with ``io.modelcontextprotocol/subscriptionId`` (the
listen request's id) in ``_meta``. The request stays open until the client
cancels it (``notifications/cancelled`` on stdio, closing the stream on
HTTP) or the connection ends; when this side ends it (the App stops), it
answers the request with an empty result first (graceful closure).

The subscription is the request's, not the connection's: a listener is
registered with the App (:attr:`AppView.listeners`) for as long as the
request runs, and the App's list-change and resource-update broadcasts
offer each notification to every listener.
"""

from __future__ import annotations

import logging
from typing import Any, Final, final

import attrs
import trio

from ..._errors import INVALID_PARAMS, McpError
from .._features._base import PeerCore
from .._messages import META_SUBSCRIPTION_ID, Request, RequestId
from .._tasks import TaskRecord
from ._modern_tasks import detailed, require_tasks

log = logging.getLogger("trio_mcp.peer")

#: Notifications one listener may have queued; past it, newer ones are dropped
#: (list changes are hints: the client lists again).
LISTENER_BUFFER: Final = 256
#: Most resource URIs one subscription may name.
MAX_URIS: Final = 1_024
#: Filter field -> the notification method it opts in to.
FILTER_METHODS: Final = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
RESOURCE_UPDATED: Final = "notifications/resources/updated"
TASK_STATUS: Final = "notifications/tasks"
#: Most task ids one subscription may name.
MAX_TASK_IDS: Final = 1_024


@final
@attrs.define(eq=False)
class Listener:
    """One open ``subscriptions/listen`` request.

    Attributes:
        subscription_id: The listen request's JSON-RPC id.
        methods: The list-change notifications it opted in to.
        uris: The resource URIs whose updates it opted in to.
    """

    subscription_id: RequestId
    methods: frozenset[str]
    uris: frozenset[str]
    _send: trio.MemorySendChannel[tuple[str, dict[str, Any]]]
    #: Tasks whose ``notifications/tasks`` it asked for (the tasks extension).
    task_ids: frozenset[str] = frozenset()

    def offer(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Queue ``method`` if this subscription asked for it; never waits.

        Returns:
            Whether it was queued.
        """
        params = params or {}
        if method == TASK_STATUS:
            if params.get("taskId") not in self.task_ids:
                return False
        elif method == RESOURCE_UPDATED:
            if params.get("uri") not in self.uris:
                return False
        elif method not in self.methods:
            return False
        try:
            self._send.send_nowait((method, params))
        except trio.WouldBlock:
            log.warning("subscription %r: reader too slow, %s dropped", self.subscription_id,
                        method)
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def close(self) -> None:
        """End the subscription gracefully (the listen request is answered)."""
        self._send.close()


def read_filter(params: dict[str, Any]) -> dict[str, Any]:
    """The acknowledged filter: what the client asked for that this side sends.

    Raises:
        McpError: -32602 when ``notifications`` is missing or malformed.
    """
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise McpError(
            INVALID_PARAMS, "Invalid params: notifications (a filter object) is required"
        )
    ack: dict[str, Any] = {}
    for field in FILTER_METHODS:
        value = wanted.get(field)
        if value is not None and not isinstance(value, bool):
            raise McpError(
                INVALID_PARAMS, f"Invalid params: notifications.{field} must be a boolean"
            )
        if value:
            ack[field] = True
    uris = wanted.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise McpError(
                INVALID_PARAMS, "Invalid params: notifications.resourceSubscriptions must be "
                "an array of URIs"
            )
        if len(uris) > MAX_URIS:
            raise McpError(INVALID_PARAMS, f"Invalid params: at most {MAX_URIS} resource URIs")
        ack["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return ack


async def listen(peer: PeerCore, req: Request) -> dict[str, Any]:
    """Serve one ``subscriptions/listen`` request until it is cancelled or the App ends it.

    Cancellation: this is how the client ends the subscription; the request
        is then never answered.
    """
    ack = read_filter(req.params or {})
    task_ids = _own_tasks(peer, req, (req.params or {}).get("notifications") or {})
    if task_ids is not None:
        ack["taskIds"] = sorted(task_ids)
    tag = {META_SUBSCRIPTION_ID: req.id}
    send, receive = trio.open_memory_channel[tuple[str, dict[str, Any]]](LISTENER_BUFFER)
    methods = frozenset(FILTER_METHODS[f] for f in FILTER_METHODS if ack.get(f))
    listener = Listener(
        req.id, methods, frozenset(ack.get("resourceSubscriptions", ())), send,
        frozenset(task_ids or ()),
    )
    listeners: set[Any] = peer.app.listeners
    await peer.notify(
        "notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": ack}
    )
    registry = peer.app.registry

    def observe(record: TaskRecord) -> None:
        if record.task_id in listener.task_ids:
            listener.offer(TASK_STATUS, detailed(record, registry))

    if listener.task_ids:
        registry.observers.append(observe)
    listeners.add(listener)
    try:
        async with receive:
            async for method, params in receive:
                meta = dict(params.get("_meta") or {})
                meta.update(tag)
                await peer.notify(method, {**params, "_meta": meta})
    finally:
        listeners.discard(listener)
        if observe in registry.observers:
            registry.observers.remove(observe)
    return {"_meta": tag}


def _own_tasks(peer: PeerCore, req: Request, wanted: dict[str, Any]) -> set[str] | None:
    """The ``taskIds`` of the filter that are the requestor's live tasks; None if not asked.

    Raises:
        McpError: -32021 without the tasks extension declared; -32602 when malformed.
    """
    if "taskIds" not in wanted:
        return None
    require_tasks(req)
    ids = wanted["taskIds"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise McpError(INVALID_PARAMS, "Invalid params: notifications.taskIds must be strings")
    if len(ids) > MAX_TASK_IDS:
        raise McpError(INVALID_PARAMS, f"Invalid params: at most {MAX_TASK_IDS} task ids")
    own: set[str] = set()
    for task_id in ids:
        try:
            peer.app.registry.lookup(peer.context_of(req), task_id)
        except McpError:
            continue  # unknown, expired or foreign: not agreed (indistinguishable)
        own.add(task_id)
    return own
