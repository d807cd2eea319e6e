"""Turn the collected runs into the results table (Markdown) and the target checks."""

from __future__ import annotations

import math
import os
import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench._runner import FLOOR, MCP2, MCP130, TRIO, TS, Impl, Outcome, Workload, sizes


@dataclass(frozen=True)
class Metric:
    workload: str
    name: str
    get: Callable[[dict[str, Any]], float]
    higher_better: bool | None  # None: no ratio (informational)
    digits: int = 0


def _cpu(r: dict[str, Any]) -> float:
    return float(r["client_cpu_us"] + r["server_cpu_us"])


def _growth(r: dict[str, Any]) -> float:
    return float(r["list_large"]["page_ms"] / r["list_small"]["page_ms"])


def metrics(quick: bool) -> list[Metric]:
    p = sizes(quick)
    n, small = p["scale"]["tasks"], p["scale"]["small"]
    return [
        Metric("plain-seq", "calls/s", lambda r: r["rate"], True),
        Metric("plain-seq", "p50 latency (ms)", lambda r: r["p50_ms"], False, 3),
        Metric("plain-seq", "p99 latency (ms)", lambda r: r["p99_ms"], False, 3),
        Metric("plain-seq", "CPU per call, client+server (us)", _cpu, False),
        Metric("plain-200", "calls/s", lambda r: r["rate"], True),
        Metric("plain-200", "CPU per call, client+server (us)", _cpu, False),
        Metric("task-roundtrip", "tasks/s", lambda r: r["rate"], True),
        Metric("task-roundtrip", "p50 latency (ms)", lambda r: r["p50_ms"], False, 3),
        Metric("task-roundtrip", "CPU per task, client+server (us)", _cpu, False),
        Metric("tasks-10k", "receiver RSS per running task (KiB)",
               lambda r: r["rss_per_task"] / 1024, False, 1),
        Metric("tasks-10k", f"tasks/get p50 at {n:,} tasks (ms)", lambda r: r["get_p50_ms"],
               False, 3),
        Metric("tasks-10k", f"tasks/get p99 at {n:,} tasks (ms)", lambda r: r["get_p99_ms"],
               False, 3),
        Metric("tasks-10k", f"cancel all {n:,} (s)", lambda r: r["cancel_s"], False, 3),
        Metric("tasks-10k", f"create {n:,} (tasks/s)", lambda r: r["tasks"] / r["create_s"], True),
        Metric("tasks-list", f"time per page at {small:,} tasks (ms)",
               lambda r: r["list_small"]["page_ms"], False, 3),
        Metric("tasks-list", f"time per page at {n:,} tasks (ms)",
               lambda r: r["list_large"]["page_ms"], False, 3),
        Metric("tasks-list", f"page time growth {small:,} -> {n:,} (x)", _growth, None, 2),
        Metric("tasks-list", "tasks per page", lambda r: r["list_large"]["listed"]
               / r["list_large"]["pages"], None),
        Metric("websocket", "tasks/s", lambda r: r["rate"], True),
        Metric("websocket", "lost tasks", lambda r: r["lost"], None),
    ]


def _fmt(value: float | None, digits: int) -> str:
    if value is None or math.isnan(value):
        return "-"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _ratio(ours: float | None, theirs: float | None, higher_better: bool | None) -> str:
    if higher_better is None or ours is None or theirs is None or not ours or not theirs:
        return ""
    ratio = ours / theirs if higher_better else theirs / ours
    return f"{ratio:.2f}x"


def table(
    impls: list[Impl],
    workloads: list[Workload],
    outcomes: dict[tuple[str, str], Outcome],
    quick: bool,
) -> tuple[str, list[str]]:
    """The Markdown table and its footnotes."""
    p = sizes(quick)
    wanted = {w.key: w for w in workloads}
    titles = {
        "tasks-10k": f"4. {p['scale']['tasks']:,} running tasks",
        "websocket": f"6. WebSocket: {p['ws']['clients']} clients x {p['ws']['per_client']} tasks",
    }
    peers = [i for i in impls if i.key != TRIO]
    header = ["workload", "metric", *[i.label for i in impls]]
    header += [f"vs {i.label}" for i in peers]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes: list[str] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    by_key = {i.key: i for i in impls}
    last = None
    for metric in metrics(quick):
        workload = wanted.get(metric.workload)
        if workload is None:
            continue
        values: dict[str, float | None] = {}
        cells: list[str] = []
        for impl in impls:
            outcome = outcomes.get((workload.driver, impl.key))
            if metric.workload in impl.unsupported:
                why = impl.unsupported[metric.workload]
                cells.append(f"n/a {note(why)}" if why else "")
                values[impl.key] = None
            elif impl.missing is not None:
                cells.append(f"n/a {note(f'{impl.label}: {impl.missing}')}")
                values[impl.key] = None
            elif outcome is None or not outcome.results:
                errors = outcome.errors if outcome else ["not run"]
                cells.append(f"error {note(f'{impl.label}, {workload.key}: {errors[-1]}')}")
                values[impl.key] = None
            else:
                values[impl.key] = outcome.median(metric.get)
                cell = _fmt(values[impl.key], metric.digits)
                if values[impl.key] is None and outcome.stopped:
                    cell = f"not reached {note(f'{impl.label}, {workload.key}: {outcome.stopped}')}"
                cells.append(cell)
        ours = values.get(TRIO)
        ratios = [_ratio(ours, values.get(i.key), metric.higher_better) for i in peers]
        title = titles.get(workload.key, workload.title) if workload.key != last else ""
        last = workload.key
        lines.append("| " + " | ".join([title, metric.name, *cells, *ratios]) + " |")
    del by_key
    return "\n".join(lines), notes


