"""The commands of ``trio-mcp``: ``call``, ``tasks``, ``serve-example`` and ``demo``.

Argument parsing and the exit statuses are in :mod:`._main`; connecting and the
client App in :mod:`._connect`; ``resources`` and ``prompts`` in
:mod:`._features`. Each ``run_*`` function here takes the parsed
arguments, runs one :func:`trio.run` and returns the exit status, or raises
:class:`CliError` for a one-line failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, Final, final

import attrs
import trio

from .._errors import (
    INTERNAL_ERROR,
    ConnectionClosed,
    RemoteError,
    TaskCancelled,
    TaskFailed,
    TrioMcpError,
)
from .._runner import start_failure
from .._util import quiet_interrupted_coroutines
from ..peer import App, Peer
from ..peer._dialects._modern_client import ModernClient
from ..peer._dialects._modern_requestor import get_detailed
from ..peer._messages import CallToolResult, Task, TextContent, from_wire, to_wire
from ..peer._tasks import META_CHILDREN, META_QUESTION
from ..transports._client import is_interrupt
from ..transports._failures import POST_FAILED
from ..transports._stdio import serve_stdio
from ._connect import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_TOOL_ERROR,
    PROG,
    CliError,
    StatusView,
    client_app,
    connect,
    parse_json_object,
    target_option,
)

#: Where ``serve-example`` finds the example server: the source checkout.
EXAMPLE_SERVER: Final = Path(__file__).resolve().parents[2] / "examples" / "task_server.py"


# --- call ------------------------------------------------------------------------------------


@final
@attrs.define
class _Followed:
    """The task a ``call --task`` follows, for the message when it stops early."""

    task_id: str | None = None
    #: The connection speaks 2026-07-28 (``--era 2026-07-28``, or ``auto`` chose it).
    modern: bool = False
    #: SIGTERM stopped the call.
    terminated: bool = False


class _Terminated(Exception):
    """SIGTERM stopped ``call`` (after its connection was closed)."""


def run_call(args: argparse.Namespace) -> int:
    """``trio-mcp call``: call a tool, or run it as a task and follow it."""
    arguments = parse_json_object(args.args, "--args")
    if args.ttl is not None and not args.task:
        raise CliError("--ttl only applies with --task")
    followed = _Followed()
    try:
        with StatusView(args.quiet) as view:
            status, result = trio.run(partial(_call, args, arguments, view, followed))
    except _Terminated:
        left = "" if followed.task_id is None else f"; {_left_behind(args, followed)}"
        print(f"{PROG}: terminated (SIGTERM){left}", file=sys.stderr)
        return EXIT_TERMINATED
    except BaseException as exc:
        if followed.task_id is None:
            raise
        lost = connection_lost(exc)
        if lost is not None:
            print(f"{PROG}: the connection to the server was lost ({lost}); "
                  f"{_left_behind(args, followed, lost=True)}", file=sys.stderr)
            return EXIT_FAILURE
        if not is_interrupt(exc):
            raise
        quiet_interrupted_coroutines()
        print(f"{PROG}: interrupted; {_left_behind(args, followed)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result is not None:
        _print_result(result, as_json=args.json)
    return status


def connection_lost(exc: BaseException) -> str | None:
    """Why the connection was lost, if ``exc`` (or one inside its group) says it was.

    Over HTTP a request whose POST could not be made is answered locally with
    a -32603 that begins with :data:`POST_FAILED`: the server did not answer.
    """
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = connection_lost(inner)
            if found is not None:
                return found
        return None
    if isinstance(exc, RemoteError) and exc.code == INTERNAL_ERROR and (
        exc.message.startswith(POST_FAILED)
    ):
        return exc.message.removeprefix(POST_FAILED).lstrip(": ") or "the POST failed"
    if isinstance(exc, ConnectionClosed):
        return str(exc) or "closed"
    return None


def _left_behind(args: argparse.Namespace, followed: _Followed, *, lost: bool = False) -> str:
    """What became of a task the CLI stopped following (``lost``: the connection was)."""
    task_id = followed.task_id
    option, target = target_option(args)
    if option == "--stdio":
        return f"task {task_id} stopped with the server process"
    runs = ("may still run on the server (if it was not restarted)" if lost
            else "keeps running on the server")
    era = " --era 2026-07-28" if followed.modern else ""
    if args.token is None and followed.modern and option == "--http":
        # 2026-07-28 over HTTP has no session: a task made without a token belongs to
        # whoever holds its id (the tasks extension: ids as bearer tokens).
        return (f"task {task_id} {runs}, not bound to a session (without --token its id "
                f"is the key to it); see its state and result with: "
                f"{PROG} tasks {option} {target}{era} result {task_id}")
    if args.token is None:
        closed = "connection" if option == "--ws" else "session"
        return (f"task {task_id} {runs}, bound to the closed "
                f"{closed} (without --token nobody can fetch its result)")
    return (f"task {task_id} {runs}; fetch its result with: "
            f"{PROG} tasks {option} {target} --token TOKEN{era} result {task_id}")


async def _call(
    args: argparse.Namespace,
    arguments: dict[str, Any],
    view: StatusView,
    followed: _Followed,
) -> tuple[int, CallToolResult | None]:
    """:func:`_call_tool`, stopped by SIGTERM as by Ctrl-C (the connection closed first).

    Raises:
        _Terminated: SIGTERM came.
    """
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_sigterm() -> None:
                async for _ in signals:
                    followed.terminated = True
                    nursery.cancel_scope.cancel()

            nursery.start_soon(on_sigterm)
            outcome = await _call_tool(args, arguments, view, followed)
            nursery.cancel_scope.cancel()
    if followed.terminated:
        raise _Terminated
    return outcome


async def _call_tool(
    args: argparse.Namespace,
    arguments: dict[str, Any],
    view: StatusView,
    followed: _Followed,
) -> tuple[int, CallToolResult | None]:
    async with connect(args, client_app(args, view)) as peer:
        followed.modern = _speaks_modern(peer)
        name = peer.remote_info.name if peer.remote_info else "the server"
        view.update(f"connected to {name}")
        with trio.move_on_after(args.timeout if args.timeout is not None else float("inf")):
            await _set_log_level(peer, args.log_level, view)
            await _check_tool(peer, args.tool, args.task)
            if args.ttl is not None and _speaks_modern(peer):
                view.note("--ttl is not sent in 2026-07-28: the server chooses the task's ttl")
            if not args.task:
                view.update(f"calling {args.tool}")
                result = await peer.call_tool(args.tool, arguments, progress=view.progress)
            else:
                handle = await peer.call_tool_task(args.tool, arguments, ttl=args.ttl,
                                                   progress=view.progress)
                if handle.task_id:
                    followed.task_id = handle.task_id
                    view.note(f"task {handle.task_id} created")
                    view.task(handle.task)
                    async for snapshot in handle:
                        view.task(snapshot)
                else:  # 2026-07-28: the server decides, and answered at once
                    view.note("the server answered at once (it made no task)")
                final = handle.task
                try:
                    result = await handle.result()
                except RemoteError as exc:
                    if connection_lost(exc) is not None:
                        raise  # not the task's outcome: run_call says the connection was lost
                    # A cancelled task, or a request that failed with a JSON-RPC error.
                    print(f"{PROG}: task {final.status.value}: {exc.message}", file=sys.stderr)
                    return EXIT_TOOL_ERROR, None
            if result.is_error:
                view.note("the tool returned an error result")
            return (EXIT_TOOL_ERROR if result.is_error else EXIT_OK), result
    message = f"no result within --timeout {args.timeout:g} s"
    if followed.task_id is not None:
        message += f"; {_left_behind(args, followed)}"
    raise CliError(message)


async def _set_log_level(peer: Peer, level: str | None, view: StatusView) -> None:
    """``--log-level``: ``logging/setLevel`` first, when the server declares logging."""
    if level is None:
        return
    caps = peer.remote_server_capabilities
    if caps is None or caps.logging is None:
        view.note(f"the server does not declare logging: --log-level {level} not sent")
        return
    await peer.set_logging_level(level)


async def _check_tool(peer: Peer, tool: str, as_task: bool) -> None:
    """Check the tool exists and fits ``--task``, when the server lists its tools.

    In 2026-07-28 the server decides whether a call becomes a task (and
    lists no ``taskSupport``): ``--task`` only follows the task it makes.
    """
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
    if _speaks_modern(peer):
        return
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
    if isinstance(output, CallToolResult):  # tasks result: printed as call prints it
        _print_result(output, as_json=getattr(args, "json", False))
    elif isinstance(output, str):  # tasks tree: the drawing
        print(output)
    elif output is not None:
        print(json.dumps(output, indent=2, ensure_ascii=False))
    return status


async def _tasks(args: argparse.Namespace, view: StatusView) -> tuple[int, Any]:
    async with connect(args, client_app(args, view)) as peer:
        view.update(f"tasks/{args.action}")
        with trio.move_on_after(args.timeout if args.timeout is not None else float("inf")):
            if args.action == "result":
                return await _task_result(peer, args.task_id)
            if args.action == "tree":
                tree = await TaskTreeView(args, view).node(peer, args.task_id, args.http)
                if getattr(args, "json", False):
                    return EXIT_OK, tree
                return EXIT_OK, "\n".join(draw_tree(tree))
            if _speaks_modern(peer):
                return await _modern_tasks(peer, args.action, getattr(args, "task_id", None))
            match args.action:
                case "list":
                    if args.token is None:
                        view.note("without --token only this connection's tasks are listed: "
                                  "tasks created without a token were bound to the connection "
                                  "or session that created them and closed with it")
                    return EXIT_OK, {"tasks": [to_wire(t) async for t in peer.iter_tasks()]}
                case "get":  # the task with its _meta (a re-runnable task's attempt)
                    raw = await peer.request_raw("tasks/get", {"taskId": args.task_id})
                    task, meta = from_wire(raw, Task), raw.get("_meta")
                    return EXIT_OK, {**to_wire(task), **({"_meta": meta} if meta else {})}
                case _:
                    return EXIT_OK, to_wire(await peer.cancel_task(args.task_id))
    raise CliError(f"no answer to tasks/{args.action} within --timeout {args.timeout:g} s")


async def _task_result(peer: Peer, task_id: str) -> tuple[int, CallToolResult | None]:
    """``tasks result``: wait for the task's result (2026-07-28: following it with
    ``tasks/get``, its questions answered as ``call`` answers them); exit 1 for an error
    result or a failed or cancelled task (the exit table), else an error stands (an
    unknown id is 2)."""
    handle = peer.task(task_id, CallToolResult)
    try:
        result = await handle.result()
    except (TaskCancelled, TaskFailed) as exc:
        print(f"{PROG}: task {handle.task.status.value}: {exc.message}", file=sys.stderr)
        return EXIT_TOOL_ERROR, None
    return (EXIT_TOOL_ERROR if result.is_error else EXIT_OK), result


async def _modern_tasks(peer: Peer, action: str, task_id: str | None) -> tuple[int, Any]:
    """``tasks`` in 2026-07-28: ``get`` (with the result, error or questions) and ``cancel``."""
    match action:
        case "list":
            raise CliError("not in 2026-07-28: there is no tasks/list (a client keeps the "
                           "ids of its tasks); use --era 2025-11-25 with a server that has it")
        case "get":
            assert task_id is not None
            task, detail = await get_detailed(peer, task_id)
            return EXIT_OK, {**to_wire(task), **detail}
        case _:
            assert task_id is not None
            return EXIT_OK, to_wire(await peer.cancel_task(task_id))


# --- tasks tree -------------------------------------------------------------------------------

#: Deepest level ``tasks tree`` follows, and most nodes it shows.
TREE_DEPTH: Final = 8
TREE_NODES: Final = 200


@final
class TaskTreeView:
    """``tasks tree``: a task and its remote children across peers, as JSON nodes.

    Each node is what the task's own peer answered to ``tasks/get`` when this
    client can reach that peer (its URL, with the same ``--token``), else what
    its parent last saw of it (``"seen": "by its parent"``).
    """

    def __init__(self, args: argparse.Namespace, view: StatusView) -> None:
        self.args = args
        self.view = view
        self.count = 0

    async def node(self, peer: Peer, task_id: str, url: str | None, depth: int = 0) -> Any:
        """The node of ``task_id`` on ``peer`` (fetched), with its children."""
        self.count += 1
        task = await peer.get_task(task_id)
        meta = task.meta or {}
        out: dict[str, Any] = {"taskId": task.task_id, "status": task.status.value,
                               "seen": "directly"}
        if url is not None:
            out["url"] = url
        if task.status_message is not None:
            out["statusMessage"] = task.status_message
        question = meta.get(META_QUESTION)
        if isinstance(question, dict):
            out["question"] = question
        children = meta.get(META_CHILDREN)
        out["children"] = await self.children(children, depth + 1)
        return out

    async def children(self, entries: Any, depth: int) -> list[Any]:
        """The nodes of a snapshot's children list (each fetched where reachable)."""
        if not isinstance(entries, list) or depth > TREE_DEPTH:
            return []
        nodes = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("taskId"), str):
                continue
            if self.count >= TREE_NODES:
                break
            nodes.append(await self.child(entry, depth))
        return nodes

    async def child(self, entry: dict[str, Any], depth: int) -> Any:
        """One child: fetched from its own peer if reachable, else its parent's view."""
        url = entry.get("url")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            fresh = argparse.Namespace(**{**vars(self.args), "http": url, "ws": None,
                                          "stdio": None, "era": None})
            try:
                with trio.fail_after(self.args.timeout or 10):
                    async with connect(fresh, client_app(fresh, self.view)) as peer:
                        return await self.node(peer, entry["taskId"], url, depth)
            except (CliError, TrioMcpError, trio.TooSlowError) as exc:
                self.view.note(f"child {entry['taskId'][:32]} at {url}: not reachable ({exc})")
        self.count += 1
        out = {k: v for k, v in entry.items() if k != "children"}
        out["seen"] = "by its parent"
        out["children"] = await self.children(entry.get("children"), depth + 1)
        return out


