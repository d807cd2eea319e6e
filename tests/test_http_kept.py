"""Streamable HTTP, MCP 2026-07-28: the session of a POST kept for the next POST of its identity.

A modern POST is answered by a session and peer of its own; one that ended in
full is kept and serves the next POST of the same identity (``KeptSessions``).
These tests pin what must not change with that: each POST is still its own
request ("Each request is independent", 2026-07-28 basic/transports), a peer
never serves another identity, a cut or open request does not leave its
session to anyone, and the number kept is bounded.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp.auth import Identity
from trio_mcp.transports._http_reuse import KeptSessions
from trio_mcp.transports._http_session import HttpSession
from trio_mcp.transports._http_store import MemoryEventStore

from .http_support import http_client, serving
from .test_http_modern import Probe, headers_for, modern_app, request

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("both_http_servers")]
TOKENS = {"token-alice": "alice", "token-bob": "bob"}


def whoami_app(probe: Probe | None = None) -> trio_mcp.App:
    """The modern test App plus ``whoami`` (the peer's requestor context and remote)."""
    app = modern_app(probe)

    @app.tool(inline=True)
    def whoami(ctx: trio_mcp.RequestContext) -> str:
        """Who this peer serves, and from where."""
        return json.dumps([ctx.peer.context, ctx.peer.bus.info.get("remote")])

    return app


async def post(client: httpx.AsyncClient, url: str, body: dict[str, Any],
               token: str | None = None) -> httpx.Response:
    headers = headers_for(body)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await client.post(url, content=json.dumps(body).encode(), headers=headers)


async def kept_count(http_app: trio_mcp.StreamableHttpApp, n: int) -> None:
    """Check that ``n`` sessions are kept, once the server is done with the POST.

    (The server finishes a POST just after the client has its answer.)
    """
    await trio.testing.wait_all_tasks_blocked()
    assert len(http_app.kept) == n


def text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return str(result["content"][0]["text"])


async def test_kept_session_serves_only_its_identity() -> None:
    """Tasks and requests of a modern peer belong to its identity: a kept session serves
    the next POST of the same identity, never another's ('Servers MUST bind ... to the
    authorization context', tasks extension); each POST still gets its own answer."""
    policy = trio_mcp.HttpPolicy(tokens=TOKENS)
    async with serving(whoami_app(), policy=policy) as (url, http_app), \
            http_client() as client:
        call = request(1, "tools/call", {"name": "whoami", "arguments": {}})
        first = json.loads(text(await post(client, url, call, "token-alice")))
        assert first[0] == "identity:alice"
        await kept_count(http_app, 1)
        assert [s.identity for s in http_app.kept.idle] == ["alice"]
        alices = http_app.kept.idle[0]
        bob = json.loads(text(await post(client, url, call, "token-bob")))
        assert bob[0] == "identity:bob"
        await kept_count(http_app, 2)
        assert [s.identity for s in http_app.kept.idle] == ["alice", "bob"]
        assert http_app.kept.idle[0] is alices  # bob's POST did not take it
        again = json.loads(text(await post(client, url, call, "token-alice")))
        assert again[0] == "identity:alice"
        await kept_count(http_app, 2)
        assert http_app.kept.idle[-1] is alices  # the same session served it
        # The same JSON-RPC id again on the kept session: a new request, answered.
        echo = request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        assert text(await post(client, url, echo, "token-alice")) == "x"
        assert http_app.sessions == {}  # still no session ids


async def test_kept_session_takes_the_new_tokens_scopes() -> None:
    """Two tokens of one owner share kept sessions; each POST is served with its own
    token's scopes: what the admin token listed, the reader's next POST does not see."""
    app = whoami_app()

    @app.tool(scopes=["admin"], inline=True)
    def admin_only() -> str:
        """For admins."""
        return "admin"

    tokens = {"read": Identity("alice", scopes="tools"),
              "admin": Identity("alice", scopes="tools admin")}
    async with serving(app, policy=trio_mcp.HttpPolicy(tokens=tokens)) as (url, http_app), \
            http_client() as client:
        listing = request(1, "tools/list")
        names = []
        for token in ("admin", "read", "admin"):
            response = await post(client, url, listing, token)
            assert response.status_code == 200, response.text
            names.append({t["name"] for t in response.json()["result"]["tools"]})
            await kept_count(http_app, 1)  # one session served all three
        assert "admin_only" in names[0] and "admin_only" in names[2]
        assert "admin_only" not in names[1]


async def test_kept_session_takes_the_new_requests_remote_address() -> None:
    """What a tool sees of its transport is its own request's, not an earlier one's."""
    async with serving(whoami_app()) as (url, http_app):
        call = request(1, "tools/call", {"name": "whoami", "arguments": {}})
        remotes = []
        for _ in range(2):
            async with http_client() as client:  # a new connection: a new client port
                _, remote = json.loads(text(await post(client, url, call)))
                remotes.append(remote)
            await kept_count(http_app, 1)
        assert remotes[0] != remotes[1]


async def test_concurrent_posts_of_one_identity_get_sessions_of_their_own() -> None:
    """One POST at a time per session: requests in flight together never share a peer."""
    probe = Probe()
    async with serving(whoami_app(probe)) as (url, http_app), http_client() as client:
        gate, all_in = trio.Event(), trio.Event()
        inside = [0]

        @http_app.app.tool
        async def hold(n: int) -> int:
            """Wait for the gate, once all three are in."""
            inside[0] += 1
            if inside[0] == 3:
                all_in.set()
            await gate.wait()
            return n

        answers: list[str] = []

        async def one(n: int) -> None:
            answers.append(text(await post(client, url, request(
                7, "tools/call", {"name": "hold", "arguments": {"n": n}}))))

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(one, n)
            with trio.fail_after(10):
                await all_in.wait()
            gate.set()
        assert sorted(answers) == ["0", "1", "2"]
        await kept_count(http_app, 3)
        assert len({id(s) for s in http_app.kept.idle}) == 3


async def test_cut_request_does_not_keep_its_session() -> None:
    """'Closing the SSE response stream MUST be treated by the server as cancellation of
    that request': its session ends, it is not kept for a later POST."""
    probe = Probe()
    async with serving(whoami_app(probe)) as (url, http_app), http_client() as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, client, url, request(
                41, "tools/call", {"name": "wait_forever", "arguments": {}}))
            with trio.fail_after(10):
                await probe.started.wait()
            nursery.cancel_scope.cancel()  # the client goes away
        with trio.fail_after(10):
            await probe.cancelled.wait()
        await kept_count(http_app, 0)
        assert list(http_app.app.connections) == []  # its session ended


async def test_kept_sessions_are_bounded_and_open_ones_refused() -> None:
    """At most ``limit`` idle sessions (the oldest go first, to be ended); a session with
    a stream still open is never kept."""
    kept = KeptSessions(limit=2)
    sessions = [HttpSession(None, "alice", MemoryEventStore(), {}) for _ in range(3)]
    open_stream = sessions[0].open_stream(1, json=False)
    assert kept.keep(sessions[0]) is sessions[0]  # its stream has not ended
    open_stream.end()
    assert kept.keep(sessions[0]) is None
    assert sessions[0].streams.keys() == {"0"}  # the request's stream is forgotten
    assert kept.keep(sessions[1]) is None
    assert kept.keep(sessions[2]) is sessions[0]  # pushed out, to be ended
    assert kept.idle == sessions[1:]
    assert kept.take("bob", {"client": ("127.0.0.1", 1)}) is None
    assert kept.take("alice", {"client": ("127.0.0.1", 1)}) is sessions[2]
    assert sessions[2].bus.info["remote"] == "127.0.0.1:1"
