"""The ``trio-mcp`` command line: ``demo``, ``call``, ``tasks`` and ``serve-example``.

Every subcommand runs one :func:`trio.run`. Exit statuses are the same
everywhere: 0 for success, 1 when the tool (or task) reported an error, 2
for a usage, protocol or connection error, which is described in one line on
stderr. Results go to stdout; live status, progress and prompts go to
stderr, so ``--json`` output can be piped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Final, final

import trio
import trio_websocket

from . import __version__
from ._errors import (
    ConnectionClosed,
    LocalUsageError,
    RemoteError,
    RemoteProtocolError,
    TrioMcpError,
)
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
from .transports._stdio import open_stdio_client, serve_stdio
from .transports._websocket import open_websocket_client, serve_websocket

PROG: Final = "trio-mcp"
EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_FAILURE: Final = 2
EXIT_INTERRUPTED: Final = 130
#: Where ``serve-example`` finds the example server: the source checkout.
EXAMPLE_SERVER: Final = Path(__file__).resolve().parent.parent / "examples" / "task_server.py"

DESCRIPTION: Final = """\
trio-mcp: a bidirectional MCP (2025-11-25) peer runtime on Trio, with tasks.

Start with the demo, then point `call` at any MCP server:

  trio-mcp demo
  trio-mcp call --stdio "python examples/task_server.py" sleep \\
      --args '{"seconds": 2, "steps": 4}' --task
"""

EPILOG: Final = """\
exit status: 0 success, 1 the tool or task reported an error,
             2 usage, protocol or connection error (one line on stderr)

Run `trio-mcp COMMAND --help` for the options of each command.
"""


class CliError(Exception):
    """A problem to report in one line on stderr, with exit status 2."""


# --- argument parsing --------------------------------------------------------------------


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection (one of --stdio or --ws)")
    target = group.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", metavar="CMD",
                        help='spawn this server command and talk over its stdin/stdout, e.g. '
                             '"python examples/task_server.py"')
    target.add_argument("--ws", metavar="URL",
                        help="connect to a WebSocket server, e.g. ws://127.0.0.1:8765/")
    group.add_argument("--token", metavar="T",
                       help="bearer token for --ws (tasks then belong to the token's identity "
                            "and outlive the connection)")
    replies = parser.add_argument_group("answers to the server's requests")
    replies.add_argument("--elicit-reply", metavar="JSON",
                         help='answer elicitation with this content, e.g. \'{"approve": true}\' '
                              '(or a whole result: \'{"action": "decline"}\'); '
                              "without it the question is asked on the terminal")
    replies.add_argument("--sampling-reply", metavar="TEXT",
                         help="answer sampling with this text; without it the question is "
                              "asked on the terminal")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no live status or progress on stderr")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log protocol events to stderr")


def build_parser() -> argparse.ArgumentParser:
    """Build the ``trio-mcp`` argument parser (one subparser per command)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="run the peer-to-peer demo: two agents calling each other's tasks",
        description="Two agents, A and B, each hosting something and calling the other. "
                    "A calls tools on B as tasks; B's task asks A for sampling as a task hosted "
                    "by A, then pauses in input_required to ask A for a decision "
                    "(elicitation); A cancels one task midway. A live view shows every task "
                    "on both sides (rich on a terminal, plain lines otherwise) and a summary "
                    "ends the run. Takes about 10-15 seconds.",
    )
    demo.add_argument("--interactive", action="store_true",
                      help="answer agent B's question yourself instead of automatically")
    demo.add_argument("--transport", choices=("memory", "ws"), default="memory",
                      help="memory: both agents in this process (default); "
                           "ws: agent B in a second process, over a WebSocket on 127.0.0.1")
    demo.add_argument("--plain", action="store_true",
                      help="plain lines even on a terminal")
    demo.add_argument("--fast", action="store_true",
                      help="ten times shorter delays (for testing)")
    demo.set_defaults(run=_run_demo)

    agent_b = commands.add_parser("demo-agent-b")  # hidden: agent B of `demo --transport ws`
    agent_b.add_argument("--port", type=int, default=0)
    agent_b.add_argument("--pace", type=float, default=1.0)
    agent_b.set_defaults(run=_run_demo_agent_b)

    call = commands.add_parser(
        "call",
        help="call a tool on an MCP server (as a task with --task)",
        description="Connect to an MCP server, call TOOL, show live status and progress on "
                    "stderr and print the result on stdout. This client declares sampling, "
                    "elicitation and the client-side tasks capability for both, so the "
                    "server may have it host those requests as tasks.",
        epilog="exit status: 0 success, 1 error result or failed task, "
               "2 usage, protocol or connection error",
    )
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    _add_connection_options(call)
    call.add_argument("--args", metavar="JSON", default="{}", help="the arguments, a JSON object")
    call.add_argument("--task", action="store_true",
                      help="call the tool as a task and follow it until it ends")
    call.add_argument("--ttl", metavar="MS", type=int,
                      help="with --task: how long the server should keep the task, in ms")
    call.add_argument("--json", action="store_true",
                      help="print the raw CallToolResult as JSON on stdout, nothing else")
    call.set_defaults(run=_run_call)

    tasks = commands.add_parser(
        "tasks",
        help="list, inspect, fetch or cancel a server's tasks",
        description="Inspect the tasks a server holds for this client, printing JSON. Most "
                    "useful over --ws with --token, where tasks outlive the connection.",
    )
    _add_connection_options(tasks)
    actions = tasks.add_subparsers(title="actions", metavar="ACTION", required=True,
                                   dest="action")
    actions.add_parser("list", help="every task of this client (tasks/list)")
    for name, text in (("get", "a task's state (tasks/get)"),
                       ("result", "wait for a task's result (tasks/result)"),
                       ("cancel", "cancel a task (tasks/cancel)")):
        action = actions.add_parser(name, help=text)
        action.add_argument("task_id", metavar="ID", help="the task's id")
    tasks.set_defaults(run=_run_tasks)

    serve = commands.add_parser(
        "serve-example",
        help="serve the example tools of examples/task_server.py",
        description=f"Serve the tools of {EXAMPLE_SERVER.name} (echo, summarize, sleep, fail, "
                    "approve) over stdio, or over WebSocket with --ws. Needs a source "
                    "checkout of trio-mcp (the examples/ directory).",
    )
    serve.add_argument("--ws", metavar="HOST:PORT",
                       help="serve over WebSocket (port 0 picks a free port) instead of stdio")
    serve.add_argument("--token", metavar="T", help="with --ws: require this bearer token")
    serve.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    serve.set_defaults(run=_run_serve_example)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``trio-mcp`` command.

    Args:
        argv: The arguments (``sys.argv[1:]`` when ``None``).

    Returns:
        The exit status: 0 success, 1 error result, 2 usage, protocol or
        connection error, 130 interrupted.

    Raises:
        SystemExit: From argparse, for ``--help`` (0) and usage errors (2).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.ERROR,
        format="%(name)s: %(message)s",
    )
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout's reader went away (`trio-mcp ... | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_TOOL_ERROR
    except BaseException as exc:
        message = describe_error(exc)
        if message is None:
            raise
        print(f"{PROG}: {message}", file=sys.stderr)
        return EXIT_FAILURE


