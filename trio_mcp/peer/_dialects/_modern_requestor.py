"""Following tasks in 2026-07-28: the client half of ``io.modelcontextprotocol/tasks``.

The server decides whether a ``tools/call`` becomes a task (the client
declares the extension in every request's capabilities). The public API is
the 2025-11-25 one; this module is the per-era strategy behind it:

* :class:`ModernTaskWire` is a :class:`~trio_mcp.TaskHandle`'s way to follow
  its task: ``tasks/get`` (the detailed task: ``inputRequests`` while
  ``input_required``, ``result`` once ``completed`` -- a tool error
  included --, ``error`` once ``failed``), ``tasks/update`` for the
  questions (answered by the App's own handlers, each key once however often
  a poll shows it), ``tasks/cancel`` (an acknowledgement only);
* :func:`modern_handle` wraps the answer to a ``tools/call``: a task, or a
  plain result (the server chose not to make a task) as a handle already
  completed;
* :func:`call_and_follow` is ``call_tool``: the final result either way;
  giving up on the call (cancellation, an error) cancels the task.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from typing import Any, Final, TypeVar, final

import trio

from ..._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    ConnectionClosed,
    RemoteProtocolError,
    TaskCancelled,
    TaskFailed,
)
from ..._util import unwrap_group
from .._features._base import PeerCore, QuestionForwarder
from .._messages import (
    META_SERVER_INFO,
    CallToolResult,
    ProgressParams,
    Task,
    TaskStatus,
    converter,
    from_answer,
)
from .._session import ProgressCallback, call_progress
from .._tasks import TaskHandle

log = logging.getLogger("trio_mcp.peer")
R = TypeVar("R")

#: Seconds a ``tasks/cancel`` sent on the way out (shielded) may take.
CANCEL_TIMEOUT: Final = 5.0
#: The fields of a detailed task that are not the :class:`Task` snapshot's.
_DETAIL: Final = ("inputRequests", "result", "error", "_meta")
#: Extension field -> the 2025-11-25 field :class:`Task` is read from.
_RENAMED: Final = {"ttlMs": "ttl", "pollIntervalMs": "pollInterval"}
_SNAPSHOT: Final = frozenset(
    {"taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
)


def snapshot(raw: dict[str, Any]) -> Task:
    """A detailed task (or ``CreateTaskResult``) of the extension as a :class:`Task`.

    ``ttlMs``/``pollIntervalMs`` become ``ttl``/``poll_interval``; the
    detail (``inputRequests``, ``result``, ``error``) and ``resultType`` are
    not part of the snapshot, nor the server's identity in ``_meta``.

    Raises:
        RemoteProtocolError: ``raw`` is not a task.
    """
    fields = {_RENAMED.get(k, k): v for k, v in raw.items()}
    wire = {k: v for k, v in fields.items() if k in _SNAPSHOT}
    meta = raw.get("_meta")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
        if meta:
            wire["_meta"] = meta
    try:
        return converter.structure(wire, Task)
    except Exception as exc:
        raise RemoteProtocolError("the server answered a malformed task") from exc


@final
class ModernTaskWire:
    """A handle's strategy in 2026-07-28 (see :class:`~trio_mcp.peer._tasks.TaskWire`).

    One per handle: it keeps the last detail seen and the question keys
    already answered (or being answered), so each is answered once.

    Attributes:
        detail: ``inputRequests``, ``result`` and ``error`` of the last ``tasks/get``.
        settled: The snapshot of a task that never was (the server answered
            the call at once); no request is sent for it.
    """

    def __init__(
        self, peer: PeerCore, settled: Task | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.peer = peer
        self.detail: dict[str, Any] = {}
        self.settled = settled
        self.progress = progress
        self._reports = 0
        self._message: str | None = None
        self._asked: set[str] = set()
        self._answering: set[trio.CancelScope] = set()
        self._failure: BaseException | None = None

    def adopt(self, raw: dict[str, Any]) -> Task:
        """Take a detailed task (a ``tasks/get`` answer): its snapshot; keep its detail."""
        task = snapshot(raw)
        self.detail = {k: raw[k] for k in _DETAIL if k in raw}
        self._report(task)
        return task

    def _report(self, task: Task) -> None:
        """A live task's new ``statusMessage`` to the ``progress`` callback: the extension's
        tasks carry no progress notifications, and a trio-mcp server writes the tool's
        progress there (``ctx.report_progress``). ``progress`` counts the messages seen
        (the numbers do not travel); ``total`` is None; the token is the task's id."""
        message, self._message = self._message, task.status_message
        if (self.progress is None or task.status_message is None
                or task.status_message == message or task.status.is_terminal):
            return
        self._reports += 1
        value = ProgressParams(task.task_id, self._reports, None, task.status_message)
        with contextlib.suppress(ConnectionClosed):  # an async callback, the peer closing
            call_progress(self.progress, value, self.peer.start_soon)

    async def get(self, task_id: str) -> Task:
        """``tasks/get`` (see :class:`TaskWire`); raises what answering a question raised."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        if self.settled is not None:
            await trio.lowlevel.checkpoint()
            return self.settled
        return self.adopt(await self.peer.request_raw("tasks/get", {"taskId": task_id}))

    async def cancel(self, task_id: str) -> Task:
        """``tasks/cancel`` (an acknowledgement), then ``tasks/get`` for the snapshot."""
        self.close()
        if self.settled is None:
            await self.peer.request_raw("tasks/cancel", {"taskId": task_id})
        return await self.get(task_id)

    def answer_soon(self, task_id: str) -> None:
        """Answer the questions of the last snapshot not yet asked, in the background."""
        requests = self.detail.get("inputRequests")
        if not isinstance(requests, dict):
            return
        new = {k: v for k, v in requests.items() if k not in self._asked}
        if not new:
            return
        self._asked.update(new)
        scope = trio.CancelScope()
        self._answering.add(scope)
        self.peer.start_soon(self._answer, task_id, new, scope)

    async def _answer(
        self, task_id: str, requests: dict[str, Any], scope: trio.CancelScope
    ) -> None:
        era = self.peer.client_era
        try:
            with scope:
                forward = self.peer.task_questions.get(task_id)
                if forward is not None:  # a child's: asked of its parent's requestor
                    responses = await forward_all(forward, requests)
                else:
                    responses = await era.answer(requests, {})
                await self.peer.request_raw(
                    "tasks/update", {"taskId": task_id, "inputResponses": responses}
                )
            if scope.cancelled_caught:
                self._asked.difference_update(requests)  # not answered: a later follower may
        except Exception as exc:
            # A handler that failed, or a refused tasks/update: the follower raises it.
            log.info("answering task %s's questions failed: %s", task_id[:64], exc)
            self._failure = exc
        finally:
            self._answering.discard(scope)
            self.peer.task_waiters.wake(task_id)  # poll again now

    def outcome(self, task: Task, result_type: type[R]) -> R:
        """The terminal task's result (typed), or raise its error."""
        if task.status is TaskStatus.CANCELLED:
            raise TaskCancelled(
                INVALID_PARAMS, task.status_message or "Task was cancelled: it has no result",
                task=task,
            )
        if task.status is TaskStatus.FAILED:
            error = self.detail.get("error")
            error = error if isinstance(error, dict) else {}
            code, message = error.get("code"), error.get("message")
            raise TaskFailed(
                code if isinstance(code, int) else INTERNAL_ERROR,
                message if isinstance(message, str) else task.status_message or "Task failed",
                error.get("data"),
                task=task,
            )
        result = self.detail.get("result")
        if task.status is not TaskStatus.COMPLETED or not isinstance(result, dict):
            raise RemoteProtocolError(f"task {task.task_id[:64]} completed without a result")
        return from_answer(result, result_type, "the result of task", task.task_id[:64])

    def close(self) -> None:
        """Cancel the questions being answered (the task ended or is given up)."""
        for scope in self._answering:
            scope.cancel()


