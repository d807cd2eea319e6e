"""Streamable HTTP, MCP 2026-07-28: each POST served in its own task, with no session.

A modern POST is one request ("Each request is independent", 2026-07-28
basic/transports): the App's ``RequestServer`` serves it in the HTTP request's
own Trio task, with no session, bus or event store (counted here), and who sent
it travels on the request: its identity, its token's scopes and its remote
address are that POST's, whatever other POSTs are in flight.
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
from trio_mcp.peer._session import MessageBus, Session
from trio_mcp.transports._http_session import HttpSession
from trio_mcp.transports._http_store import MemoryEventStore

from tests.http_support import http_client, serving
from tests.transports.http.test_http_modern import Probe, headers_for, modern_app, request

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("both_http_servers")]
TOKENS = {"token-alice": "alice", "token-bob": "bob"}


def whoami_app(probe: Probe | None = None) -> trio_mcp.App:
    """The modern test App plus ``whoami`` (the request's requestor context and remote)."""
    app = modern_app(probe)

    @app.tool(inline=True)
    def whoami(ctx: trio_mcp.RequestContext) -> str:
        """Who sent this request, and from where."""
        assert ctx.caller is not None  # a 2026-07-28 POST always has one
        return json.dumps([ctx.caller.context, ctx.info.get("remote"),
                           ctx.identity.subject if ctx.identity else None])

    return app


async def post(client: httpx.AsyncClient, url: str, body: dict[str, Any],
               token: str | None = None) -> httpx.Response:
    headers = headers_for(body)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await client.post(url, content=json.dumps(body).encode(), headers=headers)


def text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return str(result["content"][0]["text"])


async def test_modern_posts_allocate_no_session_bus_or_event_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the endpoint runs, a 2026-07-28 POST (plain call, task create, tasks/get, an
    MRTR round, a list, an error) makes no ``HttpSession``, JSON-RPC ``Session``,
    ``MessageBus`` or event store: it is served in its HTTP request's own task."""
    made: list[str] = []
    for cls in (HttpSession, Session, MessageBus, MemoryEventStore):
        init = cls.__init__

        def counting(self: Any, *args: Any, __init: Any = init, **kwargs: Any) -> None:
            made.append(type(self).__name__)
            __init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    async with serving(whoami_app()) as (url, http_app), http_client() as client:
        assert made  # the endpoint's own (once, at start)
        made.clear()
        calls = [
            request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}}),
            request(2, "tools/call", {"name": "whoami", "arguments": {}}),
            request(3, "tools/list"),
            request(4, "tools/call", {"name": "nope", "arguments": {}}),
        ]
        for body in calls * 3:
            response = await post(client, url, body)
            assert response.status_code in (200, 400), response.text
        assert made == []
        assert http_app.sessions == {}


async def test_requests_of_two_identities_stay_apart() -> None:
    """Tasks and requests belong to the identity of the POST that sent them ('Servers
    MUST bind ... to the authorization context', tasks extension), request by request."""
    policy = trio_mcp.HttpPolicy(tokens=TOKENS)
    async with serving(whoami_app(), policy=policy) as (url, _), http_client() as client:
        call = request(1, "tools/call", {"name": "whoami", "arguments": {}})
        for token, owner in (("token-alice", "alice"), ("token-bob", "bob"),
                             ("token-alice", "alice")):
            context, _, subject = json.loads(text(await post(client, url, call, token)))
            assert (context, subject) == (f"identity:{owner}", owner)
    async with serving(whoami_app()) as (url, _), http_client() as client:
        anonymous = json.loads(text(await post(client, url, call)))
        assert anonymous[0] == "anonymous" and anonymous[2] is None


async def test_each_post_has_its_own_tokens_scopes() -> None:
    """Two tokens of one owner: each POST is served with its own token's scopes, also
    while the other's request is in flight."""
    app = whoami_app()
    gate, inside = trio.Event(), trio.Event()

    @app.tool(scopes=["admin"], inline=True)
    def admin_only() -> str:
        """For admins."""
        return "admin"

    @app.tool
    async def hold() -> str:
        """Wait for the gate."""
        inside.set()
        await gate.wait()
        return "held"

    tokens = {"read": Identity("alice", scopes="tools"),
              "admin": Identity("alice", scopes="tools admin")}
    async with serving(app, policy=trio_mcp.HttpPolicy(tokens=tokens)) as (url, _), \
            http_client() as client:
        listing = request(1, "tools/list")
        names = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, client, url,
                               request(9, "tools/call", {"name": "hold", "arguments": {}}),
                               "admin")
            with trio.fail_after(10):
                await inside.wait()
            for token in ("admin", "read", "admin"):
                response = await post(client, url, listing, token)
                assert response.status_code == 200, response.text
                names.append({t["name"] for t in response.json()["result"]["tools"]})
            gate.set()
        assert "admin_only" in names[0] and "admin_only" in names[2]
        assert "admin_only" not in names[1]


async def test_each_post_has_its_own_remote_address() -> None:
    """What a tool sees of its transport is its own request's, not an earlier one's."""
    async with serving(whoami_app()) as (url, _):
        call = request(1, "tools/call", {"name": "whoami", "arguments": {}})
        remotes = []
        for _ in range(2):
            async with http_client() as client:  # a new connection: a new client port
                _, remote, _ = json.loads(text(await post(client, url, call)))
                remotes.append(remote)
        assert remotes[0] != remotes[1] and all(r.startswith("127.0.0.1:") for r in remotes)


async def test_concurrent_posts_with_one_id_get_their_own_answers() -> None:
    """Requests in flight together, even with the same JSON-RPC id, each get their own
    answer (and their own notifications)."""
    probe = Probe()
    async with serving(whoami_app(probe)) as (url, http_app), http_client() as client:
        gate, all_in = trio.Event(), trio.Event()
        inside = [0]

        @http_app.app.tool
        async def hold(n: int, ctx: trio_mcp.RequestContext) -> int:
            """Wait for the gate, once all three are in."""
            inside[0] += 1
            if inside[0] == 3:
                all_in.set()
            await gate.wait()
            await ctx.log("info", f"from {n}")
            return n

        answers: list[str] = []

        async def one(n: int) -> None:
            body = request(7, "tools/call", {"name": "hold", "arguments": {"n": n}})
            body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
            response = await post(client, url, body)
            assert response.status_code == 200, response.text
            events = [json.loads(line[5:]) for line in response.text.splitlines()
                      if line.startswith("data:")]
            assert [e["params"]["data"] for e in events[:-1]] == [f"from {n}"]
            answers.append(str(events[-1]["result"]["content"][0]["text"]))

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(one, n)
            with trio.fail_after(10):
                await all_in.wait()
            gate.set()
        assert sorted(answers) == ["0", "1", "2"]
