"""A task store in PostgreSQL, shared by many server processes (:class:`PostgresTaskStore`).

URL: ``postgresql://[user[:password]@][host][:port]/dbname`` or ``postgres://...``;
a unix socket with ``?host=/path/to/socket/dir``. Store options in the query:
``lease=SECONDS`` (default 30), ``hint=SECONDS`` (default ``min(2, lease/3)``),
``schema=NAME`` (default ``trio_mcp``), ``pool=N`` (connections, default 8); any
other query option goes to libpq (``sslmode``, ``connect_timeout``, ...). Needs
the ``postgres`` extra (psycopg 3) and PostgreSQL 13 or later.

The tables, their indexes and functions are created on first use in their own
schema and versioned (:mod:`._postgres_sql`); a schema newer than this code knows
is refused (:class:`SchemaVersionError`), never silently used. Every operation is
one statement (one round trip; the atomic ones are PL/pgSQL functions) run off
the Trio thread (:mod:`._postgres_loops`); hints go through ``LISTEN/NOTIFY``.
When PostgreSQL cannot be reached every call raises
:func:`~._shared.store_unavailable` within :attr:`PostgresTaskStore.op_timeout`
seconds, and the next call after it is back works again.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import psycopg
import trio

from ..._inline import leave_reader
from .._messages import TaskStatus
from . import _postgres_rerun as pgr
from . import _postgres_sql as pg
from ._codec import outcome_from_json, outcome_to_json
from ._postgres_cache import TerminalCache
from ._postgres_conn import (
    STORE_OPTIONS,
    PgPool,
    Row,
    conninfo_with_timeouts,
    rows,
    run_blocking,
)
from ._postgres_loops import listen
from ._rerun import LeaseClock, RerunTicket
from ._shared import LEASE_LOST_MESSAGE, SharedOptions, repeat, store_unavailable
from ._store import (
    CapReached,
    InputAnswer,
    InputItem,
    Opened,
    StoreEvents,
    TaskRecord,
    TaskStore,
    now_iso,
    trio_deadline,
    wall_expiry,
)

log = logging.getLogger("trio_mcp.tasks")

#: Seconds one store call may take before it fails as "unavailable".
OP_TIMEOUT: Final = 5.0
DEFAULT_SCHEMA: Final = "trio_mcp"
DEFAULT_POOL: Final = 8
#: The most expired rows one purge statement deletes.
PURGE_BATCH: Final = 500
#: The most purge statements per sweep period (the rest waits for the next one).
PURGE_ROUNDS: Final = 20


class SchemaVersionError(RuntimeError):
    """The store's tables were made by a newer trio-mcp than this one (or are unknown)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _record(row: Row) -> TaskRecord | None:
    """The record a ``tasks`` row holds (columns as ``_postgres_sql._COLUMNS``, as
    text), or ``None`` when it is past its expiry."""
    task_id, owner, seq, method, status, created, updated, ttl, poll, expires, msg, out = row
    now_wall = time.time()
    wall = None if expires is None else int(expires) / 1000
    if wall is not None and wall <= now_wall:
        return None
    assert task_id is not None and owner is not None and seq is not None
    assert method is not None and status is not None and created is not None
    assert updated is not None and poll is not None
    return TaskRecord(
        task_id=task_id, owner=owner, seq=int(seq), method=method, status=TaskStatus(status),
        created_at=created, last_updated_at=updated, ttl=None if ttl is None else int(ttl),
        poll_interval=int(poll), deadline=trio_deadline(wall, now_wall, trio.current_time()),
        status_message=msg, outcome=outcome_from_json(out),
    )  # fmt: skip


def _text(text: str | None) -> str | None:
    """``text`` as PostgreSQL can store it (a NUL character cannot be in ``text``)."""
    return text.replace("\x00", "\ufffd") if text and "\x00" in text else text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _create_batch(records: Sequence[TaskRecord]) -> str:
    """``create_tasks``' batch: one JSON array per record."""
    batch = []
    for r in records:
        wall = wall_expiry(r.deadline)
        batch.append([
            r.task_id, r.owner, r.status.value, r.created_at, r.method, r.last_updated_at,
            r.ttl, r.poll_interval, None if wall is None else round(wall * 1000),
            _text(r.status_message), outcome_to_json(r.outcome),
        ])  # fmt: skip
    return _json(batch)


