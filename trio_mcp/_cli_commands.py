"""The commands of ``trio-mcp``: ``call``, ``tasks``, ``serve-example`` and ``demo``.

Argument parsing and the exit statuses are in :mod:`._cli`; each ``run_*``
function here takes the parsed arguments, runs one :func:`trio.run` and
returns the exit status, or raises :class:`CliError` for a one-line failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Final, final

import attrs
import trio

from . import __version__
from ._errors import METHOD_NOT_FOUND, RemoteError
from ._terminal import Terminal, elicit_reply, rich_console
from .peer._features import App, Peer, RequestContext
from .peer._messages import (
    CallToolResult,
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    ProgressParams,
    Task,
    TextContent,
    to_wire,
)
from .transports._client import INIT_TIMEOUT, InitializeTimeout, is_interrupt
from .transports._stdio import open_stdio_client, serve_stdio
from .transports._websocket_client import open_websocket_client
from .transports._websocket_server import serve_websocket

PROG: Final = "trio-mcp"
EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_FAILURE: Final = 2
EXIT_INTERRUPTED: Final = 130
#: Where ``serve-example`` finds the example server: the source checkout.
EXAMPLE_SERVER: Final = Path(__file__).resolve().parent.parent / "examples" / "task_server.py"


class CliError(Exception):
    """A problem to report in one line on stderr, with exit status 2."""


# --- connecting ----------------------------------------------------------------------------


def _server_name(args: argparse.Namespace) -> str:
    return f"{args.stdio!r}" if args.stdio is not None else args.ws


@asynccontextmanager
async def _connect(args: argparse.Namespace, app: App) -> AsyncIterator[Peer]:
    """Connect to ``--stdio`` / ``--ws`` as a client and yield the peer.

    Raises:
        CliError: A bad URL or command, a server that did not answer
            ``initialize`` within ``--timeout``, or a program that is not an
            MCP server at all (it answered ``initialize`` with -32601).
    """
    if args.token is not None and args.ws is None:
        raise CliError("--token only applies to --ws")
    init_timeout = INIT_TIMEOUT if args.timeout is None else args.timeout
    async with AsyncExitStack() as stack:
        try:
            if args.stdio is not None:
                peer = await stack.enter_async_context(
                    open_stdio_client(args.stdio, app, init_timeout=init_timeout)
                )
            else:
                peer = await stack.enter_async_context(open_websocket_client(
                    args.ws, app, token=args.token, init_timeout=init_timeout
                ))
        except ValueError as exc:  # a bad URL, an unbalanced quote in CMD...
            raise CliError(f"cannot connect: {exc}") from exc
        except InitializeTimeout:
            raise CliError(
                f"{_server_name(args)} did not answer initialize within {init_timeout:g} s: "
                "is it an MCP server? (--timeout SECONDS waits longer)"
            ) from None
        except RemoteError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            raise CliError(not_a_server(_server_name(args), exc)) from None
        yield peer


def not_a_server(name: str, exc: RemoteError) -> str:
    """The one line for a program that answered ``initialize`` with -32601."""
    if "this side is a client" in exc.message:
        # Our own answer to our own request: the program echoed our
        # initialize back (`cat`), we refused it as a client, and it echoed
        # that refusal back too.
        return (f"{name} is not an MCP server: it sent our own messages back "
                "(it echoes its input)")
    return f"{name} is not an MCP server: it does not know initialize ({exc.message})"


@final
class StatusView:
    """Live status and progress of one call on stderr.

    A rich spinner line when stderr is a terminal and rich is installed;
    otherwise one plain line per change. Silent with ``quiet``.
    """

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        console = None if quiet else rich_console(sys.stderr)
        self._status = console.status("connecting") if console is not None else None
        self._console = console
        self._last = ""

    def __enter__(self) -> StatusView:
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._status is not None:
            self._status.stop()

    @contextmanager
    def pause(self) -> Iterator[None]:
        """Hide the spinner (while a prompt is open)."""
        if self._status is None:
            yield
            return
        self._status.stop()
        try:
            yield
        finally:
            self._status.start()

    def update(self, text: str) -> None:
        """Show the current state (a spinner text, or a line when it changed)."""
        if self.quiet or text == self._last:
            return
        self._last = text
        if self._status is not None:
            self._status.update(text)
        else:
            print(f"· {text}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        """Print an event line that stays."""
        if self.quiet:
            return
        if self._console is not None:
            self._console.print(f"· {text}", highlight=False, markup=False)
        else:
            print(f"· {text}", file=sys.stderr, flush=True)

    def progress(self, params: ProgressParams) -> None:
        """A progress callback for :meth:`Peer.call_tool_task` and friends."""
        amount = f"{params.progress:g}" + (f"/{params.total:g}" if params.total else "")
        self.update(f"progress {amount}" + (f": {params.message}" if params.message else ""))

    def task(self, task: Task) -> None:
        """Show a task snapshot."""
        text = f"task {task.task_id[:8]}: {task.status.value}"
        if task.status_message:
            text += f" ({task.status_message})"
        self.update(text)


def _client_app(args: argparse.Namespace, view: StatusView) -> App:
    """The CLI's client App: answers sampling and elicitation, hosting them as tasks."""
    app = App(PROG, __version__, host_tasks=True)
    terminal = Terminal(view.pause)
    try:
        reply = None if args.elicit_reply is None else elicit_reply(args.elicit_reply)
    except ValueError as exc:
        raise CliError(str(exc)) from None

    def hosted(ctx: RequestContext) -> str:
        return f"hosted as task {ctx.task_id}" if ctx.task_id else "not as a task"

    @app.on_sampling
    async def sampling(ctx: RequestContext, params: CreateMessageParams) -> CreateMessageResult:
        view.note(f"sampling request from the server ({hosted(ctx)})")
        if args.sampling_reply is not None:
            return CreateMessageResult(
                role="assistant",
                content={"type": "text", "text": args.sampling_reply},
                model=PROG,
            )
        return await terminal.sample(params)

    @app.on_elicitation
    async def elicitation(ctx: RequestContext, params: ElicitParams) -> ElicitResult:
        view.note(f"elicitation request from the server ({hosted(ctx)}): {params.message}")
        if reply is not None:
            return reply
        return await terminal.elicit(params)

    return app


