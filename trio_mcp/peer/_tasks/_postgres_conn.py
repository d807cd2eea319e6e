"""Statements on PostgreSQL run from the Trio thread itself: :class:`PgPool`.

psycopg 3's async API runs on asyncio only (psycopg issue #29). Its sync API
would need a thread per call (``trio.to_thread``: measured ~55 us of CPU per hop,
four times the client's share of a one-row query). So the store drives libpq's
non-blocking API (``psycopg.pq``, psycopg's public libpq wrapper) from Trio:
``send_query_prepared``, then ``trio.lowlevel.wait_readable`` on the connection's
socket, ``consume_input`` and ``get_result``: no thread, no hop. Only connecting
(libpq's connect is blocking) runs in a thread, once per connection.

Each statement is prepared once per connection and then sent as one message;
parameters and results travel as text (the statements cast them). A connection
is used by one call at a time; the pool holds at most ``size``. A call that
meets a connection broken by a server restart is retried on a fresh one (every
statement the store runs may be repeated: see :mod:`._postgres_sql`). Every call
is bounded by ``op_timeout`` (a Trio deadline; libpq's ``connect_timeout``, the
server's ``statement_timeout``), and raises :func:`~._shared.store_unavailable`
when the server cannot be reached, never hangs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias, TypeVar, final

import psycopg
import trio
from psycopg import pq

from ._shared import SharedOptions, store_unavailable

T = TypeVar("T")
#: The query options of a store URL that are the store's, not libpq's.
STORE_OPTIONS: Final = ("lease", "hint", "schema", "pool")
#: A row of a result: each column's text, or ``None`` for NULL.
Row: TypeAlias = tuple[str | None, ...]
_BAD: Final = pq.ConnStatus.BAD
_ERROR: Final = (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.NONFATAL_ERROR)


def unavailable_reason(exc: BaseException) -> str | None:
    """Why ``exc`` means PostgreSQL cannot serve now, or ``None`` for another error."""
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError):
        return f"{type(exc).__name__}: {' '.join(str(exc).split()) or type(exc).__name__}"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):  # a standby
        return f"PostgreSQL: {' '.join(str(exc).split())}"
    return None


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """Split a store URL into the libpq URL and our options (lease, hint, schema, pool)."""
    shared = SharedOptions.parse(
        url, schemes=("postgresql", "postgres"), names=STORE_OPTIONS, lease_seconds=None,
        instance="-",
    )  # fmt: skip
    return shared.driver_url, shared.options


def conninfo_with_timeouts(libpq_url: str, op_timeout: float) -> str:
    """The URL with our timeouts: connecting, and every statement on the server."""
    given = psycopg.conninfo.conninfo_to_dict(libpq_url)
    extra: dict[str, Any] = {
        "application_name": given.get("application_name", "trio-mcp"),
        "client_encoding": "UTF8",  # results are decoded as UTF-8, whatever the server's
    }
    if "connect_timeout" not in given:
        extra["connect_timeout"] = max(2, math.ceil(op_timeout))
    timeout = f"-c statement_timeout={math.ceil(op_timeout * 1000)}"
    extra["options"] = f"{given['options']} {timeout}" if given.get("options") else timeout
    return psycopg.conninfo.make_conninfo(libpq_url, **extra)


async def run_blocking(fn: Callable[[], T], op_timeout: float) -> T:
    """Run blocking psycopg code (its own connection) in a thread, bounded by
    ``op_timeout``; an unreachable server is :func:`~._shared.store_unavailable`.

    Cancellation: the thread is abandoned (``fn`` closes its own connection).
    """
    try:
        with trio.fail_after(op_timeout):
            return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
    except trio.TooSlowError:
        raise store_unavailable(f"PostgreSQL did not answer within {op_timeout:g} s") from None
    except psycopg.Error as exc:
        reason = unavailable_reason(exc)
        if reason is None:
            raise
        raise store_unavailable(reason) from exc


def to_text(value: Any) -> bytes | None:
    """A parameter as PostgreSQL's text input (lists as array literals)."""
    if type(value) is str:
        return value.encode()
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, list | tuple):
        items = (
            "NULL" if v is None else '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in value
        )
        return ("{" + ",".join(items) + "}").encode()
    return str(value).encode()