def _update_batch(records: Sequence[TaskRecord]) -> str:
    """``update_tasks``' batch: one JSON array per record."""
    return _json([
        [r.task_id, r.status.value, r.last_updated_at, _text(r.status_message),
         outcome_to_json(r.outcome)]
        for r in records
    ])  # fmt: skip


def _item(key: str, body: str) -> InputItem:
    value = json.loads(body)
    return InputItem(key=key, method=value["method"], params=value["params"])


def _item_body(item: InputItem) -> str:
    return json.dumps({"method": item.method, "params": item.params}, ensure_ascii=False)


def _set_up(conn: psycopg.Connection[Any], schema: str, q: dict[str, str]) -> str:
    """Create the schema (or check its version) and the secret, in one transaction;
    return the secret."""
    with conn.transaction():
        conn.execute(q["lock"])
        found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".meta',)).fetchone()
        migrate = pg.fill(pgr.migration(), schema).encode()
        if found is None or found[0] is None:
            conn.execute(pg.ddl(schema).encode())
            conn.execute(migrate)
            conn.execute(q["set_version"], (str(pgr.VERSION),))
        else:
            row = conn.execute(q["version"]).fetchone()
            version = None if row is None else row[0]
            if version == str(pg.SCHEMA_VERSION):  # version 1: add the re-runs in place
                conn.execute(migrate)
                conn.execute(q["bump_version"], (str(pgr.VERSION),))
            elif version != str(pgr.VERSION):
                newer = str(version).isdigit() and int(str(version)) > pgr.VERSION
                raise SchemaVersionError(
                    f"the task store's tables in schema {schema!r} have version"
                    f" {version!r}; this trio-mcp knows version {pgr.VERSION} ("
                    + ("a newer trio-mcp made them: upgrade it" if newer else "not ours")
                    + ", or use another schema=)"
                )
        conn.execute(q["secret"], (secrets.token_hex(16),))
        secret = conn.execute(q["get_secret"]).fetchone()
    assert secret is not None
    return str(secret[0])


