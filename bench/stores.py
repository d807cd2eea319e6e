"""Task stores compared: tasks/s, server CPU and ``tasks/get`` latency per store.

``python -m bench.stores [--reps 3] [--tasks 2000] [--stores memory,sqlite,...] [--json PATH]``

The same client as ``bench.serveronly`` (one synchronous stdlib NDJSON client
over stdio) drives ``examples/task_server.py --store URL`` once per store
(memory, SQLite, Redis, PostgreSQL), and the TypeScript SDK's server (its
in-memory store) as the reference:

* ``task-roundtrip``: a task-augmented ``tools/call`` of a zero-length task, then
  its ``tasks/result``, one after another (tasks/s: every status change and the
  result go through the store);
* ``roundtrip-200``: the same round trips, 200 in flight (``bench.stores_load``);
* ``tasks``: N running tasks created 200 in flight (tasks/s), ``tasks/get`` of
  random ones (p50/p99), then all cancelled.

SQLite uses a file in a temporary directory; Redis a private ``redis-server``
(``appendonly yes``, ``appendfsync everysec``, ``noeviction``) on a unix socket;
PostgreSQL a private cluster (``initdb``/``pg_ctl``, ``tests/postgres_server.py``)
on a unix socket; ``--stores ...,redis-cluster`` adds a private three-master Redis
Cluster on loopback TCP (``tests/redis_cluster.py``); each is started and stopped here, and shown as ``n/a`` with
the reason when its server or driver is missing. The targets of issue 24 (each
durable store >= 0.5x memory on the two 200-in-flight rows, <= 3x memory's
server CPU per sequential round trip) are checked below the table.
``python -m bench.stores_profile`` profiles one store's server on one workload.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._common import problem_lines, run_header, write_raw  # noqa: E402
from bench._runner import rotate  # noqa: E402
from bench.serveronly import RUNS, Client, Server, median, servers  # noqa: E402
from bench.stores_load import roundtrip_window  # noqa: E402

STORES = ("memory", "sqlite", "redis", "postgres")
#: Stores measured only when named in ``--stores``.
OPTIONAL_STORES = ("redis-cluster",)
WORKLOADS = ("task-roundtrip", "roundtrip-200", "tasks")
ROWS = [
    ("task-roundtrip", "rate", "task call + tasks/result, sequential (tasks/s)", 0),
    ("task-roundtrip", "p50_ms", "  round trip p50 (ms)", 3),
    ("task-roundtrip", "server_cpu_us", "  server CPU per task (us)", 0),
    ("roundtrip-200", "rate", "task call + tasks/result, 200 in flight (tasks/s)", 0),
    ("roundtrip-200", "server_cpu_us", "  server CPU per task (us)", 0),
    ("tasks", "create_rate", "create N running tasks, 200 in flight (tasks/s)", 0),
    ("tasks", "create_cpu_us", "  server CPU per create (us)", 0),
    ("tasks", "get_p50_ms", "tasks/get p50 (ms)", 3),
    ("tasks", "get_p99_ms", "tasks/get p99 (ms)", 3),
    ("tasks", "cancel_s_per_10k", "cancel time per 10,000 tasks (s)", 2),
    ("tasks", "cancel_cpu_us", "  server CPU per cancel (us)", 0),
    ("tasks", "tasks", "  N", 0),
]
#: Issue 24's targets: (label, workload, key, higher is better, the bound against memory).
TARGETS = [
    ("200 in-flight creates >= 0.5x memory", "tasks", "create_rate", True, 0.5),
    ("200 in-flight round trips >= 0.5x memory", "roundtrip-200", "rate", True, 0.5),
    ("sequential round trip server CPU <= 3x memory", "task-roundtrip", "server_cpu_us",
     False, 3.0),
]


@contextmanager
def store_urls(names: tuple[str, ...], tmp: Path) -> Iterator[dict[str, str]]:
    """Start the stores named (each in a folder under ``tmp``); yield name -> URL, or
    name -> ``"!why"`` for a store that cannot run here."""
    urls: dict[str, str] = {}
    with ExitStack() as stack:
        for name in names:
            try:
                if name == "memory":
                    urls[name] = "memory"
                elif name == "sqlite":
                    urls[name] = f"sqlite:///{tmp}/tasks-{{run}}.db"  # a new file per run
                elif name == "redis":
                    import coredis  # noqa: F401

                    from tests.redis_server import running_redis

                    urls[name] = stack.enter_context(running_redis(tmp / "redis"))
                elif name == "redis-cluster":  # three masters on loopback TCP
                    importlib.import_module("coredis")  # the driver, or "not available"
                    from tests.redis_cluster import cluster_store_url, running_redis_cluster

                    cluster = stack.enter_context(running_redis_cluster(tmp / "rcl"))
                    urls[name] = cluster_store_url(cluster)
                elif name == "postgres":
                    from bench.stores_pg import running_postgres

                    urls[name] = stack.enter_context(running_postgres(tmp / "pg"))
                else:
                    raise ValueError(f"unknown store {name!r}")
            except Exception as exc:  # a server or driver missing
                urls[name] = f"!not available: {exc}"[:160]
        yield urls


def store_servers(n_tasks: int, urls: dict[str, str], with_ts: bool = True) -> list[Server]:
    known = {s.key: s for s in servers(n_tasks, n_tasks, "example")}
    base = known["trio"]
    out = []
    for name, url in urls.items():
        server = Server(f"trio-{name}", f"trio-mcp, {name} store",
                        [*base.argv, "--store", url], dict(base.env),
                        noop=base.noop, park=base.park)
        if url.startswith("!"):
            server.missing = url[1:]
        out.append(server)
    if with_ts:
        ts = known["ts"]
        ts.label += " (in memory)"
        out.append(ts)
    return out


_runs = itertools.count(1)


def run_one(server: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    # Every run starts on an empty store: a SQLite file per run (a server loads what
    # its file holds at start); Redis and PostgreSQL keep earlier runs' records, each
    # under its own requestor, until their TTL.
    run = next(_runs)
    server = dataclasses.replace(server, argv=[a.replace("{run}", str(run)) for a in server.argv])
    client = Client(server)
    try:
        client.initialize()
        if workload == "roundtrip-200":
            return roundtrip_window(client, server, p)
        if workload == "task-roundtrip" and server.key == "ts":
            p = dict(p, duration=max(p["duration"], 3.0), task_warmup=2)  # 200 ms polls
        return RUNS[workload](client, server, p)
    finally:
        client.close()


def report(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]],
           errors: dict[tuple[str, str], list[str]]) -> str:
    head = "| workload | " + " | ".join(s.label for s in srvs) + " |"
    lines = [head, "|---" * (len(srvs) + 1) + "|"]
    for workload, key, label, digits in ROWS:
        cells = []
        for s in srvs:
            if s.missing is not None:
                cells.append("n/a")
                continue
            value = median(out.get((s.key, workload), []), key)
            cells.append("-" if value is None else f"{value:,.{digits}f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    problems = problem_lines(errors, srvs)
    if problems:
        lines += ["", *problems]
    return "\n".join(lines) + "\n\n" + targets(srvs, out)


def targets(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    durable = [s for s in srvs if s.key.startswith("trio-") and s.key != "trio-memory"]
    lines = ["| target (issue 24) | " + " | ".join(s.label for s in durable) + " |",
             "|---" * (len(durable) + 1) + "|"]
    for label, workload, key, higher, bound in TARGETS:
        base = median(out.get(("trio-memory", workload), []), key)
        cells = []
        for s in durable:
            value = median(out.get((s.key, workload), []), key)
            if s.missing is not None or not base or not value:
                cells.append("n/a")
                continue
            ratio = value / base
            hit = ratio >= bound if higher else ratio <= bound
            cells.append(f"{ratio:.2f}x **{'hit' if hit else 'miss'}**")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stores",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=2_000)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated, from {','.join(STORES + OPTIONAL_STORES)}"
                             " (memory is the baseline)")
    parser.add_argument("--no-ts", action="store_true", help="leave the TS SDK out")
    parser.add_argument("--only", action="append", choices=WORKLOADS)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--json", metavar="PATH", help="write every raw result to PATH")
    args = parser.parse_args(argv)
    p = {"warmup": 200, "task_warmup": 50, "duration": args.duration, "window": 200,
         "tasks": args.tasks, "gets": 1_000}
    if args.quick:
        p = {"warmup": 5, "task_warmup": 2, "duration": 0.2, "window": 20, "tasks": 50,
             "gets": 10}
        args.reps = 1
    names = tuple(n for n in args.stores.split(",") if n)
    workloads = [w for w in WORKLOADS if not args.only or w in args.only]
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    started, load0 = time.monotonic(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-stores-") as tmp, \
            store_urls(names, Path(tmp)) as urls:
        srvs = store_servers(p["tasks"], urls, not args.no_ts)
        rotate(srvs, workloads, args.reps, lambda s, w: True,
               lambda s, w: run_one(s, w, p), out, errors, width=15)
    print(run_header("Task stores (one stdlib-Python NDJSON client, examples/task_server.py --store URL)",
                     f"python -m bench.stores {' '.join(argv or sys.argv[1:])}", args.reps, load0,
                     time.monotonic() - started))
    print(report(srvs, out, errors))
    if args.json:
        write_raw(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
