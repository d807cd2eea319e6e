"""The ``trio-mcp`` command line.

Commands: ``demo``, ``call``, ``tasks``, ``resources``, ``prompts`` and
``serve-example``.

Every subcommand runs one :func:`trio.run`. Exit statuses are the same
everywhere: 0 for success, 1 when the tool (or task) reported an error, 2
for a usage, protocol or connection error (including ``--timeout``), which
is described in one line on stderr, and 130 when interrupted (Ctrl-C).
Results go to stdout; live status, progress and prompts go to stderr, so
``--json`` output can be piped.

This module parses the arguments and turns failures into exit statuses; the
commands themselves are in :mod:`._commands` and :mod:`._features`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, Final

from .. import __version__
from .._errors import (
    METHOD_NOT_FOUND,
    ConnectionClosed,
    ConnectionFailed,
    LocalUsageError,
    RemoteError,
    RemoteProtocolError,
    TrioMcpError,
)
from .._util import quiet_interrupted_coroutines
from ..peer._messages import LOGGING_LEVELS
from ..transports._client import INIT_TIMEOUT, is_interrupt
from ..transports._failures import body_text, endpoint_hint
from ._commands import (
    EXAMPLE_SERVER,
    run_call,
    run_demo_agent_b,
    run_serve_example,
    run_tasks,
    run_worker,
)
from ._connect import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_TOOL_ERROR,
    PROG,
    CliError,
    not_a_server,
)
from ._features import run_prompts, run_resources

__all__ = ["CliError", "build_parser", "describe_error", "main"]

DESCRIPTION: Final = """\
trio-mcp: a bidirectional MCP peer runtime on Trio (2025-11-25 and 2026-07-28), with tasks.

Start with the demo, then point `call` at any MCP server:

  trio-mcp demo
  trio-mcp call --stdio "python examples/task_server.py" sleep \\
      --args '{"seconds": 2, "steps": 4}' --task
"""

#: The eras ``trio-mcp demo --era`` runs in (the first is the default).
DEMO_ERAS: Final = ("2025-11-25", "2026-07-28")

#: How long ``trio-mcp demo`` takes (in memory; measured: 11.5-11.7 s).
DEMO_SECONDS: Final = 12

EPILOG: Final = """\
exit status: 0 success, 1 the tool or task reported an error,
             2 usage, protocol or connection error, or --timeout (one line on stderr),
             130 interrupted (Ctrl-C), 143 terminated (SIGTERM) during call

