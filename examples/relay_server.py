"""A relay: an agent whose task calls the same tool on another agent, as its child task.

Chain three of them (C <- B <- A) and call ``relay(2, 1.0)`` on A as a task:

    python examples/relay_server.py --http 127.0.0.1:8003 --token c-secret
    python examples/relay_server.py --http 127.0.0.1:8002 --token b-secret \
        --upstream http://127.0.0.1:8003/mcp --upstream-token c-secret --era 2026-07-28
    python examples/relay_server.py --upstream http://127.0.0.1:8002/mcp \
        --upstream-token b-secret                      # A, over stdio
    trio-mcp call --stdio "python examples/relay_server.py --upstream ..." relay \
        --args '{"depth": 2, "seconds": 1}' --task

Tool:
    relay {depth, seconds}   task_support required. depth > 0: calls
                             relay(depth - 1, seconds) on --upstream as a child
                             task (ctx.children(): cancelled with this task, its
                             questions asked of this task's requestor) and
                             returns "relay depth N <- " + the child's text.
                             depth == 0: after `seconds`, asks the requestor
                             `confirm` (a yes/no form) and returns
                             "relay depth 0: confirmed" (or declined / cancelled).

Options:
    --http HOST:PORT      serve over Streamable HTTP (endpoint /mcp); stdio without it
    --token T             the bearer token this relay's own endpoint requires
    --upstream URL        the next relay's Streamable HTTP endpoint
    --upstream-token T    this relay's own credential there (never the caller's token)
    --era REVISION        the revision spoken to the upstream: 2025-11-25 (default)
                          or 2026-07-28
    --orphan-after S      cancel a task of ours whose parent stopped following it for
                          S seconds (its agent died); 0 turns it off (default 10)
"""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial

import trio

import trio_mcp

#: The revisions ``--era`` takes.
ERAS = ("2025-11-25", "2026-07-28")
#: How often requestors are told to poll (ms): short, so a chain answers quickly.
POLL_INTERVAL_MS = 200


class Upstream:
    """The relay's one client connection to its upstream, opened on first use and
    reopened when it closed. Its questions go to whichever task's children scope
    forwards them; a question no scope claims is declined."""

    def __init__(self, url: str, token: str | None, era: str) -> None:
        self.url = url
        self.token = token
        self.era = era
        self._peer: trio_mcp.Peer | None = None
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self.app = trio_mcp.App("trio-mcp-relay-upstream", "0.1.0", host_tasks=False)

        @self.app.on_elicitation
        async def unclaimed(
            ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
        ) -> trio_mcp.ElicitResult:
            return trio_mcp.ElicitResult("decline")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the connections' nursery until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def peer(self) -> trio_mcp.Peer:
        """The open connection to the upstream (connecting if needed)."""
        async with self._lock:
            if self._peer is None or not self._peer.is_open:
                assert self._nursery is not None, "Upstream.run is not running"
                self._peer = await self._nursery.start(self._hold)
            return self._peer

    async def _hold(self, *, task_status: trio.TaskStatus[trio_mcp.Peer]) -> None:
        started = False
        try:
            async with trio_mcp.open_http_client(
                self.url, self.app, token=self.token, era=self.era
            ) as peer:
                task_status.started(peer)
                started = True
                await trio.sleep_forever()
        except trio_mcp.TrioMcpError as exc:
            if not started:
                raise  # cannot connect: the tool that asked fails with it
            # The upstream went away: reopened on next use.
            logging.getLogger("relay").info("upstream connection ended: %s", exc)


