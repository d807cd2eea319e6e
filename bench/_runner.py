"""Run the workloads against every implementation, alternating, and collect medians.

Each run is one fresh process pair: the implementation's own client driver
spawns the same implementation's server (over stdio, or WebSocket for the
``websocket`` workload), runs one workload, and prints one JSON line. The
harness only starts drivers and reads their JSON, so every implementation is
timed the same way, by its own client, in its own language.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEERS = BENCH / "peers"

TRIO = "trio-mcp"
TS = "ts-sdk"
MCP130 = "mcp-1.30"
MCP2 = "mcp-2.x"
FLOOR = "echo-floor"

SETUP_HINT = "bash bench/setup.sh"


@dataclass
class Impl:
    """One implementation: how to run its client driver and its server."""

    key: str
    label: str
    client: list[str] = field(default_factory=list)
    server: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    missing: str | None = None  # why it cannot run, and how to install it
    unsupported: dict[str, str] = field(default_factory=dict)  # workload -> why not
    #: Driver workload -> at most this many repetitions (for runs that take minutes).
    max_reps: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A workload as shown in the table; ``driver`` is what the drivers run."""

    key: str
    title: str
    driver: str


WORKLOADS = [
    Workload("plain-seq", "1. sequential plain tools/call", "plain-seq"),
    Workload("plain-200", "2. 200 concurrent plain calls", "plain-concurrent"),
    Workload("task-roundtrip", "3. task call + tasks/result (zero-length task)", "task-roundtrip"),
    Workload("tasks-10k", "4. 10,000 running tasks", "scale"),
    Workload("tasks-list", "5. tasks/list walk", "scale"),
    Workload("websocket", "6. WebSocket: clients x tasks", "ws"),
]
WORKLOAD_KEYS = [w.key for w in WORKLOADS]


def sizes(quick: bool) -> dict[str, dict[str, Any]]:
    """Parameters each driver gets, per driver workload."""
    if quick:
        timed = {"warmup": 5, "duration": 0.2, "concurrency": 20}
        return {
            "plain-seq": timed,
            "plain-concurrent": timed,
            "task-roundtrip": timed,
            "scale": {"warmup": 5, "tasks": 60, "small": 20, "window": 20,
                      "walks_small": 1, "walks_large": 1, "gets": 20},
            "ws": {"clients": 3, "per_client": 5},
        }
    timed = {"warmup": 200, "duration": 1.5, "concurrency": 200}
    return {
        "plain-seq": timed,
        "plain-concurrent": timed,
        "task-roundtrip": timed,
        "scale": {"warmup": 50, "tasks": 10_000, "small": 100, "window": 200,
                  "walks_small": 5, "walks_large": 1, "gets": 1_000},
        "ws": {"clients": 50, "per_client": 100},
    }


# --- discovering the implementations -------------------------------------------------


