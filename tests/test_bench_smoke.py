"""The benchmark entry point still runs end to end (tiny sizes; no timing is checked).

``python -m bench --quick`` runs every workload once against trio-mcp, the
echo floor, and whichever official peers are installed (``bash
bench/setup.sh``); missing ones must show as ``n/a`` with how to install them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Each runs a benchmark harness end to end (peers included): minutes of CPU together, so
#: they run under ``-m slow`` (``.ci/run`` runs it), not in the README's test command.
pytestmark = pytest.mark.slow


def test_bench_quick_prints_the_table() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "| workload | metric | trio-mcp |" in out
    for title in (
        "1. sequential plain tools/call",
        "2. 200 concurrent plain calls",
        "3. task call + tasks/result",
        "running tasks",
        "5. tasks/list walk",
        "6. WebSocket",
    ):
        assert title in out, title
    assert "## Targets (issue 7)" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    trio_column = header.index("trio-mcp")
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[trio_column] not in ("", "-") and "error" not in cells[trio_column], row
        assert not any(cell.startswith("error") for cell in cells), row
    # A peer that is not installed is reported, never silently left out. (The
    # codec line also says "orjson not installed" without the optional `fast`
    # extra; that is not a peer.)
    for line in out.splitlines():
        if "n/a (not installed" in line:
            assert "bench/setup.sh" in line, line
    assert "orjson" in out  # the codec in use is named either way



def test_bench_serverloop_prints_cpu_per_request() -> None:
    """The in-process harness (bench/serverloop.py) runs every workload end to end."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.serverloop", "--calls", "300", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "seq: trio-mcp " in proc.stdout and "echo floor" in proc.stdout
    assert "create " in proc.stdout and "cancel " in proc.stdout
    assert "Trio alone, cancelling a parked task" in proc.stdout


def test_bench_modern_tasks_prints_the_rows() -> None:
    """``python -m bench.modern_tasks --quick`` runs the 2025-11-25 and 2026-07-28 rows on
    trio-mcp (and on fastmcp-tasks when ``.interop/fastmcp`` exists, else it says so);
    no timing is checked."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.modern_tasks", "--quick", "--servers", "trio,fastmcp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "error" not in out, out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[:2] == ["workload", "trio-mcp"], header
    labels = {row.strip("|").split("|")[0].strip(): row for row in rows[1:]}
    for label in (
        "2025-11-25 sequential plain tools/call (calls/s)",
        "2026-07-28 sequential plain tools/call (calls/s)",
        "2025-11-25 task call + tasks/result (round trips/s)",
        "2026-07-28 task call + tasks/get until completed (round trips/s)",
        "tasks/get per round trip",
    ):
        assert label in labels, label
        cells = [cell.strip() for cell in labels[label].strip("|").split("|")]
        assert cells[1] not in ("", "-", "n/a"), labels[label]
    fastmcp = [i for i, h in enumerate(header) if h.startswith("fastmcp-tasks ")]
    if fastmcp:
        row = [c.strip() for c in labels[
            "2026-07-28 task call + tasks/get until completed (round trips/s)"
        ].strip("|").split("|")]
        assert row[fastmcp[0]] not in ("", "-", "n/a"), row
    else:
        assert "fastmcp-tasks: not installed" in out, out
    assert "| task-2025 |" in out  # the comparison with the recorded run


def test_bench_http_prints_the_rows() -> None:
    """``python -m bench.http --quick --only trio-mcp --only floor`` runs every Streamable HTTP
    workload on trio-mcp (the floor on its plain rows) with the raw-socket client; no timing
    is checked. The node and mcp peers are left out (the full run shows them, or n/a); the
    llhttp pair ("beyond the floor") runs when httptools is installed, else shows n/a."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.http", "--quick", "--only", "trio-mcp", "--only", "floor",
         "--only", "trio-mcp-c", "--only", "floor-c", "--clients", "6"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "error" not in out, out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[:4] == ["workload", "metric", "trio-mcp on hypercorn",
                          "HTTP floor (hypercorn)"], header
    titles = [row.strip("|").split("|")[0].strip() for row in rows[1:]]
    for title in (
        "1. sequential tools/call, one 2025-11-25 session, JSON answers",
        "2. sequential tools/call, one 2025-11-25 session, SSE answers",
        "3. 6 concurrent clients (2 client processes), a session each, SSE answers",
        "4. 2025-11-25 task: tools/call + task, then tasks/result",
        "5. 2026-07-28 stateless tools/call",
        "6. 2026-07-28 task: tools/call -> resultType task, tasks/get until completed",
    ):
        assert title in titles, title
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2] not in ("", "-", "n/a"), row  # trio-mcp ran every workload
        assert cells[3] not in ("", "-"), row  # the floor: a number, or n/a for tasks
    assert "client CPU per call (us)" in out
    assert "What trio-mcp's MCP layer costs above hypercorn" in out
    assert header[4:6] == ["trio-mcp on llhttp", "HTTP floor (llhttp)"], header
    if importlib.util.find_spec("httptools") is None:
        assert "httptools not installed (pip install 'trio-mcp[fast]')" in out
    else:
        for row in rows[1:]:
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            assert cells[4] not in ("", "-", "n/a"), row  # trio-mcp on llhttp: every workload
        assert "llhttp against hypercorn" in out
        assert "Targets (issue 33: trio-mcp on llhttp)" in out


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_bench_stores_prints_every_store_and_the_targets() -> None:
    """``python -m bench.stores --quick --no-ts`` runs every workload on the memory and SQLite
    stores, and on Redis and PostgreSQL when their servers and drivers are here (else their
    column says n/a and why); the issue-24 targets follow the table. No timing is checked."""
    import shutil

    from tests.postgres_server import PG_BIN

    proc = subprocess.run(
        [sys.executable, "-m", "bench.stores", "--quick", "--no-ts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "- error:" not in out, out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["workload"] + [f"trio-mcp, {s} store" for s in
                                     ("memory", "sqlite", "redis", "postgres")], header
    here = {
        "redis": shutil.which("redis-server") is not None and _importable("coredis"),
        "postgres": PG_BIN is not None and _importable("psycopg"),
    }
    titles = [row.strip("|").split("|")[0].strip() for row in rows]
    for title in ("task call + tasks/result, sequential (tasks/s)",
                  "task call + tasks/result, 200 in flight (tasks/s)",
                  "create N running tasks, 200 in flight (tasks/s)"):
        row = rows[titles.index(title)]
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert cells[0] not in ("", "-", "n/a") and cells[1] not in ("", "-", "n/a"), row
        for column, store in ((2, "redis"), (3, "postgres")):
            assert (cells[column] not in ("", "-", "n/a")) == here[store], (store, row)
    for store in ("redis", "postgres"):
        if not here[store]:
            assert f"trio-mcp, {store} store: not available" in out, out
    assert "| target (issue 24) |" in out
    assert "| 200 in-flight creates >= 0.5x memory |" in out


def test_bench_rerun_prints_the_rerun_delay_and_the_throughputs() -> None:
    """``python -m bench.rerun --reps 1 --tasks 20`` (Redis): a re-run delay line and the two
    throughputs. No timing is checked."""
    import shutil

    if shutil.which("redis-server") is None or not _importable("coredis"):
        pytest.skip("redis-server or coredis is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.rerun", "--reps", "1", "--tasks", "20"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("rerun 1: SIGKILL -> working again: min ") for line in lines)
    assert any(line.startswith("median one: ") for line in lines)
    assert any(line.startswith("median front+2: ") for line in lines)
