"""``python -m bench.http --instr``: server instructions per request under callgrind (load-proof).

Each Python server of ``bench.http`` (trio-mcp, the hypercorn floor, and the
llhttp pair) runs under ``valgrind --tool=callgrind`` twice per sequential
workload, driven by ``bench.http``'s raw-socket client with ``n`` and ``3 n``
requests after the same warm-up; (I(3n) - I(n)) / 2n is what the server's
process spends per request, start-up and session set-up cancelled out. It
counts user-space instructions only (the kernel's socket work is not in it),
and other load on the machine does not move it: the number to compare before
and after a change, and trio-mcp against its floor on the same server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

from bench._common import free_port, wait_for_port
from bench.http_client import Conn, setup

#: The servers that run in CPython (node is not counted the same way).
PYTHON_SERVERS = ("trio-mcp", "floor", "trio-mcp-c", "floor-c")
#: The workloads one client drives one request at a time.
SEQUENTIAL = ("seq-json", "seq-sse", "task-2025", "modern", "task-2026")


def _total(srv: Any, workload: str, count: int) -> int:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                *srv.argv(workload, port)]
        env = {**os.environ, **srv.env, "PYTHONHASHSEED": "0"}
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, 300)
            conn = Conn(port, srv.path)
            once = setup(conn, workload, srv.spec)
            for _ in range(20):
                once()
            for _ in range(count):
                once()
            conn.close()
        finally:
            proc.send_signal(signal.SIGINT)  # Trio unwinds; callgrind writes its file
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with open(out, encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f
                        if line.startswith(("summary:", "totals:")))


def per_request(srv: Any, workload: str, n: int) -> float:
    """(I(3n) - I(n)) / 2n for ``srv`` on ``workload``."""
    low, high = _total(srv, workload, n), _total(srv, workload, 3 * n)
    return (high - low) / (2 * n)


def report(srvs: list[Any], workloads: list[str], n: int) -> str:
    """The table: instructions per request, and trio-mcp's over its floor on each server."""
    shown = [s for s in srvs if s.key in PYTHON_SERVERS and s.missing is None]
    rows = [w for w in workloads if w in SEQUENTIAL]
    lines = ["| workload (server instructions per request) | "
             + " | ".join(s.label for s in shown) + " |",
             "|" + "---|" * (len(shown) + 1)]
    got: dict[tuple[str, str], float] = {}
    for w in rows:
        cells = []
        for s in shown:
            if w in s.unsupported:
                cells.append("n/a")
                continue
            value = got[(s.key, w)] = per_request(s, w, n)
            cells.append(f"{value / 1000:,.1f}k")
            print(f"{w:<10} {s.label:<28} {value / 1000:8.1f}k", file=sys.stderr, flush=True)
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    notes = []
    for ours, floor in (("trio-mcp", "floor"), ("trio-mcp-c", "floor-c")):
        for w in rows:
            if (ours, w) in got and (floor, w) in got:
                mcp = got[(ours, w)] - got[(floor, w)]
                notes.append(f"- {w}, {ours}: the MCP layer {mcp / 1000:,.1f}k above its floor "
                             f"({got[(ours, w)] / got[(floor, w)]:.2f}x the floor's)")
    return "\n".join([*lines, "", *notes])
