"""Streamable HTTP, server-only: ONE cheap client drives every server, so the ratios are the servers'.

``python -m bench.http [--reps 3] [--duration 2] [--only NAME] [--client-procs 2] [--json PATH]``
``python -m bench.http --quick [--only trio-mcp]``   (a smoke test, not a measurement)

The client (``bench/http_client.py``) is raw HTTP/1.1 keep-alive on plain sockets:
request bytes built once, a response parsed just enough (status line, headers,
``Content-Length`` or chunked body, the ``data:`` lines of an SSE answer); its own CPU
per request is shown beside each server's. Servers, each a fresh process per run on
127.0.0.1 (a server that is not installed is shown as n/a with how to install it):

* ``trio-mcp``: ``examples/task_server.py --http 127.0.0.1:PORT --http-server hypercorn``
  (SSE answers, its default); for the JSON rows the same App with ``json_response=True``
  (``bench/peers/http_trio.py --json-response``), on hypercorn's Trio worker (the
  rows of earlier sessions). Plain calls go to ``echo``, an
  ``inline=True`` plain ``def`` (runs on the event loop, no Trio task); the task is
  ``sleep {seconds: 0}`` (``task_support="optional"``, completes at once);
* ``floor``: the HTTP floor: a fixed-answer ASGI app (a constant JSON-RPC result) on
  the same hypercorn Trio worker with ``serve_http``'s configuration
  (``bench/peers/http_trio.py --floor [--sse]``): what hypercorn alone costs;
* ``ts``: the TypeScript SDK 1.32.2, ``StreamableHTTPServerTransport`` on node's http
  (``bench/peers/ts_http_server.mjs [--json]``: ``echo``; ``noop``, a task finishing at
  once); it speaks up to 2025-11-25;
* ``mcp230``: mcp 2.3.0's ``MCPServer`` (``.interop/mcp230``; ``streamable-http`` on
  uvicorn, ``echo``); both eras on one endpoint, no tasks;
* ``mcp130``: mcp 1.30.0's low-level ``Server`` with tasks behind
  ``StreamableHTTPSessionManager`` on uvicorn (``.interop/mcp130``; ``echo``, ``noop``);
* on llhttp (hypercorn parses HTTP in pure Python, node and uvicorn in C): ``trio-mcp-c``,
  the same App and modes as ``trio-mcp`` on ``serve_http``'s default server, trio-mcp's
  own HTTP/1.1 server on llhttp (``--http-server llhttp``; the ``fast`` extra's
  ``httptools``), and ``floor-c``, the fixed answer on that server
  (``bench/peers/http_trio.py --floor --server llhttp``).

Workloads (each for ``--duration`` s after a warm-up, one request in flight per connection):

* ``seq-json``: sequential ``tools/call echo`` on one 2025-11-25 session (after
  ``initialize``), JSON answers (every server started in its JSON-answer mode);
* ``seq-sse``: the same, SSE answers (every server in its default mode);
* ``c50``: 50 connections, a session each, each calling in a closed loop, spread over
  ``--client-procs`` client processes (SSE answers: the default mode);
* ``task-2025``: ``tools/call`` with ``task: {ttl}`` of the zero-length task, then
  ``tasks/result``;
* ``modern``: a stateless 2026-07-28 ``tools/call echo`` (``MCP-Protocol-Version``,
  ``Mcp-Method``, ``Mcp-Name`` headers; ``_meta`` with protocolVersion,
  clientCapabilities, clientInfo in the body); no session;
* ``task-2026``: the tasks extension declared in ``clientCapabilities.extensions``:
  ``tools/call`` answered ``resultType: "task"``, then ``tasks/get`` (``Mcp-Name``: the
  taskId) at once, again, until ``completed``.

Server CPU per request comes from ``/proc/PID/stat`` (utime + stime) around the measured
window; servers take turns within each repetition (the order rotates); medians of
``--reps``. ``--only`` (repeatable) takes server keys (trio-mcp, floor, ts, mcp230,
mcp130) and workload keys.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._common import free_port, percentile, run_header, wait_for_port, write_raw  # noqa: E402
from bench._report import codec, machine  # noqa: E402
from bench._runner import (  # noqa: E402
    _node_modules,
    _python_with_mcp,
    rotate,
)
from bench.http_client import Conn, setup, timed  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
WORKLOADS = ("seq-json", "seq-sse", "c50", "task-2025", "modern", "task-2026")
TITLES = {
    "seq-json": "1. sequential tools/call, one 2025-11-25 session, JSON answers",
    "seq-sse": "2. sequential tools/call, one 2025-11-25 session, SSE answers",
    "c50": "3. {conns} concurrent clients ({procs} client processes), a session each, SSE answers",
    "task-2025": "4. 2025-11-25 task: tools/call + task, then tasks/result",
    "modern": "5. 2026-07-28 stateless tools/call",
    "task-2026": "6. 2026-07-28 task: tools/call -> resultType task, tasks/get until completed",
}
#: workload -> the answer mode the servers are started in
JSON_MODE = {"seq-json"}
PEER_HELP = "bash bench/setup.sh, or the interop venvs of tests/interop/README.md"


@dataclass
class Server:
    key: str
    label: str
    cmd: list[str] = field(default_factory=list)  # + [PORT] (+ the JSON flag)
    json_flag: list[str] = field(default_factory=lambda: ["--json"])
    env: dict[str, str] = field(default_factory=dict)
    path: str = "/mcp"
    spec: dict[str, Any] = field(default_factory=lambda: {"echo": "echo", "task": ["noop", {}]})
    unsupported: dict[str, str] = field(default_factory=dict)
    missing: str | None = None

    def argv(self, workload: str, port: int) -> list[str]:
        json_mode = workload in JSON_MODE
        if self.key in ("trio-mcp", "trio-mcp-c"):
            server = "hypercorn" if self.key == "trio-mcp" else "llhttp"
            if json_mode:
                return [sys.executable, os.path.join(ROOT, "bench/peers/http_trio.py"), str(port),
                        "--json-response", "--server", server]
            return [sys.executable, os.path.join(ROOT, "examples/task_server.py"), "--http",
                    f"127.0.0.1:{port}", "--http-server", server]
        if self.key in ("floor", "floor-c"):
            server = "hypercorn" if self.key == "floor" else "llhttp"
            return [*self.cmd, str(port), "--floor", "--server", server,
                    *([] if json_mode or workload == "modern" else ["--sse"])]
        return [*self.cmd, str(port), *(self.json_flag if json_mode else [])]


def servers() -> list[Server]:
    py = sys.executable
    trio = Server("trio-mcp", "trio-mcp on hypercorn", env={"PYTHONPATH": ROOT},
                  spec={"echo": "echo", "task": ["sleep", {"seconds": 0}]})
    floor = Server("floor", "HTTP floor (hypercorn)", [py, os.path.join(ROOT, "bench/peers/http_trio.py")],
                   env={"PYTHONPATH": ROOT},
                   unsupported={w: "the floor answers one constant result: no tasks"
                                for w in ("task-2025", "task-2026")})
    ts = Server("ts", "TS SDK", unsupported={
        "modern": "the TS SDK 1.x speaks up to 2025-11-25",
        "task-2026": "the TS SDK 1.x speaks up to 2025-11-25"})
    found = _node_modules()
    if found is None:
        ts.missing = f"not installed ({PEER_HELP})"
    else:
        modules, version = found
        ts.label = f"TS SDK {version}"
        ts.cmd = ["node", os.path.join(ROOT, "bench/peers/ts_http_server.mjs")]
        ts.env = {"BENCH_NODE_MODULES": str(modules)}
    no_tasks = {w: "the floor answers one constant result: no tasks"
                for w in ("task-2025", "task-2026")}
    floor_c = Server("floor-c", "HTTP floor (llhttp)",
                     [py, os.path.join(ROOT, "bench/peers/http_trio.py")],
                     env={"PYTHONPATH": ROOT}, unsupported=no_tasks)
    trio_c = Server("trio-mcp-c", "trio-mcp on llhttp", env={"PYTHONPATH": ROOT},
                    spec=trio.spec)
    if importlib.util.find_spec("httptools") is None:
        floor_c.missing = trio_c.missing = (
            "httptools not installed (pip install 'trio-mcp[fast]')")
    out = [trio, floor, ts]
    for key, major, venvs, unsupported in (
        ("mcp230", 2, [".interop/mcp230", ".bench/mcp2"],
         {"task-2025": "mcp 2.x has no tasks", "task-2026": "mcp 2.x has no tasks"}),
        ("mcp130", 1, [".interop/mcp130", ".bench/mcp130"],
         {"modern": "mcp 1.30 speaks up to 2025-11-25",
          "task-2026": "mcp 1.30 speaks up to 2025-11-25"}),
    ):
        srv = Server(key, f"mcp {major}.x", unsupported=unsupported)
        got = _python_with_mcp([Path(ROOT) / v / "bin/python" for v in venvs], major)
        if got is None:
            srv.missing = f"not installed ({PEER_HELP})"
        else:
            python, version = got
            srv.label = f"mcp {version}"
            srv.cmd = [str(python), os.path.join(ROOT, "bench/peers/mcp_http_server.py")]
            if major == 1:
                srv.path = "/mcp/"  # Starlette's Mount redirects /mcp to /mcp/
        out.append(srv)
    return [*out, trio_c, floor_c]


# --- one run --------------------------------------------------------------------------


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Running:
    """A server process on a free port, for the ``with`` block."""

    def __init__(self, srv: Server, workload: str) -> None:
        self.port = free_port()
        env = {**os.environ, **srv.env, "PYTHONUNBUFFERED": "1"}
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by __exit__)
        self.proc = subprocess.Popen(srv.argv(workload, self.port), cwd=ROOT, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def __enter__(self) -> Running:
        try:
            wait_for_port(self.port, 30)
        except OSError:
            self.__exit__()
            raise
        return self

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-300:].decode(errors="replace")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if exc and exc[0] is not None:
            print(f"  server stderr: {self.stderr_tail()}", file=sys.stderr)
        self.log.close()


def summarize(n: int, elapsed: float, lat_ms: list[float], client_cpu: float,
              srv_cpu: float) -> dict[str, Any]:
    return {"rate": n / elapsed, "n": n, "p50_ms": percentile(lat_ms, 50),
            "p99_ms": percentile(lat_ms, 99), "server_cpu_us": srv_cpu / n * 1e6,
            "client_cpu_us": client_cpu / n * 1e6}


def run_sequential(srv: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    with Running(srv, workload) as running:
        conn = Conn(running.port, srv.path)
        try:
            once = setup(conn, workload, srv.spec)
            warmup = p["warmup"] if workload in ("seq-json", "seq-sse", "modern") else p["task_warmup"]
            for _ in range(warmup):
                once()
            cpu0 = server_cpu(running.proc.pid)
            got = timed(once, 0, p["duration"])
            cpu1 = server_cpu(running.proc.pid)
        finally:
            conn.close()
    return summarize(got["n"], got["elapsed"], [x * 1e3 for x in got["lat"]],
                     got["client_cpu"], cpu1 - cpu0)


def run_concurrent(srv: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    conns, procs = p["conns"], max(1, min(p["procs"], p["conns"]))
    with Running(srv, workload) as running:
        workers = []
        try:
            for i in range(procs):
                share = conns // procs + (1 if i < conns % procs else 0)
                params = {"port": running.port, "path": srv.path, "conns": share,
                          "workload": workload, "spec": srv.spec, "warmup": p["c_warmup"],
                          "duration": p["duration"]}
                workers.append(subprocess.Popen(
                    [sys.executable, "-m", "bench.http_client", "worker", json.dumps(params)],
                    cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            for w in workers:
                assert w.stdout is not None
                if w.stdout.readline().strip() != "ready":
                    raise RuntimeError("a client worker did not start")
            cpu0 = server_cpu(running.proc.pid)
            for w in workers:
                assert w.stdin is not None
                w.stdin.write("go\n")
                w.stdin.flush()
            results = []
            for w in workers:
                assert w.stdout is not None
                line = w.stdout.readline()
                while line.strip() == "ready":
                    line = w.stdout.readline()
                results.append(json.loads(line))
            cpu1 = server_cpu(running.proc.pid)
        finally:
            for w in workers:
                w.kill()
                w.wait()
    for r in results:
        if "error" in r:
            raise RuntimeError(r["error"])
    lat = [x for r in results for x in r["lat"]]
    n = sum(r["n"] for r in results)
    return summarize(n, max(r["elapsed"] for r in results), lat,
                     sum(r["client_cpu"] for r in results), cpu1 - cpu0)


def run_one(srv: Server, workload: str, p: dict[str, Any]) -> dict[str, Any]:
    if workload == "c50":
        return run_concurrent(srv, workload, p)
    return run_sequential(srv, workload, p)


def run_rotating(srvs: list[Server], workloads: list[str], reps: int, p: dict[str, Any],
                 out: dict[tuple[str, str], list[dict[str, Any]]],
                 errors: dict[tuple[str, str], list[str]]) -> None:
    """Every workload on every server ``reps`` times, taking turns (the order rotates)."""

    def status(result: dict[str, Any]) -> str:
        return (f" {result['rate']:8,.0f}/s  server {result['server_cpu_us']:5.0f} us"
                f"  client {result['client_cpu_us']:4.0f} us")

    rotate(srvs, workloads, reps, lambda s, w: w not in s.unsupported,
           lambda s, w: run_one(s, w, p), out, errors, status=status, width=9)


# --- the report -----------------------------------------------------------------------

METRICS = [  # key, label, higher is better, digits
    ("rate", "{unit}/s", True, 0),
    ("p50_ms", "p50 latency (ms)", False, 3),
    ("p99_ms", "p99 latency (ms)", False, 3),
    ("server_cpu_us", "server CPU per {one} (us)", False, 0),
    ("client_cpu_us", "client CPU per {one} (us)", None, 0),
]
VERSUS = (("floor", "vs floor"), ("ts", "vs TS SDK"), ("mcp230", "vs mcp 2.3"),
          ("mcp130", "vs mcp 1.30"))


def _median(results: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in results if key in r]
    return statistics.median(values) if values else None


def fmt(value: float | None, digits: int) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:,.{digits}f}"


def report(srvs: list[Server], out: dict[tuple[str, str], list[dict[str, Any]]],
           errors: dict[tuple[str, str], list[str]], workloads: list[str],
           p: dict[str, Any]) -> str:
    shown = list(srvs)
    keys = {s.key for s in shown}
    versus = [(k, h) for k, h in VERSUS if k in keys]
    lines = ["| workload | metric | " + " | ".join(s.label for s in shown) + " | "
             + " | ".join(h for _, h in versus) + " |",
             "|" + "---|" * (len(shown) + len(versus) + 2)]
    notes: list[str] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    med = {(s.key, w, k): _median(out.get((s.key, w), []), k)
           for s in shown for w in workloads for k, *_ in METRICS}
    for w in workloads:
        task = w.startswith("task")
        unit, one = ("round trips", "round trip") if task else ("calls", "call")
        title = TITLES[w].format(conns=p["conns"], procs=p["procs"])
        for i, (k, label, higher, digits) in enumerate(METRICS):
            cells = []
            for s in shown:
                if s.missing is not None:
                    cells.append(f"n/a {note(f'{s.label}: {s.missing}')}")
                elif w in s.unsupported:
                    cells.append(f"n/a {note(s.unsupported[w])}")
                elif (s.key, w) not in out:
                    errs = errors.get((s.key, w), ["not run"])
                    cells.append(f"error {note(f'{s.label}, {w}: {errs[-1]}')}")
                else:
                    cells.append(fmt(med[(s.key, w, k)], digits))
            ratios = []
            for other, _ in versus:
                ours, theirs = med.get(("trio-mcp", w, k)), med.get((other, w, k))
                if higher is None or not ours or not theirs:
                    ratios.append("")
                else:
                    ratios.append(f"{(ours / theirs if higher else theirs / ours):.2f}x")
            lines.append(f"| {title if i == 0 else ''} | {label.format(unit=unit, one=one)} | "
                         + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines.append("")
    lines.append("Ratios: > 1 means trio-mcp is better (more per second, less CPU or latency). "
                 "The client's CPU per request is that of the one client every server shares.")
    for i, text in enumerate(notes, 1):
        lines.append(f"- [{i}] {text}")
    lines.append("")
    lines.extend(summary(med, workloads))
    return "\n".join(lines)


def summary(med: dict[tuple[str, str, str], float | None], workloads: list[str]) -> list[str]:
    """What the MCP layer costs above hypercorn, modern against legacy, the issue's targets."""
    def m(key: str, w: str, k: str) -> float | None:
        return med.get((key, w, k))

    out = []
    if m("trio-mcp", workloads[0], "rate") is not None and m("floor", workloads[0], "rate"):
        out = ["What trio-mcp's MCP layer costs above hypercorn (server CPU per call, trio-mcp "
               "minus the floor):", ""]

    for w in ("seq-json", "seq-sse", "c50", "modern"):
        ours, floor = m("trio-mcp", w, "server_cpu_us"), m("floor", w, "server_cpu_us")
        if w in workloads and ours is not None and floor is not None:
            out.append(f"- {w}: {ours:,.0f} - {floor:,.0f} = {ours - floor:,.0f} us per call "
                       f"({ours / floor:.2f}x the floor's CPU)")
    legacy, modern = m("trio-mcp", "seq-json", "rate"), m("trio-mcp", "modern", "rate")
    if legacy and modern:
        lc, mc = m("trio-mcp", "seq-json", "server_cpu_us"), m("trio-mcp", "modern", "server_cpu_us")
        out.append(f"- modern stateless call / legacy session call (JSON answers): "
                   f"{modern / legacy:.2f}x the rate, {(mc or 0) / (lc or 1):.2f}x the server CPU")
    if out:
        out.append("")
    out += ["Targets (issue 26), ratios of this run:", ""]

    def target(label: str, w: str, other: str, goal: float) -> None:
        if w not in workloads:
            return
        ours, theirs = m("trio-mcp", w, "rate"), m(other, w, "rate")
        if not ours or not theirs:
            out.append(f"- n/a  {label}: not measured")
            return
        got = ours / theirs
        out.append(f"- {'HIT ' if got >= goal else 'MISS'} {label}: {got:.2f}x (goal >= {goal:g}x)")

    for w, name in (("seq-json", "sequential, JSON"), ("seq-sse", "sequential, SSE"),
                    ("c50", "50 clients")):
        target(f"plain calls ({name}) >= 0.85x the HTTP floor", w, "floor", 0.85)
        target(f"plain calls ({name}) >= 1.0x the TS SDK", w, "ts", 1.0)
    target("2025 task round trips >= 1.0x the TS SDK", "task-2025", "ts", 1.0)
    if "modern" in workloads and legacy and modern:
        got = modern / legacy
        out.append(f"- {'HIT ' if got >= 0.9 else 'MISS'} modern stateless call within 10% of "
                   f"the legacy one (JSON answers): {got:.2f}x (goal >= 0.9x)")
    return out + llhttp_targets(med, workloads) + beyond(med, workloads)


