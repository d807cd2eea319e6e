"""Server-only comparison: ONE client drives every server, so the ratio is the server's.

``python -m bench.serveronly [--reps 3] [--tasks 10000] [--only WORKLOAD] [--json PATH]``

The client is this file: a small, synchronous, standard-library NDJSON
JSON-RPC client (blocking ``os.read``/``os.write`` on the pipes, no event
loop), far cheaper per message than any of the servers, so a round trip's
time is mostly the server's. It spawns each server over stdio, does the MCP
handshake, and runs:

* ``plain-seq``: ``tools/call echo`` one after another (calls/s, p50/p99);
* ``plain-200``: the same with 200 requests in flight (pipelined: a new
  request is written as each answer arrives);
* ``task-roundtrip``: a task-augmented ``tools/call`` of a zero-length task,
  then ``tasks/result`` for it, one after another;
* ``tasks``: N tasks that run until cancelled, created 200 in flight (rate),
  the server's RSS growth per task (``VmRSS`` of ``/proc/PID/status``),
  ``tasks/get`` of random ones (p50/p99), then ``tasks/cancel`` of all of
  them, 200 in flight (seconds).

Server CPU per operation comes from ``/proc/PID/stat`` (utime + stime), so
no server needs a ``stats`` tool. Servers (each skipped with a note when not
installed; ``bash bench/setup.sh`` installs the peers):

* trio-mcp: ``examples/task_server.py --max-live-tasks N`` (``echo``; the
  zero-length task is ``sleep {seconds: 0}``, the running one
  ``park {}``, which awaits ``trio.sleep_forever()``);
* the TypeScript SDK: ``bench/peers/ts_server.mjs`` (``echo``, ``noop``, ``park``);
* mcp 1.30: ``bench/peers/mcp_server.py`` (same tools; its task store scans
  every task on every call, so it runs ``--tasks-mcp`` tasks, 2,000 by default);
* the Trio echo floor: ``bench/echo.py server`` (copies each line back: the
  plain workloads only).

Implementations take turns within each repetition (the order rotates), and
the medians of ``--reps`` are reported with the issue's targets. Wall time
at the defaults: about 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._common import percentile, problem_lines, run_header, write_raw  # noqa: E402
from bench._runner import (  # noqa: E402
    _node_modules,
    _python_with_mcp,
    rotate,
)

TTL = 600_000
CLK_TCK = os.sysconf("SC_CLK_TCK")
WORKLOADS = ("plain-seq", "plain-200", "task-roundtrip", "tasks")


@dataclass
class Server:
    key: str
    label: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    #: (tool name, arguments) of the zero-length task and of the running task.
    noop: tuple[str, dict[str, Any]] = ("noop", {})
    park: tuple[str, dict[str, Any]] = ("park", {})
    #: The plain workloads' tool (``--echo-tool`` changes trio-mcp's).
    echo: str = "echo"
    workloads: tuple[str, ...] = WORKLOADS
    missing: str | None = None
    tasks: int | None = None  # overrides --tasks


def servers(n_tasks: int, mcp_tasks: int, trio_server: str) -> list[Server]:
    py = sys.executable
    env = {"PYTHONPATH": ROOT}
    if trio_server == "example":
        trio = Server(
            "trio", "trio-mcp",
            [py, os.path.join(ROOT, "examples/task_server.py"),
             "--max-live-tasks", str(max(n_tasks, 10_000) * 2)],
            env, noop=("sleep", {"seconds": 0}), park=("park", {}),
        )
    else:
        trio = Server("trio", "trio-mcp (bench server)", [py, "-m", "bench.trio_server"], env)
    out = [trio]
    ts = Server("ts", "TS SDK")
    found = _node_modules()
    if found is None:
        ts.missing = "not installed (bash bench/setup.sh)"
    else:
        modules, version = found
        ts.label = f"TS SDK {version}"
        ts.argv = ["node", os.path.join(ROOT, "bench/peers/ts_server.mjs")]
        ts.env = {"BENCH_NODE_MODULES": str(modules)}
    out.append(ts)
    mcp = Server("mcp130", "mcp 1.30", tasks=mcp_tasks)
    from pathlib import Path

    found_py = _python_with_mcp(
        [Path(ROOT) / ".interop/mcp130/bin/python", Path(ROOT) / ".bench/mcp130/bin/python"], 1
    )
    if found_py is None:
        mcp.missing = "not installed (bash bench/setup.sh)"
    else:
        python, version = found_py
        mcp.label = f"mcp {version}"
        mcp.argv = [str(python), os.path.join(ROOT, "bench/peers/mcp_server.py")]
    out.append(mcp)
    out.append(
        Server("floor", "Trio echo floor", [py, "-m", "bench.echo", "server"], env,
               workloads=("plain-seq", "plain-200"))
    )
    return out


class Client:
    """A blocking NDJSON JSON-RPC client over a server process's pipes."""

    def __init__(self, server: Server) -> None:
        env = dict(os.environ)
        env.update(server.env)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            server.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, cwd=ROOT, bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.buf = b""
        self.lines: list[bytes] = []
        self.next_id = 0
        self.echo = server.key == "floor"

    # --- wire ---------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def _read_lines(self) -> None:
        data = os.read(self.rfd, 1 << 16)
        if not data:
            raise EOFError("the server closed its stdout")
        *lines, self.buf = (self.buf + data).split(b"\n")
        self.lines.extend(lines)

    def answers(self) -> Iterator[dict[str, Any]]:
        """Every answer (a line with our id) as it arrives; notifications are skipped."""
        while True:
            if not self.lines:
                self._read_lines()
            yield from self.answers_now()

    def request_line(self, method: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        return self.next_id, json.dumps(msg, separators=(",", ":")).encode() + b"\n"

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id, line = self.request_line(method, params)
        self.write(line)
        for msg in self.answers():
            if msg.get("id") == request_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result") or msg.get("params") or {}
        raise AssertionError("unreachable")

    def pipelined(
        self, n: int, window: int, make: Callable[[int], tuple[str, dict[str, Any]]],
        on_answer: Callable[[int, dict[str, Any]], None] | None = None,
        deadline: float | None = None,
    ) -> int:
        """Send ``n`` requests (``make(i)``) keeping ``window`` in flight; return answered."""
        sent = done = 0
        index: dict[int, int] = {}

        def send_more(limit: int) -> None:
            nonlocal sent
            chunks = []
            while sent < n and sent - done < limit:
                method, params = make(sent)
                request_id, line = self.request_line(method, params)
                index[request_id] = sent
                chunks.append(line)
                sent += 1
            if chunks:
                self.write(b"".join(chunks))

        send_more(window)
        while done < sent:
            if not self.lines:
                self._read_lines()
            for msg in self.answers_now():
                i = index.pop(msg.get("id"), None)  # type: ignore[arg-type]
                if i is None:
                    continue
                done += 1
                if "error" in msg:
                    raise RuntimeError(f"request {i}: {msg['error']}")
                if on_answer is not None:
                    on_answer(i, msg.get("result") or {})
            if deadline is not None and time.perf_counter() >= deadline:
                n = sent  # stop sending; drain what is in flight
            send_more(window)
        return done

    def answers_now(self) -> Iterator[dict[str, Any]]:
        lines, self.lines = self.lines, []
        for line in lines:
            if line.strip():
                msg = json.loads(line)
                # An answer has our id and a result or an error (the echo
                # floor sends our own requests back: those count too).
                if "id" in msg and (self.echo or "method" not in msg):
                    yield msg

    def close_slowly(self) -> None:
        """Close stdin and give the server (under valgrind) time to exit on its own."""
        self.close(timeout=300)

    # --- session ------------------------------------------------------------------

    def initialize(self) -> None:
        self.call("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench-serveronly", "version": "1.0"},
        })
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def cpu(self) -> float:
        """The server's user + system CPU seconds so far."""
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss(self) -> int:
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def close(self, timeout: float = 5) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# --- workloads -------------------------------------------------------------------------

