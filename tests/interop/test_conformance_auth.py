"""The official conformance suite's auth scenarios that apply to trio-mcp, both versions.

trio-mcp's OAuth client is a client acting on its own behalf
(:class:`trio_mcp.auth.ClientCredentials`), so these scenarios apply (run with
``conformance_auth_client.py``):

* ``auth/client-credentials-basic`` and ``auth/client-credentials-jwt`` (the extension
  ``io.modelcontextprotocol/oauth-client-credentials``, SEP-1046): discovery from the 401
  and the metadata, a ``client_secret_basic`` or ``private_key_jwt`` token request, the
  bearer token on every request; in 0.1.16 (2025-11-25) and 0.2.0-alpha.12 (forced onto
  the 2026-07-28 timeline: the suite files extensions outside it);
* ``auth/resource-mismatch`` (0.2.0, 2026-07-28): the client must stop when the RFC 9728
  ``resource`` is not the server it talks to (RFC 8707);
* ``auth/metadata-issuer-mismatch`` (0.2.0, 2026-07-28): the client must reject
  authorization server metadata whose ``issuer`` is not the one it asked (RFC 8414 3.3).

The others do not apply: ``metadata-*``, ``basic-cimd``, ``scope-*``,
``token-endpoint-auth-*``, ``pre-registration``, ``offline-access-*``,
``authorization-server-migration``, ``iss-*`` and the 2025-03-26 back-compat ones drive the
``authorization_code`` flow (a browser redirect, PKCE, dynamic or CIMD registration, the
authorization response's ``iss``), which trio-mcp's client does not implement;
``enterprise-managed-authorization``, ``wif-jwt-bearer``, ``dpop*`` are other grant
types and token bindings (not implemented). The suite has no scenario for an MCP server
as a resource server (its ``authorization-server`` scenarios test an authorization
server); ``tests/auth/test_auth.py`` and the mcp 2.3.0 interop test cover our server side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ..helpers import ROOT
from . import _support
from .test_conformance import CONFORMANCE, NODE22, node22  # noqa: F401 -- the fixture

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

CLIENT = Path(__file__).resolve().parent / "conformance_auth_client.py"
NEXT = _support.CONFORMANCE_NEXT
CASES = [
    (CONFORMANCE, "auth/client-credentials-basic", ()),
    (CONFORMANCE, "auth/client-credentials-jwt", ()),
    (NEXT, "auth/client-credentials-basic", ("--spec-version", "2026-07-28", "--force")),
    (NEXT, "auth/client-credentials-jwt", ("--spec-version", "2026-07-28", "--force")),
    (NEXT, "auth/resource-mismatch", ("--spec-version", "2026-07-28")),
    (NEXT, "auth/metadata-issuer-mismatch", ("--spec-version", "2026-07-28")),
]


def run_scenario(suite: Path, scenario: str, extra: tuple[str, ...],
                 output_dir: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    proc = subprocess.run(
        [str(NODE22), str(suite), "client", "--command", f"{sys.executable} {CLIENT}",
         "--scenario", scenario, *extra, "-o", str(output_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=150, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    (checks_file,) = output_dir.rglob("checks.json")
    checks = [c for c in json.loads(checks_file.read_text()) if c["status"] != "INFO"]
    return proc, checks


@pytest.mark.parametrize(("suite", "scenario", "extra"), CASES,
                         ids=[f"{s.parent.parent.name}-{n}" for s, n, _ in CASES])
def test_conformance_auth_client_scenario(node22: Path, suite: Path, scenario: str,  # noqa: F811
                                          extra: tuple[str, ...], tmp_path: Path) -> None:
    """Every graded check SUCCESS (the two mismatch scenarios: our client stops)."""
    proc, checks = run_scenario(suite, scenario, extra, tmp_path)
    failed = [f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks
              if c["status"] != "SUCCESS"]
    assert checks, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert failed == [], proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    if scenario.endswith("mismatch"):
        assert "OAuthError" in proc.stdout + proc.stderr