def llhttp_targets(med: dict[tuple[str, str, str], float | None],
                   workloads: list[str]) -> list[str]:
    """Issue 33's targets: trio-mcp on its llhttp server against the TS SDK and mcp 2.3."""
    out: list[str] = []

    def rate(key: str, w: str) -> float | None:
        return med.get((key, w, "rate")) if w in workloads else None

    def target(label: str, got: float | None, goal: float) -> None:
        if got is None:
            out.append(f"- n/a  {label}: not measured")
        else:
            out.append(f"- {'HIT ' if got >= goal else 'MISS'} {label}: {got:.2f}x "
                       f"(goal >= {goal:g}x)")

    def ratio(w: str, other: str) -> float | None:
        ours, theirs = rate("trio-mcp-c", w), rate(other, w)
        return ours / theirs if ours and theirs else None

    if not any(rate("trio-mcp-c", w) for w in WORKLOADS):
        return out
    out += ["", "Targets (issue 33: trio-mcp on llhttp), ratios of this run:", ""]
    target("sequential JSON >= 3.0x the TS SDK", ratio("seq-json", "ts"), 3.0)
    target("sequential SSE >= 3.0x the TS SDK", ratio("seq-sse", "ts"), 3.0)
    target("50 clients >= 1.8x the TS SDK", ratio("c50", "ts"), 1.8)
    target("2025 task round trip >= 2.0x the TS SDK", ratio("task-2025", "ts"), 2.0)
    target("2026-07-28 stateless call >= 3.0x mcp 2.3.0", ratio("modern", "mcp230"), 3.0)
    legacy, modern = rate("trio-mcp-c", "seq-json"), rate("trio-mcp-c", "modern")
    target("2026-07-28 stateless call within 10% of the 2025 call (JSON)",
           modern / legacy if modern and legacy else None, 0.9)
    return out


