"""A private PostgreSQL cluster for the PostgreSQL task store's tests.

From plain code::

    with running_postgres(folder) as url:   # "postgresql://postgres@/postgres?host=..."
        ...

As pytest fixtures, like ``redis_url`` / ``redis_server`` (tests/redis_server.py):

* ``postgres_url``: the URL of a fresh, empty database (``CREATE DATABASE`` per test) on
  one server shared by the test session (started on first use);
* ``postgres_server``: that :class:`PostgresServer`, to stop and restart (an outage; it
  is running again after the test), its :attr:`PostgresServer.url` naming a fresh
  database of the test.

``initdb`` runs once per session into a template data directory; a server starts on a
copy of it (``cp -a``). The binaries are Debian's
(``/usr/lib/postgresql/<highest version>/bin``), else ``initdb``/``postgres`` on ``PATH``.
Without them the fixtures skip, except under CI (``CI`` set in the environment), where
they fail: CI installs the ``postgresql`` package. Without psycopg (the optional
``postgres`` extra) they always skip.

PostgreSQL refuses to run as root, and CI runs as root: then the cluster is made and
run as the ``postgres`` user the Debian package creates, in a folder of ``/tmp`` owned
by that user. The server listens on a unix socket in that folder only (no TCP port),
trusts local connections (the superuser ``postgres``), and keeps PostgreSQL's durable
defaults (``fsync``, ``synchronous_commit``): a commit the store acknowledges survives
the server being stopped the hard way. :meth:`PostgresServer.stop` is an immediate
shutdown (``SIGQUIT``: no checkpoint, crash recovery at the next start), as abrupt as a
crash of the server process.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT = 30.0


def _find_bin() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``: Debian's newest, else ``PATH``'s."""

    def version(path: str) -> tuple[int, ...]:
        match = re.search(r"/postgresql/([0-9.]+)/bin", path)
        return tuple(int(p) for p in match.group(1).split(".")) if match else ()

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(os.path.realpath(initdb)).parent
    return None


PG_BIN = _find_bin()


def _run_as() -> dict[str, Any]:
    """``subprocess`` arguments that run PostgreSQL's programs as a user they accept."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError(
            "running as root and there is no 'postgres' user to run PostgreSQL"
        ) from None
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _own_folder(prefix: str) -> Path:
    """A new folder in /tmp (short: unix socket paths are limited) owned by the runner."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    run_as = _run_as()
    if run_as:
        os.chown(folder, run_as["user"], run_as["group"])
    return folder


def make_template(folder: Path) -> Path:
    """``initdb`` a data directory in ``folder`` (trust auth, superuser ``postgres``)."""
    assert PG_BIN is not None
    data = folder / "template"
    proc = subprocess.run(
        [str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
         "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions", "--wal-segsize=1"],
        capture_output=True, text=True, timeout=120, **_run_as(),
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"initdb failed:\n{proc.stdout}\n{proc.stderr}")
    return data


class PostgresServer:
    """One private PostgreSQL server on a copy of ``template`` (stoppable, restartable).

    Args:
        template: A data directory made by :func:`make_template`.
    """

    def __init__(self, template: Path) -> None:
        assert PG_BIN is not None
        self.folder = _own_folder("pg")
        self.data = self.folder / "data"
        subprocess.run(["cp", "-a", str(template), str(self.data)], check=True, **_run_as())
        self.log = self.folder / "postgres.log"
        self.args = [
            str(PG_BIN / "postgres"), "-D", str(self.data), "-c", "listen_addresses=",
            "-c", f"unix_socket_directories={self.folder}", "-c", "max_connections=200",
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        self._databases = itertools.count(1)
        #: The database :attr:`url` names.
        self.database = "postgres"

    def url_of(self, database: str) -> str:
        """The store URL of ``database`` on this server (over its unix socket)."""
        return f"postgresql://postgres@/{database}?host={self.folder}"

    @property
    def url(self) -> str:
        """The store URL of :attr:`database` on this server."""
        return self.url_of(self.database)

    def start(self) -> None:
        """Start the server (again) and wait until it accepts connections."""
        assert self.process is None, "already running"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, **_run_as()
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"postgres did not start:\n{text}")
            time.sleep(0.02)

    def _ready(self) -> bool:
        import psycopg

        try:
            psycopg.connect(self.url_of("postgres"), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run ``sql`` (autocommit) as the superuser."""
        import psycopg

        with psycopg.connect(self.url_of(database), autocommit=True) as conn:
            conn.execute(sql.encode())

    def create_database(self) -> str:
        """A new empty database; returns its name."""
        name = f"t{next(self._databases)}"
        self.execute(f"CREATE DATABASE {name}")
        return name

    def stop(self) -> None:
        """An immediate shutdown (``SIGQUIT``): no checkpoint, like a crash; the data stays."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGQUIT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        for leftover in self.folder.glob(".s.PGSQL.*"):
            leftover.unlink(missing_ok=True)

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


@contextmanager
def fresh_database(server: PostgresServer) -> Iterator[str]:
    """A new empty database on ``server`` for the block (then dropped); yields its URL."""
    name = server.create_database()
    try:
        yield server.url_of(name)
    finally:
        if server.process is not None:
            server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def running_postgres(template: Path) -> Iterator[str]:
    """Run a private PostgreSQL server on a copy of ``template``; yield its URL."""
    with PostgresServer(template) as server:
        yield server.url


def require_postgres() -> None:
    """Skip (or, under CI, fail) unless psycopg and PostgreSQL's binaries are available."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (the optional 'postgres' extra)")
    if PG_BIN is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL (initdb, postgres) is not installed, and CI must run its tests")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[Path]:
    """A data directory made by ``initdb`` once per test session."""
    require_postgres()
    folder = _own_folder("pgt")
    try:
        yield make_template(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_shared(postgres_template: Path) -> Iterator[PostgresServer]:
    """One running server for the session's ``postgres_url`` databases."""
    with PostgresServer(postgres_template) as server:
        yield server


@pytest.fixture
def postgres_available() -> None:
    """Skip (or, under CI, fail) unless psycopg and PostgreSQL are available."""
    require_postgres()


@pytest.fixture
def postgres_url(postgres_shared: PostgresServer) -> Iterator[str]:
    """The URL of a fresh database on the session's server (dropped after the test)."""
    with fresh_database(postgres_shared) as url:
        yield url


@pytest.fixture
def postgres_server(postgres_shared: PostgresServer) -> Iterator[PostgresServer]:
    """The session's running server (stop and start it: an outage), its ``url`` naming a
    fresh database of this test; running again after the test."""
    server = postgres_shared
    server.database = server.create_database()
    try:
        yield server
    finally:
        if server.process is None:
            server.start()
        name, server.database = server.database, "postgres"
        server.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
