"""Task stores compared: tasks/s and ``tasks/get`` latency with memory, SQLite and Redis.

``python -m bench.stores [--reps 3] [--tasks 2000] [--json PATH]``

The same client as ``bench.serveronly`` (one synchronous stdlib NDJSON client
over stdio) drives ``examples/task_server.py --store URL`` once per store, and
the TypeScript SDK's server (its in-memory store) as the reference:

* ``task-roundtrip``: a task-augmented ``tools/call`` of a zero-length task, then
  its ``tasks/result``, one after another (tasks/s: every status change and the
  result go through the store);
* ``tasks``: N running tasks created 200 in flight (tasks/s), ``tasks/get`` of
  random ones (p50/p99), then all cancelled.

SQLite uses a file in a temporary directory; Redis a private ``redis-server``
(``appendonly yes``, ``appendfsync everysec``, ``noeviction``) on loopback,
started and stopped here (skipped with a note when ``redis-server`` or
coredis is missing).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._common import run_header, write_raw  # noqa: E402
from bench.serveronly import Server, median, run_rotating, servers  # noqa: E402

ROWS = [
    ("task-roundtrip", "rate", "task call + tasks/result (tasks/s)", 0),
    ("task-roundtrip", "p50_ms", "  round trip p50 (ms)", 3),
    ("task-roundtrip", "server_cpu_us", "  server CPU per task (us)", 0),
    ("tasks", "create_rate", "create N running tasks, 200 in flight (tasks/s)", 0),
    ("tasks", "get_p50_ms", "tasks/get p50 (ms)", 3),
    ("tasks", "get_p99_ms", "tasks/get p99 (ms)", 3),
    ("tasks", "cancel_s_per_10k", "cancel time per 10,000 tasks (s)", 2),
    ("tasks", "tasks", "  N", 0),
]


def store_servers(n_tasks: int, stack: ExitStack) -> list[Server]:
    known = {s.key: s for s in servers(n_tasks, n_tasks, "example")}
    base = known["trio"]
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-stores-")))
    out = []
    urls = {"memory": "memory", "sqlite": f"sqlite:///{tmp}/tasks.db"}
    try:
        import coredis  # noqa: F401

        from tests.redis_server import running_redis

        urls["redis"] = stack.enter_context(running_redis(tmp / "redis"))
    except Exception as exc:  # redis-server or coredis missing
        missing = f"not available: {exc}"[:120]
    else:
        missing = None
    for name in ("memory", "sqlite", "redis"):
        server = Server(f"trio-{name}", f"trio-mcp, {name} store",
                        [*base.argv, "--store", urls.get(name, "")], dict(base.env),
                        noop=base.noop, park=base.park)
        if name not in urls:
            server.missing = missing
        out.append(server)
    ts = known["ts"]
    ts.label += " (in memory)"
    out.append(ts)
    return out


def report(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
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
    notes = [f"- {s.label}: {s.missing}" for s in srvs if s.missing]
    return "\n".join(lines + (["", *notes] if notes else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stores",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=2_000)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--json", metavar="PATH", help="write every raw result to PATH")
    args = parser.parse_args(argv)
    p = {"warmup": 200, "task_warmup": 50, "duration": args.duration, "window": 200,
         "tasks": args.tasks, "gets": 1_000}
    if args.quick:
        p = {"warmup": 5, "task_warmup": 2, "duration": 0.2, "window": 20, "tasks": 50,
             "gets": 10}
        args.reps = 1
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    started, load0 = time.monotonic(), os.getloadavg()
    with ExitStack() as stack:
        srvs = store_servers(p["tasks"], stack)
        run_rotating(srvs, ["task-roundtrip", "tasks"], args.reps, p, out, {})
    print(run_header("Task stores (one stdlib-Python NDJSON client, examples/task_server.py --store URL)",
                     f"python -m bench.stores {' '.join(argv or sys.argv[1:])}", args.reps, load0,
                     time.monotonic() - started))
    print(report(srvs, out))
    if args.json:
        write_raw(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
