"""The requestor side of a task: :class:`TaskHandle`.

One handle for both eras. In 2025-11-25 it speaks the core ``tasks/*``
methods itself; in 2026-07-28 (the ``io.modelcontextprotocol/tasks``
extension) its :class:`TaskWire` strategy does: ``tasks/get`` answers the
detailed task (its questions, result or error), ``tasks/update`` answers the
questions and there is no ``tasks/result``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Generic, Protocol, TypeVar, final

import attrs
import trio

from ..._errors import (
    ConnectionClosed,
    RemoteError,
    RemoteProtocolError,
    TaskCancelled,
    TaskFailed,
    TrioMcpError,
)
from .._messages import CreateTaskResult, Task, TaskStatus, converter, from_answer
from ._connection import RequestorConnection
from ._state import TRANSITIONS

R = TypeVar("R")

#: Never poll faster than this, whatever the receiver suggests (ms).
MIN_POLL_INTERVAL = 50
#: Poll interval when the receiver suggests none (ms).
DEFAULT_POLL_INTERVAL = 1_000


class TaskWire(Protocol):
    """How a handle follows its task in 2026-07-28 (the tasks extension).

    The features layer provides it (``_modern_requestor.ModernTaskWire``);
    a handle without one speaks 2025-11-25.
    """

    async def get(self, task_id: str) -> Task:
        """``tasks/get``: the snapshot; keeps the detail (questions, result, error)."""
        ...

    async def cancel(self, task_id: str) -> Task:
        """``tasks/cancel``, then the snapshot (not necessarily ``cancelled`` yet)."""
        ...

    def answer_soon(self, task_id: str) -> None:
        """Answer the last snapshot's new questions in the background (``tasks/update``)."""
        ...

    def outcome(self, task: Task, result_type: type[R]) -> R:
        """The terminal task's result, or raise its error (:class:`TaskFailed`...)."""
        ...

    def close(self) -> None:
        """Stop answering questions (the task is terminal or no longer followed)."""
        ...