def describe_error(exc: BaseException) -> str | None:
    """One line describing an expected failure, or ``None`` for a bug.

    Looks inside exception groups for the first failure it knows.
    """
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            message = describe_error(inner)
            if message is not None:
                return message
        return None
    match exc:
        case CliError():
            return str(exc)
        case RemoteError():
            return f"the server answered with an error: {exc.message} (code {exc.code})"
        case ConnectionClosed():
            return f"connection closed: {exc}"
        case RemoteProtocolError():
            return f"protocol error: {exc}"
        case LocalUsageError() | TrioMcpError():
            return str(exc)
        case trio_websocket.ConnectionRejected():
            hint = " (a missing or unknown --token?)" if exc.status_code == 401 else ""
            return f"the server refused the WebSocket connection: HTTP {exc.status_code}{hint}"
        case trio_websocket.HandshakeError():
            return f"the WebSocket handshake failed: {exc or type(exc).__name__}"
        case OSError():
            return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return None


# --- connecting ----------------------------------------------------------------------------


@asynccontextmanager
async def _connect(args: argparse.Namespace, app: App) -> AsyncIterator[Peer]:
    """Connect to ``--stdio`` / ``--ws`` as a client and yield the peer."""
    if args.token is not None and args.ws is None:
        raise CliError("--token only applies to --ws")
    async with AsyncExitStack() as stack:
        try:
            if args.stdio is not None:
                peer = await stack.enter_async_context(open_stdio_client(args.stdio, app))
            else:
                peer = await stack.enter_async_context(
                    open_websocket_client(args.ws, app, token=args.token)
                )
        except ValueError as exc:  # a bad URL, an unbalanced quote in CMD...
            raise CliError(f"cannot connect: {exc}") from exc
        yield peer


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


def _run_call(args: argparse.Namespace) -> int:
    arguments = _parse_json_object(args.args, "--args")
    if args.ttl is not None and not args.task:
        raise CliError("--ttl only applies with --task")
    with StatusView(args.quiet) as view:
        status, result = trio.run(partial(_call, args, arguments, view))
    if result is not None:
        _print_result(result, as_json=args.json)
    return status


async def _call(
    args: argparse.Namespace, arguments: dict[str, Any], view: StatusView
) -> tuple[int, CallToolResult | None]:
    async with _connect(args, _client_app(args, view)) as peer:
        name = peer.remote_info.name if peer.remote_info else "the server"
        view.update(f"connected to {name}")
        await _check_tool(peer, args.tool, args.task)
        if not args.task:
            view.update(f"calling {args.tool}")
            result = await peer.call_tool(args.tool, arguments, progress=view.progress)
        else:
            handle = await peer.call_tool_task(args.tool, arguments, ttl=args.ttl,
                                               progress=view.progress)
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


def _run_tasks(args: argparse.Namespace) -> int:
    with StatusView(args.quiet) as view:
        status, output = trio.run(partial(_tasks, args, view))
    print(json.dumps(output, indent=2, ensure_ascii=False))
    return status


async def _tasks(args: argparse.Namespace, view: StatusView) -> tuple[int, Any]:
    async with _connect(args, _client_app(args, view)) as peer:
        view.update(f"tasks/{args.action}")
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


def _run_serve_example(args: argparse.Namespace) -> int:
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


def _run_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(
        transport=args.transport,
        interactive=args.interactive,
        plain=args.plain,
        pace=0.1 if args.fast else 1.0,
    )


def _run_demo_agent_b(args: argparse.Namespace) -> int:
    from ._demo import run_agent_b_process

    return run_agent_b_process(port=args.port, pace=args.pace)
