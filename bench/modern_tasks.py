"""The tasks extension (MCP 2026-07-28) beside 2025-11-25 tasks: one client, several servers.

``python -m bench.modern_tasks [--reps 3] [--only WORKLOAD] [--base DIR] [--json PATH]``
``python -m bench.modern_tasks --instr [--base DIR]``

The client is ``bench.serveronly``'s: a synchronous standard-library NDJSON
JSON-RPC client over each server's stdio pipes, far cheaper per message than
any server, so a round trip's time is mostly the server's. Workloads, each
one round trip after another for ``--duration`` seconds after a warm-up:

* ``plain-2025``: ``initialize``, then ``tools/call echo`` (as ``bench.serveronly``'s
  ``plain-seq``, the same code);
* ``task-2025``: ``initialize``, then a task-augmented ``tools/call`` (``task: {ttl}``)
  of a zero-length task and ``tasks/result`` for it (as ``bench.serveronly``'s
  ``task-roundtrip``, the same code);
* ``plain-2026``: no handshake (one ``server/discover`` first, as a modern client
  does), then ``tools/call echo`` with the per-request ``_meta`` of 2026-07-28
  (protocol version, client capabilities declaring ``io.modelcontextprotocol/tasks``,
  client info);
* ``task-2026``: the same ``_meta`` on a ``tools/call`` of a zero-length task the
  server makes a task (answered ``resultType: "task"``, a ``CreateTaskResult``), then
  ``tasks/get`` (same ``_meta``) until ``status: "completed"``, the result inline.
  The client polls again at once, not after ``pollIntervalMs`` (1 s on trio-mcp, 5 s on
  FastMCP: waiting would measure the interval, not the server); the ``tasks/get``
  per task row says how many polls a round trip took.

Servers (each skipped with a note when not installed):

* trio-mcp: ``examples/task_server.py`` (``echo``, an ``inline=True`` plain ``def``;
  the zero-length task is ``sleep {seconds: 0}``), as in ``bench.serveronly``;
* FastMCP with ``fastmcp-tasks`` 4.1.x (``.interop/fastmcp``, see
  ``tests/interop/README.md``): ``bench/peers/fastmcp_tasks_server.py`` over stdio,
  ``TasksExtension()`` on its default ``memory://`` Docket backend (``echo``; ``noop``,
  ``task=True``, returns at once). FastMCP has no 2025-11-25 tasks any more;
* mcp 1.30 (``.interop/mcp130`` or ``.bench/mcp130``): ``bench/peers/mcp_server.py``,
  the 2025-11-25 rows only (the reference of the issue's "10x mcp 1.30");
* with ``--base DIR`` (a ``git worktree`` of an older commit): that commit's
  ``examples/task_server.py`` with ``PYTHONPATH=DIR``, the 2025-11-25 rows (and the
  2026 ones when it serves 2026-07-28 over stdio), to tell a regression from the
  machine's load in one run.

Server CPU per round trip comes from ``/proc/PID/stat`` (utime + stime). Servers
take turns within each repetition (the order rotates); medians of ``--reps``.
The 2025-11-25 rows of trio-mcp are also compared with the last recorded run
(``bench/RESULTS.md``, session 5).

``--instr`` times nothing: it counts the server's instructions per round trip of
each workload under callgrind, for trio-mcp and ``--base`` ((I(3n) - I(n)) / 2n, as
``bench.instr`` does for the 2025-11-25 workloads), which other load does not move.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._common import percentile, problem_lines, run_header, write_raw  # noqa: E402
from bench._runner import rotate  # noqa: E402
from bench.serveronly import (  # noqa: E402
    TTL,
    Client,
    Server,
    fmt,
    median,
    plain_seq,
    servers,
    task_roundtrip,
)

MODERN = "2026-07-28"
TASKS_EXT = "io.modelcontextprotocol/tasks"
#: The per-request ``_meta`` of every 2026-07-28 request (the extension declared).
META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXT: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-modern-tasks", "version": "1.0"},
}
WORKLOADS = ("plain-2025", "plain-2026", "task-2025", "task-2026")
LEGACY_ONLY = ("plain-2025", "task-2025")
FASTMCP_PYTHONS = (".interop/fastmcp/bin/python", ".bench/fastmcp/bin/python")

#: trio-mcp's last recorded server-only numbers (bench/RESULTS.md, "Final run of
#: session 5", main 3d665ac, quiet machine): workload -> (rate /s, server CPU us).
RECORDED = {"plain-2025": (15_486, 53), "task-2025": (3_900, 240)}
RECORDED_AT = "session 5, 3d665ac"


# --- servers --------------------------------------------------------------------------


def _version_of(python: str, dist: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", f"from importlib.metadata import version; print(version({dist!r}))"],
            capture_output=True, text=True, timeout=60, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def fastmcp_server() -> Server:
    srv = Server("fastmcp", "fastmcp-tasks", noop=("noop", {}),
                 workloads=("plain-2025", "plain-2026", "task-2026"))
    for rel in FASTMCP_PYTHONS:
        python = os.path.join(ROOT, rel)
        if os.path.exists(python):
            found = _version_of(python, "fastmcp-tasks")
            if found:
                srv.label = f"fastmcp-tasks {found}"
                srv.argv = [python, os.path.join(ROOT, "bench/peers/fastmcp_tasks_server.py")]
                srv.env = {"FASTMCP_LOG_LEVEL": "WARNING"}
                return srv
    srv.missing = ("not installed (python -m venv .interop/fastmcp && .interop/fastmcp/bin/pip "
                   "install -r tests/interop/py/requirements-fastmcp.txt)")
    return srv


def base_server(base: str, trio: Server) -> Server:
    """trio-mcp at the commit checked out in ``base`` (a git worktree)."""
    base = os.path.abspath(base)
    try:
        rev = subprocess.run(["git", "-C", base, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = os.path.basename(base)
    argv = [trio.argv[0], os.path.join(base, "examples/task_server.py"), *trio.argv[2:]]
    srv = replace(trio, key="base", label=f"trio-mcp @ {rev}", argv=argv,
                  env={"PYTHONPATH": base})
    if not speaks_modern(srv):
        srv.workloads = LEGACY_ONLY
    return srv


def speaks_modern(srv: Server) -> bool:
    """Whether the server answers a 2026-07-28 ``server/discover`` over stdio."""
    client = Client(srv)
    try:
        client.call("server/discover", {"_meta": META})
    except (RuntimeError, EOFError, OSError):
        return False
    finally:
        client.close()
    return True


def all_servers(base: str | None) -> list[Server]:
    known = {s.key: s for s in servers(10_000, 2_000, "example")}
    trio = known["trio"]
    trio.workloads = WORKLOADS
    out = [trio, fastmcp_server()]
    mcp = known["mcp130"]
    mcp.workloads = LEGACY_ONLY
    out.append(mcp)
    if base:
        out.append(base_server(base, trio))
    return out


# --- workloads ------------------------------------------------------------------------


def _timed(c: Client, once: Callable[[], int], warmup: int, duration: float) -> dict[str, Any]:
    """Run ``once`` ``warmup`` times, then for ``duration`` s: rate, p50/p99, server CPU.

    ``once`` returns how many ``tasks/get`` it sent (0 for the others).
    """
    for _ in range(warmup):
        once()
    lat: list[float] = []
    gets = 0
    cpu0 = c.cpu()
    start = time.perf_counter()
    deadline = start + duration
    while True:
        t0 = time.perf_counter()
        gets += once()
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 >= deadline:
            break
    elapsed = time.perf_counter() - start
    out = {"rate": len(lat) / elapsed, "p50_ms": percentile(lat, 50) * 1e3,
           "p99_ms": percentile(lat, 99) * 1e3,
           "server_cpu_us": (c.cpu() - cpu0) / len(lat) * 1e6, "n": len(lat)}
    if gets:
        out["gets_per_task"] = gets / len(lat)
    return out


def modern_once(c: Client, s: Server, workload: str) -> Callable[[], int]:
    """One 2026-07-28 round trip of ``workload`` (``plain-2026`` or ``task-2026``)."""
    if workload == "plain-2026":
        params = {"_meta": META, "name": s.echo, "arguments": {"text": "hello"}}

        def plain() -> int:
            result = c.call("tools/call", params)
            if result.get("resultType", "complete") != "complete" or result.get("isError"):
                raise RuntimeError(f"not a plain result: {result}")
            return 0

        return plain
    name, args = s.noop
    call = {"_meta": META, "name": name, "arguments": args}

    def task() -> int:
        created = c.call("tools/call", call)
        if created.get("resultType") != "task":
            raise RuntimeError(f"not a CreateTaskResult: {created}")
        get = {"_meta": META, "taskId": created["taskId"]}
        gets = 0
        while True:
            gets += 1
            got = c.call("tasks/get", get)
            status = got.get("status")
            if status == "completed":
                if got["result"].get("isError"):
                    raise RuntimeError(f"task failed: {got}")
                return gets
            if status != "working":
                raise RuntimeError(f"task is {status}: {got}")

    return task


def legacy_once(c: Client, s: Server, workload: str) -> Callable[[], int]:
    """One 2025-11-25 round trip (as ``bench.serveronly``'s and ``bench.instr``'s)."""
    if workload == "plain-2025":
        echo = ("tools/call", {"name": s.echo, "arguments": {"text": "hello"}})

        def plain() -> int:
            c.call(*echo)
            return 0

        return plain
    call = {"name": s.noop[0], "arguments": s.noop[1], "task": {"ttl": TTL}}

    def task() -> int:
        task_id = c.call("tools/call", call)["task"]["taskId"]
        result = c.call("tasks/result", {"taskId": task_id})
        if result.get("isError"):
            raise RuntimeError(f"task failed: {result}")
        return 0

    return task


def session(c: Client, s: Server, workload: str) -> Callable[[], int]:
    """Open the connection as ``workload``'s era does; one round trip of it."""
    if workload.endswith("2025"):
        c.initialize()
        return legacy_once(c, s, workload)
    c.call("server/discover", {"_meta": META})
    return modern_once(c, s, workload)


