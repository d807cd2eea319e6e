"""``examples/task_server.py`` as an OAuth resource server, run as a real subprocess.

``--jwks-uri/--issuer/--audience`` (JWT) and ``--introspection-url/--client-id/
--client-secret`` (RFC 7662), over ``--http`` and ``--ws``; tokens from the
loopback authorization server of ``tests/oauth_server.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

import trio_mcp

from tests.helpers import HTTP_SERVERS, ROOT, TASK_SERVER, free_port, load_example, needs_llhttp
from tests.oauth_server import RS_CLIENT, AuthServer, authorization_server

pytestmark = pytest.mark.timeout(90)


@contextmanager
def example(*args: str) -> Iterator[str]:
    """Run the example server with ``args``; yield the URL it prints."""
    with subprocess.Popen([sys.executable, str(TASK_SERVER), *args], stderr=subprocess.PIPE,
                          text=True, cwd=ROOT) as proc:
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.search(r"serving on (\S+)", line)
            assert match, line + proc.stderr.read()
            yield match.group(1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    with authorization_server() as state:
        yield state


async def check_whoami_and_admin(url: str, reader: str, admin: str, *, ws: bool) -> None:
    """``whoami`` answers the caller's subject and scopes; ``admin_echo`` needs ``admin``."""
    connect = trio_mcp.open_websocket_client if ws else trio_mcp.open_http_client
    async with connect(url, token=reader) as client:
        me = json.loads((await client.call_tool("whoami")).text)
        assert me == {"subject": "rita", "client_id": "agent", "scopes": ["tools"]}
        assert "admin_echo" not in {t.name for t in await client.list_all_tools()}
        with pytest.raises(trio_mcp.RemoteError, match="scope"):
            await client.call_tool("admin_echo", {"text": "x"})
    async with connect(url, token=admin) as client:
        assert (await client.call_tool("admin_echo", {"text": "hi"})).text == "hi"


@pytest.mark.parametrize(("transport", "server"), [
    pytest.param("http", "llhttp", marks=needs_llhttp), ("http", "hypercorn"), ("ws", None)])
async def test_auth_example_jwks(auth_server: AuthServer, transport: str, server: str | None
                                 ) -> None:
    port = free_port()
    audience = (f"http://127.0.0.1:{port}/mcp" if transport == "http"
                else f"ws://127.0.0.1:{port}/")
    chosen = ["--http-server", server] if server else []
    with example(f"--{transport}", f"127.0.0.1:{port}", *chosen, "--jwks-uri",
                 auth_server.issuer + "/jwks.json", "--issuer", auth_server.issuer,
                 "--audience", audience) as url:
        reader = auth_server.mint({"aud": audience, "sub": "rita", "scope": "tools"})
        admin = auth_server.mint({"aud": audience, "sub": "ada", "scope": "tools admin"})
        await check_whoami_and_admin(url, reader, admin, ws=transport == "ws")
        if transport == "http":  # its metadata names the issuer and the scopes
            import httpx

            async with httpx.AsyncClient(trust_env=False) as http:
                document = (await http.get(
                    f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp")).json()
            assert document["resource"] == audience
            assert document["authorization_servers"] == [auth_server.issuer]
            assert document["scopes_supported"] == ["tools", "admin"]
        await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("server", HTTP_SERVERS)
async def test_auth_example_introspection(auth_server: AuthServer, server: str) -> None:
    auth_server.token_format = "opaque"
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    with example("--http", f"127.0.0.1:{port}", "--http-server", server, "--introspection-url",
                 auth_server.issuer + "/introspect", "--client-id", RS_CLIENT[0],
                 "--client-secret", RS_CLIENT[1], "--issuer", auth_server.issuer,
                 "--audience", audience) as url:
        reader = auth_server.issue("agent", {"tools"}, audience)["access_token"]
        auth_server.opaque[reader]["sub"] = "rita"
        admin = auth_server.issue("agent", {"tools", "admin"}, audience)["access_token"]
        await check_whoami_and_admin(url, reader, admin, ws=False)


def test_auth_example_refuses_incomplete_options(capsys: pytest.CaptureFixture[str]) -> None:
    # main() of the script in this process: its argument checks refuse these before it
    # serves (test_cli_http runs the script itself for its exit status).
    main = load_example("task_server").main
    for args in (["--http", "127.0.0.1:0", "--jwks-uri", "http://x/jwks"],
                 ["--jwks-uri", "http://x/jwks", "--issuer", "i", "--audience", "a"],
                 ["--http", "127.0.0.1:0", "--introspection-url", "http://x/i"],
                 ["--http", "127.0.0.1:0", "--issuer", "i"]):
        with pytest.raises(SystemExit) as exited:
            main(args)
        stderr = capsys.readouterr().err
        assert exited.value.code == 2 and "error:" in stderr, (args, stderr)
