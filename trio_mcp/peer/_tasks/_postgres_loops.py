"""How :class:`~._postgres.PostgresTaskStore` talks to PostgreSQL from Trio.

psycopg 3's async API runs on asyncio only (psycopg issue #29), so the store uses
its sync API off the Trio thread:

* :class:`PgCaller`: one ``psycopg_pool.ConnectionPool`` (autocommit connections)
  and a bounded :class:`trio.CapacityLimiter` of the same size; each call is one
  statement (one round trip) run by ``trio.to_thread.run_sync``, bounded by a
  Trio deadline (and PostgreSQL's ``statement_timeout``, libpq's
  ``connect_timeout``, the pool's wait), so an unreachable server is the
  :func:`~._shared.store_unavailable` error, never a hang. A call that meets a
  connection broken by a server restart is retried on a fresh one (every
  statement the store runs may be repeated: see :mod:`._postgres_sql`).
* :func:`listen`: the ``LISTEN`` connection, read on the Trio thread itself
  (``trio.lowlevel.wait_readable`` on its socket, then libpq's non-blocking
  ``consume_input``/``notifies``): a hint costs no thread hop. It reconnects with
  backoff when the server goes away.
* :func:`repeat`: a periodic job (lease, sweep, purge) that logs an outage once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, final

import psycopg
import psycopg_pool
import trio
from psycopg import sql

from ._shared import StoreEvents, store_unavailable

log = logging.getLogger("trio_mcp.tasks")
T = TypeVar("T")

#: First and longest pause before listening again after the server went away (seconds).
BACKOFF_FIRST: Final = 0.1
BACKOFF_MAX: Final = 5.0


def unavailable_reason(exc: BaseException) -> str | None:
    """Why ``exc`` means PostgreSQL cannot serve now, or ``None`` for another error."""
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError):
        return f"{type(exc).__name__}: {' '.join(str(exc).split()) or type(exc).__name__}"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):  # a standby
        return f"PostgreSQL: {str(exc).strip()}"
    return None


@final
class PgCaller:
    """Runs statements on a pool of connections, off the Trio thread.

    Args:
        conninfo: The libpq connection string (or URL).
        size: The most connections (and threads) at once.
        op_timeout: Seconds a call may take before it fails as "unavailable".
        name: The pool's name (in psycopg_pool's logs).
    """

    def __init__(self, conninfo: str, size: int, op_timeout: float, name: str) -> None:
        self.conninfo = conninfo
        self.op_timeout = op_timeout
        self.size = size
        self.name = name
        self.limiter = trio.CapacityLimiter(size)
        self.pool: psycopg_pool.ConnectionPool[Any] | None = None

    async def open(self) -> None:
        """Open the pool and wait for its first connection.

        Raises:
            McpError: The server cannot be reached within ``op_timeout``.
        """
        # One connection first: an unreachable server fails now, with libpq's reason
        # (the pool would only say that it timed out).
        await self._in_thread(lambda: psycopg.connect(self.conninfo).close())
        pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            self.conninfo, min_size=1, max_size=self.size, open=False, name=self.name,
            timeout=self.op_timeout, kwargs={"autocommit": True}, reconnect_timeout=60.0,
        )  # fmt: skip
        try:
            await self._in_thread(lambda: pool.open(wait=True, timeout=self.op_timeout))
        except BaseException:
            await trio.to_thread.run_sync(pool.close)
            raise
        self.pool = pool

    async def close(self) -> None:
        """Close the pool (connections in use are closed when given back)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(lambda: pool.close(timeout=self.op_timeout))

    async def call(self, job: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``job`` with a connection of the pool, in a thread.

        Raises:
            McpError: :func:`~._shared.store_unavailable` when the server cannot
                be reached, is restarting, or does not answer within ``op_timeout``.

        Cancellation: the thread is abandoned (it ends by its own timeouts); the
        statement may still have been applied.
        """
        pool = self.pool
        if pool is None:
            raise store_unavailable("the PostgreSQL store is not open")
        return await self._in_thread(lambda: self._with_connection(pool, job))

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        try:
            with trio.fail_after(self.op_timeout):
                return await trio.to_thread.run_sync(
                    fn, limiter=self.limiter, abandon_on_cancel=True
                )
        except trio.TooSlowError:
            raise store_unavailable(
                f"PostgreSQL did not answer within {self.op_timeout:g} s"
            ) from None
        except psycopg.Error as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            raise store_unavailable(reason) from exc

    def _with_connection(
        self, pool: psycopg_pool.ConnectionPool[Any], job: Callable[[psycopg.Connection[Any]], T]
    ) -> T:
        # Idle connections broken by a server restart fail at once: try the next
        # (the pool replaces each broken one it gets back).
        for attempt in range(self.size + 1):
            try:
                conn = pool.getconn(timeout=self.op_timeout / 2)
            except psycopg_pool.PoolTimeout:
                # Why: the server is down (libpq's reason), or every connection is busy.
                psycopg.connect(self.conninfo).close()
                raise psycopg_pool.PoolTimeout(
                    f"all {self.size} connections busy for {self.op_timeout / 2:g} s"
                ) from None
            try:
                return job(conn)  # autocommit: one statement, one transaction
            except psycopg.OperationalError:
                if not conn.broken or attempt == self.size:
                    raise
            finally:
                pool.putconn(conn)
        raise AssertionError("unreachable")

    async def check(self) -> None:
        """Replace the pool's broken idle connections (after the server came back)."""
        pool = self.pool
        if pool is not None:
            with trio.move_on_after(self.op_timeout):
                await trio.to_thread.run_sync(pool.check, abandon_on_cancel=True)


async def listen(
    owner: object,
    caller: PgCaller,
    channel: str,
    events: StoreEvents,
    task_status: trio.TaskStatus[None],
) -> None:
    """``LISTEN`` on ``channel`` and pass each ``kind|task_id`` hint to
    ``events.on_hint``; listen again with backoff when the connection drops."""
    started = False
    delay = BACKOFF_FIRST
    lost_since: float | None = None
    while True:
        conn: psycopg.Connection[Any] | None = None
        try:
            conn = await _connect_listening(caller, channel)
            if lost_since is not None:
                log.warning(
                    "%r: hints flow again (listening lost for %.1f s)",
                    owner, trio.current_time() - lost_since,
                )  # fmt: skip
                lost_since = None
                await caller.check()  # the pool's idle connections died with the server
            delay = BACKOFF_FIRST
            if not started:
                started = True
                task_status.started()
            await _receive(owner, conn, events)
        except (psycopg.Error, OSError) as exc:
            if lost_since is None:
                lost_since = trio.current_time()
                log.warning("%r: listening for hints lost (%s); reconnecting", owner, exc)
        finally:
            if conn is not None:
                conn.close()
        if not started:
            started = True
            task_status.started()
        await trio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, BACKOFF_MAX)


