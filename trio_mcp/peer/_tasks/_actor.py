"""The task actor: the Trio task that owns one task's state, cancel scope and outcome."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, TypeAlias, final

import attrs
import trio

from ... import _telemetry
from ..._errors import INTERNAL_ERROR, ConnectionClosed, McpError, RemoteError
from ..._inline import InlineEvent, leave_reader
from .._messages import ErrorData, Task, TaskStatus, related_task_meta
from ._connection import TaskConnection
from ._shared import InputRelay
from ._state import TaskEvent
from ._store import TaskOutcome, TaskRecord
from ._tree import TaskTree

log = logging.getLogger("trio_mcp.tasks")

#: The work of a task: computes the underlying request's result JSON.
Work: TypeAlias = Callable[["TaskActor"], Awaitable[dict[str, Any]]]


class ActorHost(Protocol):
    """What an actor needs from the registry that started it."""

    def transition(
        self, actor: TaskActor, event: TaskEvent | None, message: str | None = None
    ) -> bool:
        """Apply ``event`` to the actor's task (``None``: a new status ``message`` only, the
        status unchanged); False if it was ignored."""
        ...

    def finish(self, actor: TaskActor, outcome: TaskOutcome) -> None:
        """Record the outcome and move the task to its terminal status."""
        ...

    def release(self, actor: TaskActor) -> None:
        """The actor has ended: forget it (its record stays in the store)."""
        ...

    def launch(self, actor: TaskActor) -> None:
        """Start ``actor.run`` in the actors' nursery (if still running)."""
        ...

    def live_peer(
        self, owner: str, prefer: TaskConnection | None = None
    ) -> TaskConnection | None:
        """An open connection of ``owner``: ``prefer`` if open, else the newest."""
        ...

    @property
    def input_relay(self) -> InputRelay | None:
        """With a shared store: what carries the actors' input requests (else None)."""
        ...


#: How many poll intervals (``pollInterval``) a pushed question waits for a ``tasks/result`` to
#: take it before it goes to the requestor's newest connection. A requestor that
#: polls ``tasks/get`` at the interval we suggest sees ``input_required`` within
#: one interval and then opens ``tasks/result`` (the TypeScript SDK's
#: ``requestStream`` does so); the second interval covers that round trip, so
#: the question rides the ``tasks/result`` stream rather than racing it.
PUSH_FALLBACK_POLLS: Final = 2


@final
@attrs.define(eq=False)
class _InputRequest:
    """A request the task needs the requestor to answer (side channel)."""

    method: str
    params: dict[str, Any]
    claimed: bool = False
    answered: trio.Event = attrs.field(factory=trio.Event)
    result: dict[str, Any] | None = None
    error: RemoteError | ConnectionClosed | None = None
    peer: TaskConnection | None = None
    #: With tracing: the task's work span context, to send the request under.
    context: Any = None


_InputChannel: TypeAlias = tuple[
    trio.MemorySendChannel[_InputRequest], trio.MemoryReceiveChannel[_InputRequest]
]


