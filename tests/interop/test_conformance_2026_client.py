"""The conformance suite 0.2.0-alpha.12 (``conformance-next``) vs our client in 2026-07-28.

The suite starts a scripted Streamable HTTP server per scenario and runs
``conformance_client.py`` (built on :func:`trio_mcp.open_http_client` with
``era="2026-07-28"``, chosen from ``--spec-version``) against it:

* ``request-metadata``: per-request ``_meta``, ``MCP-Protocol-Version`` equal
  to it, the capabilities declared as objects, and a retry after -32022;
* ``sep-2322-client-request-state``: MRTR, ``requestState`` echoed, none
  invented, a new JSON-RPC id per round, no state leaking into another call;
* ``http-standard-headers``: ``Mcp-Method`` and ``Mcp-Name``;
* ``http-custom-headers``: ``Mcp-Param-*`` from ``x-mcp-header``, Base64
  where needed, omitted for null;
* ``http-invalid-tool-headers``: tools with invalid annotations never called.

Every graded check (SUCCESS, FAILURE or WARNING; the suite does not count
SKIPPED, e.g. ``Mcp-Method`` on ``initialize``, which 2026-07-28 never
sends) must be SUCCESS. Needs the suite's Node 22 (the ``conformance_next``
fixture skips without Node.js, fails in CI).

Also here, as it needs Node.js: ``era="auto"`` against the TS SDK 1.32.2
server, a 2025-11-25-only one, falls back to ``initialize`` and caches it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trio_mcp
from trio_mcp.peer._dialects._modern_client import ERA_CACHE

from ..helpers import ROOT
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CLIENT = Path(__file__).resolve().parent / "conformance_client.py"
SCENARIOS = [
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
]
GRADED = ("SUCCESS", "FAILURE", "WARNING")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_2026_client_scenario(
    conformance_next: list[str], scenario: str, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [*conformance_next, "client", "--command", f"{sys.executable} {CLIENT}",
         "--scenario", scenario, "--spec-version", "2026-07-28", "-o", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=150, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    (checks_file,) = tmp_path.glob("*/checks.json")
    checks: list[dict[str, Any]] = json.loads(checks_file.read_text())
    graded = [c for c in checks if c["status"] in GRADED]
    failed = [f"{c['id']} {c.get('name', '')}: {c['status']} {c.get('errorMessage', '')}"
              for c in graded if c["status"] != "SUCCESS"]
    output = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert graded, output
    assert failed == [], output
    assert proc.returncode == 0, output


async def test_auto_falls_back_against_ts_sdk_server(node: str) -> None:
    """``era="auto"`` against the TS SDK 1.32.2 server (2025-11-25 only, stdio):
    the ``server/discover`` probe is refused, ``initialize`` follows, and the
    choice is remembered for that command line."""
    argv = [node, str(_support.TS_SERVER)]
    for _ in range(2):
        async with trio_mcp.open_stdio_client(argv, era="auto") as client:
            assert client.protocol_version == "2025-11-25"
            assert await client.list_all_tools()
        assert ERA_CACHE[shlex.join(argv)] == "2025-11-25"