ECHO = ("tools/call", {"name": "echo", "arguments": {"text": "hello"}})


def _echo(s: Server) -> tuple[str, dict[str, Any]]:
    return ("tools/call", {"name": s.echo, "arguments": {"text": "hello"}})


def _task_id(result: dict[str, Any]) -> str:
    return str(result["task"]["taskId"])


def plain_seq(c: Client, s: Server, p: dict[str, Any]) -> dict[str, Any]:
    echo = _echo(s)
    for _ in range(p["warmup"]):
        c.call(*echo)
    lat: list[float] = []
    cpu0 = c.cpu()
    start = time.perf_counter()
    deadline = start + p["duration"]
    while True:
        t0 = time.perf_counter()
        c.call(*echo)
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 >= deadline:
            break
    elapsed = time.perf_counter() - start
    return {"rate": len(lat) / elapsed, "p50_ms": percentile(lat, 50) * 1e3,
            "p99_ms": percentile(lat, 99) * 1e3,
            "server_cpu_us": (c.cpu() - cpu0) / len(lat) * 1e6}


def plain_200(c: Client, s: Server, p: dict[str, Any]) -> dict[str, Any]:
    echo = _echo(s)
    for _ in range(p["warmup"]):
        c.call(*echo)
    cpu0 = c.cpu()
    start = time.perf_counter()
    ops = c.pipelined(10**9, p["window"], lambda i: echo,
                      deadline=start + p["duration"])
    elapsed = time.perf_counter() - start
    return {"rate": ops / elapsed, "server_cpu_us": (c.cpu() - cpu0) / ops * 1e6}


