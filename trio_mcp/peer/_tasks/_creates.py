"""Group creates: the new tasks of one pass of the event loop stored in one round trip.

A shared store's creates (``create_many``: Redis, one script for many records;
PostgreSQL, one function call) all go through :class:`CreateBatcher`: a create
joins the open batch and waits; the batcher's task sends the batch once the tasks
that are ready have run (while one batch is in flight, the next one fills). Each
create still gets its own answer (its sequence number, or the cap or the error),
and is acknowledged only once the store holds it.

A create started inline (``tools/call`` read by the session) waits for its batch
without a Trio task of its own (:class:`~trio_mcp._inline.InlineEvent`): once the
batch is stored, the batcher's task runs each request on and sends its answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, final

import trio

from ..._inline import InlineEvent
from ._shared import store_unavailable
from ._store import TaskRecord

#: The most creates sent in one round trip.
MAX_BATCH: Final = 512

CreateMany = Callable[..., Awaitable[Sequence[int | Exception]]]


def _owner(waiter: _Waiter) -> str:
    return waiter.record.owner


@final
class _Waiter:
    __slots__ = ("answer", "done", "max_live", "record")

    def __init__(self, record: TaskRecord, max_live: int) -> None:
        self.record = record
        self.max_live = max_live
        self.done = InlineEvent()
        self.answer: int | BaseException | None = None


@final
class CreateBatcher:
    """Sends the creates made meanwhile to ``create_many`` together.

    Args:
        create_many: The store's ``create_many(records, *, max_live)``.
    """

    def __init__(self, create_many: CreateMany) -> None:
        self._create_many = create_many
        self._open: list[_Waiter] = []
        self._sending: list[_Waiter] = []
        self._kick: trio.Event | None = None
        #: True while :meth:`run` runs (else creates go to the store one by one).
        self.running = False

    async def create(self, record: TaskRecord, max_live: int) -> int:
        """Store ``record`` with the next batch; return its sequence number.

        Raises:
            CapReached: The owner has ``max_live`` live tasks.
            McpError: -32603 when the store is unavailable.

        Cancellation: stops waiting; the record may still be stored with its
        batch (as a create cancelled in flight may be, in any store).
        """
        waiter = _Waiter(record, max_live)
        self._open.append(waiter)
        kick = self._kick
        if kick is not None:
            self._kick = None
            kick.set()
        await waiter.done.wait()
        answer = waiter.answer
        if isinstance(answer, BaseException):
            raise answer
        assert answer is not None
        return answer

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled: send each batch as soon as the previous one is answered."""
        self.running = True
        task_status.started()
        try:
            while True:
                if not self._open:
                    kick = self._kick = trio.Event()
                    await kick.wait()  # resumes after the pass that made the first create
                batch, self._open = self._open[:MAX_BATCH], self._open[MAX_BATCH:]
                # By owner: every process takes per-owner locks (PostgreSQL) in one order.
                batch.sort(key=_owner)
                for max_live in {w.max_live for w in batch}:  # one cap in practice
                    await self._send([w for w in batch if w.max_live == max_live], max_live)
        finally:
            self.running = False
            for waiter in [*self._sending, *self._open]:
                if not waiter.done.is_set():
                    waiter.answer = store_unavailable("the task registry is closing")
                    waiter.done.set()
            self._open = []

    async def _send(self, batch: list[_Waiter], max_live: int) -> None:
        self._sending = batch
        try:
            answers: Sequence[int | BaseException] = await self._create_many(
                [w.record for w in batch], max_live=max_live
            )
        except Exception as exc:  # the store's error (e.g. unavailable) for each create
            answers = [exc] * len(batch)
        for waiter, answer in zip(batch, answers, strict=True):
            waiter.answer = answer
            waiter.done.set()