Run `trio-mcp COMMAND --help` for the options of each command.
"""


# --- argument parsing --------------------------------------------------------------------


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def _add_connection_options(parser: argparse.ArgumentParser, *, repeated: bool = False) -> None:
    """The options of every command that connects to a server.

    With ``repeated`` (the actions of ``tasks``, ``resources`` and
    ``prompts``), the same options are also accepted after the action; they
    default to "not given", so they never undo one given before it, and
    ``--stdio``/``--ws``/``--http`` are checked after parsing (see
    :func:`_check_target`).
    """
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if repeated else {}
    group = parser.add_argument_group("connection (one of --stdio, --ws or --http)")
    target = group if repeated else group.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", metavar="CMD", **unset,
                        help='spawn this server command and talk over its stdin/stdout, e.g. '
                             '"python examples/task_server.py"')
    target.add_argument("--ws", metavar="URL", **unset,
                        help="connect to a WebSocket server, e.g. ws://127.0.0.1:8765/")
    target.add_argument("--http", metavar="URL", **unset,
                        help="connect to a Streamable HTTP endpoint, e.g. "
                             "http://127.0.0.1:8000/mcp")
    group.add_argument("--token", metavar="T", **unset,
                       help="bearer token for --ws or --http (tasks then belong to the token's "
                            "identity and outlive the connection)")
    group.add_argument("--era", choices=("auto", "2025-11-25", "2026-07-28"), **unset,
                       help="the MCP revision to speak: 2025-11-25 (default: initialize), "
                            "2026-07-28 (per-request _meta), or auto (probe with "
                            "server/discover, fall back to initialize)")
    group.add_argument("--timeout", metavar="SECONDS", type=_positive_seconds, **unset,
                       help=f"how long to wait for the server's answer to initialize "
                            f"(default {INIT_TIMEOUT:g}) and then for the result (default: "
                            "no limit); exit status 2 when it runs out")
    replies = parser.add_argument_group("answers to the server's requests")
    replies.add_argument("--elicit-reply", metavar="JSON", **unset,
                         help='answer elicitation with this content, e.g. \'{"approve": true}\' '
                              '(or a whole result: \'{"action": "decline"}\'); '
                              "without it the question is asked on the terminal")
    replies.add_argument("--sampling-reply", metavar="TEXT", **unset,
                         help="answer sampling with this text; without it the question is "
                              "asked on the terminal")
    parser.add_argument("-q", "--quiet", action="store_true", **unset,
                        help="no live status or progress on stderr")
    parser.add_argument("-v", "--verbose", action="store_true", **unset,
                        help="log protocol events to stderr")


def _check_target(args: argparse.Namespace) -> None:
    """Commands with actions: exactly one of ``--stdio``/``--ws``/``--http``, either side."""
    given = [f"--{name}" for name in ("stdio", "ws", "http") if getattr(args, name) is not None]
    if len(given) > 1:
        args.usage.error(f"argument {given[1]}: not allowed with argument {given[0]}")
    if not given:
        args.usage.error("one of the arguments --stdio --ws --http is required")


def _add_actions(
    commands: Any,
    name: str,
    actions: list[tuple[str, str, Callable[[argparse.ArgumentParser], None]]],
    **options: Any,
) -> argparse.ArgumentParser:
    """A command with actions (``tasks list``...) whose options go before or after the action.

    Each action is ``(name, help, add_arguments)``.
    """
    command: argparse.ArgumentParser = commands.add_parser(name, **options)
    _add_connection_options(command, repeated=True)
    command.set_defaults(stdio=None, ws=None, http=None, token=None, timeout=None,
                         elicit_reply=None, sampling_reply=None, quiet=False, verbose=False,
                         check=_check_target)
    chosen = command.add_subparsers(title="actions", metavar="ACTION", required=True,
                                    dest="action")
    for action_name, text, add_arguments in actions:
        action = chosen.add_parser(action_name, help=text, description=text)
        add_arguments(action)
        _add_connection_options(action, repeated=True)
        action.set_defaults(usage=action)
    return command


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """An action without arguments of its own."""


def _task_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", metavar="ID", help="the task's id")


def _task_result(parser: argparse.ArgumentParser) -> None:
    _task_id(parser)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the raw CallToolResult as JSON on stdout, nothing else")


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the raw result as JSON")


def _resources_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--templates", action="store_true",
                        help="list the resource templates instead (resources/templates/list)")
    _json_option(parser)


def _resources_read(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uri", metavar="URI", help="the resource's URI")
    parser.add_argument("--out", metavar="FILE",
                        help="write the contents to FILE (a blob decoded from base64) "
                             "instead of printing them")
    _json_option(parser)


def _prompts_list(parser: argparse.ArgumentParser) -> None:
    _json_option(parser)


def _prompts_get(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the prompt's name")
    parser.add_argument("--args", metavar="JSON", default="{}",
                        help='the arguments, a JSON object of strings, e.g. \'{"arg1": "a"}\'')
    _json_option(parser)


def _run_demo(args: argparse.Namespace) -> int:
    """``trio-mcp demo``."""
    from ._demo import run_demo

    return run_demo(
        transport=args.transport,
        interactive=args.interactive,
        plain=args.plain,
        pace=0.1 if args.fast else 1.0,
        era=args.era,
    )


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
                    "ends the run. With --era 2026-07-28 the story runs on the tasks "
                    "extension: B's questions are inputRequests of its task, which A answers "
                    f"with tasks/update (A hosts no task). Takes about {DEMO_SECONDS} seconds.",
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
    demo.add_argument("--era", choices=DEMO_ERAS, default=DEMO_ERAS[0],
                      help="the MCP revision A speaks to B: 2025-11-25 (default: tasks both "
                           "ways) or 2026-07-28 (the tasks extension)")
    demo.set_defaults(run=_run_demo)

    agent_b = commands.add_parser("demo-agent-b")  # hidden: agent B of `demo --transport ws`
    agent_b.add_argument("--port", type=int, default=0)
    agent_b.add_argument("--pace", type=float, default=1.0)
    agent_b.set_defaults(run=run_demo_agent_b)

    call = commands.add_parser(
        "call",
        help="call a tool on an MCP server (as a task with --task)",
        description="Connect to an MCP server, call TOOL, show live status and progress on "
                    "stderr and print the result on stdout. This client declares sampling, "
                    "elicitation and the client-side tasks capability for both, so the "
                    "server may have it host those requests as tasks.",
        epilog="exit status: 0 success, 1 error result or failed task, "
               "2 usage, protocol or connection error, or --timeout, 130 interrupted, "
               "143 terminated by SIGTERM "
               "(over --ws or --http a task keeps running: the message says how to "
               "fetch its result)",
    )
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    _add_connection_options(call)
    call.add_argument("--args", metavar="JSON", default="{}", help="the arguments, a JSON object")
    call.add_argument("--task", action="store_true",
                      help="call the tool as a task and follow it until it ends (in "
                           "2026-07-28 the server decides whether it makes a task)")
    call.add_argument("--ttl", metavar="MS", type=int,
                      help="with --task: how long the server should keep the task, in ms "
                           "(not sent in 2026-07-28, where the server chooses)")
    call.add_argument("--json", action="store_true",
                      help="print the raw CallToolResult as JSON on stdout, nothing else")
    call.add_argument("--log-level", choices=LOGGING_LEVELS, metavar="LEVEL",
                      help="first ask the server to log at LEVEL and above "
                           f"({', '.join(LOGGING_LEVELS)}), when it declares logging; "
                           "its log messages are shown on stderr either way")
    call.set_defaults(run=run_call)

    tasks = _add_actions(
        commands, "tasks", [
            ("list", "every task of this client (tasks/list; not in 2026-07-28)", _no_arguments),
            ("get", "a task's state (tasks/get; in 2026-07-28 with its result or error)",
             _task_id),
            ("result", "wait for a task's result and print it as call does (tasks/result; "
                       "in 2026-07-28 by following it with tasks/get)", _task_result),
            ("cancel", "cancel a task (tasks/cancel)", _task_id),
        ],
        help="list, inspect, fetch or cancel a server's tasks",
        description="Inspect the tasks a server holds for this client, printing JSON (result "
                    "prints the result as call does). Most "
                    "useful over --ws or --http with --token, where tasks outlive the "
                    "connection. The options may come before or after the action.",
    )
    tasks.set_defaults(run=run_tasks)

    resources = _add_actions(
        commands, "resources", [
            ("list", "the server's resources, one a line: URI  NAME  MIME-TYPE "
                     "(resources/list)", _resources_list),
            ("read", "read a resource: text is printed, a blob summarized unless --out "
                     "(resources/read)", _resources_read),
        ],
        help="list or read a server's resources",
        description="List or read the resources a server offers. The options may come "
                    "before or after the action.",
    )
    resources.set_defaults(run=run_resources, json=False)

    prompts = _add_actions(
        commands, "prompts", [
            ("list", "the server's prompts, one a line: NAME(ARG, OPTIONAL?)  TITLE "
                     "(prompts/list)", _prompts_list),
            ("get", "render a prompt: ROLE: TEXT per message (prompts/get)", _prompts_get),
        ],
        help="list or render a server's prompts",
        description="List or render the prompts a server offers. The options may come "
                    "before or after the action.",
    )
    prompts.set_defaults(run=run_prompts, json=False)

    serve = commands.add_parser(
        "serve-example",
        help="serve the example tools of examples/task_server.py",
        description=f"Serve the tools of {EXAMPLE_SERVER.name} (echo, summarize, sleep, fail, "
                    "approve) over stdio, or over WebSocket with --ws, or Streamable HTTP "
                    "with --http. Needs a source checkout of trio-mcp (the examples/ "
                    "directory).",
    )
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--ws", metavar="HOST:PORT",
                       help="serve over WebSocket (port 0 picks a free port) instead of stdio")
    where.add_argument("--http", metavar="HOST:PORT",
                       help="serve over Streamable HTTP, endpoint http://HOST:PORT/mcp "
                            "(port 0 picks a free port)")
    serve.add_argument("--token", metavar="T",
                       help="with --ws or --http: require this bearer token")
    serve.add_argument("--http-server", choices=("llhttp", "hypercorn"),
                       help="with --http: the HTTP/1.1 server; llhttp (trio-mcp's own, on "
                            "httptools) when httptools is installed, else hypercorn")
    serve.add_argument("--store", metavar="URL",
                       help="where tasks live: memory (default), sqlite:///path/to/tasks.db "
                            "(tasks survive a restart, for the same --token), "
                            "redis://host:port/0, redis+cluster://host:port,host:port/ or "
                            "postgresql://user@host:port/db (shared by "
                            "every server on that Redis or database)")
    serve.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    serve.set_defaults(run=run_serve_example)

    worker = commands.add_parser(
        "worker",
        help="run an App's task work from a shared store, serving no MCP",
        description="Run the task work of an App without serving MCP: claim the tasks "
                    "queued in a shared store (by front processes, or after the process "
                    "running them stopped) for the tools it hosts, and run them. SIGTERM "
                    "drains it: --grace seconds for its running tasks, the re-runnable ones "
                    "left are handed to the other processes; then it exits 0.",
    )
    worker.add_argument("--store", metavar="URL", required=True,
                        help="the shared store: redis://host:port/0 or "
                             "postgresql://user@host:port/db")
    worker.add_argument("--app", metavar="MODULE:NAME",
                        help="the App (or a function of the store URL that makes it); "
                             "default: the tools of examples/task_server.py")
    worker.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                        help="on SIGTERM: how long running tasks may finish (default 30)")
    worker.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    worker.set_defaults(run=run_worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``trio-mcp`` command.

    Args:
        argv: The arguments (``sys.argv[1:]`` when ``None``).

    Returns:
        The exit status: 0 success, 1 error result, 2 usage, protocol or
        connection error or ``--timeout``, 130 interrupted.

    Raises:
        SystemExit: From argparse, for ``--help`` (0) and usage errors (2).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    check: Callable[[argparse.Namespace], None] | None = getattr(args, "check", None)
    if check is not None:
        check(args)
    verbose = getattr(args, "verbose", False)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.ERROR,
        format="%(name)s: %(message)s",
    )
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except BrokenPipeError:
        # stdout's reader went away (`trio-mcp ... | head`): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_TOOL_ERROR
    except BaseException as exc:
        if is_interrupt(exc):
            quiet_interrupted_coroutines()
            print(f"{PROG}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
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
        case RemoteError(code=code, message=text) if (
            code == METHOD_NOT_FOUND and "initialize" in text
        ):
            return not_a_server("the other side", exc)
        case RemoteError():
            return f"the server answered with an error: {exc.message} (code {exc.code})"
        case ConnectionFailed(url=str() as url, status_code=int() as status):
            kind = "WebSocket" if url.startswith("ws") else "HTTP"
            hint = ""
            if status == 401:
                hint = " (a missing or unknown --token?)"
            elif status == 404 and (endpoint := endpoint_hint(url)) is not None:
                hint = f" (is the path right? trio-mcp serves {endpoint})"
            elif (body := _websocket_refusal_body(exc)) is not None:
                hint = body_text(body)
                if "Streamable HTTP" in hint:  # our HTTP server, asked for a WebSocket
                    hint += f" (connect with --http {'http' + url.removeprefix('ws')})"
            return f"the server refused the {kind} connection: HTTP {status}{hint}"
        case ConnectionFailed(url=str() as url) if url.startswith(("ws", "http")):
            return str(exc)  # cannot connect to URL: why
        case ConnectionClosed():
            return f"connection closed: {exc}"
        case RemoteProtocolError():
            return f"protocol error: {exc}"
        case LocalUsageError() | TrioMcpError():
            return str(exc)
        case OSError():
            return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    return _describe_transport_error(exc)


def _websocket_refusal_body(exc: BaseException) -> bytes | None:
    """The body of a ``trio_websocket.ConnectionRejected``; ``None`` for anything else.

    Never imports trio_websocket: its refusal cannot exist unless it was loaded.
    """
    if "trio_websocket" not in sys.modules:
        return None
    import trio_websocket

    if not isinstance(exc, trio_websocket.ConnectionRejected):
        return None
    return exc.body or b""


def _describe_transport_error(exc: BaseException) -> str | None:
    """One line for an error of trio_websocket or httpx themselves, or ``None``.

    Such an error can only exist once its library was imported, so neither is
    imported here for a process that never loaded it (``call --stdio``).
    """
    if "trio_websocket" in sys.modules:
        import trio_websocket

        match exc:
            case trio_websocket.ConnectionRejected():
                hint = " (a missing or unknown --token?)" if exc.status_code == 401 else ""
                return f"the server refused the WebSocket connection: HTTP {exc.status_code}{hint}"
            case trio_websocket.HandshakeError():
                return f"the WebSocket handshake failed: {exc or type(exc).__name__}"
    if "httpx" in sys.modules:
        import httpx

        match exc:
            case httpx.HTTPStatusError():
                status = exc.response.status_code
                hint = " (a missing or unknown --token?)" if status == 401 else ""
                return f"the server refused the HTTP connection: HTTP {status}{hint}"
            case httpx.TransportError():
                return f"the HTTP connection failed: {exc or type(exc).__name__}"
    return None