def _parse_json_object(text: str, option: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object")
    return value


# --- call ------------------------------------------------------------------------------------


@final
@attrs.define
class _Followed:
    """The task a ``call --task`` follows, for the message when it stops early."""

    task_id: str | None = None


def run_call(args: argparse.Namespace) -> int:
    """``trio-mcp call``: call a tool, or run it as a task and follow it."""
    arguments = _parse_json_object(args.args, "--args")
    if args.ttl is not None and not args.task:
        raise CliError("--ttl only applies with --task")
    followed = _Followed()
    try:
        with StatusView(args.quiet) as view:
            status, result = trio.run(partial(_call, args, arguments, view, followed))
    except BaseException as exc:
        if followed.task_id is None or not is_interrupt(exc):
            raise
        print(f"{PROG}: interrupted; {_left_behind(args, followed.task_id)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result is not None:
        _print_result(result, as_json=args.json)
    return status


def _left_behind(args: argparse.Namespace, task_id: str) -> str:
    """What became of a task the CLI stopped following."""
    if args.stdio is not None:
        return f"task {task_id} stopped with the server process"
    if args.token is None:
        return (f"task {task_id} keeps running on the server, bound to the closed "
                "connection (without --token nobody can fetch its result)")
    return (f"task {task_id} keeps running on the server; fetch its result with: "
            f"{PROG} tasks --ws {args.ws} --token TOKEN result {task_id}")


async def _call(
    args: argparse.Namespace,
    arguments: dict[str, Any],
    view: StatusView,
    followed: _Followed,
) -> tuple[int, CallToolResult | None]:
    async with _connect(args, _client_app(args, view)) as peer:
        name = peer.remote_info.name if peer.remote_info else "the server"
        view.update(f"connected to {name}")
        with trio.move_on_after(args.timeout if args.timeout is not None else float("inf")):
            await _check_tool(peer, args.tool, args.task)
            if not args.task:
                view.update(f"calling {args.tool}")
                result = await peer.call_tool(args.tool, arguments, progress=view.progress)
            else:
                handle = await peer.call_tool_task(args.tool, arguments, ttl=args.ttl,
                                                   progress=view.progress)
                followed.task_id = handle.task_id
                view.note(f"task {handle.task_id} created")
                view.task(handle.task)
                async for snapshot in handle:
                    view.task(snapshot)
                final = handle.task
                try:
                    result = await handle.result()
                except RemoteError as exc:
                    # A cancelled task, or a request that failed with a JSON-RPC error.
                    print(f"{PROG}: task {final.status.value}: {exc.message}", file=sys.stderr)
                    return EXIT_TOOL_ERROR, None
            if result.is_error:
                view.note("the tool returned an error result")
            return (EXIT_TOOL_ERROR if result.is_error else EXIT_OK), result
    message = f"no result within --timeout {args.timeout:g} s"
    if followed.task_id is not None:
        message += f"; {_left_behind(args, followed.task_id)}"
    raise CliError(message)


async def _check_tool(peer: Peer, tool: str, as_task: bool) -> None:
    """Check the tool exists and fits ``--task``, when the server lists its tools."""
    caps = peer.remote_server_capabilities
    if caps is None or caps.tools is None:
        return
    try:
        tools = {t.name: t for t in await peer.list_all_tools()}
    except RemoteError:
        return
    found = tools.get(tool)
    if found is None:
        names = ", ".join(sorted(tools)) or "none"
        raise CliError(f"the server has no tool {tool!r} (its tools: {names})")
    support = found.task_support
    if as_task and support == "forbidden":
        raise CliError(f"tool {tool!r} cannot run as a task: call it without --task")
    if not as_task and support == "required":
        raise CliError(f"tool {tool!r} only runs as a task: add --task")


def _print_result(result: CallToolResult, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(to_wire(result), ensure_ascii=False))
        return
    for block in result.content:
        if isinstance(block, TextContent):
            print(block.text)
        else:
            print(json.dumps(to_wire(block), ensure_ascii=False))
    if result.structured_content is not None and not result.content:
        print(json.dumps(result.structured_content, indent=2, ensure_ascii=False))


# --- tasks ----------------------------------------------------------------------------------


def run_tasks(args: argparse.Namespace) -> int:
    """``trio-mcp tasks``: list, get, fetch the result of, or cancel tasks."""
    with StatusView(args.quiet) as view:
        status, output = trio.run(partial(_tasks, args, view))
    print(json.dumps(output, indent=2, ensure_ascii=False))
    return status


async def _tasks(args: argparse.Namespace, view: StatusView) -> tuple[int, Any]:
    async with _connect(args, _client_app(args, view)) as peer:
        view.update(f"tasks/{args.action}")
        with trio.move_on_after(args.timeout if args.timeout is not None else float("inf")):
            match args.action:
                case "list":
                    return EXIT_OK, {"tasks": [to_wire(t) async for t in peer.iter_tasks()]}
                case "get":
                    return EXIT_OK, to_wire(await peer.get_task(args.task_id))
                case "cancel":
                    return EXIT_OK, to_wire(await peer.cancel_task(args.task_id))
                case _:
                    result = await peer.task_result(args.task_id)
                    failed = result.get("isError") is True
                    return (EXIT_TOOL_ERROR if failed else EXIT_OK), result
    raise CliError(f"no answer to tasks/{args.action} within --timeout {args.timeout:g} s")


# --- serve-example ----------------------------------------------------------------------------


def load_example_server(path: Path = EXAMPLE_SERVER) -> ModuleType:
    """Import the example server script (``examples/task_server.py``) as a module.

    Raises:
        CliError: The file is not there (an installed copy without the
            source checkout's ``examples/``).
    """
    if not path.is_file():
        raise CliError(
            f"{path} not found: serve-example runs the example from a source checkout "
            "of trio-mcp (git clone the project, then pip install -e .)"
        )
    spec = importlib.util.spec_from_file_location("trio_mcp_example_task_server", path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise CliError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_serve_example(args: argparse.Namespace) -> int:
    """``trio-mcp serve-example``: serve the example tools over stdio or WebSocket."""
    module = load_example_server()
    app: App = module.build_app()
    if args.ws is None:
        if args.token is not None:
            raise CliError("--token only applies to --ws")
        trio.run(serve_stdio, app)
        return EXIT_OK
    host, _, port_text = args.ws.rpartition(":")
    if not port_text.isdigit():
        raise CliError(f"--ws wants HOST:PORT, not {args.ws!r}")
    tokens = {args.token: "token-user"} if args.token else None
    trio.run(_serve_ws, app, host or "127.0.0.1", int(port_text), tokens)
    return EXIT_OK


async def _serve_ws(app: App, host: str, port: int, tokens: dict[str, str] | None) -> None:
    async with trio.open_nursery() as nursery:
        address = await nursery.start(
            partial(serve_websocket, app, host, port, tokens=tokens)
        )
        auth = " (bearer token required)" if tokens else ""
        print(f"serving the example tools on {address.url}{auth}", file=sys.stderr, flush=True)


# --- demo -------------------------------------------------------------------------------------


def run_demo(args: argparse.Namespace) -> int:
    """``trio-mcp demo``."""
    from ._demo import run_demo as demo

    return demo(
        transport=args.transport,
        interactive=args.interactive,
        plain=args.plain,
        pace=0.1 if args.fast else 1.0,
    )


def run_demo_agent_b(args: argparse.Namespace) -> int:
    """The hidden ``trio-mcp demo-agent-b``: agent B of ``demo --transport ws``."""
    from ._demo import run_agent_b_process

    return run_agent_b_process(port=args.port, pace=args.pace)