@final
class PgConn:
    """One connection, driven without blocking from Trio (one call at a time)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.pgconn.nonblocking = 1
        self.fd = self.pgconn.socket
        self._prepared: set[bytes] = set()

    @property
    def broken(self) -> bool:
        """True once the connection is lost (libpq's status is bad)."""
        return self.conn.closed or self.pgconn.status == _BAD

    def close(self) -> None:
        """Close it (the socket is closed at once)."""
        self.conn.close()

    async def run(self, name: str, sql: str, params: Sequence[Any]) -> pq.abc.PGresult:
        """Run the statement ``sql`` (prepared as ``name`` on first use) with ``params``.

        Raises:
            psycopg.Error: The server's error (the connection stays usable), or
                a lost connection (:attr:`broken`).

        Cancellation: the connection is closed (its state is unknown).
        """
        pg, key = self.pgconn, name.encode()
        try:
            if key not in self._prepared:
                pg.send_prepare(key, sql.encode())
                await self._flush()
                await self._result()
                self._prepared.add(key)
            pg.send_query_prepared(key, [to_text(p) for p in params])
            await self._flush()
            return await self._result()
        except psycopg.Error:
            raise
        except BaseException:
            self.close()
            raise

    async def _flush(self) -> None:
        while self.pgconn.flush():
            await trio.lowlevel.wait_writable(self.fd)

    async def _result(self) -> pq.abc.PGresult:
        pg = self.pgconn
        last: pq.abc.PGresult | None = None
        error: psycopg.Error | None = None
        while True:
            while pg.is_busy():
                await trio.lowlevel.wait_readable(self.fd)
                pg.consume_input()  # raises when the server closed the connection
            result = pg.get_result()
            if result is None:
                break
            if result.status in _ERROR and error is None:
                error = psycopg.errors.error_from_result(result)
            last = result
        if error is not None:
            raise error
        if last is None:
            raise psycopg.OperationalError(pq.error_message(pg) or "no result")
        return last


def rows(result: pq.abc.PGresult) -> list[Row]:
    """A result's rows, each column as text (``None`` for NULL)."""
    width = result.nfields
    out: list[Row] = []
    for r in range(result.ntuples):
        cells = (result.get_value(r, c) for c in range(width))
        out.append(tuple(None if v is None else bytes(v).decode() for v in cells))
    return out


@final
class PgPool:
    """At most ``size`` :class:`PgConn` to one server, for statements from Trio.

    Args:
        conninfo: The libpq connection string (or URL).
        size: The most connections at once.
        op_timeout: Seconds a call may take before it fails as "unavailable".
    """

    def __init__(self, conninfo: str, size: int, op_timeout: float) -> None:
        self.conninfo = conninfo
        self.size = size
        self.op_timeout = op_timeout
        self._idle: list[PgConn] = []
        self._slots = trio.Semaphore(size)
        self.closed = False

    async def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (made in a thread: libpq connects blocking).

        Cancellation: waits for the attempt (bounded by ``connect_timeout``).
        """
        return await trio.to_thread.run_sync(
            lambda: psycopg.connect(self.conninfo, autocommit=True)
        )

    async def query(self, name: str, sql: str, params: Sequence[Any]) -> pq.abc.PGresult:
        """Run statement ``sql`` (named ``name``) on a connection of the pool.

        Raises:
            McpError: :func:`~._shared.store_unavailable` when the server cannot
                be reached, is restarting, or does not answer within ``op_timeout``.
            psycopg.Error: Any other error of the server (a bug).

        Cancellation: the connection in use is closed; the statement may still
        have been applied.
        """
        if self.closed:
            raise store_unavailable("the PostgreSQL store is not open")
        try:
            with trio.fail_after(self.op_timeout):
                async with self._slots:
                    return await self._query(name, sql, params)
        except trio.TooSlowError:
            raise store_unavailable(
                f"PostgreSQL did not answer within {self.op_timeout:g} s"
            ) from None
        except psycopg.Error as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            raise store_unavailable(reason) from exc

    async def _query(self, name: str, sql: str, params: Sequence[Any]) -> pq.abc.PGresult:
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else PgConn(await self.connect())
            try:
                result = await conn.run(name, sql, params)
            except psycopg.Error:
                broken = conn.broken
                self._give_back(conn)
                if broken and reused and not self.closed:
                    continue  # idle connections die with a server restart: try another
                raise
            self._give_back(conn)
            return result

    def _give_back(self, conn: PgConn) -> None:
        if conn.broken or self.closed:
            conn.close()
        else:
            self._idle.append(conn)

    def drop_idle(self) -> None:
        """Close the idle connections (after an outage they are likely broken)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close every idle connection; later calls fail as "not open"."""
        self.closed = True
        self.drop_idle()
