"""The example MCP server: plain and task tools, over stdio, WebSocket or Streamable HTTP.

Run it over stdio (the default), as MCP clients spawn servers:

    python examples/task_server.py
    python examples/task_server.py --ws 127.0.0.1:8765 --token s3cret
    python examples/task_server.py --http 127.0.0.1:8000 --store sqlite:///tasks.db
    python examples/task_server.py --max-live-tasks 20000   # room for 20,000 running tasks
    python examples/task_server.py --http 127.0.0.1:8000 --store redis://127.0.0.1:6379/0
    python examples/task_server.py --worker --store redis://127.0.0.1:6379/0  # task work only
    python examples/task_server.py --http 127.0.0.1:8000 --jwks-uri https://as.example/jwks \
        --issuer https://as.example --audience http://127.0.0.1:8000/mcp   # OAuth (JWT)
    python examples/task_server.py --http 127.0.0.1:8000 --introspection-url \
        https://as.example/introspect --client-id mcp --client-secret S     # OAuth (RFC 7662)

Tools:
    echo {text}                      plain only (taskSupport forbidden)
    summarize {text}                 optional; samples from the client, as a
                                     task when the client can host one
    sleep {seconds, steps?}          optional; reports `steps` progress updates
    park {}                          optional; runs until cancelled
    fail {message}                   optional; returns an isError result
    approve {question}               required; elicits a yes/no mid-task
    resumable_sleep {seconds}        optional; re-runnable (3 attempts): with a shared store
                                     it runs again on another process if its own stops;
                                     the result says which attempt finished it
                                     (RESUMABLE_SLEEP_LOG=path: each run appends a line
                                     "task_id attempt pid time"; RESUMABLE_SLEEP_ATTEMPTS)

A process started with --http/--ws/stdio serves MCP and runs task work; SIGTERM drains it
(--grace seconds for its running tasks, re-runnable ones left handed to the others) and it
exits 0. --worker (with --store redis://... or postgresql://...) runs task work without serving
MCP; --front serves MCP and queues every task for the workers.
    whoami {}                        with OAuth: the caller's subject and scopes (JSON)
    admin_echo {text}                with OAuth: echo, for callers with the scope "admin"
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from functools import partial
from typing import Any

import trio

import trio_mcp
from trio_mcp.auth import IntrospectionVerifier, JWTVerifier, TokenVerifier


def build_app(
    limits: trio_mcp.TaskLimits | None = None, *, store: str | None = None, auth: bool = False
) -> trio_mcp.App:
    """Build a fresh App with the example tools (each App has its own tasks).

    Args:
        limits: The task limits (the defaults when None).
        store: Where tasks live: ``"memory"`` (the default) or
            ``"sqlite:///path/to/tasks.db"`` (they survive a restart).
        auth: Add ``whoami`` and ``admin_echo`` (for a server that verifies tokens).
    """
    app = trio_mcp.App(
        "trio-mcp-example",
        "0.1.0",
        instructions="Example tools for trio-mcp tasks.",
        limits=limits or trio_mcp.TaskLimits(),
        store=store,
    )

    @app.tool(inline=True)  # quick and never blocking: runs on the event loop
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool(task_support="optional")
    async def summarize(ctx: trio_mcp.RequestContext, text: str) -> str:
        """Summarize text by asking the client's model (sampling)."""
        reply = await ctx.sample(f"Summarize in one sentence:\n\n{text}", max_tokens=200)
        return reply.text

    @app.tool(task_support="optional")
    async def sleep(ctx: trio_mcp.RequestContext, seconds: float, steps: int = 0) -> str:
        """Sleep for `seconds`, reporting `steps` progress updates on the way."""
        if seconds < 0:
            raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "seconds must not be negative")
        if steps <= 0:
            await trio.sleep(seconds)
        else:
            for step in range(1, steps + 1):
                await trio.sleep(seconds / steps)
                await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"slept {seconds:g} seconds"

    @app.tool(task_support="optional")
    async def park() -> str:
        """Run until cancelled: a task that stays `working` (e.g. cancel it with tasks/cancel)."""
        await trio.sleep_forever()

    @app.tool(task_support="optional")
    async def fail(message: str) -> trio_mcp.CallToolResult:
        """Fail on purpose with `message` (an isError result)."""
        return trio_mcp.CallToolResult(content=[trio_mcp.TextContent(message)], is_error=True)

    @app.tool(task_support="required")
    async def approve(ctx: trio_mcp.RequestContext, question: str) -> str:
        """Ask the user to approve `question` (elicitation, mid-task)."""
        answer = await ctx.elicit(
            question,
            {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "description": "Approve?"}},
                "required": ["approve"],
            },
        )
        if answer.action == "accept" and (answer.content or {}).get("approve") is True:
            return f"approved: {question}"
        return f"declined: {question}"

    attempts = int(os.environ.get("RESUMABLE_SLEEP_ATTEMPTS", "3"))  # (tests raise it)

    @app.tool(task_support="optional", rerun=trio_mcp.Rerun(attempts=attempts))
    async def resumable_sleep(ctx: trio_mcp.RequestContext, seconds: float) -> str:
        """Sleep for `seconds`; if the process running it stops, it runs again elsewhere."""
        if seconds < 0:
            raise trio_mcp.McpError(trio_mcp.INVALID_PARAMS, "seconds must not be negative")
        log = os.environ.get("RESUMABLE_SLEEP_LOG")
        if log:  # one line per run: what a test counts
            async with await trio.open_file(log, "a") as f:
                await f.write(f"{ctx.task_id} {ctx.attempt} {os.getpid()} {time.time()}\n")
        await trio.sleep(seconds)
        return f"slept {float(seconds)!r} s (attempt {ctx.attempt})"

    if auth:
        add_auth_tools(app)
    return app