def _median(
    outcomes: dict[tuple[str, str], Outcome], driver: str, impl: str,
    get: Callable[[dict[str, Any]], float],
) -> float | None:
    outcome = outcomes.get((driver, impl))
    return outcome.median(get) if outcome else None


def targets(outcomes: dict[tuple[str, str], Outcome], quick: bool) -> list[str]:
    """One line per target of issue 7: HIT, MISS, or n/a, with the measured value."""

    def m(driver: str, impl: str, get: Callable[[dict[str, Any]], float]) -> float | None:
        return _median(outcomes, driver, impl, get)

    def rate(r: dict[str, Any]) -> float:
        return float(r["rate"])

    def ratio_line(label: str, driver: str, peer: str, goal: float) -> str:
        ours, theirs = m(driver, TRIO, rate), m(driver, peer, rate)
        if ours is None or theirs is None:
            return f"- n/a  {label}: not measured"
        got = ours / theirs
        return f"- {'HIT ' if got >= goal else 'MISS'} {label}: {got:.2f}x (goal >= {goal:g}x)"

    out = []
    for driver, name in (("plain-seq", "sequential"), ("plain-concurrent", "200 concurrent")):
        out.append(ratio_line(f"plain calls ({name}) >= 4x mcp 1.30", driver, MCP130, 4))
        out.append(ratio_line(f"plain calls ({name}) >= 4x mcp 2.x", driver, MCP2, 4))
        out.append(ratio_line(f"plain calls ({name}) >= 1.3x TS SDK", driver, TS, 1.3))
        out.append(ratio_line(f"plain calls ({name}) >= 60% of the echo floor", driver, FLOOR, 0.6))
    out.append(ratio_line("tasks/s >= 10x mcp 1.30", "task-roundtrip", MCP130, 10))
    out.append(ratio_line("tasks/s >= 10x TS SDK", "task-roundtrip", TS, 10))

    def limit_line(label: str, value: float | None, goal: float, unit: str) -> str:
        if value is None:
            return f"- n/a  {label}: not measured"
        return f"- {'HIT ' if value <= goal else 'MISS'} {label}: {value:.3g} {unit} (goal <= {goal:g})"

    out.append(limit_line("RSS per running task", m("scale", TRIO, lambda r: r["rss_per_task"] / 1024),
                          4, "KiB"))
    out.append(limit_line("tasks/get p99 with the tasks running",
                          m("scale", TRIO, lambda r: r["get_p99_ms"]), 2, "ms"))
    out.append(limit_line("tasks/list page time at the large size / at the small size",
                          m("scale", TRIO, _growth), 1.5, "x (flat)"))
    out.append(limit_line("cancelling all the running tasks",
                          m("scale", TRIO, lambda r: r["cancel_s"]), 1, "s"))
    lost = m("ws", TRIO, lambda r: r["lost"])
    out.append(limit_line("WebSocket tasks lost", lost, 0, "tasks"))
    if quick:
        out = [line + "  (quick sizes: not a measurement)" for line in out]
    return out


def machine() -> list[str]:
    """Facts about this machine and run, for the report header."""

    def run(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "n/a"

    cpu = "n/a"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = "n/a"
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kib = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
            memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return [
        f"- CPUs: {os.cpu_count()} x {cpu}",
        f"- memory: {memory}",
        f"- OS: {platform.platform()}",
        f"- Python: {platform.python_version()} ({platform.python_implementation()}); "
        f"Node.js: {run('node', '--version') or 'n/a'}",
    ]


def codec() -> str:
    """Which JSON codec trio-mcp uses here (orjson is the optional ``fast`` extra)."""
    try:
        from importlib.metadata import version

        return f"orjson {version('orjson')} (the `fast` extra)"
    except Exception:
        return "stdlib json (orjson not installed: pip install -e '.[fast]')"


def load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            one, five, fifteen = f.read().split()[:3]
        return f"{one} {five} {fifteen} (1/5/15 min)"
    except OSError:
        return "n/a"


__all__ = ["MCP2", "MCP130", "TS", "load", "machine", "table", "targets"]