@final
@attrs.define(eq=False)
class TaskHandle(Generic[R]):
    """Follows one task hosted by the other side.

    Returned by :meth:`Peer.call_tool_task` and friends. ``R`` is the result
    type of the underlying request (e.g. ``CallToolResult``).

    Attributes:
        peer: The connection the task is followed on.
        task: The newest snapshot seen (from ``tasks/get``, a status
            notification, or the ``CreateTaskResult``).
        result_type: The type :meth:`result` structures the payload into.
        meta: The ``_meta`` of the ``CreateTaskResult`` (e.g. the
            model-immediate-response text).
        wire: How the task is followed in 2026-07-28; ``None`` in 2025-11-25.
    """

    peer: RequestorConnection = attrs.field(repr=False)
    task: Task
    result_type: type[R]
    meta: dict[str, Any] | None = None
    progress_token: str | int | None = None
    wire: TaskWire | None = attrs.field(default=None, kw_only=True, repr=False)
    _outcome: R | TrioMcpError | None = attrs.field(default=None, init=False)
    _collecting: bool = attrs.field(default=False, init=False)

    @classmethod
    def from_create_result(
        cls, peer: RequestorConnection, raw: dict[str, Any], result_type: type[R]
    ) -> TaskHandle[R]:
        """Wrap a raw ``CreateTaskResult`` received on ``peer``.

        Raises:
            RemoteProtocolError: ``raw`` is not a ``CreateTaskResult``.
        """
        try:
            created = converter.structure(raw, CreateTaskResult)
        except Exception as exc:
            raise RemoteProtocolError("expected a CreateTaskResult") from exc
        return cls(peer, created.task, result_type, meta=created.meta)

    @property
    def task_id(self) -> str:
        """The task's id (chosen by the receiver)."""
        return self.task.task_id

    def __repr__(self) -> str:
        """The task's id and last seen status (no private state)."""
        result = getattr(self.result_type, "__name__", repr(self.result_type))
        return (f"TaskHandle(task_id={self.task_id!r}, status={self.task.status.value!r}, "
                f"result_type={result})")

    def _observe(self, task: Task) -> None:
        if task.task_id != self.task_id:
            # Adopting it would silently make this handle follow another task.
            raise RemoteProtocolError(
                f"asked about task {self.task_id[:64]!r}, got task {task.task_id[:64]!r}"
            )
        old = self.task.status
        # Polling can skip states (working -> input_required -> working between
        # two polls), so the one impossible observation is leaving a terminal.
        if task.status != old and (old, task.status) not in _OBSERVABLE and old.is_terminal:
            raise RemoteProtocolError(
                f"task {self.task_id} moved from terminal {old.value!r} to {task.status.value!r}"
            )
        self.task = task
        if task.status.is_terminal:
            self._release()

    def _release(self) -> None:
        if self.wire is not None:
            self.wire.close()
        self.peer.task_waiters.discard(self.task_id)
        if self.progress_token is not None:
            self.peer.forget_progress(self.progress_token)
            self.progress_token = None

    async def status(self) -> Task:
        """Ask the receiver for the task's state (``tasks/get``).

        Raises:
            RemoteError: -32602 when the task is unknown (e.g. expired).
            RemoteProtocolError: The receiver answered about another task,
                or moved a terminal task.
            ConnectionClosed: The connection closed.

        Cancellation: sends ``notifications/cancelled`` for the ``tasks/get``;
            the task itself is unaffected.
        """
        if self.wire is not None:
            task = await self.wire.get(self.task_id)
        else:
            task = await self.peer.request("tasks/get", {"taskId": self.task_id}, Task)
        self._observe(task)
        return task

    def _interval(self) -> float:
        ms = self.task.poll_interval or DEFAULT_POLL_INTERVAL
        return max(ms, MIN_POLL_INTERVAL) / 1000

    async def _collect(self) -> None:
        try:
            self._outcome = await self._fetch_result()
        except (RemoteError, RemoteProtocolError, ConnectionClosed) as exc:
            self._outcome = exc

    async def _fetch_result(self) -> R:
        if self.wire is not None:  # 2026-07-28: tasks/get has the result once terminal
            await self.wait()
            return self.wire.outcome(self.task, self.result_type)
        try:
            raw = await self.peer.request_raw("tasks/result", {"taskId": self.task_id})
        except RemoteError as exc:
            raise await self._typed_error(exc) from None
        return from_answer(raw, self.result_type, "tasks/result for", self.task_id)

    async def _typed_error(self, exc: RemoteError) -> RemoteError:
        """Tell a cancelled or failed task from other errors (one ``tasks/get`` if needed)."""
        task = self.task
        if not task.status.is_terminal:
            try:
                task = await self.status()
            except TrioMcpError:
                return exc
        if task.status is TaskStatus.CANCELLED:
            return TaskCancelled(exc.code, exc.message, exc.data, task=task)
        if task.status is TaskStatus.FAILED:
            return TaskFailed(exc.code, exc.message, exc.data, task=task)
        return exc

    async def __aiter__(self) -> AsyncIterator[Task]:
        """Yield each new snapshot until the task is terminal.

        Wakes early on ``notifications/tasks/status`` but never relies on it:
        it polls ``tasks/get`` at the receiver's ``pollInterval``. When the
        task is ``input_required`` it opens ``tasks/result`` in the background
        so the receiver can deliver its request to this peer's handlers
        (2026-07-28: it answers the ``inputRequests`` of ``tasks/get`` with
        those handlers in the background, each key once, by ``tasks/update``).

        Cancellation: stops following; the task itself is unaffected.
        """
        last: tuple[TaskStatus, str | None] | None = None
        try:
            while True:
                changed = self.peer.task_waiters.event(self.task_id)
                task = await self.status()
                if (task.status, task.status_message) != last:
                    last = (task.status, task.status_message)
                    yield task
                if task.status.is_terminal:
                    return
                if task.status is TaskStatus.INPUT_REQUIRED and self.wire is not None:
                    self.wire.answer_soon(self.task_id)
                elif task.status is TaskStatus.INPUT_REQUIRED and not self._collecting:
                    # Runs in the connection's nursery (no nursery may span a
                    # yield of this generator), and ends with the task.
                    self._collecting = True
                    self.peer.start_soon(self._collect)
                with trio.move_on_after(self._interval()):
                    await changed.wait()
        finally:
            # Stopped early (an error such as an expired task, or the caller
            # gave up): drop the wake-up event unless another follower waits.
            self.peer.task_waiters.discard_if_unwaited(self.task_id)

    async def wait(self) -> Task:
        """Follow the task until it is terminal and return its final snapshot.

        Cancellation: stops waiting; the task itself is unaffected (use
        :meth:`cancel` to stop it).
        """
        async for _ in self:
            pass
        return self.task

    async def result(self) -> R:
        """Return the underlying request's result (``tasks/result``).

        Blocks until the task is terminal; while blocked, the receiver may
        send this peer the task's side-channel requests (elicitation,
        sampling), which the registered handlers answer. (2026-07-28 has no
        ``tasks/result``: this follows the task with ``tasks/get``, answering
        its questions, and takes the result or error from the terminal task;
        a tool error is a ``completed`` task there.)

        Outcomes, by the task's final status:

        * ``completed``: the result, typed as ``R`` (e.g. ``CallToolResult``);
        * ``failed`` with a result (a tool that reported failure): that
          result, with ``is_error`` set;
        * ``failed`` with a JSON-RPC error: raises :class:`~trio_mcp.TaskFailed`;
        * ``cancelled``: raises :class:`~trio_mcp.TaskCancelled`.

        Raises:
            TaskCancelled: The task was cancelled (it has no result).
            TaskFailed: The underlying request failed with a JSON-RPC error.
            RemoteError: -32602 for an unknown or expired task.
            RemoteProtocolError: The payload does not fit the result type.
            ConnectionClosed: The connection closed first (the handle may
                fetch again).

        Cancellation: stops waiting (``notifications/cancelled`` is sent for
            the ``tasks/result``); the task itself is unaffected.
        """
        if self._outcome is None:
            await self._collect()
        outcome = self._outcome
        if isinstance(outcome, TrioMcpError):
            if isinstance(outcome, ConnectionClosed):
                self._outcome = None  # may be fetched again on a new connection
            raise outcome
        assert outcome is not None
        if not self.task.status.is_terminal:
            self._release()
        return outcome

    async def cancel(self) -> Task:
        """Cancel the task (``tasks/cancel``) and return its new snapshot.

        In 2026-07-28 ``tasks/cancel`` only acknowledges (also for a terminal
        task) and cancellation is eventually consistent: the snapshot (from a
        ``tasks/get`` right after) may not be ``cancelled`` yet; :meth:`wait`
        tells how it ended.

        Raises:
            RemoteError: -32602 when it is unknown or already terminal
                (2026-07-28: when it is unknown).
            ConnectionClosed: The connection closed first.

        Cancellation: the cancel may or may not have reached the receiver;
            :meth:`status` tells.
        """
        if self.wire is not None:
            task = await self.wire.cancel(self.task_id)
            self._observe(task)
            return task
        task = await self.peer.request("tasks/cancel", {"taskId": self.task_id}, Task)
        self._observe(task)
        return task


_OBSERVABLE = frozenset((src, dst) for (src, _), dst in TRANSITIONS.items())
