"""Helpers shared by the Python drivers (trio-mcp, the echo floor, the mcp SDKs).

This module uses the standard library only, so the drivers that run under the
``mcp`` SDKs' own interpreters can import it too (they put ``bench/`` on
``sys.path``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

#: The tools every benchmark server offers (same names in every implementation):
#:   echo {text}   plain call, returns the text
#:   noop {}       task-augmented, finishes at once ("zero-length task")
#:   park {}       task-augmented, runs until cancelled
#:   stats {}      plain call, returns JSON text {"rss": bytes, "cpu": seconds} of the server
#:                 process (resident set size, user+system CPU time used so far)
TASK_TTL_MS = 600_000


def rss_bytes() -> int:
    """This process's resident set size, from /proc (Linux)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def cpu_seconds() -> float:
    """User + system CPU time this process has used."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stats_text() -> str:
    """What the ``stats`` tool answers."""
    return json.dumps({"rss": rss_bytes(), "cpu": cpu_seconds()})


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) of ``samples``, nearest rank; NaN when empty."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def parse_argv(argv: list[str]) -> tuple[str, dict[str, Any], list[str]]:
    """``<workload> <params-json> <server argv...>`` -> the three parts."""
    if len(argv) < 2:
        sys.exit("usage: driver WORKLOAD PARAMS_JSON [SERVER_ARGV...]")
    return argv[0], json.loads(argv[1]), argv[2:]


def emit(result: dict[str, Any]) -> None:
    """Write the one JSON line of results the harness reads."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def server_env() -> dict[str, str]:
    """The environment for a spawned server: ours, unbuffered."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    """Block until something listens on 127.0.0.1:``port``."""
    import socket
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run_header(title: str, command: str, reps: int, load0: tuple[float, ...], wall_s: float) -> str:
    """The heading of a run's report: what ran, how often, the machine's load."""
    load1 = os.getloadavg()
    return (f"# {title}\n\n- command: {command}\n- repetitions: {reps}, medians; load average "
            f"before {'/'.join(f'{x:.2f}' for x in load0)}, after "
            f"{'/'.join(f'{x:.2f}' for x in load1)}; wall time {wall_s:.0f} s\n")


def write_raw(path: str, out: dict[tuple[str, str], Any]) -> None:
    """Every raw result of a run, as JSON keyed ``"server workload"``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump({f"{k} {w}": v for (k, w), v in out.items()}, f, indent=1)


def problem_lines(errors: dict[tuple[str, str], list[str]], servers: list[Any]) -> list[str]:
    """The report's lines for the runs that failed and the servers that could not run."""
    lines = [f"- error: {key} {w}: {e}" for (key, w), errs in errors.items() for e in errs]
    lines += [f"- {s.label}: {s.missing}" for s in servers if s.missing]
    return lines
