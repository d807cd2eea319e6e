"""A private ``redis-server`` for the Redis task store's tests.

From plain code::

    with running_redis(tmp_dir) as url:     # "unix:///.../redis.sock?db=0"
        ...

As a pytest fixture: ``redis_url`` (a fresh server per test) and
``redis_server`` (the :class:`RedisServer` itself, to stop and restart it).
Without ``redis-server`` the fixtures skip, except under CI (``CI`` set in the
environment), where they fail: CI installs it. Without ``coredis`` (the
optional ``redis`` extra) they always skip.

The server listens on a unix socket in its own temporary folder only (no TCP
port), with ``--save '' --appendonly yes --maxmemory-policy noeviction``; it is
killed at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT = 10.0


def _ping(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect(str(sock))
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One private ``redis-server`` process in ``folder`` (stoppable, restartable).

    Args:
        folder: Where its socket, AOF and log go.
        policy: Its ``maxmemory-policy``.
        extra: More ``redis-server`` arguments.
    """

    def __init__(self, folder: Path, *, policy: str = "noeviction", extra: tuple[str, ...] = ()):
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        # unix socket paths are limited to ~107 bytes: keep it short.
        self.sock = self.folder / "r.sock"
        if len(str(self.sock)) > 100:
            raise RuntimeError(f"socket path too long: {self.sock}")
        self.args = [
            REDIS_SERVER, "--port", "0", "--unixsocket", str(self.sock), "--unixsocketperm", "700",
            "--dir", str(self.folder), "--save", "", "--appendonly", "yes",
            "--maxmemory-policy", policy, "--logfile", str(self.folder / "redis.log"), *extra,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The store URL of this server (database 0)."""
        return f"unix://{self.sock}?db=0"

    def start(self) -> None:
        """Start the server (again) and wait until it answers ``PING``."""
        assert self.process is None, "already running"
        self.process = subprocess.Popen(self.args, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while not _ping(self.sock):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server did not start:\n{log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the server (``SIGKILL``: as abrupt as a crash); its AOF stays."""
        if self.process is None:
            return
        self.process.kill()
        self.process.wait()
        self.process = None
        # The socket file stays behind after SIGKILL: a client must not reach it.
        self.sock.unlink(missing_ok=True)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_redis(folder: Path | str, *, policy: str = "noeviction") -> Iterator[str]:
    """Run a private ``redis-server`` in ``folder`` for the block; yield its URL."""
    with RedisServer(Path(folder), policy=policy) as server:
        yield server.url


def require_redis() -> None:
    """Skip (or, under CI, fail) unless ``coredis`` and ``redis-server`` are available."""
    try:
        import coredis  # noqa: F401
    except ImportError:
        pytest.skip("coredis is not installed (the optional 'redis' extra)")
    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed, and CI must run the Redis tests")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")


@pytest.fixture
def redis_available() -> None:
    """Skip (or, under CI, fail) unless coredis and ``redis-server`` are available."""
    require_redis()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private running ``redis-server`` (stop and start it to simulate an outage)."""
    require_redis()
    if len(str(tmp_path)) <= 80:
        with RedisServer(tmp_path) as server:
            yield server
        return
    # a unix socket path is limited to ~107 bytes: use a short folder instead
    with tempfile.TemporaryDirectory(prefix="rds") as folder, RedisServer(Path(folder)) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of a private running ``redis-server`` (database 0)."""
    return redis_server.url