async def forward_all(forward: QuestionForwarder, requests: dict[str, Any]) -> dict[str, Any]:
    """Ask each of a child task's ``inputRequests`` through ``forward`` (at once); the
    ``inputResponses``."""
    responses: dict[str, Any] = {}

    async def one(key: str, request: Any) -> None:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise RemoteProtocolError(f"input request {str(key)[:64]!r} is malformed")
        params = request.get("params")
        responses[key] = await forward(
            request["method"], params if isinstance(params, dict) else {}, key
        )

    with unwrap_group():
        async with trio.open_nursery() as nursery:
            for key, request in requests.items():
                nursery.start_soon(one, key, request)
    return responses


def _now() -> str:
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def modern_handle(
    peer: PeerCore, raw: dict[str, Any], result_type: type[R],
    progress: ProgressCallback | None = None,
) -> TaskHandle[R]:
    """The handle for a 2026-07-28 answer: a task, or a result (a handle already completed).

    A plain result's handle has an empty ``task_id`` (no task exists on the
    server); its snapshot is ``completed`` and :meth:`TaskHandle.result`
    returns the result.

    Raises:
        RemoteProtocolError: A malformed task.
    """
    if raw.get("resultType") == "task":
        wire = ModernTaskWire(peer, progress=progress)
        task = wire.adopt(raw)
        meta = raw.get("_meta")
        return TaskHandle(peer, task, result_type, meta if isinstance(meta, dict) else None,
                          wire=wire)
    stamp = _now()
    done = Task("", TaskStatus.COMPLETED, stamp, stamp, None)
    wire = ModernTaskWire(peer, settled=done)
    wire.detail = {"result": raw}
    return TaskHandle(peer, done, result_type, wire=wire)