def add_auth_tools(app: trio_mcp.App) -> None:
    """``whoami`` (the caller's identity as JSON) and ``admin_echo`` (scope ``admin``)."""

    @app.tool
    async def whoami(ctx: trio_mcp.RequestContext) -> str:
        """The caller's verified identity: subject, client id and scopes (JSON text)."""
        identity = ctx.identity
        if identity is None:
            return json.dumps({"subject": None, "client_id": None, "scopes": []})
        return json.dumps({"subject": identity.subject, "client_id": identity.client_id,
                           "scopes": sorted(identity.scopes)})

    @app.tool(scopes=["admin"])
    async def admin_echo(text: str) -> str:
        """Return the text unchanged; only for callers granted the scope `admin`."""
        return text


async def serve_websocket(
    app: trio_mcp.App, host: str, port: int, tokens: dict[str, str] | None,
    verifier: TokenVerifier | None = None, server: trio_mcp.HttpServerName | None = None,
) -> None:
    """Serve over WebSocket; print the URL (the real port when given 0) on stderr."""
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(trio_mcp.serve_websocket, app, host, port, tokens=tokens, verifier=verifier)
        )
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


async def serve_http(
    app: trio_mcp.App, host: str, port: int, tokens: dict[str, str] | None,
    verifier: TokenVerifier | None = None, server: trio_mcp.HttpServerName | None = None,
) -> None:
    """Serve over Streamable HTTP; print the endpoint's URL on stderr.

    With a verifier, the protected-resource metadata names its issuer and
    the scopes ``tools`` and ``admin``.
    """
    scopes = ["tools", "admin"] if verifier is not None else None
    async with trio.open_nursery() as nursery:
        address = await nursery.start(partial(
            trio_mcp.serve_http, app, host, port, tokens=tokens, verifier=verifier,
            scopes_supported=scopes, server=server,
        ))
        print(f"serving on {address.url}", file=sys.stderr, flush=True)


#: First-generation GC threshold (CPython's default is 700): measured in
#: bench/PERF_NOTES.md, creating 10,000 running tasks costs ~15% less CPU.
_GC_GEN0 = 50_000


def _tune_gc() -> None:
    """Make the cyclic GC cheaper for a server holding many running tasks (measured).

    The objects made at start-up (modules, classes, the App) live as long as
    the process: ``gc.freeze()`` moves them out of every collection. A
    running task is a few dozen GC-tracked objects, so creating thousands
    of them triggers many young collections; a larger first threshold makes
    those rarer. Tunable from the environment for measurements.
    """
    gc.collect()
    gc.freeze()
    first = int(os.environ.get("TRIO_MCP_GC_GEN0", "") or _GC_GEN0)
    if first > 0:
        _, second, third = gc.get_threshold()
        gc.set_threshold(first, second, third)


async def _work(app: trio_mcp.App, grace: float) -> None:
    """Run task work only (``--worker``) until SIGTERM; say so on stderr once started."""
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio_mcp.until_drained, app,
                                    partial(trio_mcp.serve_worker, app), grace=grace))
        print(f"worker running task work pid {os.getpid()}", file=sys.stderr, flush=True)


def _first(group: BaseException) -> BaseException:
    """The first error in ``group`` (unwrapping nested groups)."""
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