def task_roundtrip(c: Client, s: Server, p: dict[str, Any]) -> dict[str, Any]:
    name, args = s.noop
    call = {"name": name, "arguments": args, "task": {"ttl": TTL}}

    def once() -> None:
        task_id = _task_id(c.call("tools/call", call))
        result = c.call("tasks/result", {"taskId": task_id})
        if result.get("isError"):
            raise RuntimeError(f"task failed: {result}")

    for _ in range(p["task_warmup"]):
        once()
    lat: list[float] = []
    cpu0 = c.cpu()
    start = time.perf_counter()
    deadline = start + p["duration"]
    while True:
        t0 = time.perf_counter()
        once()
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 >= deadline:
            break
    elapsed = time.perf_counter() - start
    return {"rate": len(lat) / elapsed, "p50_ms": percentile(lat, 50) * 1e3,
            "server_cpu_us": (c.cpu() - cpu0) / len(lat) * 1e6}


def tasks(c: Client, s: Server, p: dict[str, Any]) -> dict[str, Any]:
    n = s.tasks or p["tasks"]
    window = p["window"]
    name, args = s.park
    for _ in range(p["warmup"]):
        c.call(*_echo(s))
    time.sleep(0.2)
    rss0 = c.rss()
    ids = [""] * n
    call = {"name": name, "arguments": args, "task": {"ttl": TTL}}

    def got_id(i: int, result: dict[str, Any]) -> None:
        ids[i] = _task_id(result)

    cpu0 = c.cpu()
    t0 = time.perf_counter()
    c.pipelined(n, window, lambda i: ("tools/call", call), got_id)
    create_s = time.perf_counter() - t0
    create_cpu = c.cpu() - cpu0
    time.sleep(0.2)
    rss1 = c.rss()
    rng = random.Random(7)
    lat: list[float] = []
    for _ in range(p["gets"]):
        task_id = ids[rng.randrange(n)]
        t1 = time.perf_counter()
        task = c.call("tasks/get", {"taskId": task_id})
        lat.append(time.perf_counter() - t1)
        if task.get("status") != "working":
            raise RuntimeError(f"task {task_id} is {task.get('status')}")
    bad = 0

    def cancelled(i: int, result: dict[str, Any]) -> None:
        nonlocal bad
        bad += result.get("status") != "cancelled"

    cpu1 = c.cpu()
    t2 = time.perf_counter()
    c.pipelined(n, window, lambda i: ("tasks/cancel", {"taskId": ids[i]}), cancelled)
    cancel_s = time.perf_counter() - t2
    cancel_cpu = c.cpu() - cpu1
    return {"tasks": n, "create_rate": n / create_s, "create_cpu_us": create_cpu / n * 1e6,
            "rss_per_task_kib": (rss1 - rss0) / n / 1024,
            "get_p50_ms": percentile(lat, 50) * 1e3, "get_p99_ms": percentile(lat, 99) * 1e3,
            "cancel_s": cancel_s, "cancel_s_per_10k": cancel_s * 10_000 / n,
            "cancel_cpu_us": cancel_cpu / n * 1e6, "cancel_errors": bad}


