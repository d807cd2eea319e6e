"""OAuth 2.1 resource server (MCP authorization, 2025-11-25 and 2026-07-28), with real parts.

A real authorization server runs on loopback (``tests/oauth_server.py``: a
JWKS of joserfc keys, a ``client_credentials`` token endpoint, RFC 7662
introspection); our Streamable HTTP and WebSocket servers fetch from it over
sockets; tokens come from it or are forged by the tests with joserfc.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
import pytest
import trio

import trio_mcp
from trio_mcp.auth import ClientCredentials, Identity, IntrospectionVerifier, JWTVerifier

from tests.helpers import load_example
from tests.http_support import INITIALIZE, Raw, http_client
from tests.oauth_server import RS_CLIENT, AuthServer, authorization_server

#: Every test on both HTTP/1.1 servers (llhttp, hypercorn).
pytestmark = pytest.mark.usefixtures("both_http_servers")

ERA_2026 = "2026-07-28"


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    with authorization_server() as state:
        state.clients["agent"] = ("agent-secret", {"tools", "admin"})
        state.clients["reader"] = ("reader-secret", {"tools"})
        yield state


def secured_app() -> trio_mcp.App:
    """The example's tools, ``whoami`` and ``admin_echo`` (scope ``admin``), plus scoped
    resources, templates and prompts."""
    app: trio_mcp.App = load_example("task_server").build_app(auth=True)

    @app.resource("notes://public")
    async def public() -> str:
        return "public"

    @app.resource("notes://secret", scopes=["admin"])
    async def secret() -> str:
        return "secret"

    @app.resource_template("vault://{item}", scopes=["admin"])
    async def vault(item: str) -> str:
        return item

    @app.prompt(scopes=["admin"])
    async def audit_prompt() -> str:
        return "audit"

    @app.prompt
    async def hello() -> str:
        return "hello"

    return app


@asynccontextmanager
async def jwt_server(
    auth: AuthServer, app: trio_mcp.App | None = None, required_scopes: tuple[str, ...] = (),
) -> AsyncIterator[tuple[str, JWTVerifier]]:
    """Serve ``app`` over HTTP verifying JWTs of ``auth``; yield (url, verifier)."""
    verifier = JWTVerifier(auth.issuer + "/jwks.json", auth.issuer, "http://pending")
    http_app = trio_mcp.StreamableHttpApp(
        app or secured_app(), policy=trio_mcp.HttpPolicy(
            verifier=verifier, scopes_supported=["tools", "admin"],
            required_scopes=required_scopes))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        verifier.audience = address.url  # the canonical URI, known once bound
        yield address.url, verifier
        nursery.cancel_scope.cancel()


def text_json(result: trio_mcp.CallToolResult) -> Any:
    assert not result.is_error, result.text
    return json.loads(result.text)


# --- valid tokens, identity --------------------------------------------------------------------


async def test_auth_jwt_token_gives_the_handler_its_identity(auth_server: AuthServer) -> None:
    """A valid JWT reaches the tool; ``ctx.identity`` has subject, client id, scopes, claims."""
    seen: list[Identity | None] = []
    app = secured_app()

    @app.tool
    async def claims(ctx: trio_mcp.RequestContext) -> str:
        seen.append(ctx.identity)
        return "ok"

    async with jwt_server(auth_server, app) as (url, _):
        token = auth_server.mint({"aud": url, "sub": "alice", "client_id": "agent",
                                  "scope": "tools admin", "tenant": "t1"})
        for era in ("2025-11-25", ERA_2026):
            async with trio_mcp.open_http_client(url, token=token, era=era) as client:
                me = text_json(await client.call_tool("whoami"))
                assert me == {"subject": "alice", "client_id": "agent",
                              "scopes": ["admin", "tools"]}
                await client.call_tool("claims")
    assert [i.claims["tenant"] for i in seen if i is not None] == ["t1", "t1"]
    assert all(i is not None and i.owner == "alice" for i in seen)


async def test_auth_missing_token_is_401_naming_the_metadata(auth_server: AuthServer) -> None:
    """2025-11-25 authorization.mdx: "MCP servers MUST implement the OAuth 2.0 Protected
    Resource Metadata (RFC9728)" and include "the resource metadata URL in the
    WWW-Authenticate HTTP header under resource_metadata when returning 401"; the document
    "MUST include the authorization_servers field"; it is served at the path-suffixed
    well-known URI and at the root. The 401 also names the scopes required (``scope=``,
    SHOULD), not every scope supported."""
    async with jwt_server(auth_server, required_scopes=("tools",)) as (url, _), \
            http_client() as client:
        response = await Raw(client, url).post(INITIALIZE)
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "error=" not in challenge
        assert 'scope="tools"' in challenge
        metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert f'resource_metadata="{metadata_url}"' in challenge
        for where in (metadata_url, metadata_url.removesuffix("/mcp")):
            document = (await client.get(where)).json()
            assert document["resource"] == url
            assert document["authorization_servers"] == [auth_server.issuer]
            assert document["scopes_supported"] == ["tools", "admin"]


BAD_TOKENS = [
    "tampered", "expired", "not_yet_valid", "wrong_issuer", "wrong_audience", "no_audience",
    "unknown_key", "alg_none", "hmac_with_public_key", "no_exp", "garbage", "other_signer",
]


def forge(auth: AuthServer, kind: str, url: str) -> str:
    """A token of ``kind`` that must be refused (all else valid, for ``url``)."""
    import time

    now = int(time.time())
    good = {"aud": url}
    if kind == "tampered":  # payload swapped after signing (scope escalation)
        header, _, signature = auth.mint(good).split(".")
        body = auth.mint({**good, "scope": "tools admin root"}).split(".")[1]
        return f"{header}.{body}.{signature}"
    if kind == "expired":
        return auth.mint({**good, "exp": now - 120, "iat": now - 600})
    if kind == "not_yet_valid":
        return auth.mint({**good, "nbf": now + 600})
    if kind == "wrong_issuer":
        return auth.mint({**good, "iss": "https://evil.example"})
    if kind == "wrong_audience":
        return auth.mint({"aud": "https://other-server.example/mcp"})
    if kind == "no_audience":
        return auth.mint(good, drop=("aud",))
    if kind == "unknown_key":
        return auth.mint(good, kid=auth.add_key(publish=False))
    if kind == "alg_none":
        return auth.unsigned({"iss": auth.issuer, "sub": "alice", "aud": url, "exp": now + 300,
                              "scope": "tools admin"}, auth.signing_kid)
    if kind == "hmac_with_public_key":
        return auth.hmac_with_public_key(good, auth.signing_kid)
    if kind == "no_exp":
        return auth.mint(good, drop=("exp",))
    if kind == "garbage":
        return "not-a-jwt"
    if kind == "other_signer":  # a published kid, but signed with another key
        other = auth.keys[auth.add_key(publish=False)]
        return auth.mint(good, key=other)
    raise AssertionError(kind)


async def test_auth_every_bad_token_is_401_invalid_token(auth_server: AuthServer) -> None:
    """2025-11-25 authorization.mdx: "Invalid or expired tokens MUST receive a HTTP 401
    response"; "MCP servers MUST validate that access tokens were issued specifically for
    them as the intended audience" (RFC 8707); RFC 6750 3.1: ``error="invalid_token"``.
    Each forged token is refused, and a good one still works after them."""
    async with jwt_server(auth_server) as (url, verifier), http_client() as client:
        raw = Raw(client, url)
        for kind in BAD_TOKENS:
            raw.headers["Authorization"] = f"Bearer {forge(auth_server, kind, url)}"
            response = await raw.post(INITIALIZE)
            assert response.status_code == 401, (kind, response.text)
            challenge = response.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge, kind
            assert "resource_metadata=" in challenge, kind
        raw.headers["Authorization"] = f"Bearer {auth_server.mint({'aud': url})}"
        assert (await raw.post(INITIALIZE)).status_code == 200
        assert verifier.fetches <= 2  # one fetch, one for the first unknown kid


async def test_auth_rotated_key_is_accepted_the_first_time(auth_server: AuthServer) -> None:
    """A key newly published in the JWKS is fetched on its first token and accepted; further
    unknown kids do not refetch within ``refetch_interval`` (bounded rate)."""
    async with jwt_server(auth_server) as (url, verifier), http_client() as client:
        raw = Raw(client, url)
        raw.headers["Authorization"] = f"Bearer {auth_server.mint({'aud': url})}"
        assert (await raw.post(INITIALIZE)).status_code == 200
        assert auth_server.jwks_fetches == 1
        auth_server.rotate()
        raw.headers["Authorization"] = f"Bearer {auth_server.mint({'aud': url})}"
        assert (await raw.post(INITIALIZE)).status_code == 200
        assert auth_server.jwks_fetches == 2
        for _ in range(3):  # made-up kids: refused, and no new fetch (rate bound)
            forged = auth_server.mint({"aud": url}, header={"kid": "made-up"})
            raw.headers["Authorization"] = f"Bearer {forged}"
            assert (await raw.post(INITIALIZE)).status_code == 401
        assert auth_server.jwks_fetches == 2 and verifier.fetches == 2


# --- scopes ----------------------------------------------------------------------------------


async def test_auth_scopes_hide_and_refuse_over_http(auth_server: AuthServer) -> None:
    """Without ``admin``, ``admin_echo``, the scoped resource, template and prompt are left out
    of the lists and refused with 403 ``insufficient_scope`` naming the scope (2025-11-25
    authorization.mdx, "Runtime Insufficient Scope Errors": "HTTP 403 Forbidden", "error=
    "insufficient_scope"", "scope="..."", "resource_metadata"), in both eras; with it they
    are listed and work."""
    async with jwt_server(auth_server) as (url, _), http_client() as http:
        reader = auth_server.mint({"aud": url, "sub": "rita", "scope": "tools"})
        admin = auth_server.mint({"aud": url, "sub": "ada", "scope": "tools admin"})
        for era in ("2025-11-25", ERA_2026):
            async with trio_mcp.open_http_client(url, token=reader, era=era) as client:
                assert "admin_echo" not in {t.name for t in await client.list_all_tools()}
                assert "whoami" in {t.name for t in await client.list_all_tools()}
                assert {r.uri for r in await client.list_all_resources()} == {"notes://public"}
                assert await client.list_all_resource_templates() == []
                assert {p.name for p in await client.list_all_prompts()} == {"hello"}
            async with trio_mcp.open_http_client(url, token=admin, era=era) as client:
                assert "admin_echo" in {t.name for t in await client.list_all_tools()}
                assert (await client.call_tool("admin_echo", {"text": "hi"})).text == "hi"
                assert (await client.read_resource("vault://x")).contents[0].text == "x"
                assert (await client.get_prompt("audit_prompt")).messages
        raw = Raw(http, url)
        raw.headers["Authorization"] = f"Bearer {reader}"
        await raw.initialize()
        refusals = [
            ("tools/call", {"name": "admin_echo", "arguments": {"text": "x"}}),
            ("resources/read", {"uri": "notes://secret"}),
            ("resources/read", {"uri": "vault://x"}),
            ("prompts/get", {"name": "audit_prompt"}),
        ]
        for number, (method, params) in enumerate(refusals):
            response = await raw.post({"jsonrpc": "2.0", "id": number, "method": method,
                                       "params": params})
            assert response.status_code == 403, (method, response.text)
            challenge = response.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge and 'scope="admin"' in challenge
            assert "resource_metadata=" in challenge
            assert response.json()["id"] == number
        # The modern era: the same 403 on a 2026-07-28 POST.
        modern = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "admin_echo", "arguments": {"text": "x"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": ERA_2026,
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        response = await http.post(url, json=modern, headers={
            "Authorization": f"Bearer {reader}", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": ERA_2026, "Mcp-Method": "tools/call",
            "Mcp-Name": "admin_echo"})
        assert response.status_code == 403
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_auth_scopes_over_websocket_are_jsonrpc_errors(auth_server: AuthServer) -> None:
    """Elsewhere than HTTP the refusal is a JSON-RPC error (-32602, ``data.error`` =
    ``insufficient_scope``), the tool is hidden, and the connection keeps working."""
    verifier = JWTVerifier(auth_server.issuer + "/jwks.json", auth_server.issuer,
                           "ws://mcp.example/")
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_websocket, secured_app(),
                                              verifier=verifier))
        reader = auth_server.mint({"aud": "ws://mcp.example/", "sub": "rita", "scope": "tools"})
        async with trio_mcp.open_websocket_client(address.url, token=reader) as client:
            assert "admin_echo" not in {t.name for t in await client.list_all_tools()}
            with pytest.raises(trio_mcp.RemoteError) as refused:
                await client.call_tool("admin_echo", {"text": "x"})
            assert refused.value.code == trio_mcp.INVALID_PARAMS
            assert refused.value.data == {"error": "insufficient_scope", "scope": "admin"}
            assert text_json(await client.call_tool("whoami"))["subject"] == "rita"
        with pytest.raises(trio_mcp.ConnectionFailed):
            bad = auth_server.mint({"aud": "ws://other.example/"})
            async with trio_mcp.open_websocket_client(address.url, token=bad):
                pass
        nursery.cancel_scope.cancel()


async def test_auth_scopes_deny_by_default_without_identity() -> None:
    """No verified identity (here: memory, as on stdio) holds no scope: the scoped tool is
    hidden and refused; ``task_scopes`` guard ``tasks/*`` the same way."""
    app = secured_app()
    app.task_scopes = frozenset({"tasks"})
    async with trio_mcp.open_memory_pair(app) as (client, _):
        assert "admin_echo" not in {t.name for t in await client.list_all_tools()}
        with pytest.raises(trio_mcp.RemoteError, match="Insufficient scope"):
            await client.call_tool("admin_echo", {"text": "x"})
        with pytest.raises(trio_mcp.RemoteError, match="Insufficient scope: tasks/list"):
            await client.list_tasks()
        assert text_json(await client.call_tool("whoami"))["subject"] is None


# --- tasks belong to the identity, across reconnects, in both eras -----------------------------


async def test_auth_identity_owns_tasks_across_reconnect_2025(auth_server: AuthServer) -> None:
    """A task created in one session is found from a new session with another token of the
    same subject; another subject gets -32602 (2025-11-25 tasks.mdx: tasks are bound to the
    requestor's authorization context)."""
    app = secured_app()
    app.task_scopes = frozenset({"tools"})
    async with jwt_server(auth_server, app) as (url, _):
        first = auth_server.mint({"aud": url, "sub": "alice", "jti": "1"})
        async with trio_mcp.open_http_client(url, token=first) as client:
            handle = await client.call_tool_task("park")
            task_id = handle.task_id
        again = auth_server.mint({"aud": url, "sub": "alice", "jti": "2", "scope": "tools x"})
        async with trio_mcp.open_http_client(url, token=again) as client:
            assert (await client.get_task(task_id)).status == "working"
            assert task_id in {t.task_id for t in (await client.list_tasks()).tasks}
            assert (await client.cancel_task(task_id)).status == "cancelled"
        mallory = auth_server.mint({"aud": url, "sub": "mallory"})
        async with trio_mcp.open_http_client(url, token=mallory) as client:
            with pytest.raises(trio_mcp.RemoteError) as refused:
                await client.get_task(task_id)
            assert refused.value.code == trio_mcp.INVALID_PARAMS
        no_task_scope = auth_server.mint({"aud": url, "sub": "alice", "scope": "admin"})
        async with trio_mcp.open_http_client(url, token=no_task_scope) as client:
            with pytest.raises(trio_mcp.RemoteError, match=r"HTTP 403: .*insufficient scope"):
                await client.get_task(task_id)


async def test_auth_identity_owns_tasks_across_reconnect_2026(auth_server: AuthServer) -> None:
    """The same in 2026-07-28 (the tasks extension): every POST is verified on its own; the
    task made by one connection is read and cancelled by a new one of the same subject."""
    async with jwt_server(auth_server) as (url, _):
        first = auth_server.mint({"aud": url, "sub": "alice", "jti": "1"})
        async with trio_mcp.open_http_client(url, token=first, era=ERA_2026) as client:
            handle = await client.call_tool_task("park")
            task_id = handle.task_id
            assert task_id
        again = auth_server.mint({"aud": url, "sub": "alice", "jti": "2"})
        async with trio_mcp.open_http_client(url, token=again, era=ERA_2026) as client:
            assert (await client.get_task(task_id)).status == "working"
            await client.cancel_task(task_id)
            assert (await client.get_task(task_id)).status == "cancelled"
        mallory = auth_server.mint({"aud": url, "sub": "mallory"})
        async with trio_mcp.open_http_client(url, token=mallory, era=ERA_2026) as client:
            with pytest.raises(trio_mcp.RemoteError) as refused:
                await client.get_task(task_id)
            assert refused.value.code == trio_mcp.INVALID_PARAMS


# --- RFC 7662 introspection ------------------------------------------------------------------


async def test_auth_introspection_verifier(auth_server: AuthServer) -> None:
    """Opaque tokens checked with RFC 7662 (this server authenticated with HTTP Basic): active
    ones work and are cached; inactive, unknown, expired and other-audience ones are 401
    ``invalid_token``."""
    import time

    auth_server.token_format = "opaque"
    verifier = IntrospectionVerifier(auth_server.issuer + "/introspect", *RS_CLIENT,
                                     issuer=auth_server.issuer, audience="http://pending")
    http_app = trio_mcp.StreamableHttpApp(secured_app(),
                                          policy=trio_mcp.HttpPolicy(verifier=verifier))
    async with trio.open_nursery() as nursery, http_client() as http:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        url = verifier.audience = address.url
        good = auth_server.issue("agent", {"tools"}, url)["access_token"]
        async with trio_mcp.open_http_client(url, token=good) as client:
            assert text_json(await client.call_tool("whoami"))["subject"] == "agent"
            await client.call_tool("whoami")
        assert auth_server.introspections == 1  # cached for the later requests
        now = int(time.time())
        expired = auth_server.issue("agent", {"tools"}, url)["access_token"]
        auth_server.opaque[expired]["exp"] = now - 120
        other = auth_server.issue("agent", {"tools"}, "https://other.example/mcp")["access_token"]
        revoked = auth_server.issue("agent", {"tools"}, url)["access_token"]
        del auth_server.opaque[revoked]
        raw = Raw(http, url)
        for token in (expired, other, revoked, "unknown"):
            raw.headers["Authorization"] = f"Bearer {token}"
            response = await raw.post(INITIALIZE)
            assert response.status_code == 401
            assert 'error="invalid_token"' in response.headers["www-authenticate"]
        # Wrong resource-server credentials at the authorization server: a server failure.
        verifier.client_secret = "wrong"
        raw.headers["Authorization"] = "Bearer not-cached"
        assert (await raw.post(INITIALIZE)).status_code == 500
        nursery.cancel_scope.cancel()


# --- the client: static token, httpx.Auth, client_credentials --------------------------------


async def test_auth_client_credentials_discovers_and_sends_resource(
    auth_server: AuthServer,
) -> None:
    """``ClientCredentials`` finds the token endpoint from the 401's ``resource_metadata``
    and the authorization server's RFC 8414 metadata, and asks a token for this server
    (2025-11-25 authorization.mdx: "MCP clients MUST include the resource parameter in
    authorization and token requests"); both eras."""
    async with jwt_server(auth_server) as (url, _):
        for era in ("2025-11-25", ERA_2026):
            auth = ClientCredentials("agent", "agent-secret", scope="tools admin")
            async with trio_mcp.open_http_client(url, auth=auth, era=era) as client:
                me = text_json(await client.call_tool("whoami"))
                assert me == {"subject": "agent", "client_id": "agent",
                              "scopes": ["admin", "tools"]}
                assert (await client.call_tool("admin_echo", {"text": "ok"})).text == "ok"
            assert auth.tokens_fetched == 1
    requests = auth_server.token_requests
    assert [r["resource"] for r in requests] == [url, url]
    assert all(r["grant_type"] == "client_credentials" and r["_auth"] == "basic"
               for r in requests)


async def test_auth_client_credentials_renews_before_expiry_and_on_401(
    auth_server: AuthServer,
) -> None:
    """A token at its renewal time is replaced before the request; a token the server stops
    accepting (401) is replaced once and the request retried."""
    auth_server.token_format = "opaque"
    verifier = IntrospectionVerifier(auth_server.issuer + "/introspect", *RS_CLIENT,
                                     issuer=auth_server.issuer, cache_ttl=0)
    http_app = trio_mcp.StreamableHttpApp(secured_app(),
                                          policy=trio_mcp.HttpPolicy(verifier=verifier))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        auth = ClientCredentials("agent", "agent-secret")
        async with trio_mcp.open_http_client(address.url, auth=auth) as client:
            fetched = auth.tokens_fetched
            auth_server.opaque.clear()  # every token revoked
            assert text_json(await client.call_tool("whoami"))["subject"] == "agent"
            assert auth.tokens_fetched == fetched + 1
            auth_server.opaque.clear()  # revoked again, under five concurrent calls:
            fetched = auth.tokens_fetched
            async with trio.open_nursery() as calls:
                for _ in range(5):
                    calls.start_soon(client.call_tool, "whoami")
            assert auth.tokens_fetched == fetched + 1  # one renewal served them all
            auth_server.token_ttl = 0  # expires at once: renewed before each request
            auth_server.opaque.clear()
            await client.call_tool("whoami")
            renewed = auth.tokens_fetched
            await client.call_tool("whoami")
            assert auth.tokens_fetched > renewed
        nursery.cancel_scope.cancel()


async def test_auth_client_static_token_and_httpx_auth(auth_server: AuthServer) -> None:
    """``auth=`` also takes a static token or any ``httpx.Auth``; ``token`` and ``auth``
    together are refused."""

    class Bearer(httpx.Auth):
        def __init__(self, token: str) -> None:
            self.token = token

        def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request

    async with jwt_server(auth_server) as (url, _):
        token = auth_server.mint({"aud": url, "sub": "bo"})
        for auth in (token, Bearer(token)):
            async with trio_mcp.open_http_client(url, auth=auth) as client:
                assert text_json(await client.call_tool("whoami"))["subject"] == "bo"
        with pytest.raises(ValueError, match="not both"):
            async with trio_mcp.open_http_client(url, auth=token, token=token):
                pass
        with pytest.raises(httpx.HTTPStatusError):
            async with trio_mcp.open_http_client(url):  # no token: 401
                pass


# --- units (no I/O) ----------------------------------------------------------------------------


def test_auth_identity_owner_and_scopes() -> None:
    """The owner is the subject (stable across tokens), else ``client:<id>``; scopes parse
    from a space-separated string; claims are read-only."""
    a = Identity("alice", "app", "tools admin", 1.0, {"x": 1})
    assert a.owner == "alice" and a.scopes == {"tools", "admin"} and a.has_scopes(["admin"])
    assert Identity(None, "robot").owner == "client:robot"
    with pytest.raises(ValueError):
        _ = Identity(None).owner
    with pytest.raises(TypeError):
        a.claims["x"] = 2  # type: ignore[index]
    assert a == Identity("alice", "app", ["admin", "tools"], 1.0, {"other": True})


def test_auth_scopes_must_be_tokens() -> None:
    app = trio_mcp.App("s")
    for bad in ([""], ["two words"], ['q"uote']):
        with pytest.raises(ValueError, match="scope"):
            app.tool(scopes=bad)
    app.tool(name="t", scopes="admin")(lambda: "x")
    assert app.scope_rules[("tool", "t")] == {"admin"}  # a string is one scope
    app.remove_tool("t")
    assert ("tool", "t") not in app.scope_rules


def test_auth_jwt_verifier_refuses_unsafe_algorithms() -> None:
    """``none`` and HMAC algorithms can never be allowed (a public key is no HMAC secret)."""
    for algorithms in (["none"], ["HS256"], ["RS256", "HS512"], []):
        with pytest.raises(ValueError):
            JWTVerifier("http://as/jwks", "http://as", "http://rs/mcp", algorithms=algorithms)
    with pytest.raises(ValueError, match="audience"):
        JWTVerifier("http://as/jwks", "http://as", [])


def test_auth_challenge_and_discovery_urls() -> None:
    from trio_mcp.auth._client import (
        authorization_server_urls,
        canonical_resource,
        challenge_params,
        protected_resource_urls,
    )

    header = ('Bearer realm="mcp", error="insufficient_scope", scope="a b", '
              'resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp"')
    assert challenge_params(header) == {
        "realm": "mcp", "error": "insufficient_scope", "scope": "a b",
        "resource_metadata": "https://rs.example/.well-known/oauth-protected-resource/mcp"}
    assert challenge_params("Basic realm=x") == {}
    assert protected_resource_urls("https://rs.example/public/mcp?x=1") == [
        "https://rs.example/.well-known/oauth-protected-resource/public/mcp",
        "https://rs.example/.well-known/oauth-protected-resource"]
    # 2025-11-25 authorization.mdx: the priority order for issuers with and without a path.
    assert authorization_server_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]
    assert authorization_server_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]
    assert canonical_resource("HTTPS://RS.Example/mcp#frag") == "https://rs.example/mcp"
    with pytest.raises(ValueError):
        ClientCredentials("id")  # neither a secret nor a key


async def test_auth_required_scopes_and_key_alg_mismatch(auth_server: AuthServer) -> None:
    """``required_scopes`` are needed by every request (403 ``insufficient_scope``); a JWKS key
    whose ``alg`` differs from the token's header refuses it (401)."""
    kid = auth_server.add_key()
    auth_server.published.remove(kid)
    key = auth_server.keys[kid]
    auth_server.keys[kid] = type(key).import_key(key.as_dict(private=True),
                                                  parameters={"alg": "RS512", "kid": kid})
    auth_server.published.append(kid)
    verifier = JWTVerifier(auth_server.issuer + "/jwks.json", auth_server.issuer, "http://p")
    http_app = trio_mcp.StreamableHttpApp(secured_app(), policy=trio_mcp.HttpPolicy(
        verifier=verifier, required_scopes=["tools"]))
    async with trio.open_nursery() as nursery, http_client() as http:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        url = verifier.audience = address.url
        raw = Raw(http, url)
        raw.headers["Authorization"] = f"Bearer {auth_server.mint({'aud': url, 'scope': 'x'})}"
        response = await raw.post(INITIALIZE)
        assert response.status_code == 403
        assert 'error="insufficient_scope", scope="tools"' in response.headers["www-authenticate"]
        mismatched = auth_server.mint({"aud": url}, kid=kid, alg="RS256", key=key)
        raw.headers["Authorization"] = f"Bearer {mismatched}"
        assert (await raw.post(INITIALIZE)).status_code == 401
        nursery.cancel_scope.cancel()


async def test_auth_metadata_behind_a_proxy_and_client_resource_check(
    auth_server: AuthServer,
) -> None:
    """With a configured canonical URI (a TLS proxy in front), the challenge names its
    metadata URL as RFC 9728 3.1 builds it ("inserting /.well-known/oauth-protected-resource
    between the host component and the path") and that path is served too; our
    ``ClientCredentials`` refuses metadata whose ``resource`` is not the server it talks to."""
    public = "https://mcp.example.com/api/mcp"
    verifier = JWTVerifier(auth_server.issuer + "/jwks.json", auth_server.issuer, public)
    http_app = trio_mcp.StreamableHttpApp(secured_app(), policy=trio_mcp.HttpPolicy(
        verifier=verifier))
    async with trio.open_nursery() as nursery, http_client() as http:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        response = await Raw(http, address.url).post(INITIALIZE)
        assert response.status_code == 401
        assert ('resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource'
                '/api/mcp"') in response.headers["www-authenticate"]
        origin = address.url.removesuffix("/mcp")
        for path in ("/api/mcp", "/mcp", ""):
            document = (await http.get(f"{origin}/.well-known/oauth-protected-resource{path}"))
            assert document.json()["resource"] == public, path
        nursery.cancel_scope.cancel()
    # Our client follows a challenge to a metadata document naming another resource: it stops.
    other = trio_mcp.StreamableHttpApp(secured_app(), policy=trio_mcp.HttpPolicy(
        tokens={"t": "x"}, resource_metadata={"resource": "https://other.example/mcp",
                                             "authorization_servers": [auth_server.issuer]}))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_http, other)
        with pytest.raises(trio_mcp.auth.OAuthError, match="is not this server"):
            async with trio_mcp.open_http_client(
                address.url, auth=ClientCredentials("agent", "agent-secret")):
                pass
        assert auth_server.token_requests == []
        nursery.cancel_scope.cancel()


async def test_auth_websocket_identity_owns_tasks_across_reconnect(
    auth_server: AuthServer,
) -> None:
    """Over WebSocket the verified subject owns the tasks: a new connection with another
    token of the same subject finds the task; another subject gets -32602."""
    audience = "ws://mcp.example/"
    verifier = JWTVerifier(auth_server.issuer + "/jwks.json", auth_server.issuer, audience)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(trio_mcp.serve_websocket, secured_app(),
                                              verifier=verifier))
        first = auth_server.mint({"aud": audience, "sub": "alice", "jti": "1"})
        async with trio_mcp.open_websocket_client(address.url, token=first) as client:
            task_id = (await client.call_tool_task("park")).task_id
        again = auth_server.mint({"aud": audience, "sub": "alice", "jti": "2"})
        async with trio_mcp.open_websocket_client(address.url, token=again) as client:
            assert (await client.get_task(task_id)).status == "working"
            assert (await client.cancel_task(task_id)).status == "cancelled"
        bob = auth_server.mint({"aud": audience, "sub": "bob"})
        async with trio_mcp.open_websocket_client(address.url, token=bob) as client:
            with pytest.raises(trio_mcp.RemoteError) as refused:
                await client.get_task(task_id)
            assert refused.value.code == trio_mcp.INVALID_PARAMS
        nursery.cancel_scope.cancel()


async def test_auth_custom_verifier_and_a_nameless_identity() -> None:
    """Any object with ``async verify`` is a verifier; an identity with neither subject nor
    client id cannot own anything: a server failure (500), not an anonymous caller."""

    class Verifier:
        async def verify(self, token: str) -> Identity | None:
            await trio.lowlevel.checkpoint()
            return {"good": Identity("gina", scopes="admin"), "nameless": Identity(None)}.get(
                token)

    http_app = trio_mcp.StreamableHttpApp(secured_app(), policy=trio_mcp.HttpPolicy(
        verifier=Verifier()))
    async with trio.open_nursery() as nursery, http_client() as http:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        raw = Raw(http, address.url)
        for token, status in (("good", 200), ("nameless", 500), ("other", 401)):
            raw.headers["Authorization"] = f"Bearer {token}"
            assert (await raw.post(INITIALIZE)).status_code == status, token
        async with trio_mcp.open_http_client(address.url, token="good") as client:
            assert (await client.call_tool("admin_echo", {"text": "g"})).text == "g"
        nursery.cancel_scope.cancel()


async def test_auth_client_credentials_only_authorization_server(auth_server: AuthServer) -> None:
    """RFC 8414 2: ``authorization_endpoint`` is "REQUIRED unless no grant types are supported
    that use the authorization endpoint": our client takes metadata without it, and the token
    endpoint wherever the metadata says."""
    auth_server.authorization_endpoint = False
    auth_server.token_path = "/oauth2/token"
    async with jwt_server(auth_server) as (url, _):
        auth = ClientCredentials("reader", "reader-secret")
        async with trio_mcp.open_http_client(url, auth=auth) as client:
            assert text_json(await client.call_tool("whoami"))["scopes"] == ["tools"]
    assert auth.token_endpoint == auth_server.issuer + "/oauth2/token"


async def test_auth_jwt_token_types_when_asked(auth_server: AuthServer) -> None:
    """``token_types=("at+jwt",)`` (RFC 9068 4: "Resource servers MUST verify that the typ
    header value is at+jwt or application/at+jwt") refuses a ``typ: JWT`` token."""
    verifier = JWTVerifier(auth_server.issuer + "/jwks.json", auth_server.issuer,
                           "http://rs/mcp", token_types=("at+jwt", "application/at+jwt"))
    good = auth_server.mint({"aud": "http://rs/mcp"}, header={"typ": "at+jwt"})
    assert (await verifier.verify(good)).subject == "alice"
    with pytest.raises(trio_mcp.auth.InvalidToken, match="token type"):
        await verifier.verify(auth_server.mint({"aud": "http://rs/mcp"}))