def _started(serve: Any) -> Any:
    """``serve`` as a function ``nursery.start`` can start (it reports started at once)."""

    async def run(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await serve()

    return run


def _verifier(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TokenVerifier | None:
    """The token verifier the OAuth options ask for, if any (exits on a bad combination)."""
    if args.jwks_uri and args.introspection_url:
        parser.error("--jwks-uri or --introspection-url, not both")
    if not (args.jwks_uri or args.introspection_url):
        if args.issuer or args.audience or args.client_id or args.client_secret:
            parser.error("--issuer/--audience/--client-id/--client-secret need --jwks-uri "
                         "or --introspection-url")
        return None
    if not (args.ws or args.http) or args.token:
        parser.error("OAuth applies to --ws or --http, without --token")
    if args.jwks_uri:
        if not (args.issuer and args.audience):
            parser.error("--jwks-uri needs --issuer and --audience")
        return JWTVerifier(args.jwks_uri, args.issuer, args.audience)
    if not (args.client_id and args.client_secret):
        parser.error("--introspection-url needs --client-id and --client-secret")
    return IntrospectionVerifier(args.introspection_url, args.client_id, args.client_secret,
                                 issuer=args.issuer, audience=args.audience)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--ws", metavar="HOST:PORT", help="serve over WebSocket instead of stdio")
    where.add_argument("--http", metavar="HOST:PORT",
                       help="serve over Streamable HTTP (endpoint /mcp) instead of stdio")
    parser.add_argument("--token", help="require this bearer token (WebSocket or HTTP)")
    parser.add_argument("--http-server", choices=("llhttp", "hypercorn"),
                        help="with --http: the HTTP/1.1 server (default: llhttp when httptools "
                             "is installed, else hypercorn)")
    oauth = parser.add_argument_group(
        "OAuth 2.1 (WebSocket or HTTP): verify JWT access tokens with --jwks-uri, or opaque "
        "ones with --introspection-url; tokens must be issued by --issuer for --audience")
    oauth.add_argument("--jwks-uri", metavar="URL", help="the authorization server's JWKS")
    oauth.add_argument("--issuer", metavar="ISS", help="the one accepted token issuer")
    oauth.add_argument("--audience", metavar="URI",
                       help="this server's canonical URI, e.g. http://127.0.0.1:8000/mcp")
    oauth.add_argument("--introspection-url", metavar="URL",
                       help="an RFC 7662 introspection endpoint (with --client-id and "
                            "--client-secret, this server's credentials there)")
    oauth.add_argument("--client-id", metavar="ID")
    oauth.add_argument("--client-secret", metavar="S")
    parser.add_argument("--store", metavar="URL",
                        help="where tasks live: memory (default), sqlite:///path/to/tasks.db "
                             "(tasks survive a restart), redis://host:port/0 or "
                             "postgresql://user@host:port/db (every server on that Redis or "
                             "database serves every task of a token)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    parser.add_argument("--worker", action="store_true",
                        help="with --store redis://... or postgresql://...: run task work "
                             "without serving MCP")
    parser.add_argument("--front", action="store_true",
                        help="with a shared --store: serve MCP and queue every task for the "
                             "workers (run no task work here)")
    parser.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                        help="on SIGTERM: how long running tasks may finish (default 30)")
    parser.add_argument(
        "--max-live-tasks",
        type=int,
        metavar="N",
        help="let each requestor run N tasks at once (default 1,024); the total cap "
        "(records kept, finished ones included) becomes at least 4 N",
    )
    args = parser.parse_args(argv)
    limits = trio_mcp.TaskLimits()
    if args.max_live_tasks is not None:
        if args.max_live_tasks < 1:
            parser.error("--max-live-tasks must be at least 1")
        limits = trio_mcp.TaskLimits(
            max_live_per_requestor=args.max_live_tasks,
            max_tasks=max(limits.max_tasks, 4 * args.max_live_tasks),
        )
    if args.token and not (args.ws or args.http):
        parser.error("--token applies to --ws or --http")
    if args.http_server and not args.http:
        parser.error("--http-server applies to --http")
    if args.worker and (args.ws or args.http or args.token or args.front):
        parser.error("--worker serves no MCP: not with --ws, --http, --token or --front")
    if (args.worker or args.front) and not (args.store or "").startswith(
        ("redis", "rediss", "unix", "postgres")
    ):
        parser.error("--worker and --front need a shared --store (redis://... or postgresql://...)")
    verifier = _verifier(parser, args)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    try:
        app = build_app(limits, store=args.store, auth=verifier is not None)
    except ValueError as exc:  # an unknown store URL
        parser.error(f"--store: {exc}")
    tokens = {args.token: "token-user"} if args.token else None
    app.registry.run_tasks = not args.front
    _tune_gc()
    if args.worker:
        try:
            trio.run(_work, app, args.grace)
        except* trio_mcp.McpError as group:
            sys.exit(f"task_server: {_first(group)}")
        return
    if args.ws or args.http:
        host, _, port = (args.ws or args.http).rpartition(":")
        if not port.isdigit():
            parser.error(f"wants HOST:PORT, not {args.ws or args.http!r}")
        serve = serve_websocket if args.ws else partial(serve_http, server=args.http_server)
    try:
        if args.ws or args.http:
            serving = partial(serve, app, host or "127.0.0.1", int(port), tokens, verifier)
        else:
            serving = partial(trio_mcp.serve_stdio, app)
        trio.run(partial(trio_mcp.until_drained, app, _started(serving), grace=args.grace))
    except* trio_mcp.McpError as group:  # e.g. the task store is unreachable at start
        sys.exit(f"task_server: {_first(group)}")


if __name__ == "__main__":
    main()
