"""Work that outlives its process (issue 32): how fast a killed process's task runs again,
and what workers cost.

``python -m bench.rerun [--store redis|postgres] [--lease 2] [--reps 3] [--tasks 400] [--json PATH]``

Processes of ``examples/task_server.py`` (Streamable HTTP, 2025-11-25 clients with one
token) on a private redis-server or PostgreSQL; ``resumable_sleep`` logs each run's
start (``RESUMABLE_SLEEP_LOG``):

* ``rerun``: two servers; N re-runnable tasks of 30 s started on A, A SIGKILLed: the
  time from the SIGKILL to each task's second run starting (the lease lapses, a sweep
  queues it, B claims and starts it): min / median / max, against the lease;
* ``throughput``: N ``resumable_sleep(0)`` tasks created 50 in flight and followed to
  their result, on one process that serves and runs them, and on one ``--front`` with two
  ``--worker`` processes (tasks/s, wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import trio_mcp  # noqa: E402

EXAMPLE = ROOT / "examples" / "task_server.py"
TOKEN = "bench"


class Proc:
    """One example process, its stderr in a file; ``url`` once it serves (or works)."""

    def __init__(self, store: str, log: Path, folder: Path, *args: str) -> None:
        self.err = folder / f"proc-{time.monotonic_ns()}.err"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RESUMABLE_SLEEP_LOG": str(log)}
        argv = [sys.executable, str(EXAMPLE), "--store", store, "--max-live-tasks", "10000",
                *args]  # fmt: skip
        with self.err.open("wb") as sink:
            self.proc = subprocess.Popen(argv, stderr=sink, env=env)
        deadline = time.monotonic() + 30
        while True:
            text = self.err.read_bytes()
            if b"serving on " in text or b"worker running" in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the example did not start: {text[-2000:]!r}")
            time.sleep(0.02)
        self.url = text.split(b"serving on ", 1)[1].split()[0].decode() if b"serving" in text else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def server(store: str, log: Path, folder: Path, *extra: str) -> Proc:
    return Proc(store, log, folder, "--http", "127.0.0.1:0", "--token", TOKEN, *extra)


def runs(log: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            task_id, _, _, when = line.split()
            out.setdefault(task_id, []).append(float(when))
    return out


async def create(url: str, n: int, seconds: float) -> list[str]:
    async with trio_mcp.open_http_client(url, token=TOKEN) as peer:
        return [
            (await peer.call_tool_task("resumable_sleep", {"seconds": seconds})).task_id
            for _ in range(n)
        ]


def rerun_latency(store: str, lease: float, n: int, folder: Path) -> dict[str, Any]:
    log = folder / f"rerun-{time.monotonic_ns()}.log"
    a, b = server(store, log, folder), server(store, log, folder)
    try:
        ids = trio.run(create, a.url, n, 30.0)
        while len(runs(log)) < n:
            time.sleep(0.01)
        a.proc.send_signal(signal.SIGKILL)
        killed = time.time()
        a.proc.wait()
        deadline = time.monotonic() + lease * 3 + 30
        while True:
            seen = runs(log)
            if all(len(seen.get(t, [])) >= 2 for t in ids):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the re-runs did not all start")
            time.sleep(0.01)
        late = sorted(seen[t][1] - killed for t in ids)
        return {"n": n, "lease_s": lease, "min_s": late[0], "median_s": statistics.median(late),
                "max_s": late[-1]}  # fmt: skip
    finally:
        a.stop()
        b.stop()


async def drive(url: str, n: int, window: int) -> float:
    """Create ``n`` zero-length tasks, ``window`` at a time, each followed to its result."""
    started = time.perf_counter()
    todo = iter(range(n))
    async with trio_mcp.open_http_client(url, token=TOKEN) as peer:

        async def one_lane() -> None:
            for _ in todo:
                handle = await peer.call_tool_task("resumable_sleep", {"seconds": 0})
                await handle.result()

        async with trio.open_nursery() as nursery:
            for _ in range(window):
                nursery.start_soon(one_lane)
    return time.perf_counter() - started


def throughput(store: str, n: int, folder: Path, layout: str) -> dict[str, Any]:
    log = folder / f"tp-{time.monotonic_ns()}.log"
    procs: list[Proc] = []
    try:
        if layout == "one":
            procs.append(server(store, log, folder))
        else:
            procs.append(server(store, log, folder, "--front"))
            procs += [Proc(store, log, folder, "--worker") for _ in range(2)]
        wall = trio.run(drive, procs[0].url, n, 50)
        return {"layout": layout, "n": n, "wall_s": wall, "tasks_per_s": n / wall}
    finally:
        for p in procs:
            p.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=("redis", "postgres"), default="redis")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    out: dict[str, Any] = {"store": args.store, "lease_s": args.lease, "rerun": [],
                           "throughput": []}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        if args.store == "redis":
            from tests.redis_server import running_redis

            base = stack.enter_context(running_redis(folder / "redis"))
        else:
            from bench.stores_pg import running_postgres

            base = stack.enter_context(running_postgres(folder / "pg"))
        sep = "&" if "?" in base else "?"
        for rep in range(args.reps):
            store = f"{base}{sep}lease={args.lease:g}"
            if args.store == "redis":
                store += f"&prefix=b{rep}"
            row = rerun_latency(store, args.lease, 50, folder)
            out["rerun"].append(row)
            print(f"rerun {rep + 1}: SIGKILL -> working again: min {row['min_s']:.2f} s, "
                  f"median {row['median_s']:.2f} s, max {row['max_s']:.2f} s "
                  f"(lease {args.lease:g} s, {row['n']} tasks)", flush=True)  # fmt: skip
            for layout in ("one", "front+2"):
                if args.store == "redis":
                    store = f"{base}{sep}lease={args.lease:g}&prefix=t{rep}{layout[0]}"
                tp = throughput(store, args.tasks, folder, layout)
                out["throughput"].append(tp)
                print(f"throughput {rep + 1} {layout}: {tp['tasks_per_s']:.0f} tasks/s "
                      f"({tp['n']} tasks, {tp['wall_s']:.2f} s)", flush=True)
    for layout in ("one", "front+2"):
        rates = [t["tasks_per_s"] for t in out["throughput"] if t["layout"] == layout]
        print(f"median {layout}: {statistics.median(rates):.0f} tasks/s")
    late = [r["median_s"] for r in out["rerun"]]
    print(f"median SIGKILL -> working again: {statistics.median(late):.2f} s (lease {args.lease:g} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