def _python_with_mcp(candidates: list[Path], major: int) -> tuple[Path, str] | None:
    for python in candidates:
        if not python.exists():
            continue
        try:
            out = subprocess.run(
                [str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout.strip()
        except (subprocess.SubprocessError, OSError):
            continue
        if out.split(".")[0] == str(major):
            return python, out
    return None


def _node_modules() -> tuple[Path, str] | None:
    for candidate in (ROOT / "tests/interop/node/node_modules", ROOT / ".bench/node/node_modules"):
        package = candidate / "@modelcontextprotocol/sdk/package.json"
        if package.exists() and (candidate / "zod/package.json").exists():
            return candidate, json.loads(package.read_text())["version"]
    return None


def discover(skip_peers: bool) -> list[Impl]:
    """Every implementation, with ``missing`` set for those that cannot run."""
    py = sys.executable
    trio_env = {"PYTHONPATH": str(ROOT)}
    impls = [
        Impl(
            TRIO, "trio-mcp",
            client=[py, "-m", "bench.trio_client"],
            server=[py, "-m", "bench.trio_server"],
            env=trio_env,
        ),
    ]
    skipped = "skipped (--skip-peers)"

    ts = Impl(TS, "TS SDK", unsupported={
        "websocket": "n/a (the TS SDK has a WebSocket client but no server)",
    })
    found = None if skip_peers else _node_modules()
    if skip_peers:
        ts.missing = skipped
    elif shutil.which("node") is None:
        ts.missing = f"n/a (not installed: Node.js >= 20 on PATH, then {SETUP_HINT})"
    elif found is None:
        ts.missing = f"n/a (not installed: {SETUP_HINT}, or npm ci in tests/interop/node)"
    else:
        modules, version = found
        ts.label = f"TS SDK {version}"
        ts.client = ["node", str(PEERS / "ts_client.mjs")]
        ts.server = ["node", str(PEERS / "ts_server.mjs")]
        ts.env = {"BENCH_NODE_MODULES": str(modules)}
    impls.append(ts)

    for key, major, venvs, hint in (
        (MCP130, 1, [ROOT / ".interop/mcp130", ROOT / ".bench/mcp130"], "mcp==1.30.0"),
        (MCP2, 2, [ROOT / ".bench/mcp2"], "mcp 2.x"),
    ):
        impl = Impl(key, "mcp 1.30" if major == 1 else "mcp 2.x")
        if major == 1:
            # Its InMemoryTaskStore scans every task on every call (expiry), so
            # 10,000 tasks take minutes: once per full run is all the budget allows.
            impl.max_reps = {"scale": 1}
        if major == 2:
            impl.unsupported = {
                w: "n/a (mcp 2.x removed tasks)"
                for w in ("task-roundtrip", "tasks-10k", "tasks-list", "websocket")
            }
        found_py = None if skip_peers else _python_with_mcp(
            [venv / "bin/python" for venv in venvs], major
        )
        if skip_peers:
            impl.missing = skipped
        elif found_py is None:
            impl.missing = f"n/a (not installed: {SETUP_HINT} puts {hint} in .bench/)"
        else:
            python, version = found_py
            impl.label = f"mcp {version}"
            impl.client = [str(python), str(PEERS / "mcp_client.py")]
            impl.server = [str(python), str(PEERS / "mcp_server.py")]
        impls.append(impl)

    impls.append(
        Impl(
            FLOOR, "Trio echo floor",
            client=[py, "-m", "bench.echo", "client"],
            server=[py, "-m", "bench.echo", "server"],
            env=trio_env,
            unsupported={
                w: "" for w in ("task-roundtrip", "tasks-10k", "tasks-list", "websocket")
            },
        )
    )
    return impls


# --- running ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the runs of one implementation on one driver workload produced."""

    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: Why a run stopped early (its last printed phase results are kept).
    stopped: str | None = None

    def median(self, get: Callable[[dict[str, Any]], float]) -> float | None:
        values = []
        for result in self.results:
            try:
                values.append(float(get(result)))
            except (KeyError, TypeError, ValueError):
                continue
        return statistics.median(values) if values else None


def run_driver(
    impl: Impl, driver: str, params: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """Run one client driver once; return its (last) JSON result.

    A driver that runs out of time is stopped; if it printed results of its
    first phases (as the mcp 1.30 driver does for the 10,000-task run), the
    last of them is returned with ``"stopped": <seconds>``.

    Raises:
        RuntimeError: The driver failed, or timed out before any result.
    """
    env = dict(os.environ)
    env.update(impl.env)
    env["PYTHONUNBUFFERED"] = "1"
    argv = [*impl.client, driver, json.dumps(params), *impl.server]
    # Its own process group, so that stopping it also stops the server it spawned.
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        stdout, stderr = proc.communicate()
        partial = [line for line in stdout.splitlines() if line.startswith("{")]
        if not partial:
            raise RuntimeError(f"timed out after {timeout:.0f} s") from None
        result: dict[str, Any] = json.loads(partial[-1])
        result["stopped"] = timeout
        return result
    finally:
        _kill_group(proc)  # a server left behind by a driver that failed
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"exit {proc.returncode}: {_last_error(stderr)}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _last_error(stderr: str) -> str:
    """The most telling line of a failed driver's stderr."""
    lines = [line.strip(" |+-") for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if "Error" in line or "error" in line]
    return ((errors or lines or ["(no output)"])[-1])[:240]


def run_all(
    impls: list[Impl],
    workloads: list[Workload],
    reps: int,
    quick: bool,
    progress: Callable[[str], None],
    budget: float | None = None,
) -> dict[tuple[str, str], Outcome]:
    """Run every (driver workload, implementation) ``reps`` times, alternating.

    Within a repetition the implementations take turns, and the order rotates
    from one repetition to the next, so slow drift of the machine's load
    does not favour anyone. Runs limited by ``Impl.max_reps`` (the ones that
    take minutes) go last and get what is left of ``budget`` seconds.
    """
    params = sizes(quick)
    timeout = 120.0 if quick else 600.0
    deadline = None if budget is None else time.monotonic() + budget
    drivers: list[str] = []
    for workload in workloads:
        if workload.driver not in drivers:
            drivers.append(workload.driver)
    outcomes: dict[tuple[str, str], Outcome] = {}
    runnable = [i for i in impls if i.missing is None]

    def run_one(impl: Impl, driver: str, limit: float, label: str) -> None:
        outcome = outcomes.setdefault((driver, impl.key), Outcome())
        started = time.monotonic()
        try:
            result = run_driver(impl, driver, params[driver], limit)
        except RuntimeError as exc:
            outcome.errors.append(str(exc))
            status = f"ERROR {exc}"
        else:
            outcome.results.append(result)
            status = "ok"
            if "stopped" in result:
                outcome.stopped = f"stopped after {limit:.0f} s (time budget); later phases not run"
                status = outcome.stopped
        progress(
            f"[{label}] {driver:<16} {impl.label:<18} {time.monotonic() - started:5.1f} s  {status}"
        )
    for rep in range(reps):
        for driver in drivers:
            shown = [w.key for w in workloads if w.driver == driver]
            order = [
                i for i in runnable if not all(k in i.unsupported for k in shown)
            ]
            if order:
                shift = rep % len(order)
                order = order[shift:] + order[:shift]
            for impl in order:
                if driver in impl.max_reps:
                    continue  # a long run: after the others
                run_one(impl, driver, timeout, f"rep {rep + 1}/{reps}")
    for rep in range(reps):
        for driver in drivers:
            for impl in runnable:
                if rep < impl.max_reps.get(driver, 0):
                    left = timeout if deadline is None else deadline - time.monotonic()
                    run_one(impl, driver, max(30.0, min(timeout, left)), "long run")
    return outcomes


def rotate(
    servers: list[Any],
    workloads: list[str],
    reps: int,
    supports: Callable[[Any, str], bool],
    run: Callable[[Any, str], dict[str, Any]],
    out: dict[tuple[str, str], list[dict[str, Any]]],
    errors: dict[tuple[str, str], list[str]],
    status: Callable[[dict[str, Any]], str] = lambda _: "ok",
    width: int = 15,
) -> None:
    """Run every workload on every server ``reps`` times, the servers taking turns.

    The order rotates each repetition, so no server always runs first on a
    warm or a cold machine. A server is skipped where ``missing`` is set or
    ``supports(server, workload)`` is false; results go into ``out`` and
    errors into ``errors`` by ``(server.key, workload)``; each run is logged
    on stderr with ``status(result)``.
    """
    for rep in range(reps):
        for w in workloads:
            order = [s for s in servers if s.missing is None and supports(s, w)]
            shift = rep % max(1, len(order))
            for s in order[shift:] + order[:shift]:
                t0 = time.monotonic()
                try:
                    result = run(s, w)
                except Exception as exc:
                    errors.setdefault((s.key, w), []).append(repr(exc)[:200])
                    shown = f"ERROR {exc!r}"[:200]
                else:
                    out.setdefault((s.key, w), []).append(result)
                    shown = status(result)
                print(f"[rep {rep + 1}/{reps}] {w:<{width}} {s.label:<28} "
                      f"{time.monotonic() - t0:5.1f} s {shown}", file=sys.stderr, flush=True)
