"""A private PostgreSQL cluster for ``python -m bench.stores``: the tests' own helper.

:func:`running_postgres` starts one with ``tests/postgres_server.py`` (``initdb`` and
``pg_ctl`` on a unix socket in a temporary folder) and yields its store URL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def running_postgres(folder: Path) -> Iterator[str]:
    """Start a private PostgreSQL in ``folder``; yield its ``postgresql://`` URL; stop it.

    Raises:
        RuntimeError: PostgreSQL, psycopg or the store is not available here.
    """
    try:
        import psycopg  # noqa: F401

        from tests import postgres_server  # the tests' helper (issue 24)
        from trio_mcp.peer._tasks import _postgres  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(f"PostgresTaskStore or its test helper missing ({exc})") from None
    with postgres_server.running_postgres(folder) as url:
        yield url
