"""A durable task store on SQLite: records survive a crash of the process.

Reads are served from memory (a :class:`MemoryTaskStore` the store keeps in
step). Writes are committed in groups: the changes made while the Trio thread
runs one batch of tasks are committed together, in one transaction, by a small
flusher task that runs after that batch (the group commit).
:meth:`SqliteTaskStore.sync` waits until every change made so far is
committed; the registry awaits it before it acknowledges anything (a created
task, a terminal status, a result), so what a requestor was told survives a
``SIGKILL``. On start, :meth:`SqliteTaskStore.open` loads the file: expired
records are dropped, and tasks that were ``working`` or ``input_required``
when the process died become ``failed`` with a status message saying so.

The commit runs on the Trio thread: with the WAL journal and
``synchronous=NORMAL`` a commit appends to the WAL file (a ``write`` into the
OS page cache, no ``fsync``), tens of microseconds, less than handing it to a
thread and back (measured in bench/RESULTS.md, "Session 7"). What may wait on
the disk, the checkpoints that copy the WAL into the database and ``fsync``,
runs in a thread of its own (``wal_autocheckpoint`` is off on the writing
connection). Loading the file at start is done in a thread too.

If the disk fails (full, read-only), the flusher keeps the failed changes and
retries every second; meanwhile :meth:`sync` raises after
:data:`SYNC_TIMEOUT` seconds, so requests get a clear error instead of
hanging, and service resumes once a retry commits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import secrets
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ..._errors import INTERNAL_ERROR, McpError
from ..._inline import InlineEvent
from .._messages import TaskStatus
from ._codec import outcome_from_json, outcome_to_json
from ._rerun import exhausted_message, rerun_message
from ._store import (
    InputAnswer,
    InputItem,
    MemoryTaskStore,
    Opened,
    RerunTicket,
    StoreEvents,
    TaskRecord,
    TaskStore,
    create_one_by_one,
    now_iso,
    trio_deadline,
    wall_expiry,
)

log = logging.getLogger("trio_mcp.tasks")

#: Seconds :meth:`SqliteTaskStore.sync` waits for a failing disk before it
#: reports the store as unavailable.
SYNC_TIMEOUT: Final = 5.0
#: Status message of a task whose process died while it ran.
LOST_MESSAGE: Final = (
    "The server stopped while this task was running (it was restarted); its work was lost."
)
_RETRY_SECONDS: Final = 1.0
#: Commits between two checkpoints (the WAL grows by about a page per commit).
_CHECKPOINT_EVERY: Final = 500
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    seq INTEGER NOT NULL,
    method TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_updated_at TEXT NOT NULL,
    ttl INTEGER,
    poll_interval INTEGER NOT NULL,
    expires_at REAL,
    status_message TEXT,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, seq);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reruns (
    task_id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    backoff REAL NOT NULL,
    job TEXT NOT NULL,
    attempt INTEGER NOT NULL
);
"""
_UPSERT: Final = (
    "INSERT OR REPLACE INTO tasks (task_id, owner, seq, method, status, created_at,"
    " last_updated_at, ttl, poll_interval, expires_at, status_message, outcome)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: A re-runnable task's ticket (``reruns``: a table of its own, added to older files
#: by ``CREATE TABLE IF NOT EXISTS``; the ``tasks`` table is unchanged).
_RERUN_UPSERT: Final = (
    "INSERT OR REPLACE INTO reruns (task_id, tool, attempts, backoff, job, attempt)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


@final
class SqliteTaskStore:
    """A :class:`~._store.TaskStore` kept in a SQLite file (``sqlite:///path``), for
    one process: reads and writes return at once, :meth:`sync` waits for the commit.

    Args:
        path: The database file; created with its folder if missing.

    The registry calls :meth:`open` when it starts, :meth:`sync` before it
    acknowledges a change, and :meth:`aclose` when it stops.
    """

    shared = False
    lease_seconds = math.inf
    hint_seconds = math.inf

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.instance = f"sqlite:{self.path}"
        self._memory = MemoryTaskStore()
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[Any, ...]] = []  # changes not committed yet, in order
        self._queued = 0  # changes made
        self._done = 0  # changes committed
        self._committed = InlineEvent()  # set (and replaced) at every commit
        self._kick: trio.Event | None = None
        self._failure: str | None = None
        self._flusher: trio.CancelScope | None = None
        self._commits = 0
        self._checkpoints: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._checkpointer: threading.Thread | None = None
        self._expires: dict[str, float | None] = {}

    def __repr__(self) -> str:
        return f"SqliteTaskStore({str(self.path)!r})"

    # --- the TaskStore contract (memory reads, queued writes) ----------------------------

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Nothing to run beside the flusher (started by :meth:`open`); no hints."""
        task_status.started()

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        """Keep ``record`` (its seq and live count in memory) and commit it before returning.

        Raises:
            CapReached: The owner has ``max_live`` live tasks.
            McpError: -32603 when the disk keeps failing (the record is dropped).
        """
        seq = await self._memory.create(record, max_live=max_live)
        self._expires[record.task_id] = wall_expiry(record.deadline)
        self._write(("upsert", self._row(record)))
        if (ticket := record.rerun) is not None:
            self._write(("rerun", (record.task_id, ticket.tool, ticket.attempts,
                                   ticket.backoff, ticket.request, record.attempt)))  # fmt: skip
        try:
            await self.sync()
        except McpError:
            await self.delete(record.task_id)
            raise
        return seq

    async def create_many(
        self, records: Sequence[TaskRecord], *, max_live: int
    ) -> list[int | Exception]:
        return await create_one_by_one(self, records, max_live=max_live)

    async def get(self, task_id: str) -> TaskRecord | None:
        return await self._memory.get(task_id)

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        return await self._memory.page(owner, after_seq, limit)

    async def update(self, record: TaskRecord) -> bool:
        """Apply the change in memory (compare and set) and queue it for the next commit."""
        if not await self._memory.update(record):
            return False
        self._write(("upsert", self._row(record)))
        return True

    async def update_many(self, records: Sequence[TaskRecord]) -> list[bool]:
        return [await self.update(record) for record in records]

    async def cancel(self, task_id: str, message: str, updated_at: str) -> TaskRecord | None:
        before = await self._memory.get(task_id)
        live = before is not None and not before.status.is_terminal
        record = await self._memory.cancel(task_id, message, updated_at)
        if live and record is not None:
            self._write(("upsert", self._row(record)))
        return record

    async def delete(self, task_id: str) -> None:
        await self._memory.delete(task_id)
        self._expires.pop(task_id, None)
        self._write(("delete", task_id))

    async def terminal_among(self, task_ids: Collection[str]) -> set[str]:
        return await self._memory.terminal_among(task_ids)

    # The side channel is not durable: a restart fails every running task anyway.

    async def push_input(self, task_id: str, item: InputItem) -> None:
        await self._memory.push_input(task_id, item)

    async def claim_input(self, task_id: str, key: str | None = None) -> InputItem | None:
        return await self._memory.claim_input(task_id, key)

    async def peek_inputs(self, task_id: str) -> list[InputItem]:
        return await self._memory.peek_inputs(task_id)

    async def requeue_input(self, task_id: str, item: InputItem) -> None:
        await self._memory.requeue_input(task_id, item)

    async def answer_input(self, task_id: str, key: str, answer: InputAnswer) -> None:
        await self._memory.answer_input(task_id, key, answer)

    async def take_answer(self, task_id: str, key: str) -> InputAnswer | None:
        return await self._memory.take_answer(task_id, key)

    def __len__(self) -> int:
        return len(self._memory.index)

    def _row(self, r: TaskRecord) -> tuple[Any, ...]:
        return (
            r.task_id, r.owner, r.seq, r.method, r.status.value, r.created_at,
            r.last_updated_at, r.ttl, r.poll_interval, self._expires.get(r.task_id),
            r.status_message, outcome_to_json(r.outcome),
        )  # fmt: skip

    def _write(self, item: tuple[Any, ...]) -> None:
        if self._conn is None:
            raise RuntimeError("the SQLite task store is not open (run the registry)")
        self._pending.append(item)
        self._queued += 1
        kick = self._kick
        if kick is not None:  # the first change since the last commit
            self._kick = None
            kick.set()

    # --- durability ---------------------------------------------------------------------

    @property
    def pending_writes(self) -> int:
        """Changes made but not yet committed."""
        return self._queued - self._done

    async def sync(self) -> None:
        """Wait until every change made so far is committed to the file.

        Raises:
            McpError: -32603 when the disk has been failing for
                :data:`SYNC_TIMEOUT` seconds of this wait (give or take one
                retry; the changes stay queued and are retried; nothing
                acknowledged is lost).

        Cancellation: stops waiting; the writes go on.
        """
        target = self._queued
        give_up = math.inf  # no timer while commits succeed: the flusher wakes us
        # Started inline (trio_mcp._inline), it waits without a task: the flusher's
        # task goes on with it after the commit.
        while self._done < target:
            if self._conn is None:  # closed with changes it could not commit
                break
            if self._failure is not None:  # woken by a failed commit (one per retry)
                now = trio.current_time()
                give_up = min(give_up, now + SYNC_TIMEOUT)
                if now >= give_up:
                    break
            await self._committed.wait()
        else:
            return
        raise McpError(
            INTERNAL_ERROR,
            f"Task store unavailable ({self._failure or 'writes are not completing'}); "
            "retry later",
        )

    async def _flush(self, scope: trio.CancelScope) -> None:
        """The flusher: after each scheduler batch that made changes, commit them
        together; on a failure, keep them and retry every :data:`_RETRY_SECONDS`."""
        with scope:
            while True:
                if not self._pending:
                    kick = self._kick = trio.Event()
                    await kick.wait()  # resumes after the batch that made the first change
                if not self._commit_pending():
                    await trio.sleep(_RETRY_SECONDS)

    def _commit_pending(self) -> bool:
        """Commit every pending change in one transaction; False if it failed."""
        conn, changes = self._conn, self._pending
        if conn is None or not changes:
            return True
        # Each change sets a whole row (or deletes it): the last one per task wins.
        last: dict[str, tuple[Any, ...]] = {}
        reruns: list[tuple[Any, ...]] = []
        for change in changes:
            if change[0] == "rerun":
                reruns.append(change[1])
                continue
            last[change[1][0] if change[0] == "upsert" else change[1]] = change
        rows = [change[1] for change in last.values() if change[0] == "upsert"]
        gone = [(change[1],) for change in last.values() if change[0] == "delete"]
        try:
            conn.execute("BEGIN")
            if gone:
                conn.executemany("DELETE FROM tasks WHERE task_id = ?", gone)
                conn.executemany("DELETE FROM reruns WHERE task_id = ?", gone)
            if rows:
                conn.executemany(_UPSERT, rows)
            if reruns:
                conn.executemany(_RERUN_UPSERT, reruns)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if self._failure is None:
                log.error("%s: writes failing, retrying every second: %s", self, exc)
            self._failure = f"{type(exc).__name__}: {exc}"
            self._wake_waiters()  # they give up after SYNC_TIMEOUT of failures
            return False
        if self._failure is not None:
            log.warning("%s: writes succeed again", self)
            self._failure = None
        self._pending = []
        self._done += len(changes)
        self._wake_waiters()
        self._commits += 1
        if self._commits % _CHECKPOINT_EVERY == 0:
            self._checkpoints.put(True)
        return True

    def _wake_waiters(self) -> None:
        committed, self._committed = self._committed, InlineEvent()
        committed.set()

    def _checkpoint(self) -> None:
        """The checkpoint thread: copy the WAL into the database when asked (it
        waits on the disk, so never on the Trio thread); a last one at close."""
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            while True:
                more = self._checkpoints.get()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as exc:
                    log.warning("%s: checkpoint failed (retried later): %s", self, exc)
                if not more:
                    return
        finally:
            conn.close()

    # --- opening and closing ----------------------------------------------------------------

    async def open(self) -> Opened:
        """Open (or create) the file, load what it holds, start the flusher.

        Returns:
            The records still within their TTL (now also in memory), the cursor
            key kept in the file, how many running tasks were marked ``failed``.

        Raises:
            sqlite3.Error: The file cannot be opened or is not a task store.

        Cancellation: the loading finishes in its thread; the store stays closed.
        """
        if self._conn is not None:
            raise RuntimeError("the SQLite task store is already open")
        now_wall, now_trio = time.time(), trio.current_time()
        conn, restored = await trio.to_thread.run_sync(self._load, now_wall, now_trio)
        self._memory.restore(restored.records)
        self._conn = conn
        self._checkpointer = threading.Thread(
            target=self._checkpoint, name=f"trio-mcp sqlite {self.path.name}", daemon=True
        )
        self._checkpointer.start()
        self._flusher = trio.CancelScope()
        trio.lowlevel.spawn_system_task(self._flush, self._flusher, name=f"{self!r} flusher")
        return restored

    async def aclose(self) -> None:
        """Commit what is pending (retrying for at most :data:`SYNC_TIMEOUT` s), stop.

        Cancellation: the last checkpoint finishes in its thread.
        """
        conn = self._conn
        if conn is None:
            return
        if self._flusher is not None:
            self._flusher.cancel()
        give_up = trio.current_time() + SYNC_TIMEOUT
        while True:
            if self._commit_pending() or trio.current_time() >= give_up:
                break
            with trio.CancelScope(shield=True):
                await trio.sleep(_RETRY_SECONDS)
        if self._pending:
            self._failure = self._failure or "the store was closed"
        self._conn = None
        conn.close()
        self._wake_waiters()
        self._checkpoints.put(False)
        if self._checkpointer is not None:
            await trio.to_thread.run_sync(
                self._checkpointer.join, SYNC_TIMEOUT, abandon_on_cancel=True
            )

    def _load(self, now_wall: float, now_trio: float) -> tuple[sqlite3.Connection, Opened]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a crash of the process (SIGKILL);
        # only a power loss may take the last transactions.
        conn.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints (they fsync) run in the store's checkpoint thread, not on commit.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA busy_timeout=100")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()
        if row is None:
            secret = secrets.token_bytes(16)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('cursor_secret', ?)", (secret.hex(),)
            )
        else:
            secret = bytes.fromhex(row[0])
        conn.execute("BEGIN")
        conn.execute(
            "DELETE FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?", (now_wall,)
        )
        conn.execute(
            "DELETE FROM reruns WHERE task_id NOT IN (SELECT task_id FROM tasks)"
        )
        tickets = {
            row[0]: row[1:] for row in conn.execute(
                "SELECT task_id, tool, attempts, backoff, job, attempt FROM reruns"
            )
        }  # fmt: skip
        records, lost, changed = [], 0, []
        for row in conn.execute("SELECT * FROM tasks ORDER BY seq"):
            record = self._record(row, now_wall, now_trio)
            if (ticket := tickets.get(record.task_id)) is not None:
                tool, attempts, backoff, job, attempt = ticket
                record.rerun = RerunTicket(tool, attempts, backoff, job)
                record.attempt = attempt
            if not record.status.is_terminal:
                record.last_updated_at = now_iso()
                changed.append(record)
                if record.rerun is not None and record.attempt < record.rerun.attempts:
                    # re-runnable: runs again in this process (the registry starts it)
                    record.attempt += 1
                    record.status = TaskStatus.WORKING
                    record.status_message = rerun_message(record.attempt, record.rerun.attempts)
                    conn.execute(
                        "UPDATE reruns SET attempt = ? WHERE task_id = ?",
                        (record.attempt, record.task_id),
                    )
                else:
                    record.status = TaskStatus.FAILED
                    record.status_message = (
                        LOST_MESSAGE if record.rerun is None
                        else exhausted_message(record.rerun.attempts)
                    )  # fmt: skip
                    lost += 1
            records.append(record)
        for record in changed:
            conn.execute(_UPSERT, self._row(record))
        conn.execute("COMMIT")
        if lost:
            log.warning("%s: %d task(s) were running when the process stopped: failed", self, lost)
        return conn, Opened(secret, tuple(records), lost)

    def _record(self, row: Iterable[Any], now_wall: float, now_trio: float) -> TaskRecord:
        (task_id, owner, seq, method, status, created_at, last_updated_at, ttl, poll_interval,
         expires_at, status_message, outcome) = row  # fmt: skip
        self._expires[task_id] = expires_at
        deadline = trio_deadline(expires_at, now_wall, now_trio)
        return TaskRecord(
            task_id=task_id,
            owner=owner,
            seq=seq,
            method=method,
            status=TaskStatus(status),
            created_at=created_at,
            last_updated_at=last_updated_at,
            ttl=ttl,
            poll_interval=poll_interval,
            deadline=deadline,
            status_message=status_message,
            outcome=outcome_from_json(outcome),
        )


if TYPE_CHECKING:

    def _conforms(store: SqliteTaskStore) -> TaskStore:
        return store  # mypy checks the class against the protocol