class TaskQuestions(Protocol):
    """How one task's questions reach its requestor and come back (a strategy).

    Attributes:
        notifies: Whether the requestor gets the task's notifications (progress,
            log messages) as they happen; ``False``: it polls for everything, and
            progress is shown as the task's status message.
    """

    notifies: bool

    def post(
        self, actor: TaskActor, method: str, params: dict[str, Any], key: str | None
    ) -> Any:
        """Make the question ready to travel, before the task shows ``input_required``;
        what :meth:`wait` takes.

        Raises:
            RuntimeError: Too many questions outstanding at once.
        """
        ...

    async def wait(
        self, actor: TaskActor, posted: Any
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Wait for the answer to a posted question.

        Returns:
            The raw result and the connection that delivered it (``None`` when
            it did not come over a connection of this process).

        Raises:
            RemoteError: The requestor answered with an error.
            ConnectionClosed: No connection of the requestor was open and the
                task ended while waiting.

        Cancellation: the question is withdrawn.
        """
        ...



@final
class PushedQuestions:
    """Questions sent to the requestor as requests (a :class:`TaskQuestions`): the
    default of every actor (:data:`PUSHED`). Each carries the related-task ``_meta``
    and is delivered by the actor (:meth:`TaskActor.push`); the requestor gets the
    task's notifications as they happen."""

    __slots__ = ()
    notifies = True

    def post(
        self, actor: TaskActor, method: str, params: dict[str, Any], key: str | None
    ) -> _InputRequest:
        """The request to send (``key`` is not on this wire)."""
        params = dict(params)
        params["_meta"] = related_task_meta(actor.task_id, params.get("_meta"))
        item = _InputRequest(method, params)
        if actor.trace is not None:
            item.context = actor.trace.context
        return item

    async def wait(
        self, actor: TaskActor, posted: _InputRequest
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Deliver the request and wait for its answer (:meth:`TaskActor.push`)."""
        return await actor.push(posted)


#: The pushed strategy (stateless: one for every actor).
PUSHED = PushedQuestions()


@final
class Announcement:
    """The handle the session calls once the ``CreateTaskResult`` is sent.

    ``set()`` starts the task's work (once); ``is_set()`` tells whether it was
    called. It exists only while the answer is in flight.
    """

    __slots__ = ("_actor",)

    def __init__(self, actor: TaskActor) -> None:
        self._actor = actor

    def set(self) -> None:
        """The ``CreateTaskResult`` is on the bus (or failed to be): start the work."""
        self._actor.launch()

    def is_set(self) -> bool:
        """True once :meth:`set` was called."""
        return self._actor.is_announced


@final
@attrs.define(eq=False)
class TaskActor:
    """The Trio task that owns one task: its state, cancel scope and outcome.

    Kept small, since a server may hold tens of thousands of running tasks:
    nothing runs until the ``CreateTaskResult`` is sent (:attr:`announced`),
    then one Trio task runs the work inside :attr:`scope`. The ``done``
    event and the input side channel are made only when someone waits on
    them (most tasks never need a side channel).
    """

    registry: ActorHost
    record: TaskRecord
    origin: TaskConnection | None
    progress_token: str | int | None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    #: The work, until the actor is launched.
    _work: Work | None = None
    _announced: bool = False
    _finished: bool = False
    _done: trio.Event | None = None
    _pending_inputs: int = 0
    _inputs: _InputChannel | None = None
    #: Set (and dropped) when the task ends or its first input request is
    #: queued: what :meth:`wait_done` waits on. Made only while someone waits.
    #: An :class:`~trio_mcp._inline.InlineEvent`: a ``tasks/result`` started in the
    #: reader's task waits for it parked, with no Trio task of its own.
    _changed: InlineEvent | None = None
    #: How the task's questions travel to its requestor (its era's choice, made by
    #: whoever created the task): pushed as requests, or pulled (``PulledInputs``).
    questions: TaskQuestions = PUSHED
    #: With tracing on: the work's span (``trio_mcp._telemetry._calls.TaskTrace``).
    trace: Any = None
    #: Its place in a task tree across peers (parent, remote children), if any.
    tree: TaskTree | None = None

    def _input_channel(self) -> _InputChannel:
        if self._inputs is None:
            self._inputs = trio.open_memory_channel[_InputRequest](math.inf)
            self._signal_change()
        return self._inputs

    def _signal_change(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.record.task_id

    @property
    def announced(self) -> Announcement:
        """``announced.set()`` once the ``CreateTaskResult`` is sent: the work starts."""
        return Announcement(self)

    @property
    def is_announced(self) -> bool:
        """True once the ``CreateTaskResult`` was sent (status notifications may go)."""
        return self._announced

    @property
    def done(self) -> trio.Event:
        """Set when the task reached a terminal status or was deleted."""
        if self._done is None:
            self._done = trio.Event()
            if self._finished:
                self._done.set()
        return self._done

    def mark_done(self) -> None:
        """The task is terminal (or deleted): wake every waiter on :attr:`done`."""
        self._finished = True
        if self._done is not None:
            self._done.set()
        self._signal_change()

    def show_progress(self, message: str) -> None:
        """Progress of a task whose requestor gets no notifications
        (``questions.notifies`` is false): its new status message, shown by ``tasks/get``."""
        self.registry.transition(self, None, message)

    def wrap_work(self, wrapper: Callable[[Work], Work]) -> None:
        """Replace the work (not started yet) by ``wrapper(work)``."""
        if self._work is not None:
            self._work = wrapper(self._work)

    def launch(self) -> None:
        """Start the work (called through :attr:`announced`); idempotent."""
        if self._announced:
            return
        self._announced = True
        if self._work is not None:
            self.registry.launch(self)

    async def run(
        self,
        work: Work | None = None,
        *,
        task_status: trio.TaskStatus[Task] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the work inside :attr:`scope`, then record the outcome.

        The registry starts it with ``nursery.start_soon(actor.run)`` once the
        ``CreateTaskResult`` has been sent (:meth:`launch`), so a running
        task is one Trio task from the start and nothing waits for the
        announcement. ``work`` defaults to the one given at creation.

        Cancellation: cancelling :attr:`scope` (``tasks/cancel``, TTL expiry)
        stops the work; the status was set before the scope is cancelled (a
        task cancelled before it was launched never starts its work).
        Cancelling the registry's nursery ends the actor without a status
        change.
        """
        tracing = _telemetry.active
        if tracing is not None and self.trace is None:  # run under the work's own span
            await tracing.run_task(self, lambda: self.run(work, task_status=task_status))
            return
        registry = self.registry
        if work is None:
            work, self._work = self._work, None
        self._announced = True
        with self.scope:
            if task_status is not trio.TASK_STATUS_IGNORED:
                task_status.started(self.record.snapshot())
            if work is not None and not self.record.status.is_terminal:
                try:
                    # The work's coroutine is all a running task keeps of it.
                    call, work = work(self), None
                    result = await call
                except McpError as exc:
                    registry.finish(self, ErrorData(exc.code, exc.message, exc.data))
                except Exception:
                    log.exception("task %s failed with an exception", self.task_id)
                    registry.finish(self, ErrorData(INTERNAL_ERROR, "Internal error"))
                else:
                    registry.finish(self, result)
        if self._inputs is not None:
            for end in self._inputs:
                end.close()
        # A finished task needs only its record (kept by the store until it
        # expires); the actor and its channels go now.
        registry.release(self)

    # --- the input_required side channel -------------------------------------------

    async def ask(
        self, method: str, params: dict[str, Any], key: str | None = None
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Ask the requestor ``method`` on the task's behalf and await the answer.

        The question travels as :attr:`questions` says (pushed as a request with
        the related-task ``_meta``, or posted under ``key``, made unique for the
        task's life, for the requestor to pull); the task is ``input_required``
        until every outstanding question is answered.

        Returns:
            The raw result and the peer that delivered it (``None`` when a
            connection in another process did, with a shared store, or the
            answer was pulled).

        Raises:
            RemoteError: The requestor answered with an error.
            ConnectionClosed: No connection of the requestor was open and the
                task was cancelled or expired while waiting.
            RuntimeError: Too many questions outstanding at once (pulled).
        """
        questions = self.questions
        # Posted first, so the input_required status shows the question.
        posted = questions.post(self, method, params, key)
        self._pending_inputs += 1
        shown = self.tree.asking(method, params) if self.tree is not None else None
        if self.record.status is TaskStatus.WORKING:
            self.registry.transition(self, TaskEvent.NEED_INPUT)
        if self.trace is not None:
            self.trace.status_changed(self.record)
        try:
            return await questions.wait(self, posted)
        finally:
            self._pending_inputs -= 1
            if shown is not None and self.tree is not None:
                self.tree.answered(shown)
            if self._pending_inputs == 0 and self.record.status is TaskStatus.INPUT_REQUIRED:
                self.registry.transition(self, TaskEvent.INPUT_GIVEN)
                if self.trace is not None:
                    self.trace.status_changed(self.record)

    async def push(self, item: _InputRequest) -> tuple[dict[str, Any], TaskConnection | None]:
        """Deliver a pushed question (:class:`PushedQuestions`) and await the answer.

        It goes on the connection that has ``tasks/result`` open for this task;
        if none does within :data:`PUSH_FALLBACK_POLLS` poll intervals, straight
        to the requestor's most recent connection (a requestor that only polls
        ``tasks/get`` is never stuck). With a shared store it is queued there for any process.

        Raises:
            RemoteError: The requestor answered with an error.
            ConnectionClosed: No connection of the requestor was open and the
                task was cancelled or expired while waiting.
        """
        relay = self.registry.input_relay
        if relay is not None:  # tasks shared by processes: through the store
            return await relay.ask(self, item.method, item.params)
        self._input_channel()[0].send_nowait(item)
        with trio.move_on_after(PUSH_FALLBACK_POLLS * self.record.poll_interval / 1000):
            await item.answered.wait()
        while not item.answered.is_set():
            if not item.claimed:
                peer = self.registry.live_peer(self.record.owner, prefer=self.origin)
                if peer is not None:
                    await _deliver(item, peer, self._input_channel()[0])
                    continue
            with trio.move_on_after(self.record.poll_interval / 1000):
                await item.answered.wait()
        if item.error is not None:
            raise item.error
        assert item.result is not None and item.peer is not None
        return item.result, item.peer

    async def wait_done(self, peer: TaskConnection) -> None:
        """Wait until the task ends, delivering its side-channel requests over ``peer``.

        What ``tasks/result`` does while the task runs. Until the task asks
        for input, this only waits on one event: no nursery and no Trio task
        for :meth:`serve_inputs` (most tasks never ask). Started inline
        (:mod:`trio_mcp._inline`), it waits parked on that event and goes on in
        the task that ends the task (or asks its first question).

        Cancellation: stops waiting (and serving); the task is unaffected.
        """
        while not self._finished and self._inputs is None:
            if self._changed is None:
                self._changed = InlineEvent()
            await self._changed.wait()
        if self._finished:
            return
        await leave_reader()  # the nursery is a task's own
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.serve_inputs, peer)
            await self.done.wait()
            nursery.cancel_scope.cancel()

    async def serve_inputs(self, peer: TaskConnection) -> None:
        """Deliver the task's side-channel requests over ``peer`` until cancelled.

        Run by ``tasks/result`` while it waits for the task to finish. Returns
        at once if the task has already ended (its channel is closed).
        """
        if self._finished:
            return  # the task ended before this tasks/result started serving
        try:
            inputs = self._input_channel()[1].clone()
        except trio.ClosedResourceError:
            return  # its channel was closed as the task ended
        async with trio.open_nursery() as nursery, inputs:
            async for item in inputs:
                if not item.claimed:
                    nursery.start_soon(_deliver, item, peer, self._input_channel()[0])


async def _deliver(
    item: _InputRequest, peer: TaskConnection, requeue: trio.MemorySendChannel[_InputRequest]
) -> None:
    if item.claimed:
        return
    item.claimed = True
    try:
        request: Awaitable[dict[str, Any]] = peer.request_raw(item.method, item.params)
        if item.context is not None:  # sent under the task's work span
            request = _telemetry.within(item.context, request)
        item.result = await request
        item.peer = peer
    except RemoteError as exc:
        item.error = exc
    except ConnectionClosed:
        _unclaim(item, requeue)  # another connection may take it
        return
    except trio.Cancelled:
        _unclaim(item, requeue)  # the tasks/result serving it ended first
        raise
    item.answered.set()


def _unclaim(item: _InputRequest, requeue: trio.MemorySendChannel[_InputRequest]) -> None:
    """An unanswered request goes back in the queue: for the next ``tasks/result``
    or the actor's own fallback to the requestor's newest connection."""
    item.claimed = False
    with contextlib.suppress(trio.ClosedResourceError):
        requeue.send_nowait(item)