RUNS = {"plain-seq": plain_seq, "plain-200": plain_200, "task-roundtrip": task_roundtrip,
        "tasks": tasks}


def run_rotating(srvs: list[Server], workloads: list[str], reps: int, p: dict[str, Any],
                 out: dict[tuple[str, str], list[dict[str, Any]]],
                 errors: dict[tuple[str, str], list[str]]) -> None:
    """Run every workload on every server ``reps`` times, the servers taking turns
    (the order rotates each repetition); results and errors go into ``out``/``errors``."""
    rotate(srvs, workloads, reps, lambda s, w: w in s.workloads,
           lambda s, w: run_one(s, w, p), out, errors)


def run_one(server: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    client = Client(server)
    try:
        client.initialize()
        if workload == "task-roundtrip" and server.key == "ts":
            p = dict(p, duration=max(p["duration"], 3.0), task_warmup=2)  # 200 ms polls
        return RUNS[workload](client, server, p)
    finally:
        client.close()


# --- the report ------------------------------------------------------------------------

ROWS: list[tuple[str, str, str, bool, int]] = [
    # workload, metric key, label, higher is better, digits
    ("plain-seq", "rate", "sequential plain tools/call (calls/s)", True, 0),
    ("plain-seq", "p50_ms", "  p50 latency (ms)", False, 3),
    ("plain-seq", "p99_ms", "  p99 latency (ms)", False, 3),
    ("plain-seq", "server_cpu_us", "  server CPU per call (us)", False, 0),
    ("plain-200", "rate", "200 in flight plain tools/call (calls/s)", True, 0),
    ("plain-200", "server_cpu_us", "  server CPU per call (us)", False, 0),
    ("task-roundtrip", "rate", "task call + tasks/result, zero-length task (/s)", True, 0),
    ("task-roundtrip", "server_cpu_us", "  server CPU per task (us)", False, 0),
    ("tasks", "create_rate", "create N running tasks, 200 in flight (/s)", True, 0),
    ("tasks", "create_cpu_us", "  server CPU per create (us)", False, 0),
    ("tasks", "rss_per_task_kib", "server RSS per running task (KiB)", False, 1),
    ("tasks", "get_p50_ms", "tasks/get p50 (ms)", False, 3),
    ("tasks", "get_p99_ms", "tasks/get p99 (ms)", False, 3),
    ("tasks", "cancel_s", "cancel all N, 200 in flight (s)", False, 2),
    ("tasks", "cancel_s_per_10k", "  cancel time per 10,000 tasks (s)", False, 2),
    ("tasks", "cancel_cpu_us", "  server CPU per cancel (us)", False, 0),
    ("tasks", "tasks", "  N", True, 0),
]


def median(results: list[dict[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in results if key in r]
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]],
           errors: dict[tuple[str, str], list[str]]) -> str:
    shown = [s for s in srvs if s.missing is None]
    head = "| workload | " + " | ".join(s.label for s in shown) + " | vs TS SDK | vs mcp 1.30 " \
        "| vs echo floor |"
    lines = [head, "|" + "---|" * (len(shown) + 4)]
    med = {(s.key, w, k): median(out.get((s.key, w), []), k)
           for s in shown for w, k, *_ in ROWS}

    def ratio(w: str, k: str, higher: bool, other: str) -> str:
        ours, theirs = med.get(("trio", w, k)), med.get((other, w, k))
        if not ours or not theirs or k == "tasks" or (k == "cancel_s" and other == "mcp130"):
            return ""
        return f"{(ours / theirs if higher else theirs / ours):.2f}x"

    for w, k, label, higher, digits in ROWS:
        cells = [fmt(med[(s.key, w, k)], digits) for s in shown]
        lines.append(f"| {label} | " + " | ".join(cells) + " | "
                     + " | ".join(ratio(w, k, higher, o) for o in ("ts", "mcp130", "floor"))
                     + " |")
    lines.append("")
    lines.append("Ratios: > 1 means trio-mcp is better. mcp 1.30 runs N = its own task count "
                 "(the N row); cancel time compares per 10,000 tasks in the targets.")
    lines.extend(problem_lines(errors, srvs))
    lines.append("")
    lines.append(targets(med))
    return "\n".join(lines)


