"""The cluster half of the registry: tasks shared by many processes through one store.

With a shared :class:`~._store.TaskStore` (Redis, PostgreSQL) the store holds the truth and
every process reads from it; a process keeps only the actors it runs. This
module does what crosses processes:

- **writes in order**: the ledger's changes of a local record (status,
  message, outcome, expiry) go through one writer task, each a compare-and-set
  in the store; :meth:`Cluster.settle` waits until they are stored before
  anything is acknowledged. A write the store refuses (the task was cancelled
  by another process, or failed when this process's lease lapsed) makes the
  local actor agree with the store (:meth:`Cluster.reconcile`).
- **waiting**: ``tasks/result`` for a task anywhere waits on hints from the
  store (its pub/sub), re-reading the stored status at least every
  ``hint_seconds``, so a lost hint costs a delay and never a hang.
- **cancel**: a cancel stored by any process sends a hint; the process that
  runs the actor cancels its scope. A heartbeat every third of the lease
  re-checks every local actor against the store, for hints that were lost.
- **input_required**: a task's requests to its requestor are queued in the
  store; whichever process has ``tasks/result`` open for the task takes one,
  sends it over its connection and stores the answer, which wakes the actor.
  If nobody takes it within two poll intervals (``PUSH_FALLBACK_POLLS``),
  the actor's own process sends it to the requestor's newest local connection,
  as the local runtime does.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, TypeAlias, final

import attrs
import trio

from ..._errors import ConnectionClosed, McpError, RemoteError
from ..._inline import InlineEvent, leave_reader, started_inline
from .._messages import TaskStatus
from ._actor import PUSH_FALLBACK_POLLS, TaskActor
from ._connection import TaskConnection
from ._creates import CreateBatcher
from ._ledger import (
    CANCEL_MESSAGE,
    TaskLedger,
    already_terminal,
    audit,
    expired,
    live_cap_reached,
    owned,
)
from ._questions import PulledInputs
from ._rerun import RerunStore, rerun_store
from ._shared import store_unavailable
from ._state import TaskEvent
from ._store import CapReached, InputAnswer, InputItem, TaskRecord, TaskStore, now_iso

log = logging.getLogger("trio_mcp.tasks")

#: Seconds :meth:`Cluster.settle` waits for writes to reach the store before the
#: request gets the "store unavailable" error (the writes go on being retried).
SETTLE_TIMEOUT: Final = 5.0
_RETRY_SECONDS: Final = 0.5
_NO_TIMER: Final = contextlib.nullcontext()
#: The most status writes the writer sends in one round trip.
_BATCH: Final = 256
#: The most terminal records kept after this process stored them (tasks/result and
#: tasks/get read them here: a terminal record never changes in the store).
_FINAL_KEPT: Final = 4096
#: The most queued tasks one claim takes.
_CLAIM_BATCH: Final = 16

_Write: TypeAlias = tuple[Literal["update"], TaskRecord] | tuple[Literal["delete"], str]


@final
class Cluster:
    """Connects one registry to a store shared with other processes.

    Args:
        ledger: The registry whose actors this process runs.
        store: The shared store (opened and run by the registry).
    """

    #: Other processes use the store: it, not this process, holds the truth.
    shared = True

    def __init__(self, ledger: TaskLedger, store: TaskStore) -> None:
        self.store = store
        self._ledger = ledger
        self._send, self._receive = trio.open_memory_channel[_Write](math.inf)
        self._queued = 0
        self._stored = 0
        #: settle()'s wake-ups, by the count of queued changes each waits for: set once that
        #: many are stored (only those: a batch wakes no waiter it did not satisfy), or
        #: all of them after a failed attempt (each then looks at its time bound).
        self._settling: dict[int, InlineEvent] = {}
        self._targets: list[int] = []  # the keys of _settling, a heap
        self._failing: str | None = None
        #: Per task: set (and dropped) at its next change here (status stored, question
        #: queued, hint, actor ended); a tasks/result started inline parks on it.
        self._waiters: dict[str, InlineEvent] = {}
        self._keys = itertools.count(1)
        # Who delivered an input request answered in this process: its actor's
        # ask() returns that connection (a nested task is followed there).
        self._via: dict[tuple[str, str], TaskConnection] = {}
        self._nursery: trio.Nursery | None = None
        self._creates = CreateBatcher(store.create_many)
        # Terminal records whose terminal write this process stored (compare and set):
        # final in the store until deleted, so read here, not again from the store.
        self._final: collections.OrderedDict[str, TaskRecord] = collections.OrderedDict()
        # Tasks whose local actor is asking its requestor (queued in the store) now.
        self._asking: dict[str, int] = {}
        #: Serves a claimed task's stored request again here (False: it could not);
        #: set by the registry.
        self.rerun: Callable[[TaskRecord], bool] | None = None
        #: The tools whose queued tasks this process claims (none: it claims nothing).
        self.claim_tools: Callable[[], frozenset[str]] = frozenset
        #: Draining: this process claims no more queued work.
        self.draining = False
        self._claim_wake = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the store's hints and lease, the writer and the heartbeat, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.store.run, self)
            await nursery.start(self._creates.run)
            nursery.start_soon(self._writer)
            nursery.start_soon(self._heartbeat)
            if (reruns := rerun_store(self.store)) is not None:
                nursery.start_soon(self._claimer, reruns)
                nursery.start_soon(self._fence, reruns)
            task_status.started()

    # --- creating ------------------------------------------------------------------------

    async def create(self, record: TaskRecord, max_live: int) -> None:
        """Store a new record run here; set its global sequence number.

        Raises:
            McpError: -32000 at the owner's live-task cap (counted over every
                process, atomically); -32603 when the store is unavailable.
        """
        try:
            if self._creates.running:  # (started inline, it waits for its batch there)
                record.seq = await self._creates.create(record, max_live)
            else:
                await leave_reader()
                record.seq = await self.store.create(record, max_live=max_live)
        except CapReached:
            raise live_cap_reached(record.owner, max_live) from None

    # --- ordered writes (the ledger's RecordMirror) --------------------------------------

    def written(self, record: TaskRecord) -> None:
        """Queue ``record``'s current state for the store."""
        self._queue(("update", attrs.evolve(record)))

    def deleted(self, task_id: str) -> None:
        """Queue the deletion of an expired task."""
        self._final.pop(task_id, None)
        self._queue(("delete", task_id))

    def _queue(self, item: _Write) -> None:
        self._queued += 1
        self._send.send_nowait(item)

    async def settle(self) -> None:
        """Wait until every change queued so far is in the store.

        Started inline (``trio_mcp._inline``), it waits without a task: the
        writer's task goes on with it once they are stored.

        Raises:
            McpError: -32603 when the store has not taken them within
                :data:`SETTLE_TIMEOUT` seconds (they are kept and retried;
                the wait is checked after each failed write attempt, so it gives up
                within one store call, at most ``op_timeout``, of the bound).

        Cancellation: stops waiting; the writes go on.
        """
        target = self._queued
        if self._stored >= target:
            return
        give_up = trio.current_time() + SETTLE_TIMEOUT
        # In a task, a timer bounds the wait even when no write attempt ends (the
        # writer stopped: a process shutting down); parked, the writer wakes it.
        with trio.move_on_after(SETTLE_TIMEOUT) if not started_inline() else _NO_TIMER:
            while self._stored < target:
                if trio.current_time() >= give_up:
                    break
                await self._settled(target).wait()
            else:
                return
        raise store_unavailable(self._failing or "writes are not getting through")

    def _settled(self, target: int) -> InlineEvent:
        """The event set once ``target`` queued changes are stored (or an attempt fails)."""
        event = self._settling.get(target)
        if event is None:
            event = self._settling[target] = InlineEvent()
            heapq.heappush(self._targets, target)
        return event

    def _attempted(self, *, failed: bool = False) -> None:
        """A write attempt ended: wake the settle() waiters it satisfied; after a failure,
        all of them (each looks at its bound, and waits again for a new event)."""
        if failed:
            waiting, self._settling, self._targets = self._settling, {}, []
            for event in waiting.values():
                event.set()
            return
        targets, settling, stored = self._targets, self._settling, self._stored
        while targets and targets[0] <= stored:
            # Popped before it is set: a waiter going on here may settle() again.
            settling.pop(heapq.heappop(targets)).set()

    async def _writer(self) -> None:
        """Store the queued changes in order: a run of status writes in one round trip."""
        async for first in self._receive:
            batch = [first]
            while len(batch) < _BATCH and first[0] == "update":
                try:
                    item = self._receive.receive_nowait()
                except trio.WouldBlock:
                    break
                batch.append(item)
                if item[0] != "update":
                    break
            updates = [item[1] for item in batch if item[0] == "update"]
            await self._store_retrying(updates, batch[-1] if batch[-1][0] == "delete" else None)
            self._stored += len(batch)
            self._attempted()
            for record in updates:
                self.wake(record.task_id)

    async def _store_retrying(self, updates: list[TaskRecord], delete: _Write | None) -> None:
        done = False
        while True:
            try:
                if updates and not done:
                    applied = await self.store.update_many(updates)
                    done = True
                    for record, ok in zip(updates, applied, strict=True):
                        if not ok:  # terminal in the store already: make the actor agree
                            self._spawn(self.reconcile, record.task_id)
                        elif record.status.is_terminal:
                            self._keep_final(record)
                if delete is not None:
                    await self.store.delete(str(delete[1]))
            except McpError as exc:
                if self._failing is None:
                    log.warning("task store write failed, retrying: %s", exc.message)
                self._failing = exc.message
                self._attempted(failed=True)  # (waiters past SETTLE_TIMEOUT give up)
                await trio.sleep(_RETRY_SECONDS)
                continue
            break
        if self._failing is not None:
            log.warning("task store writes resumed")
            self._failing = None

    def _keep_final(self, record: TaskRecord) -> None:
        final = self._final
        final[record.task_id] = record
        if len(final) > _FINAL_KEPT:
            final.popitem(last=False)  # the oldest (O(1); a dict's first key is not)

    def _spawn(self, fn: Any, *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args)

    # --- hints (the store's StoreEvents) -------------------------------------------------

    def on_hint(self, kind: str, task_id: str) -> None:
        """A hint from the store: wake who waits on the task; a cancel reaches its actor."""
        if kind == "cancel" and self._ledger.running_actor(task_id) is not None:
            self._spawn(self.reconcile, task_id)
        elif kind == "queue":
            self._claim_wake.set()
        self.wake(task_id)

    def wake(self, task_id: str) -> None:
        """Wake every local waiter on ``task_id`` (they re-read the store)."""
        event = self._waiters.pop(task_id, None)
        if event is not None:
            event.set()

    def _hint(self, task_id: str) -> InlineEvent:
        event = self._waiters.get(task_id)
        if event is None:
            event = self._waiters[task_id] = InlineEvent()
        return event

    def released(self, task_id: str) -> None:
        """The task's local actor ended (with or without a status change): its waiters
        look again (one parked on the actor now reads the store)."""
        self.wake(task_id)

    async def _sleep_on(self, event: InlineEvent, seconds: float) -> bool:
        """Wait for ``event`` (at most ``seconds``, ``hint_seconds``); True if it came."""
        with trio.move_on_after(min(seconds, self.store.hint_seconds)):
            await event.wait()
            return True
        return False

    async def reconcile(self, task_id: str) -> None:
        """Make a local actor agree with the store (cancelled, failed or gone elsewhere)."""
        actor = self._ledger.running_actor(task_id)
        if actor is None or actor.record.status.is_terminal:
            return
        try:
            record = await self.store.get(task_id)
        except McpError:
            return  # the heartbeat tries again
        if record is not None and not record.status.is_terminal:
            return
        if record is None:
            self._ledger.expire(task_id)
            return
        event = TaskEvent.CANCEL if record.status is TaskStatus.CANCELLED else TaskEvent.FAIL
        self._ledger.transition(actor, event, record.status_message)
        actor.scope.cancel()
        log.info("task %s %s by another process", task_id, record.status.value)

    async def _heartbeat(self) -> None:
        """Every third of the lease: re-check the local actors against the store."""
        while True:
            await trio.sleep(self.store.lease_seconds / 3)
            ids = self._ledger.running_ids()
            if not ids:
                continue
            try:
                stopped = await self.store.terminal_among(ids)
            except McpError:
                continue
            for task_id in stopped:
                await self.reconcile(task_id)

    # --- queued work (re-runs, a front's tasks) -------------------------------------------

    async def _claimer(self, store: RerunStore) -> None:
        """Claim queued tasks of the tools this process hosts and run them here: at a
        ``queue`` hint, else every ``hint_seconds``."""
        registered: bool | None = None
        while True:
            tools = frozenset() if self.draining else self.claim_tools()
            claimed = []
            with contextlib.suppress(McpError):
                if bool(tools) != registered:
                    await store.set_worker(bool(tools))
                    registered = bool(tools)
                if tools:
                    claimed = await store.claim(tools, _CLAIM_BATCH)
            for record in claimed:
                if self.rerun is None or not self.rerun(record):  # hand it back
                    with contextlib.suppress(McpError):
                        await store.requeue(
                            [record.task_id], count=False, message=record.status_message
                        )
            if len(claimed) == _CLAIM_BATCH:
                continue
            with trio.move_on_after(self.store.hint_seconds):
                await self._claim_wake.wait()
            self._claim_wake = trio.Event()

    async def _fence(self, store: RerunStore) -> None:
        """No second run while the first process lives: once this process's lease may
        have lapsed (no renewal for a whole lease), its re-runnable work stops here, since
        the others may claim it; when a renewal succeeds again, those of its tasks the
        store still gives this process go back to the queue (an attempt counted), and
        those a sweep queued meanwhile are left to whoever claimed them."""
        lease = store.lease
        while True:
            if trio.current_time() < lease.held_until:
                await trio.sleep_until(lease.held_until)
                continue
            fenced = self._ledger.rerunnable_actors()
            for actor in fenced:
                actor.scope.cancel()  # ends without a status change (the store decides)
            if fenced:
                log.warning(
                    "%r: lease not renewed for %g s (store unreachable?): stopped %d"
                    " re-runnable task(s) here, which other processes may run again",
                    self.store, lease.seconds, len(fenced),
                )  # fmt: skip
            await lease.wait_renewed()
            ids = [actor.task_id for actor in fenced]
            while ids:
                try:
                    await self.settle()
                    await store.requeue(ids, count=True)
                except McpError:
                    await lease.wait_renewed()
                else:
                    ids = []

    async def hand_off(self, task_ids: list[str]) -> None:
        """Give these local re-runnable tasks to the other processes at once (a drain):
        queued in the store, then their actors here stopped without a status change."""
        store = rerun_store(self.store)
        if not task_ids or store is None:
            return
        await self.settle()
        await store.requeue(task_ids, count=True, spend=False)
        for task_id in task_ids:
            actor = self._ledger.running_actor(task_id)
            if actor is not None:
                actor.scope.cancel()

    # --- reading ---------------------------------------------------------------------------

    async def lookup(self, owner: str, task_id: str, *, final_here: bool = False) -> TaskRecord:
        """``owner``'s task as stored, after this process's own writes.

        With ``final_here``, a terminal record this process stored is not read
        again (``tasks/result``: it cannot change in the store; ``tasks/get`` and
        the others always read the store, so an outage shows at once).

        Raises:
            McpError: -32602 for an unknown, expired or foreign id; -32603
                when the store is unavailable.
        """
        await leave_reader()
        await self.settle()
        record = self._final.get(task_id) if final_here else None
        if record is None:
            record = await self.store.get(task_id)
        record = owned(record, owner, task_id)
        if record.deadline <= trio.current_time():
            raise expired()
        return record

    async def cancel(
        self, owner: str, task_id: str, requestor: TaskConnection | None
    ) -> TaskRecord:
        """``tasks/cancel`` wherever the task runs: a local actor is cancelled here (status
        first, then its scope), any other through the store (the stored cancel reaches
        its process); the record as stored afterwards.

        Raises:
            McpError: -32602 for an unknown task or one already terminal (also when it
                ended first in another process); -32603 when the store is unavailable.
        """
        actor = self._ledger.running_actor(task_id)
        if actor is not None and not actor.record.status.is_terminal:
            # Its actor runs here: its record is checked here, the store is not read.
            self._ledger.lookup(owner, task_id)
            self._ledger.cancel_actor(task_id, requestor)
            return await self._cancelled_here(owner, task_id)
        record = await self.lookup(owner, task_id)
        if record.status.is_terminal:
            raise already_terminal(record)
        if self._ledger.cancel_actor(task_id, requestor):  # (it started here meanwhile)
            return await self._cancelled_here(owner, task_id)
        stored = await self.store.cancel(task_id, CANCEL_MESSAGE, now_iso())
        record = stored if stored is not None else await self.lookup(owner, task_id)
        if record.status is not TaskStatus.CANCELLED:
            raise already_terminal(record)  # it ended first, in another process
        audit.info("task cancel requested id=%s context=%s", task_id, owner)
        return record

    async def _cancelled_here(self, owner: str, task_id: str) -> TaskRecord:
        """The answer to a cancel of a local actor, once its cancelled status is stored.

        That status went to the store as a conditional write: applied, it is the
        answer (a terminal status never changes again); not applied, the task was
        terminal in the store first (ended or cancelled by another process): -32602.
        (The last ``_FINAL_KEPT`` applied terminal writes are kept: far more than
        one settle() spans.)
        """
        await leave_reader()
        await self.settle()
        final = self._final.get(task_id)
        if final is None:
            raise already_terminal(await self.lookup(owner, task_id))
        audit.info("task cancel requested id=%s context=%s", task_id, owner)
        return final

    async def wait_terminal(self, owner: str, task_id: str, peer: TaskConnection) -> TaskRecord:
        """``tasks/result``'s wait: until the task is terminal, wherever it runs.

        Meanwhile the task's input requests queued in the store are taken
        and sent over ``peer``, and their answers stored for the actor.
        """
        hint = self._hint(task_id)
        # Started inline, a task this process stored as terminal is answered without a
        # task: settle() parks until the writer has stored it, and it is read here.
        await self.settle()
        record = self._final.get(task_id)
        actor = self._ledger.running_actor(task_id)
        if record is None and actor is not None and started_inline():
            # Its actor runs here: parked until it ends (its terminal status stored)
            # or asks. Every change wakes the hint (each stored status, each question
            # queued, the actor's end with or without a status), so no timer is needed.
            owned(actor.record, owner, task_id)
            while (
                not actor.record.status.is_terminal
                and not self._asking.get(task_id)
                and self._ledger.running_actor(task_id) is actor
            ):
                await hint.wait()
                hint = self._hint(task_id)
            if actor.record.status.is_terminal:
                await self.settle()
                record = self._final.get(task_id)
        if record is not None and record.deadline > trio.current_time():
            return owned(record, owner, task_id)
        await leave_reader()
        record = await self._current(owner, task_id)
        if record.status.is_terminal:
            return record
        async with trio.open_nursery() as nursery:
            while not record.status.is_terminal:
                # A local actor's requests are queued by this process (ask()): look
                # for them only while it asks; any other task's, at every wake-up.
                if task_id not in self._final and (
                    self._asking.get(task_id) or self._ledger.running_actor(task_id) is None
                ):
                    while (item := await self.store.claim_input(task_id)) is not None:
                        nursery.start_soon(_deliver, self, task_id, item, peer)
                hinted = await self._sleep_on(hint, math.inf)
                hint = self._hint(task_id)
                if hinted:
                    record = await self._current(owner, task_id)
                else:  # no hint for hint_seconds: read the store (a hint may be lost)
                    record = await self.lookup(owner, task_id, final_here=True)
            nursery.cancel_scope.cancel()
        return record

    async def _current(self, owner: str, task_id: str) -> TaskRecord:
        """``tasks/result``'s read: a task whose actor runs here and is not terminal
        is read here (a change made elsewhere reaches it by hint, else the
        heartbeat, and the wait re-reads the store every ``hint_seconds``);
        any other, :meth:`lookup` (``final_here``)."""
        actor = self._ledger.running_actor(task_id)
        if actor is None or actor.record.status.is_terminal:
            return await self.lookup(owner, task_id, final_here=True)
        record = owned(actor.record, owner, task_id)
        if record.deadline <= trio.current_time():
            raise expired()
        return record

    # --- the actors' input requests (InputRelay) -----------------------------------------

    @contextlib.contextmanager
    def asking(self, task_id: str) -> Iterator[None]:
        """Mark the local actor of ``task_id`` as asking (its requests are in the store)."""
        self._asking[task_id] = self._asking.get(task_id, 0) + 1
        try:
            yield
        finally:
            if left := self._asking[task_id] - 1:
                self._asking[task_id] = left
            else:
                del self._asking[task_id]

    async def ask_pulled(
        self, actor: TaskActor, pulled: PulledInputs, key: str, method: str,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        """A pulled question (posted in the actor's ``pulled``), visible to every process.

        Queued in the store (any process's ``tasks/get`` shows it); the answer
        comes from a local one (``pulled.answer``) or one stored by another
        process, whichever is first.

        Cancellation: the question is taken off the queue.
        """
        task_id = actor.task_id
        with self.asking(task_id):
            return await self._ask_pulled(actor, pulled, key, method, params)

    async def _ask_pulled(
        self,
        actor: TaskActor,
        pulled: PulledInputs,
        key: str,
        method: str,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        task_id = actor.task_id
        await self.store.push_input(task_id, InputItem(key, method, params))
        self.wake(task_id)
        got: list[dict[str, Any]] = []
        try:
            async with trio.open_nursery() as nursery:

                async def local() -> None:
                    got.append(await pulled.answered(key))
                    nursery.cancel_scope.cancel()

                nursery.start_soon(local)
                while not got:
                    hint = self._hint(task_id)
                    stored = await self.store.take_answer(task_id, key)
                    if stored is not None and stored.result is not None:
                        got.append(stored.result)
                        nursery.cancel_scope.cancel()
                        break
                    await self._sleep_on(hint, actor.record.poll_interval / 1000)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self.store.claim_input(task_id, key)
        return got[0]

    async def ask(
        self, actor: TaskActor, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], TaskConnection | None]:
        """Queue ``method`` for the requestor in the store and await its answer.

        Raises:
            RemoteError: The requestor answered with an error.
            McpError: -32603 when the store is unavailable.
        """
        task_id = actor.task_id
        key = str(next(self._keys))
        if actor.record.attempt > 1:  # a re-run: never the key of an earlier run's question
            key = f"{actor.record.attempt}.{key}"
        item = InputItem(key, method, params)
        with self.asking(task_id):
            await self.store.push_input(task_id, item)
            self.wake(task_id)  # a tasks/result open here takes it at once
            hint = self._hint(task_id)
            poll = actor.record.poll_interval / 1000
            fallback_at = trio.current_time() + PUSH_FALLBACK_POLLS * poll
            while (answer := await self.store.take_answer(task_id, item.key)) is None:
                if trio.current_time() >= fallback_at:
                    fallback_at = trio.current_time() + poll
                    peer = self._ledger.live_peer(actor.record.owner, prefer=actor.origin)
                    if peer is not None and await self.store.claim_input(task_id, item.key):
                        try:
                            return await peer.request_raw(method, params), peer
                        except ConnectionClosed:
                            await self.store.requeue_input(task_id, item)
                await self._sleep_on(hint, max(0.0, fallback_at - trio.current_time()))
                hint = self._hint(task_id)
        via = self._via.pop((task_id, item.key), None)
        if answer.error is not None:
            error = answer.error
            raise RemoteError(int(error["code"]), str(error["message"]), error.get("data"))
        assert answer.result is not None
        return answer.result, via


async def _deliver(
    cluster: Cluster, task_id: str, item: InputItem, peer: TaskConnection
) -> None:
    """Send a queued input request over ``peer``; store the answer (or requeue it)."""
    params = item.params
    if cluster._ledger.running_actor(task_id) is None and "task" in params:
        # The answer goes to another process, which cannot follow a task
        # hosted on this connection: ask for the plain result instead.
        params = {k: v for k, v in params.items() if k != "task"}
    try:
        result = await peer.request_raw(item.method, params)
        answer = InputAnswer(result=result)
        if cluster._ledger.running_actor(task_id) is not None:
            cluster._via[task_id, item.key] = peer
    except RemoteError as exc:
        error = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        answer = InputAnswer(error=error)
    except ConnectionClosed:
        await _requeue(cluster, task_id, item)
        return
    except trio.Cancelled:
        # This tasks/result ended first: the request goes back in the queue
        # for the next one (or the actor's own fallback), never lost.
        with trio.CancelScope(shield=True):
            await _requeue(cluster, task_id, item)
        raise
    try:
        await cluster.store.answer_input(task_id, item.key, answer)
    except McpError as exc:
        log.warning("task %s: an answer could not be stored: %s", task_id, exc.message)
    cluster.wake(task_id)  # an actor asking here takes it at once

async def _requeue(cluster: Cluster, task_id: str, item: InputItem) -> None:
    with trio.move_on_after(SETTLE_TIMEOUT):
        try:
            await cluster.store.requeue_input(task_id, item)
        except McpError as exc:
            log.warning("task %s: a request could not be requeued: %s", task_id, exc.message)