async def _connect_listening(caller: PgCaller, channel: str) -> psycopg.Connection[Any]:
    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            caller.conninfo, autocommit=True, keepalives=1, keepalives_idle=10,
            keepalives_interval=5, keepalives_count=3,
        )  # fmt: skip
        try:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            conn.close()
            raise
        return conn

    with trio.fail_after(caller.op_timeout * 2):
        return await trio.to_thread.run_sync(connect, abandon_on_cancel=False)


async def _receive(owner: object, conn: psycopg.Connection[Any], events: StoreEvents) -> None:
    pgconn = conn.pgconn
    pgconn.nonblocking = 1
    fd = pgconn.socket
    while True:
        await trio.lowlevel.wait_readable(fd)
        pgconn.consume_input()  # raises when the server closed the connection
        while (note := pgconn.notifies()) is not None:
            kind, _, task_id = note.extra.decode().partition("|")
            try:
                events.on_hint(kind, task_id)
            except Exception:
                log.exception("%r: on_hint(%r, %r) failed", owner, kind, task_id)


async def repeat(
    owner: object, what: str, period: float, job: Callable[[], Awaitable[object]]
) -> None:
    """Run ``job`` now and then every ``period`` seconds; log failures once per outage."""
    failing = False
    while True:
        try:
            await job()
        except Exception as exc:
            if not failing:
                log.warning("%r: could not %s: %s", owner, what, exc)
            failing = True
        else:
            if failing:
                log.warning("%r: could %s again", owner, what)
            failing = False
        await trio.sleep(period)
