"""Instructions per operation of the trio-mcp SERVER alone, under valgrind (repeatable).

``python -m bench.instr [--only plain-seq,...] [--n 300] [--server example|bench]``

Runs the server (``examples/task_server.py`` by default) under
``valgrind --tool=callgrind`` twice per workload, driven by the server-only
benchmark's stdlib client (``bench/serveronly.py``) with ``n`` and ``3 n``
operations, and prints (I(3n) - I(n)) / 2n: the instructions the server
spends per operation, start-up and handshake cancelled out. Other load on
the machine does not change the count, so this is the number to compare
before and after a change (a few minutes per workload: valgrind is ~50x
slower than the real thing).

Workloads: ``plain-seq`` (one echo call), ``plain-200`` (echo, 200 in
flight), ``task-roundtrip`` (zero-length task + tasks/result), ``create``
(one running task created, 200 in flight), ``cancel`` (one tasks/cancel of a
running task, 200 in flight; the create cost is subtracted).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from bench.serveronly import ECHO, TTL, Client, servers

WORKLOADS = ("plain-seq", "plain-200", "task-roundtrip", "create", "cancel")


def drive(c: Client, workload: str, n: int, noop: Any, park: Any) -> None:
    if workload == "plain-seq":
        for _ in range(n):
            c.call(*ECHO)
    elif workload == "plain-200":
        c.pipelined(n, 200, lambda i: ECHO)
    elif workload == "task-roundtrip":
        call = {"name": noop[0], "arguments": noop[1], "task": {"ttl": TTL}}
        for _ in range(n):
            task_id = c.call("tools/call", call)["task"]["taskId"]
            c.call("tasks/result", {"taskId": task_id})
    elif workload in ("create", "cancel"):
        ids = [""] * n
        call = {"name": park[0], "arguments": park[1], "task": {"ttl": TTL}}

        def got(i: int, result: dict[str, Any]) -> None:
            ids[i] = result["task"]["taskId"]

        c.pipelined(n, 200, lambda i: ("tools/call", call), got)
        if workload == "cancel":
            c.pipelined(n, 200, lambda i: ("tasks/cancel", {"taskId": ids[i]}))


def count(argv: list[str], env: dict[str, str], workload: str, n: int, s: Any) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        s.argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv]
        s.env = {**env, "PYTHONHASHSEED": "0"}
        c = Client(s)
        try:
            c.initialize()
            for _ in range(20):
                c.call(*ECHO)
            drive(c, workload, n, s.noop, s.park)
        finally:
            c.close_slowly()
        with open(out, encoding="ascii") as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no total in the callgrind output")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated: {','.join(WORKLOADS)}")
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--server", choices=("example", "bench"), default="example")
    args = parser.parse_args()
    wanted = args.only.split(",") if args.only else list(WORKLOADS)
    s = servers(10_000, 0, args.server)[0]
    argv, env = list(s.argv), dict(s.env)
    results = {}
    for workload in wanted:
        n = args.n
        i1 = count(argv, env, workload, n, s)
        i3 = count(argv, env, workload, 3 * n, s)
        per = (i3 - i1) / (2 * n)
        if workload == "cancel":
            c1 = count(argv, env, "create", n, s)
            c3 = count(argv, env, "create", 3 * n, s)
            per -= (c3 - c1) / (2 * n)
        results[workload] = per
        print(f"{workload:<15} {per / 1000:8.1f}k instructions per op (server)", flush=True)
    print("  ".join(f"{k}={v / 1000:.1f}k" for k, v in results.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