@final
class PostgresTaskStore:
    """A :class:`~._store.TaskStore` in PostgreSQL, shared by processes (see the module
    for the URL).

    Args:
        url: ``postgresql://user@host:port/db`` (or ``postgres://``, or
            ``?host=/socket/dir``), optionally with ``lease=``, ``hint=``,
            ``schema=`` and ``pool=`` query options.
        lease_seconds: The lease (overrides the URL's ``lease``; default 30).
        schema: The PostgreSQL schema of the tables (overrides the URL's; default
            ``trio_mcp``).
        instance: This process's id (default: host, pid and a random part).

    Call :meth:`open` first, then keep :meth:`run` running (it renews the
    lease), and :meth:`aclose` at the end. They may be called from any task.
    """

    #: Other processes read and write the same tasks.
    shared = True

    def __init__(
        self,
        url: str,
        *,
        lease_seconds: float | None = None,
        schema: str | None = None,
        instance: str | None = None,
    ) -> None:
        self.url = url
        shared = SharedOptions.parse(
            url, schemes=("postgresql", "postgres"), names=STORE_OPTIONS,
            lease_seconds=lease_seconds, instance=instance,
        )  # fmt: skip
        options = shared.options
        self.lease_seconds = shared.lease_seconds
        self.lease = LeaseClock(self.lease_seconds)
        self.hint_seconds = shared.hint_seconds
        self.instance = shared.instance
        self.schema = pg.check_schema_name(schema or options.get("schema", DEFAULT_SCHEMA))
        self.pool_size = int(options.get("pool", DEFAULT_POOL))
        if self.pool_size < 1:
            raise ValueError(f"the pool needs at least one connection: {self.pool_size}")
        self._libpq_url = shared.driver_url
        self._lease_ms = math.ceil(self.lease_seconds * 1000)
        self._q = pg.queries(self.schema)
        self.op_timeout = OP_TIMEOUT
        self.purge_batch = PURGE_BATCH
        self._pool: PgPool | None = None
        self._terminal = TerminalCache()

    def __repr__(self) -> str:
        return f"PostgresTaskStore({self.url!r}, instance={self.instance!r})"

    # --- calls -------------------------------------------------------------------------

    async def _rows(self, name: str, *args: Any) -> list[Row]:
        """The rows of statement ``name`` (one round trip)."""
        await leave_reader()  # every statement waits on PostgreSQL (see TaskStore)
        return rows(await self._pool_().query(name, self._q[name], args))

    async def _one(self, name: str, *args: Any) -> Row | None:
        """The first row of statement ``name`` (``None`` if none)."""
        found = await self._rows(name, *args)
        return found[0] if found else None

    def _pool_(self) -> PgPool:
        pool = self._pool
        if pool is None:
            raise store_unavailable("the PostgreSQL store is not open")
        pool.op_timeout = self.op_timeout
        return pool

    # --- lifecycle ---------------------------------------------------------------------

    async def open(self) -> Opened:
        """Connect, create or check the tables, take the lease.

        Returns:
            The cursor secret every process shares (no records: they are read here).

        Raises:
            McpError: PostgreSQL cannot be reached (:func:`~._shared.store_unavailable`).
            SchemaVersionError: The tables were made by a newer trio-mcp.
        """
        if self._pool is not None:
            raise RuntimeError(f"{self!r} is already open")
        conninfo = conninfo_with_timeouts(self._libpq_url, self.op_timeout)
        schema, q = self.schema, self._q

        def set_up() -> str:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                return _set_up(conn, schema, q)

        secret = await run_blocking(set_up, self.op_timeout)
        self._pool = pool = PgPool(conninfo, self.pool_size, self.op_timeout)
        try:
            await self.renew_lease()
        except BaseException:
            self._pool = None
            pool.close()
            raise
        log.info("%r: open (lease %g s)", self, self.lease_seconds)
        return Opened(bytes.fromhex(secret))

    async def aclose(self) -> None:
        """Fail this process's still-running tasks, release the lease, disconnect."""
        pool = self._pool
        if pool is None:
            return
        try:
            with trio.CancelScope(shield=True):
                failed, _ = await self.sweep(self.instance)
            if failed:
                log.warning("%r: closing: %d running task(s) failed", self, failed)
        except Exception as exc:  # PostgreSQL is down: the lease lapses on its own
            log.warning("%r: could not release the lease: %s", self, exc)
        finally:
            self._pool = None
            pool.close()

    async def run(
        self, events: StoreEvents, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Until cancelled: hints to ``events.on_hint``; the lease renewed every lease/3 s;
        dead instances swept (their re-runnable tasks queued again) and expired rows purged every
        min(lease/2, hint) s. Survives outages."""
        pool = self._pool
        if pool is None:
            raise RuntimeError(f"{self!r} is not open")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(repeat, self, "renew the lease", self.lease_seconds / 3,
                               self._keep_lease)  # fmt: skip
            nursery.start_soon(repeat, self, "sweep dead instances",
                               min(self.lease_seconds / 2, self.hint_seconds),
                               self._sweep_and_purge)  # fmt: skip
            await listen(self, pool, pg.channel(self.schema), events, task_status)

    async def _keep_lease(self) -> None:
        if not await self.renew_lease():
            log.warning(
                "%r: our lease had lapsed (PostgreSQL unreachable for over %g s?): other"
                " processes may have failed the tasks we run", self, self.lease_seconds,
            )  # fmt: skip

    async def _sweep_and_purge(self) -> None:
        await self.sweep()
        for _ in range(PURGE_ROUNDS):
            if await self.purge() < self.purge_batch:
                break

    async def renew_lease(self) -> bool:
        """Take or renew this process's lease; False if it had lapsed (or is new)."""
        started = trio.current_time()
        row = await self._one("renew", self.instance, self._lease_ms)
        self.lease.renewed(started)
        return row is not None and row[0] == "t"

    async def sweep(self, instance: str = "") -> tuple[int, list[str]]:
        """Fail the running tasks of dead instances (or of ``instance``, releasing
        its lease) with :data:`~._shared.LEASE_LOST_MESSAGE`.

        Returns:
            How many tasks failed, and which instances were found dead.
        """
        row = await self._one("rescue", LEASE_LOST_MESSAGE, now_iso(), instance, _now_ms())
        assert row is not None and row[0] is not None and row[1] is not None
        failed, dead, queued = int(row[0]), [str(d) for d in json.loads(row[1])], int(row[2] or 0)
        if (failed or queued) and not instance:
            log.warning(
                "%r: instance(s) %s stopped: %d task(s) failed, %d queued to run again",
                self, dead, failed, queued,
            )  # fmt: skip
        return failed, dead

    # --- handing tasks between processes (RerunStore) ------------------------------------

    async def requeue(
        self,
        task_ids: Collection[str],
        *,
        count: bool,
        spend: bool = True,
        message: str | None = None,
    ) -> int:
        """Queue these live re-runnable tasks of this process again (see
        :class:`~._rerun.RerunStore`); how many workers are alive."""
        row = await self._one(
            "requeue", self.instance, count, spend, _text(message), now_iso(), _now_ms(),
            list(task_ids),
        )  # fmt: skip
        return int(row[0] or 0) if row is not None else 0

    async def claim(self, tools: Collection[str], limit: int) -> list[TaskRecord]:
        """Take up to ``limit`` due queued tasks of ``tools``, atomically."""
        if not tools:
            return []
        found = await self._rows(
            "claim", self.instance, sorted(tools), _now_ms(), limit, self._lease_ms
        )
        out = []
        for row in found:
            record = _record(row[:12])
            if record is None:
                continue
            tool, attempts, backoff, job, attempt = row[12:]
            assert tool is not None and attempts is not None and job is not None
            record.attempt = int(attempt or 1)
            if record.attempt == 1:
                record.status_message = None  # (the claim cleared a front's "queued")
            record.rerun = RerunTicket(tool, int(attempts), int(backoff or 0) / 1000, job)
            out.append(record)
        return out

    async def set_worker(self, worker: bool) -> None:
        """Count this process as a live worker (it claims queued work), or not."""
        await self._rows("worker_on" if worker else "worker_off", self.instance)

    async def purge(self) -> int:
        """Delete up to :attr:`purge_batch` expired records (with their input
        requests and answers); return how many."""
        result = await self._pool_().query(
            "purge", self._q["purge"], (_now_ms(), self.purge_batch)
        )
        return int(result.command_tuples or 0)

    # --- records -----------------------------------------------------------------------

    async def sync(self) -> None:
        """Nothing to wait for: each operation is durable in the store when it returns."""

    async def create(self, record: TaskRecord, *, max_live: int) -> int:
        """Store a new record run by this process; return its global seq.

        Raises:
            CapReached: ``record.owner`` has ``max_live`` live tasks.
            ValueError: A task with this id exists.
        """
        (answer,) = await self.create_many([record], max_live=max_live)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def create_many(
        self, records: Sequence[TaskRecord], *, max_live: int
    ) -> list[int | Exception]:
        """:meth:`create` for each record, in order, in one round trip and one commit.

        Returns:
            Each record's seq, or the :class:`~._shared.CapReached` or
            :class:`ValueError` it would have raised.
        """
        if not records:
            return []
        tickets = [
            [n, r.task_id, t.tool, t.attempts, round(t.backoff * 1000), _text(t.request), r.attempt]
            for n, r in enumerate(records, 1)
            if (t := r.rerun) is not None
        ]
        args = (self.instance, max_live, _now_ms(), self._lease_ms, _create_batch(records))
        if tickets:  # the tasks and their tickets in one statement
            seqs = await self._rows("create_many_reruns", *args, _json(tickets))
        else:
            seqs = await self._rows("create_many", *args)
        out: list[int | Exception] = []
        for record, (text,) in zip(records, seqs, strict=True):
            seq = int(text or 0)
            if seq == -1:
                out.append(CapReached(f"{record.owner!r} has {max_live} live tasks"))
            elif seq == -2:
                out.append(ValueError(f"task {record.task_id!r} exists"))
            else:
                out.append(seq)
        return out

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` if unknown or expired."""
        if (known := self._terminal.get(task_id)) is not None:
            return known  # terminal: it never changes again (see _postgres_cache)
        row = await self._one("get", task_id)
        record = None if row is None else _record(row[:12])
        if record is not None and row is not None and row[12] is not None:
            record.attempt = int(row[12])  # a re-runnable task's
        self._terminal.keep(record)
        return record

    async def page(self, owner: str, after_seq: int, limit: int) -> tuple[list[TaskRecord], bool]:
        """Up to ``limit`` live records of ``owner`` with ``seq > after_seq``, oldest first,
        and whether more remain."""
        found = await self._rows("page", owner, after_seq, _now_ms(), limit + 1)
        records = [r for r in map(_record, found[:limit]) if r is not None]
        return records, len(found) > limit

    async def update(self, record: TaskRecord) -> bool:
        """Compare and set status, message, updated and outcome while non-terminal."""
        row = await self._one(
            "update", record.task_id, record.status.value, record.last_updated_at,
            _text(record.status_message), outcome_to_json(record.outcome), _now_ms(),
        )  # fmt: skip
        if applied := row is not None and row[0] == "t":
            self._terminal.keep(record)
        return applied

    async def update_many(self, records: Sequence[TaskRecord]) -> list[bool]:
        """:meth:`update` for each record, in order, in one round trip (one statement)."""
        if not records:
            return []
        rows_ = await self._rows("update_many", _update_batch(records), _now_ms())
        applied = [row[0] == "t" for row in rows_]
        for record, ok in zip(records, applied, strict=True):
            if ok:
                self._terminal.keep(record)
        return applied

    async def cancel(self, task_id: str, message: str, updated_at: str) -> TaskRecord | None:
        """Move a non-terminal task to ``cancelled``; return the record after."""
        row = await self._one("cancel", task_id, _text(message), updated_at, _now_ms())
        record = None if row is None else _record(row)
        self._terminal.keep(record)
        return record

    async def delete(self, task_id: str) -> None:
        """Forget a record, its input queue and answers."""
        self._terminal.drop(task_id)
        await self._rows("delete", task_id)

    async def terminal_among(self, task_ids: Collection[str]) -> set[str]:
        """Which of these ids are terminal, expired or gone."""
        if not task_ids:
            return set()
        found = await self._rows("terminal_among", list(task_ids), _now_ms())
        return {str(row[0]) for row in found}

    # --- the input_required side channel -------------------------------------------------

    async def push_input(self, task_id: str, item: InputItem) -> None:
        """Queue a side-channel request of the task (dropped if the task is gone)."""
        await self._one("push_input", task_id, item.key, _item_body(item), False)

    async def claim_input(self, task_id: str, key: str | None = None) -> InputItem | None:
        """Take the oldest queued request (or the one with ``key``), atomically."""
        row = await (self._one("claim_oldest", task_id) if key is None
                     else self._one("claim_key", task_id, key))  # fmt: skip
        return None if row is None else _item(str(row[0]), str(row[1]))

    async def peek_inputs(self, task_id: str) -> list[InputItem]:
        """The queued requests of the task, oldest first, left in the queue."""
        found = await self._rows("peek_inputs", task_id)
        return [_item(str(key), str(body)) for key, body in found]

    async def requeue_input(self, task_id: str, item: InputItem) -> None:
        """Put a claimed request back at the head of the queue."""
        await self._one("push_input", task_id, item.key, _item_body(item), True)

    async def answer_input(self, task_id: str, key: str, answer: InputAnswer) -> None:
        """Store the answer to request ``key`` (dropped if the task is gone)."""
        body = {"error": answer.error} if answer.error is not None else {"result": answer.result}
        await self._one("answer_input", task_id, key, json.dumps(body, ensure_ascii=False))

    async def take_answer(self, task_id: str, key: str) -> InputAnswer | None:
        """Remove and return the answer to request ``key``, if there is one."""
        row = await self._one("take_answer", task_id, key)
        if row is None:
            return None
        body = json.loads(str(row[0]))
        return InputAnswer(result=body.get("result"), error=body.get("error"))


if TYPE_CHECKING:

    def _conforms(store: PostgresTaskStore) -> TaskStore:
        return store  # mypy checks the class against the protocol
