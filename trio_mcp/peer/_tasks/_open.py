"""The task store a URL names: ``memory``, ``sqlite:///...``, ``redis://...``
(``redis+cluster://...``) or ``postgresql://...``.

The one module that knows every store: it imports the SQLite store, and the
Redis and PostgreSQL ones only when a URL asks for them (coredis and psycopg are
optional).
"""

from __future__ import annotations

from typing import Any

from ._sqlite import SqliteTaskStore
from ._store import MemoryTaskStore


def open_task_store(url: str) -> Any:
    """The task store a URL names.

    * ``memory`` or ``memory://``: the default in-memory store (dies with the process);
    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``: a
      :class:`~._sqlite.SqliteTaskStore`, durable across restarts of one process;
    * ``redis://host:port/db``, ``rediss://...`` or ``unix:///path/to/redis.sock?db=N``
      (query options ``lease=SECONDS``, ``prefix=NAME``, ``hint=SECONDS``), or a Redis
      Cluster, ``redis+cluster://host:port[,host:port...]/`` (``rediss+cluster://``
      with TLS; the same options): a :class:`~._redis.RedisTaskStore` shared by many
      processes (the ``redis`` extra);
    * ``postgresql://user@host:port/db`` or ``postgres://...``, a unix socket with
      ``?host=/socket/dir`` (query options ``lease=SECONDS``, ``hint=SECONDS``,
      ``schema=NAME``, ``pool=N``; the rest goes to libpq): a
      :class:`~._postgres.PostgresTaskStore` shared by many processes (the
      ``postgres`` extra).

    Raises:
        ValueError: An unknown or unsupported scheme.
        ImportError: A Redis URL without coredis installed, or a PostgreSQL URL
            without psycopg.
    """
    scheme, sep, rest = url.partition("://")
    if url == "memory" or (scheme == "memory" and sep):
        return MemoryTaskStore()
    if scheme == "sqlite" and sep:
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise ValueError(f"a sqlite store URL needs a path: {url!r}")
        return SqliteTaskStore(path)
    if scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster") and sep:
        # Imported here: coredis is optional (the ``redis`` extra).
        try:
            from ._redis import RedisTaskStore
        except ImportError as exc:
            raise ImportError(
                f"a Redis task store ({url!r}) needs coredis: pip install 'trio-mcp[redis]'"
            ) from exc
        return RedisTaskStore(url)
    if scheme in ("postgresql", "postgres") and sep:
        # Imported here: psycopg is optional (the ``postgres`` extra).
        try:
            from ._postgres import PostgresTaskStore
        except ImportError as exc:
            raise ImportError(
                f"a PostgreSQL task store ({url!r}) needs psycopg:"
                " pip install 'trio-mcp[postgres]'"
            ) from exc
        return PostgresTaskStore(url)
    raise ValueError(
        f"unsupported task store URL {url!r}: use 'memory', 'sqlite:///path/to/tasks.db',"
        " 'redis://host:port/db', 'redis+cluster://host:port,host:port/' or"
        " 'postgresql://user@host:port/db'"
    )