def targets(med: dict[tuple[str, str, str], float | None]) -> str:
    def r(a: tuple[str, str, str], b: tuple[str, str, str], higher: bool) -> float | None:
        x, y = med.get(a), med.get(b)
        if not x or not y:
            return None
        return x / y if higher else y / x

    checks = [
        ("sequential plain >= 1.0x TS SDK",
         r(("trio", "plain-seq", "rate"), ("ts", "plain-seq", "rate"), True), 1.0),
        ("sequential plain >= 0.75x echo floor",
         r(("trio", "plain-seq", "rate"), ("floor", "plain-seq", "rate"), True), 0.75),
        ("200 in flight >= 1.0x TS SDK",
         r(("trio", "plain-200", "rate"), ("ts", "plain-200", "rate"), True), 1.0),
        ("task call + tasks/result >= 10x mcp 1.30",
         r(("trio", "task-roundtrip", "rate"), ("mcp130", "task-roundtrip", "rate"), True), 10),
        ("create rate >= 1.0x TS SDK",
         r(("trio", "tasks", "create_rate"), ("ts", "tasks", "create_rate"), True), 1.0),
        ("RSS per task <= TS SDK (ratio >= 1)",
         r(("trio", "tasks", "rss_per_task_kib"), ("ts", "tasks", "rss_per_task_kib"), False),
         1.0),
        ("cancel-all time <= TS SDK (ratio >= 1)",
         r(("trio", "tasks", "cancel_s_per_10k"), ("ts", "tasks", "cancel_s_per_10k"), False),
         1.0),
    ]
    out = ["| target | ratio | |", "|---|---|---|"]
    for name, value, goal in checks:
        verdict = "-" if value is None else ("**hit**" if value >= goal else "**miss**")
        out.append(f"| {name} | {'-' if value is None else f'{value:.2f}x'} | {verdict} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serveronly",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--tasks-mcp", type=int, default=2_000,
                        help="tasks for mcp 1.30 (its store is O(n) per call)")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--only", action="append", choices=WORKLOADS)
    parser.add_argument("--servers", help="comma-separated keys: trio,ts,mcp130,floor")
    parser.add_argument("--trio-server", choices=("example", "bench"), default="example")
    parser.add_argument("--echo-tool", default="echo",
                        help="trio-mcp's tool for the plain workloads (bench server: "
                             "echo_async, an async def echo)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--json", metavar="PATH", help="write every raw result to PATH")
    parser.add_argument("--from-json", metavar="PATH",
                        help="print the table of an earlier run's --json file (runs nothing)")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            raw = json.load(f)
        loaded = {tuple(key.split(" ", 1)): v for key, v in raw.items()}
        known = servers(args.tasks, args.tasks_mcp, args.trio_server)
        print(report(known, loaded, {}))  # type: ignore[arg-type]
        return 0
    p = {"warmup": 200, "task_warmup": 50, "duration": args.duration, "window": 200,
         "tasks": args.tasks, "gets": 1_000}
    if args.quick:
        p = {"warmup": 5, "task_warmup": 2, "duration": 0.2, "window": 20, "tasks": 50,
             "gets": 10}
        args.reps, args.tasks_mcp = 1, 50
    srvs = servers(p["tasks"], args.tasks_mcp, args.trio_server)
    for srv in srvs:
        if srv.key == "trio":
            srv.echo = args.echo_tool
    if args.servers:
        keep = set(args.servers.split(","))
        srvs = [s for s in srvs if s.key in keep]
    workloads = [w for w in WORKLOADS if not args.only or w in args.only]
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    started = time.monotonic()
    load0 = os.getloadavg()
    run_rotating(srvs, workloads, args.reps, p, out, errors)
    print(run_header("Server-only comparison (one stdlib-Python NDJSON client drives every server)",
                     f"python -m bench.serveronly {' '.join(argv or sys.argv[1:])}", args.reps, load0,
                     time.monotonic() - started))
    print(report(srvs, out, errors))
    if args.json:
        write_raw(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
