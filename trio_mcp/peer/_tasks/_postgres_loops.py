"""The background tasks of :class:`~._postgres.PostgresTaskStore`.

* :func:`listen`: the ``LISTEN`` connection, read on the Trio thread itself
  (``trio.lowlevel.wait_readable`` on its socket, then libpq's non-blocking
  ``consume_input``/``notifies``): a hint costs no thread hop. It connects again
  with backoff when the server goes away (and then drops the pool's idle
  connections, which died with it).
* (the periodic jobs, lease, sweep and purge, run under :func:`._shared.repeat`).
"""

from __future__ import annotations

import logging
import random
from typing import Any, Final

import psycopg
import trio
from psycopg import sql

from ._postgres_conn import PgPool
from ._store import StoreEvents

log = logging.getLogger("trio_mcp.tasks")

#: First and longest pause before listening again after the server went away (seconds).
BACKOFF_FIRST: Final = 0.1
BACKOFF_MAX: Final = 5.0


async def listen(
    owner: object,
    caller: PgPool,
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
                caller.drop_idle()  # the pool's idle connections died with the server
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


async def _connect_listening(caller: PgPool, channel: str) -> psycopg.Connection[Any]:
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