def beyond(med: dict[tuple[str, str, str], float | None], workloads: list[str]) -> list[str]:
    """Hypercorn (h11, pure Python) against a Trio server on llhttp (C), floor and app."""
    out: list[str] = []
    for w in workloads:
        cpu = {k: med.get((k, w, "server_cpu_us")) for k in ("floor", "floor-c", "trio-mcp",
                                                             "trio-mcp-c", "ts")}
        rate = {k: med.get((k, w, "rate")) for k in cpu}
        if not cpu["trio-mcp-c"] and not cpu["floor-c"]:
            continue
        parts = []
        if cpu["floor"] and cpu["floor-c"] and rate["floor"] and rate["floor-c"]:
            parts.append(f"floor {cpu['floor-c']:,.0f} us vs hypercorn's {cpu['floor']:,.0f} "
                         f"({rate['floor-c'] / rate['floor']:.2f}x the rate)")
        if cpu["trio-mcp"] and cpu["trio-mcp-c"] and rate["trio-mcp"] and rate["trio-mcp-c"]:
            parts.append(f"trio-mcp {cpu['trio-mcp-c']:,.0f} us on llhttp vs {cpu['trio-mcp']:,.0f} on "
                         f"hypercorn ({rate['trio-mcp-c'] / rate['trio-mcp']:.2f}x the rate)")
        if cpu["trio-mcp-c"] and cpu["floor-c"] and rate["trio-mcp-c"] and rate["floor-c"]:
            parts.append(f"MCP layer {cpu['trio-mcp-c'] - cpu['floor-c']:,.0f} us above its "
                         f"floor ({rate['trio-mcp-c'] / rate['floor-c']:.2f}x the floor's rate)")
        if rate["trio-mcp-c"] and rate["ts"]:
            parts.append(f"{rate['trio-mcp-c'] / rate['ts']:.2f}x the TS SDK's rate")
        if parts:
            out.append(f"- {w}: " + "; ".join(parts))
    if out:
        out = ["", "llhttp against hypercorn (server CPU per request; trio-mcp's own HTTP/1.1 "
               "server, serve_http's default with httptools):", "", *out]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="a server (trio-mcp, trio-mcp-c, floor, floor-c, ts, mcp230, "
                             "mcp130) or a workload "
                             f"({', '.join(WORKLOADS)}); repeatable")
    parser.add_argument("--clients", type=int, default=50, help="connections of the c50 rows")
    parser.add_argument("--client-procs", type=int, default=2,
                        help="client processes sharing those connections")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--json", metavar="PATH", help="write every raw result to PATH")
    parser.add_argument("--instr", type=int, metavar="N", default=0,
                        help="instead: the Python servers' instructions per request under "
                             "callgrind, N and 3N requests (bench/http_instr.py)")
    args = parser.parse_args(argv)
    # Stopped with SIGTERM: unwind, so the `with Running` blocks stop their servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    srvs = servers()
    names = set(args.only or ())
    unknown = names - {s.key for s in srvs} - set(WORKLOADS)
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}")
    if names & {s.key for s in srvs}:
        srvs = [s for s in srvs if s.key in names]
    workloads = [w for w in WORKLOADS if w in names] or list(WORKLOADS)
    p = {"warmup": 200, "task_warmup": 50, "c_warmup": 10, "duration": args.duration,
         "conns": args.clients, "procs": args.client_procs}
    if args.quick:
        p.update(warmup=5, task_warmup=2, c_warmup=1, duration=0.2)
        args.reps = 1
    if args.instr:
        from bench.http_instr import report as instr_report

        print(instr_report(srvs, workloads, args.instr))
        return 0
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], list[str]] = {}
    started, load0 = time.monotonic(), os.getloadavg()
    run_rotating(srvs, workloads, args.reps, p, out, errors)
    print(run_header("Streamable HTTP, server-only (one raw-socket HTTP/1.1 client; bench.http)",
                     f"python -m bench.http {' '.join(argv if argv is not None else sys.argv[1:])}",
                     args.reps, load0, time.monotonic() - started))
    print("\n".join(machine()))
    print(f"- trio-mcp codec: {codec()}; {args.duration if not args.quick else p['duration']} s "
          "per run\n")
    print(report(srvs, out, errors, workloads, p))
    if args.json:
        write_raw(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