def run_one(server: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    client = Client(server)
    try:
        once = session(client, server, workload)
        if workload == "plain-2025":  # bench.serveronly's own code: the recorded rows
            return plain_seq(client, server, p)
        if workload == "task-2025":
            return task_roundtrip(client, server, p)
        warmup = p["warmup"] if workload == "plain-2026" else p["task_warmup"]
        return _timed(client, once, warmup, p["duration"])
    finally:
        client.close()


def instructions(server: Server, workload: str, n: int) -> tuple[float, float]:
    """The server's instructions per round trip under callgrind, (I(3n) - I(n)) / 2n:
    start-up and handshake cancel out (as in ``bench.instr``); and tasks/get per trip."""
    totals, gets = [], 0
    for count in (n, 3 * n):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cg.out")
            traced = replace(server, argv=["valgrind", "--tool=callgrind",
                                           f"--callgrind-out-file={out}", *server.argv],
                             env={**server.env, "PYTHONHASHSEED": "0"})
            client = Client(traced)
            try:
                once = session(client, traced, workload)
                for _ in range(20):
                    once()
                gets = sum(once() for _ in range(count))
            finally:
                client.close_slowly()
            with open(out, encoding="ascii") as f:
                totals.append(next(int(line.split()[1]) for line in f
                                   if line.startswith(("summary:", "totals:"))))
    return (totals[1] - totals[0]) / (2 * n), gets / (3 * n)


def instr_report(srvs: list[Server], workloads: list[str], n: int) -> str:
    """``--instr``: the server instructions per round trip of trio-mcp (and of ``--base``)."""
    shown = [s for s in srvs if s.key in ("trio", "base")]
    both = len(shown) > 1
    lines = ["| workload (server instructions per round trip) | "
             + " | ".join(s.label for s in shown) + (" | change |" if both else " |"),
             "|" + "---|" * (len(shown) + 1 + both)]
    for w in workloads:
        cells, values = [], []
        for s in shown:
            if w not in s.workloads:
                cells.append("n/a")
                continue
            per, gets = instructions(s, w, n)
            values.append(per)
            cells.append(f"{per / 1000:,.1f}k" + (f" ({gets:.2f} tasks/get)" if gets else ""))
            print(f"{w:<11} {s.label:<28} {per / 1000:8.1f}k", file=sys.stderr, flush=True)
        change = ""
        if both:
            change = f" | {(values[0] / values[1] - 1) * 100:+.1f}%" if len(values) == 2 else " |"
        lines.append(f"| {w} | " + " | ".join(cells) + change + " |")
    return "\n".join(lines)


def run_rotating(srvs: list[Server], workloads: list[str], reps: int, p: dict[str, Any],
                 out: dict[tuple[str, str], list[dict[str, Any]]],
                 errors: dict[tuple[str, str], list[str]]) -> None:
    """Every workload on every server ``reps`` times, taking turns (the order rotates)."""
    rotate(srvs, workloads, reps, lambda s, w: w in s.workloads,
           lambda s, w: run_one(s, w, p), out, errors, width=11)


# --- the report -----------------------------------------------------------------------

ROWS: list[tuple[str, str, str, bool, int]] = [
    # workload, metric key, label, higher is better, digits
    ("plain-2025", "rate", "2025-11-25 sequential plain tools/call (calls/s)", True, 0),
    ("plain-2025", "p50_ms", "  p50 latency (ms)", False, 3),
    ("plain-2025", "server_cpu_us", "  server CPU per call (us)", False, 0),
    ("plain-2026", "rate", "2026-07-28 sequential plain tools/call (calls/s)", True, 0),
    ("plain-2026", "p50_ms", "  p50 latency (ms)", False, 3),
    ("plain-2026", "server_cpu_us", "  server CPU per call (us)", False, 0),
    ("task-2025", "rate", "2025-11-25 task call + tasks/result (round trips/s)", True, 0),
    ("task-2025", "p50_ms", "  p50 latency (ms)", False, 3),
    ("task-2025", "server_cpu_us", "  server CPU per round trip (us)", False, 0),
    ("task-2026", "rate", "2026-07-28 task call + tasks/get until completed (round trips/s)",
     True, 0),
    ("task-2026", "p50_ms", "  p50 latency (ms)", False, 3),
    ("task-2026", "server_cpu_us", "  server CPU per round trip (us)", False, 0),
    ("task-2026", "gets_per_task", "  tasks/get per round trip", False, 2),
]
#: Ratio columns: (server key, heading).
VERSUS = (("fastmcp", "vs fastmcp-tasks"), ("mcp130", "vs mcp 1.30"), ("base", "vs base"))


def report(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]],
           errors: dict[tuple[str, str], list[str]]) -> str:
    ran = {w for _, w in out} | {w for _, w in errors}
    shown = [s for s in srvs if s.missing is None]
    versus = [(k, h) for k, h in VERSUS if any(s.key == k for s in shown)]
    lines = ["| workload | " + " | ".join(s.label for s in shown) + " | "
             + " | ".join(h for _, h in versus) + " |",
             "|" + "---|" * (len(shown) + len(versus) + 1)]
    med = {(s.key, w, k): median(out.get((s.key, w), []), k)
           for s in shown for w, k, *_ in ROWS}

    def cell(s: Server, w: str, k: str, digits: int) -> str:
        if w not in s.workloads:
            return "n/a"
        return fmt(med[(s.key, w, k)], digits)

    def ratio(w: str, k: str, higher: bool, other: str) -> str:
        ours, theirs = med.get(("trio", w, k)), med.get((other, w, k))
        if not ours or not theirs or k == "gets_per_task":
            return ""
        return f"{(ours / theirs if higher else theirs / ours):.2f}x"

    for w, k, label, higher, digits in ROWS:
        if w not in ran:
            continue
        lines.append(f"| {label} | " + " | ".join(cell(s, w, k, digits) for s in shown) + " | "
                     + " | ".join(ratio(w, k, higher, o) for o, _ in versus) + " |")
    lines.append("")
    lines.append("Ratios: > 1 means trio-mcp (this checkout) is better. n/a: the server does "
                 "not serve that workload (FastMCP has no 2025-11-25 tasks; mcp 1.30 no "
                 "2026-07-28).")
    lines.extend(problem_lines(errors, srvs))
    lines.append("")
    lines.append(f"trio-mcp's 2025-11-25 rows against the last recorded run ({RECORDED_AT}, "
                 "a quiet machine; bench/RESULTS.md). Absolute numbers move with the machine "
                 "and its load: --base DIR measures an older commit in the same run.")
    lines.append("")
    lines.append("| workload | recorded /s (CPU us) | this run /s (CPU us) | rate change "
                 "| CPU change |")
    lines.append("|---|---|---|---|---|")
    for w, (rate, cpu) in RECORDED.items():
        now_rate, now_cpu = med.get(("trio", w, "rate")), med.get(("trio", w, "server_cpu_us"))
        if now_rate is None or now_cpu is None:
            continue
        lines.append(f"| {w} | {rate:,} ({cpu}) | {now_rate:,.0f} ({now_cpu:.0f}) "
                     f"| {(now_rate / rate - 1) * 100:+.1f}% | {(now_cpu / cpu - 1) * 100:+.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.modern_tasks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--only", action="append", choices=WORKLOADS)
    parser.add_argument("--servers", help="comma-separated keys: trio,fastmcp,mcp130,base")
    parser.add_argument("--base", metavar="DIR",
                        help="also run trio-mcp from this checkout (e.g. git worktree add "
                             "/tmp/base COMMIT), PYTHONPATH=DIR")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--instr", action="store_true",
                        help="count the server's instructions per round trip under callgrind "
                             "instead (trio-mcp and --base; load-independent; minutes)")
    parser.add_argument("--instr-n", type=int, default=300)
    parser.add_argument("--json", metavar="PATH", help="write every raw result to PATH")
    parser.add_argument("--from-json", metavar="PATH",
                        help="print the table of an earlier run's --json file (runs nothing)")
    args = parser.parse_args(argv)
    srvs = all_servers(args.base)
    if args.servers:
        keep = set(args.servers.split(","))
        srvs = [s for s in srvs if s.key in keep]
    if args.from_json:
        raw = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        loaded = {tuple(key.split(" ", 1)): v for key, v in raw.items()}
        print(report(srvs, loaded, {}))
        return 0
    p = {"warmup": 200, "task_warmup": 50, "duration": args.duration}
    if args.quick:
        p = {"warmup": 5, "task_warmup": 2, "duration": 0.2}
        args.reps = 1
    workloads = [w for w in WORKLOADS if not args.only or w in args.only]
    if args.instr:
        started, load0 = time.monotonic(), os.getloadavg()
        table = instr_report(srvs, workloads, 20 if args.quick else args.instr_n)
        print(run_header("Server instructions per round trip (callgrind; bench.modern_tasks)",
                         f"python -m bench.modern_tasks {' '.join(argv or sys.argv[1:])}", 1,
                         load0, time.monotonic() - started))
        print(table)
        return 0
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    started, load0 = time.monotonic(), os.getloadavg()
    run_rotating(srvs, workloads, args.reps, p, out, errors)
    print(run_header("The tasks extension (2026-07-28) beside 2025-11-25 tasks, server-only "
                     "(one stdlib-Python NDJSON client over stdio)",
                     f"python -m bench.modern_tasks {' '.join(argv or sys.argv[1:])}",
                     args.reps, load0, time.monotonic() - started))
    print(report(srvs, out, errors))
    if args.json:
        write_raw(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