def reattach(peer: PeerCore, task_id: str, result_type: type[R]) -> TaskHandle[R]:
    """A 2026-07-28 handle on a task known only by id."""
    placeholder = Task(task_id, TaskStatus.WORKING, "", "", None)
    return TaskHandle(peer, placeholder, result_type, wire=ModernTaskWire(peer))


async def get_detailed(
    peer: PeerCore, task_id: str, meta: dict[str, Any] | None = None
) -> tuple[Task, dict[str, Any]]:
    """One ``tasks/get`` (``meta``: more ``_meta`` for it): the snapshot and its detail
    (``inputRequests``, ``result``, ``error``)."""
    wire = ModernTaskWire(peer)
    if not meta:
        task = await wire.get(task_id)
    else:
        params = {"taskId": task_id, "_meta": dict(meta)}
        task = wire.adopt(await peer.request_raw("tasks/get", params))
    return task, wire.detail


async def cancel_quietly(peer: PeerCore, task_id: str) -> None:
    """``tasks/cancel`` on the way out of a call: shielded, bounded, errors logged."""
    with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_TIMEOUT):
        try:
            await peer.request_raw("tasks/cancel", {"taskId": task_id})
        except Exception as exc:
            log.info("tasks/cancel of %s on the way out failed: %s", task_id[:64], exc)


async def call_and_follow(
    peer: PeerCore, params: dict[str, Any], progress: ProgressCallback | None
) -> CallToolResult:
    """``tools/call`` in 2026-07-28: its result, following the task the server may make.

    Raises:
        TaskFailed: The task failed with a JSON-RPC error (a ``RemoteError``).
        TaskCancelled: Someone else cancelled the task.
        RemoteError, RemoteProtocolError, ConnectionClosed: As for a call.

    Cancellation: sends ``tasks/cancel`` (shielded, at most
        :data:`CANCEL_TIMEOUT` seconds) for a task still running, and re-raises.
    """
    raw = await peer.request_raw("tools/call", params, progress=progress)
    if raw.get("resultType") != "task":
        return from_answer(raw, CallToolResult, "the answer to", "tools/call")
    wire = ModernTaskWire(peer, progress=progress)
    handle = TaskHandle(peer, wire.adopt(raw), CallToolResult, wire=wire)
    try:
        return await handle.result()
    except BaseException as exc:
        if not handle.task.status.is_terminal and not isinstance(exc, ConnectionClosed):
            await cancel_quietly(peer, handle.task_id)
        raise
    finally:
        wire.close()
