"""What every client command of ``trio-mcp`` shares: connecting, the client App, the status line.

:func:`connect` opens ``--stdio``, ``--ws`` or ``--http`` as a client;
:func:`client_app` is the CLI's client :class:`App` (it answers sampling and
elicitation, hosting them as tasks, and shows the server's log messages);
:class:`StatusView` is the live status on stderr. Failures the user can fix
are :class:`CliError`, one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any, Final, final

import trio

from .. import __version__
from .._errors import METHOD_NOT_FOUND, RemoteError
from ..peer import App, Peer, RequestContext
from ..peer._messages import (
    CreateMessageParams,
    CreateMessageResult,
    ElicitParams,
    ElicitResult,
    LoggingMessageParams,
    ProgressParams,
    Task,
)
from ..transports._client import INIT_TIMEOUT, InitializeTimeout
from ..transports._stdio import open_stdio_client
from ._terminal import Terminal, elicit_reply, rich_console

PROG: Final = "trio-mcp"
EXIT_OK: Final = 0
EXIT_TOOL_ERROR: Final = 1
EXIT_FAILURE: Final = 2
EXIT_INTERRUPTED: Final = 130
#: ``call`` stopped by SIGTERM (128 + 15, as a shell reports a process it killed).
EXIT_TERMINATED: Final = 143


class CliError(Exception):
    """A problem to report in one line on stderr, with exit status 2."""


# --- the target -------------------------------------------------------------------------------


def target_option(args: argparse.Namespace) -> tuple[str, str]:
    """The connection option given and its value: ``("--ws", URL)``, ``("--stdio", CMD)``..."""
    for option in ("stdio", "ws", "http"):
        value = getattr(args, option, None)
        if value is not None:
            return f"--{option}", value
    raise CliError("one of --stdio, --ws or --http is required")  # pragma: no cover


def server_name(args: argparse.Namespace) -> str:
    """How messages name the server: the quoted command, or the URL."""
    option, value = target_option(args)
    return repr(value) if option == "--stdio" else value


def not_a_server(name: str, exc: RemoteError) -> str:
    """The one line for a program that answered ``initialize`` with -32601."""
    if "this side is a client" in exc.message:
        # Our own answer to our own request: the program echoed our
        # initialize back (`cat`), we refused it as a client, and it echoed
        # that refusal back too.
        return (f"{name} is not an MCP server: it sent our own messages back "
                "(it echoes its input)")
    return f"{name} is not an MCP server: it does not know initialize ({exc.message})"


def _timed_out(args: argparse.Namespace, seconds: float) -> CliError:
    return CliError(
        f"{server_name(args)} did not answer initialize within {seconds:g} s: "
        "is it an MCP server? (--timeout SECONDS waits longer)"
    )


@asynccontextmanager
async def connect(args: argparse.Namespace, app: App) -> AsyncIterator[Peer]:
    """Connect to ``--stdio`` / ``--ws`` / ``--http`` as a client and yield the peer.

    Raises:
        CliError: A bad URL or command, a server that cannot be reached or
            did not answer ``initialize`` within ``--timeout``, or a program
            that is not an MCP server at all (it answered ``initialize`` with
            -32601).
    """
    option, target = target_option(args)
    if args.token is not None and option == "--stdio":
        raise CliError("--token only applies to --ws or --http")
    init_timeout = INIT_TIMEOUT if args.timeout is None else args.timeout
    era = getattr(args, "era", None) or "2025-11-25"
    if option == "--http":
        async with _connect_http(args, target, app, init_timeout, era) as peer:
            yield peer
        return
    async with AsyncExitStack() as stack:
        try:
            if option == "--stdio":
                peer = await stack.enter_async_context(
                    open_stdio_client(target, app, init_timeout=init_timeout, era=era)
                )
            else:
                # Imported here, as open_http_client below: --stdio never loads them.
                from ..transports._websocket_client import open_websocket_client

                peer = await stack.enter_async_context(open_websocket_client(
                    target, app, token=args.token, init_timeout=init_timeout, era=era
                ))
        except ValueError as exc:  # a bad URL, an unbalanced quote in CMD...
            raise CliError(f"cannot connect: {exc}") from exc
        except InitializeTimeout:
            raise _timed_out(args, init_timeout) from None
        except RemoteError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            raise CliError(not_a_server(server_name(args), exc)) from None
        yield peer


@asynccontextmanager
async def _connect_http(
    args: argparse.Namespace, url: str, app: App, init_timeout: float, era: str
) -> AsyncIterator[Peer]:
    """``--http``: the handshake bounded by ``init_timeout``, the session by nothing."""
    if not url.startswith(("http://", "https://")):
        raise CliError(f"cannot connect: not an HTTP URL: {url!r}")
    from ..transports._http_client import open_http_client

    connected = False
    with trio.CancelScope(deadline=trio.current_time() + init_timeout) as handshake:
        try:
            async with open_http_client(url, app, token=args.token,
                                        connect_timeout=init_timeout, era=era) as peer:
                connected = True
                handshake.deadline = math.inf
                yield peer
        except ValueError as exc:  # a token that cannot be a header
            if connected:
                raise
            raise CliError(f"cannot connect: {exc}") from exc
        except RemoteError as exc:
            if connected or exc.code != METHOD_NOT_FOUND:
                raise
            raise CliError(not_a_server(url, exc)) from None
    if not connected:
        raise _timed_out(args, init_timeout)


def parse_json_object(text: str, option: str) -> dict[str, Any]:
    """Parse the JSON object an option was given.

    Raises:
        CliError: It is not JSON, or not an object.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object")
    return value


# --- the status line ----------------------------------------------------------------------------


@final
class StatusView:
    """Live status, progress and the server's log messages on stderr.

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

    def note(self, text: str, *, bullet: str = "· ") -> None:
        """Print an event line that stays."""
        if self.quiet:
            return
        if self._console is not None:
            self._console.print(f"{bullet}{text}", highlight=False, markup=False)
        else:
            print(f"{bullet}{text}", file=sys.stderr, flush=True)

    def log_message(self, params: LoggingMessageParams) -> None:
        """Show one of the server's log messages: ``[level logger] data``."""
        data = params.data if isinstance(params.data, str) else json.dumps(
            params.data, ensure_ascii=False)
        where = f"{params.level} {params.logger}" if params.logger else params.level
        self.note(f"[{where}] {data}", bullet="")

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


# --- the client App ---------------------------------------------------------------------------


def client_app(args: argparse.Namespace, view: StatusView) -> App:
    """The CLI's client App.

    It answers sampling and elicitation (from ``--sampling-reply`` /
    ``--elicit-reply``, else on the terminal), hosting them as tasks, and
    shows the server's log messages on stderr.

    Raises:
        CliError: ``--elicit-reply`` is not a valid answer.
    """
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

    @app.on_log_message
    def log_message(peer: Peer, params: LoggingMessageParams) -> None:
        view.log_message(params)

    return app