def build_app(
    upstream: Upstream | None, *, whereabouts: dict[str, str] | None = None,
    orphan_after: float = 10.0,
) -> trio_mcp.App:
    """The relay's App: the ``relay`` tool.

    Args:
        upstream: The next relay (``None``: this one can only run depth 0).
        whereabouts: Where this relay serves (``{"url": ...}`` once known), named to
            its children as their parent's endpoint.
        orphan_after: Seconds after which a child task of ours whose parent stopped
            following it cancels itself (0: never).
    """
    limits = trio_mcp.TaskLimits(
        poll_interval=POLL_INTERVAL_MS,
        orphan_after=int(orphan_after * 1000) if orphan_after > 0 else None,
    )
    app = trio_mcp.App("trio-mcp-relay", "0.1.0", limits=limits)

    @app.tool(task_support="required")
    async def relay(ctx: trio_mcp.RequestContext, depth: int, seconds: float) -> str:
        """Relay down `depth` hops; the last one asks `confirm` after `seconds`."""
        if depth < 0 or seconds < 0:
            raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "depth and seconds must be >= 0")
        if depth == 0:
            await trio.sleep(seconds)
            answer = await ctx.elicit(
                "confirm",
                trio_mcp.form_schema(
                    {"confirm": trio_mcp.boolean_field(description="Confirm? (yes/no)")},
                    ["confirm"],
                ),
                key="confirm",
            )
            if answer.action == "accept" and (answer.content or {}).get("confirm") is True:
                return "relay depth 0: confirmed"
            if answer.action == "cancel":
                return "relay depth 0: cancelled"
            return "relay depth 0: declined"
        if upstream is None:
            raise trio_mcp.McpError(
                trio_mcp.INVALID_PARAMS, f"depth {depth} needs an --upstream relay"
            )
        try:
            peer = await upstream.peer()
        except trio_mcp.ConnectionFailed as exc:
            raise trio_mcp.McpError(
                trio_mcp.INTERNAL_ERROR, f"the upstream relay cannot be reached: {exc}"
            ) from None
        async with ctx.children(url=(whereabouts or {}).get("url")) as kids:
            child = await kids.call_tool_task(
                peer, "relay", {"depth": depth - 1, "seconds": seconds}
            )
            result = await child.result()  # TaskFailed / TaskCancelled raise here
        text = "".join(b.text for b in result.content if isinstance(b, trio_mcp.TextContent))
        if result.is_error:
            raise trio_mcp.McpError(trio_mcp.INTERNAL_ERROR, f"upstream relay failed: {text}")
        return f"relay depth {depth} <- {text}"

    return app


async def serve(
    app: trio_mcp.App, upstream: Upstream | None, where: tuple[str, int] | None,
    token: str | None, whereabouts: dict[str, str],
) -> None:
    """Run the upstream holder and serve the App (HTTP when ``where`` is given, else stdio)."""
    async with trio.open_nursery() as nursery:
        if upstream is not None:
            await nursery.start(upstream.run)
        if where is None:
            await trio_mcp.serve_stdio(app)
        else:
            host, port = where
            tokens = {token: "relay-caller"} if token else None
            address = await nursery.start(partial(trio_mcp.serve_http, app, host, port,
                                                  tokens=tokens))
            whereabouts["url"] = address.url
            print(f"serving on {address.url}", file=sys.stderr, flush=True)
            await trio.sleep_forever()
        nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", metavar="HOST:PORT",
                        help="serve over Streamable HTTP (endpoint /mcp) instead of stdio")
    parser.add_argument("--token", help="the bearer token this relay's endpoint requires")
    parser.add_argument("--upstream", metavar="URL", help="the next relay's endpoint")
    parser.add_argument("--upstream-token", metavar="T",
                        help="this relay's own bearer token for --upstream")
    parser.add_argument("--era", default="2025-11-25", choices=ERAS,
                        help="the revision spoken to --upstream (default 2025-11-25)")
    parser.add_argument("--orphan-after", type=float, default=10.0, metavar="S",
                        help="cancel a child task whose parent stopped following it for S "
                             "seconds (0: never; default 10)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    args = parser.parse_args(argv)
    if args.token and not args.http:
        parser.error("--token applies to --http")
    if args.upstream_token and not args.upstream:
        parser.error("--upstream-token applies to --upstream")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    where: tuple[str, int] | None = None
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not port.isdigit():
            parser.error(f"--http wants HOST:PORT, not {args.http!r}")
        where = (host.strip("[]") or "127.0.0.1", int(port))
    upstream = (Upstream(args.upstream, args.upstream_token, args.era)
                if args.upstream else None)
    whereabouts: dict[str, str] = {}
    app = build_app(upstream, whereabouts=whereabouts, orphan_after=args.orphan_after)
    trio.run(serve, app, upstream, where, args.token, whereabouts)


if __name__ == "__main__":
    main()
