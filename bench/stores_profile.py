"""Where one store's server spends its CPU on one workload of ``bench.stores``.

``python -m bench.stores_profile STORE [--workload roundtrip-200] [--profiler cprofile|pyspy]``

Starts the store as ``bench.stores`` does, runs ``examples/task_server.py --store URL``
under a profiler, drives it with the same client and workload, and prints the top
functions:

* ``cprofile`` (default): ``cProfile`` with CPU time (``time.process_time``) of the
  server's main thread (the Trio thread), by own time and by cumulative time;
* ``pyspy``: ``py-spy record --gil`` sampling every thread (SQLite's writer thread, the
  PostgreSQL store's worker threads) while it holds the GIL, summed per function, own
  and cumulative (``pip install py-spy``).

Both print the server's CPU per thread (``/proc/PID/task``) over the workload.
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.serveronly import CLK_TCK, RUNS, Client, Server  # noqa: E402
from bench.stores import STORES, WORKLOADS, store_servers, store_urls  # noqa: E402
from bench.stores_load import roundtrip_window  # noqa: E402


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"warmup": 200, "task_warmup": 50, "duration": args.duration, "window": 200,
            "tasks": args.tasks, "gets": 200}


def _pyspy_table(raw: Path, top: int) -> str:
    own: collections.Counter[str] = collections.Counter()
    cum: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [f.split(" (", 1)[0] + " " + f.rsplit("/", 1)[-1].rstrip(")")
                  for f in stack.split(";")[1:]]  # [0] is the thread
        if frames:
            own[frames[-1]] += n
        for frame in set(frames):
            cum[frame] += n
    out = [f"{total} non-idle samples", "", "own %   function", *(
        f"{n / total * 100:5.1f}   {f}" for f, n in own.most_common(top)),
        "", "cum %   function", *(f"{n / total * 100:5.1f}   {f}" for f, n in cum.most_common(top))]
    return "\n".join(out)


def _threads(pid: int) -> dict[str, tuple[float, float]]:
    """CPU seconds per thread of ``pid`` (name:tid -> user, system)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                head, _, rest = f.read().rpartition(")")
            fields = rest.split()
            out[f"{head.split('(', 1)[1]}:{tid}"] = (int(fields[11]) / CLK_TCK,
                                                     int(fields[12]) / CLK_TCK)
        except OSError:
            continue
    return out


def _run(server: Server, workload: str, p: dict[str, Any], spy_out: Path | None
         ) -> tuple[dict[str, Any], str]:
    """``run_one``, with ``py-spy record`` attached after the handshake if ``spy_out``;
    also the server's CPU per thread over the workload."""
    server.argv = [a.replace("{run}", "1") for a in server.argv]
    client = Client(server)
    try:
        client.initialize()
        spy = None
        if spy_out is not None:
            spy = subprocess.Popen(
                ["py-spy", "record", "--format", "raw", "--threads", "--gil", "-r", "1000",
                 "-o", str(spy_out), "--pid", str(client.proc.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # py-spy attaches
        before = _threads(client.proc.pid)
        try:
            if workload == "roundtrip-200":
                result = roundtrip_window(client, server, p)
            else:
                result = RUNS[workload](client, server, p)
            after = _threads(client.proc.pid)
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
    finally:
        client.close()
    rows = sorted(((after[k][0] - before.get(k, (0.0, 0.0))[0],
                    after[k][1] - before.get(k, (0.0, 0.0))[1], k) for k in after),
                  key=lambda r: -(r[0] + r[1]))
    table = "server CPU per thread over the workload (user + system s): " + ", ".join(
        f"{k} {u:.2f} + {s:.2f}" for u, s, k in rows if u + s > 0)
    return result, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stores_profile",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=STORES)
    parser.add_argument("--workload", choices=WORKLOADS, default="roundtrip-200")
    parser.add_argument("--profiler", choices=("cprofile", "pyspy"), default="cprofile")
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--tasks", type=int, default=2_000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", metavar="PATH", help="keep the raw profile here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-prof-") as tmp, \
            store_urls((args.store,), Path(tmp)) as urls:
        (server,) = store_servers(args.tasks, urls, with_ts=False)
        if server.missing:
            sys.exit(f"{args.store}: {server.missing}")
        out = Path(args.out or Path(tmp) / "profile")
        script = server.argv.index(os.path.join(ROOT, "examples/task_server.py"))
        if args.profiler == "cprofile":
            server.argv[script:script] = ["-m", "bench._cprofiled", str(out)]
        elif shutil.which("py-spy") is None:
            sys.exit("py-spy is not installed (pip install py-spy)")
        t0 = time.monotonic()
        result, threads = _run(server, args.workload, _params(args),
                               out if args.profiler == "pyspy" else None)
        time.sleep(1.0)  # the profiler writes its file as the server exits
        for _ in range(100):
            if out.exists() and out.stat().st_size:
                break
            time.sleep(0.1)
        print(f"# {args.store} store, {args.workload}, {args.profiler} "
              f"({time.monotonic() - t0:.0f} s)\n")
        print({k: round(v, 3) for k, v in result.items()})
        print(threads)
        print()
        if args.profiler == "cprofile":
            stats = pstats.Stats(str(out))
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumulative").print_stats(args.top)
        else:
            print(_pyspy_table(out, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
