"""The Python SDK ``mcp`` 2.3.0's client against our OAuth 2.1 resource server.

Our ``examples/task_server.py --http ... --jwks-uri ... --issuer ... --audience ...``
verifies JWTs of the loopback authorization server of ``tests/oauth_server.py``;
``py/mcp230_auth_client.py`` connects with a static bearer token, and with the SDK's
``ClientCredentialsOAuthProvider``, which must find everything from our 401 and our
RFC 9728 metadata (then the authorization server's RFC 8414 metadata) and ask for a token
for our canonical URI (the ``resource`` parameter, RFC 8707). Both the SDK's ``auto``
mode (it probes ``server/discover``: 2026-07-28) and ``2026-07-28``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .. import oauth_server
from . import _support

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT = _support.PY_DIR / "mcp230_auth_client.py"


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[str, oauth_server.AuthServer]]:
    """Our example server verifying the authorization server's JWTs; yields (url, AS)."""
    with oauth_server.authorization_server() as auth:
        auth.clients["sdk-agent"] = ("sdk-secret", {"tools", "admin"})
        port = _support.free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        argv = [sys.executable, str(_support.TASK_SERVER), "--http", f"127.0.0.1:{port}",
                "--jwks-uri", auth.issuer + "/jwks.json", "--issuer", auth.issuer,
                "--audience", url]
        with _support.background_server(argv, port):
            yield url, auth


def run(mcp230: Path, *args: str) -> dict[str, Any]:
    report = _support.run_report([str(mcp230), str(CLIENT), *args])
    assert "fatal" not in report, report
    return report


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
def test_mcp230_bearer_token(mcp230: Path, secured: tuple[str, oauth_server.AuthServer],
                             mode: str) -> None:
    """A static token: ``whoami`` answers its subject and scopes; without ``admin``,
    ``admin_echo`` is not listed and its call is refused (our 403 insufficient_scope)."""
    url, auth = secured
    token = auth.mint({"aud": url, "sub": "sdk-user", "scope": "tools"})
    report = run(mcp230, mode, url, "bearer", token)
    assert report["protocol_version"] == "2026-07-28"
    assert report["whoami"] == {"subject": "sdk-user", "client_id": "agent", "scopes": ["tools"]}
    assert "whoami" in report["tools"] and "admin_echo" not in report["tools"]
    refused = report["admin_echo"]
    assert refused["ok"] is False and "insufficient scope" in refused["error"], report


@pytest.mark.parametrize("mode", ["auto", "2026-07-28"])
def test_mcp230_client_credentials(mcp230: Path, secured: tuple[str, oauth_server.AuthServer],
                                   mode: str) -> None:
    """The SDK's OAuth ``client_credentials`` flow: discovery from our metadata, a token
    for our canonical URI, then ``admin_echo`` works (its token has ``admin``)."""
    url, auth = secured
    before = len(auth.token_requests)
    report = run(mcp230, mode, url, "client_credentials", "sdk-agent", "sdk-secret",
                 auth.issuer, "tools admin")
    assert report["whoami"] == {"subject": "sdk-agent", "client_id": "sdk-agent",
                                "scopes": ["admin", "tools"]}
    assert "admin_echo" in report["tools"]
    assert report["admin_echo"] == {"ok": True, "is_error": False, "text": "hi"}
    requests = auth.token_requests[before:]
    assert requests and all(r["grant_type"] == "client_credentials" for r in requests)
    assert {r.get("resource") for r in requests} == {url}


def test_mcp230_deviation_requires_an_authorization_endpoint(mcp230: Path) -> None:
    """Deviation (mcp 2.3.0): its RFC 8414 metadata model requires ``authorization_endpoint``,
    which RFC 8414 section 2 makes "REQUIRED unless no grant types are supported that use
    the authorization endpoint": against a ``client_credentials``-only authorization server
    that omits it (and keeps its token endpoint off ``/token``), the SDK's client-credentials
    flow finds no token endpoint. Ours (``ClientCredentials``) gets its token from the same
    server (``tests/auth/test_auth.py::test_auth_client_credentials_only_authorization_server``)."""
    with oauth_server.authorization_server() as auth:
        auth.clients["sdk-agent"] = ("sdk-secret", {"tools"})
        auth.authorization_endpoint = False
        auth.token_path = "/oauth2/token"
        port = _support.free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        argv = [sys.executable, str(_support.TASK_SERVER), "--http", f"127.0.0.1:{port}",
                "--jwks-uri", auth.issuer + "/jwks.json", "--issuer", auth.issuer,
                "--audience", url]
        with _support.background_server(argv, port):
            done = subprocess.run(
                [str(mcp230), str(CLIENT), "auto", url, "client_credentials", "sdk-agent",
                 "sdk-secret", auth.issuer, "tools"],
                capture_output=True, text=True, timeout=_support.RUN_TIMEOUT, check=False)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert done.returncode == 1 and "fatal" in report, done.stdout + done.stderr[-2000:]
        assert "No authorization server metadata discovered" in report["fatal"]
        assert auth.token_requests == [], report


def test_a_failing_peer_script_says_why() -> None:
    """A peer script that fails prints its traceback as the report's ``fatal`` (stdout) and
    exits 1; ``run_report``'s failure shows it, even when stderr is empty (CI once showed
    "exited with 1" and an empty stderr, and nothing else)."""
    script = ("import json, sys; print(json.dumps({'fatal': 'Traceback ...\\n"
              "httpx.ReadError: [Errno 104] Connection reset by peer'})); sys.exit(1)")
    with pytest.raises(AssertionError) as failed:
        _support.run_report([sys.executable, "-c", script])
    message = str(failed.value)
    assert "exited with 1" in message
    assert "--- the peer's fatal error ---\nTraceback ...\nhttpx.ReadError" in message
