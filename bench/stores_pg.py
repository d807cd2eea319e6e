"""A private PostgreSQL cluster for ``python -m bench.stores``: the tests' own helper.

:func:`running_postgres` starts one with ``tests/postgres_server.py`` (``initdb`` into a
template, ``postgres`` on a copy of it, on a unix socket in a folder of ``/tmp``; as the
``postgres`` user when run as root) and yields its store URL.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def running_postgres(folder: Path) -> Iterator[str]:
    """Start a private PostgreSQL; yield its ``postgresql://`` URL; stop and remove it.

    ``folder`` is unused: PostgreSQL's socket path must be short, so the helper makes
    its own folders in ``/tmp``.

    Raises:
        RuntimeError: PostgreSQL, psycopg or the store is not available here.
    """
    del folder
    try:
        import psycopg  # noqa: F401

        from trio_mcp.peer._tasks import _postgres  # noqa: F401

        from tests import postgres_server as pg
    except ImportError as exc:
        raise RuntimeError(f"psycopg, PostgresTaskStore or its test helper missing ({exc})") from None
    if pg.PG_BIN is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    place = pg._own_folder("pgb")
    try:
        template = pg.make_template(place)
        with pg.running_postgres(template) as url:
            yield url
    finally:
        shutil.rmtree(place, ignore_errors=True)