def draw_tree(node: Any, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """The lines that draw ``node`` and its children (``tasks tree``'s output)."""
    parts = [str(node.get("taskId")), str(node.get("status"))]
    if node.get("statusMessage"):
        parts.append(repr(node["statusMessage"]))
    question = node.get("question")
    if isinstance(question, dict):
        asked = question.get("message") or ""
        parts.append(f"question: {question.get('method')} {asked!r}")
    if node.get("url"):
        parts.append(f"at {node['url']}")
    if node.get("seen") == "by its parent":
        parts.append("(as its parent last saw it)")
    branch = "" if top else ("└─ " if last else "├─ ")
    lines = [prefix + branch + "  ".join(parts)]
    inner = prefix + ("" if top else ("   " if last else "│  "))
    children = node.get("children") or []
    for i, child in enumerate(children):
        lines.extend(draw_tree(child, inner, i == len(children) - 1, top=False))
    return lines


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
    """``trio-mcp serve-example``: serve the example tools over stdio, WebSocket or HTTP."""
    module = load_example_server()
    try:
        app: App = module.build_app(store=args.store)
    except ValueError as exc:  # an unknown store URL
        raise CliError(f"--store: {exc}") from None
    http_server = getattr(args, "http_server", None)
    if http_server is not None and args.http is None:
        raise CliError("--http-server only applies to --http")
    if args.ws is None and args.http is None:
        if args.token is not None:
            raise CliError("--token only applies to --ws or --http")
        trio.run(serve_stdio, app)
        return EXIT_OK
    option, where = ("--ws", args.ws) if args.ws is not None else ("--http", args.http)
    host, _, port_text = where.rpartition(":")
    if not port_text.isdigit():
        raise CliError(f"{option} wants HOST:PORT, not {where!r}")
    tokens = {args.token: "token-user"} if args.token else None
    # Imported here: a stdio server never loads the WebSocket or HTTP stack.
    serve: Callable[..., Awaitable[None]]
    if option == "--http":
        from ..transports._http_server import serve_http

        serve = partial(serve_http, server=http_server)
    else:
        from ..transports._websocket_server import serve_websocket

        serve = serve_websocket
    trio.run(_serve, serve, app, host.strip("[]") or "127.0.0.1", int(port_text), tokens)
    return EXIT_OK


async def _serve(
    serve: Callable[..., Awaitable[None]],
    app: App,
    host: str,
    port: int,
    tokens: dict[str, str] | None,
) -> None:
    async with trio.open_nursery() as nursery:
        try:
            address = await nursery.start(partial(serve, app, host, port, tokens=tokens))
        except BaseException as exc:
            failed = start_failure(exc, app, f"{host}:{port}")
            if failed is None:
                raise
            raise CliError(str(failed)) from None
        auth = " (bearer token required)" if tokens else ""
        print(f"serving the example tools on {address.url}{auth}", file=sys.stderr, flush=True)


# --- worker -----------------------------------------------------------------------------------


def load_app(target: str | None, store: str) -> App:
    """The App a worker runs: ``MODULE:NAME`` (an App, or a function of the store URL that
    makes one), or the example's tools (``build_app``) when ``target`` is None.

    Raises:
        CliError: The target cannot be found or is not an App.
    """
    if target is None:
        made: Any = load_example_server().build_app(store=store)
    else:
        module_name, _, name = target.partition(":")
        if not module_name or not name:
            raise CliError(f"--app wants MODULE:NAME, not {target!r}")
        try:
            found = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError) as exc:
            raise CliError(f"--app {target}: {exc}") from None
        made = found if isinstance(found, App) else found(store)
        if not isinstance(made, App):
            raise CliError(f"--app {target} is not a trio_mcp.App (nor makes one)")
        if made.store != store:
            raise CliError(f"--app {target}: its App's store is not --store {store}")
    return made  # type: ignore[no-any-return]


