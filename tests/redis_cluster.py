"""A private three-master Redis Cluster for the Redis task store's tests.

From plain code::

    with running_redis_cluster(tmp_dir) as cluster:   # a RedisCluster
        cluster.url          # "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"

As a pytest fixture: ``redis_cluster`` (one cluster per test worker, shared by its
tests: each test names its own keys with ``prefix=``, see :func:`cluster_store_url`).
It skips (or, under CI, fails) like ``redis_server`` when ``redis-server``,
``redis-cli`` or coredis is missing.

Three ``redis-server --cluster-enabled yes`` processes on loopback ports (each with its
own ``--cluster-port`` for the bus), joined by ``redis-cli --cluster create ...
--cluster-replicas 0``; the fixture waits for ``cluster_state:ok`` on every node.
They are killed at the end.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from .redis_server import REDIS_SERVER, require_redis

REDIS_CLI = shutil.which("redis-cli")
START_TIMEOUT = 20.0


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on loopback now."""
    with ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def _command(port: int, *words: str) -> str:
    """One inline command to the node on ``port``; its reply as text ('' if unreachable)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall((" ".join(words) + "\r\n").encode())
            data = b""
            while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data.decode(errors="replace")
    except OSError:
        return ""


class RedisCluster:
    """Three private cluster-enabled ``redis-server`` processes in ``folder``, one cluster.

    Attributes:
        ports: The client ports of the three masters.
        url: The store URL (``redis+cluster://`` with every node).
    """

    def __init__(self, folder: Path) -> None:
        if REDIS_SERVER is None or REDIS_CLI is None:
            raise RuntimeError("redis-server and redis-cli are needed")
        self.folder = Path(folder)
        self.processes: list[subprocess.Popen[bytes] | None] = []
        self.ports: list[int] = []
        self._argv: list[list[str]] = []

    @property
    def url(self) -> str:
        """The store URL naming every master (``redis+cluster://h:p,h:p,h:p``)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self) -> None:
        """Start the nodes, join them into one cluster, wait for ``cluster_state:ok``."""
        assert REDIS_SERVER is not None and REDIS_CLI is not None
        ports = _free_ports(6)
        self.ports, buses = ports[:3], ports[3:]
        for port, bus in zip(self.ports, buses, strict=True):
            node = self.folder / str(port)
            node.mkdir(parents=True, exist_ok=True)
            self._argv.append(
                [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-port", str(bus),
                 "--cluster-config-file", str(node / "nodes.conf"), "--dir", str(node),
                 "--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction",
                 "--logfile", str(node / "redis.log")]
            )  # fmt: skip
            self.processes.append(subprocess.Popen(self._argv[-1], stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + START_TIMEOUT
        for port in self.ports:
            while not _command(port, "PING").startswith("+PONG"):
                self._check(deadline, f"node {port} did not start")
                time.sleep(0.02)
        subprocess.run(
            [REDIS_CLI, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=START_TIMEOUT,
        )  # fmt: skip
        for port in self.ports:
            while "cluster_state:ok" not in _command(port, "CLUSTER", "INFO"):
                self._check(deadline, f"node {port} did not reach cluster_state:ok")
                time.sleep(0.05)

    def node_id(self, i: int) -> str:
        """Master ``i``'s cluster node id."""
        return _command(self.ports[i], "CLUSTER", "MYID").split("\r\n")[1]

    def move_slots(self, source: int, target: int, count: int) -> None:
        """Move ``count`` slots, with their keys, from master ``source`` to ``target``
        (``redis-cli --cluster reshard``)."""
        assert REDIS_CLI is not None
        subprocess.run(
            [REDIS_CLI, "--cluster", "reshard", f"127.0.0.1:{self.ports[source]}",
             "--cluster-from", self.node_id(source), "--cluster-to", self.node_id(target),
             "--cluster-slots", str(count), "--cluster-yes"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def kill_node(self, i: int) -> None:
        """``SIGKILL`` master ``i`` (its AOF and cluster config stay)."""
        process = self.processes[i]
        assert process is not None, "not running"
        process.kill()
        process.wait()
        self.processes[i] = None

    def start_node(self, i: int) -> None:
        """Start master ``i`` again (it rejoins with its slots); wait for ``cluster_state:ok``."""
        assert self.processes[i] is None, "already running"
        self.processes[i] = subprocess.Popen(self._argv[i], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        for port in self.ports:
            while "cluster_state:ok" not in _command(port, "CLUSTER", "INFO"):
                self._check(deadline, f"node {port} did not reach cluster_state:ok")
                time.sleep(0.05)

    def _check(self, deadline: float, what: str) -> None:
        if time.monotonic() > deadline or any(
            p is not None and p.poll() is not None for p in self.processes
        ):
            logs = [
                (self.folder / str(p) / "redis.log").read_text(errors="replace")[-1500:]
                for p in self.ports
                if (self.folder / str(p) / "redis.log").exists()
            ]
            self.stop()
            raise RuntimeError(f"Redis Cluster: {what}\n" + "\n".join(logs))

    async def keys_on(self, port: int, pattern: str) -> list[str]:
        """The keys matching ``pattern`` held by the master on ``port`` (``SCAN``)."""
        import coredis  # the redis extra; the fixture has checked it

        client: coredis.Redis[str] = coredis.Redis("127.0.0.1", port, decode_responses=True)
        async with client:
            return [k async for k in client.scan_iter(match=pattern, count=1000)]

    def stop(self) -> None:
        """Kill every node."""
        for process in self.processes:
            if process is not None:
                process.kill()
                process.wait()
        self.processes = []

    def __enter__(self) -> RedisCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_redis_cluster(folder: Path | str) -> Iterator[RedisCluster]:
    """Run a private three-master Redis Cluster in ``folder`` for the block."""
    with RedisCluster(Path(folder)) as cluster:
        yield cluster


def require_redis_cluster() -> None:
    """Skip (or, under CI, fail) unless coredis, ``redis-server`` and ``redis-cli`` exist."""
    require_redis()
    if REDIS_CLI is None:
        pytest.skip("redis-cli is not installed (apt-get install redis-tools)")


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A private three-master Redis Cluster, shared by this worker's tests (each test
    keeps to its own key prefix: :func:`cluster_store_url`)."""
    require_redis_cluster()
    with (
        tempfile.TemporaryDirectory(prefix="rcl") as folder,
        running_redis_cluster(folder) as cluster,
    ):
        yield cluster


def cluster_store_url(cluster: RedisCluster, **options: object) -> str:
    """The store URL of ``cluster`` with a fresh key prefix (a store of its own) and
    ``options`` as query options."""
    query = {"prefix": f"t{secrets.token_hex(4)}", **options}
    return cluster.url + "/?" + "&".join(f"{k}={v}" for k, v in query.items())