def run_worker(args: argparse.Namespace) -> int:
    """``trio-mcp worker``: run an App's task work from a shared store, serving no MCP."""
    from .._worker import serve_worker, until_drained

    try:
        app = load_app(args.app, args.store)
    except ValueError as exc:  # an unknown store URL
        raise CliError(f"--store: {exc}") from None
    if not app.registry.store.shared:
        raise CliError("--store: a worker needs a store shared by processes "
                       "(redis://... or postgresql://...)")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(partial(until_drained, app, partial(serve_worker, app),
                                            grace=args.grace))
            except BaseException as exc:
                failed = start_failure(exc, app, None)
                if failed is None:
                    raise
                raise CliError(str(failed)) from None
            print(f"worker running the task work of {app.name} (pid {os.getpid()})",
                  file=sys.stderr, flush=True)

    trio.run(main)
    return EXIT_OK


# --- demo -------------------------------------------------------------------------------------


def run_demo_agent_b(args: argparse.Namespace) -> int:
    """The hidden ``trio-mcp demo-agent-b``: agent B of ``demo --transport ws``."""
    from ._demo import run_agent_b_process

    return run_agent_b_process(port=args.port, pace=args.pace)


def _speaks_modern(peer: Peer) -> bool:
    """Whether the connection chose 2026-07-28 (as a client)."""
    return isinstance(peer.client_era, ModernClient)
