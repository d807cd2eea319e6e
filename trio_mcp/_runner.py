"""``App.run()``: serve an App from a script in one line.

The App class of the features layer knows no transport (transports sit above
it); this module, above the transports, adds :meth:`App.run` to it. The
public ``trio_mcp.App`` is this class.
"""

from __future__ import annotations

import inspect
import os
import sys
import types
import urllib.parse
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal, TypeVar, final

import attrs
import trio

from ._errors import McpError
from .peer import App as _BaseApp
from .peer import Peer, RequestContext
from .peer._tasks import TaskHandle
from .transports._stdio import serve_stdio

Transport = Literal["stdio", "ws", "http"]
E = TypeVar("E", bound=BaseException)


class _Documented(type):
    """The public App's metaclass: ``dir(App)`` (what ``help()`` shows) is its API only.

    The attrs machinery (``__attrs_attrs__``, ``__setattr__``, the slots of
    every field, the generated ``__init__``) and the App's inner state stay
    reachable, just not listed.
    """

    def __dir__(cls) -> list[str]:
        fields = {f.name for f in attrs.fields(cls)} if attrs.has(cls) else set()
        return sorted(
            name for name in type.__dir__(cls)
            if not name.startswith("_") and name not in fields
            and not isinstance(getattr(cls, name, None), types.MemberDescriptorType)
        )


@final
@attrs.define(eq=False)
class App(_BaseApp, metaclass=_Documented):
    __doc__ = _BaseApp.__doc__

    def run(
        self,
        transport: Transport = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        grace: float = 30.0,
        **options: Any,
    ) -> None:
        """Serve this App until stdin closes (stdio), Ctrl-C or SIGTERM (drained), then return.

        Starts its own Trio run (``trio.run``): call it from a script, not
        from inside Trio (there, use :func:`trio_mcp.serve_stdio` or
        :func:`trio_mcp.serve_websocket` in a nursery).

        Args:
            transport: ``"stdio"`` (default: MCP over this process's
                stdin/stdout), ``"ws"`` (WebSocket on ``host:port``) or
                ``"http"`` (Streamable HTTP on ``host:port``, path ``/mcp``);
                for the last two the URL is printed on stderr.
            host: Address to bind (``ws``, ``http``); loopback by default.
            port: Port to bind (``ws``, ``http``); 0 picks a free one.
            grace: On SIGTERM the App drains (:meth:`App.drain`): its running
                tasks get ``grace`` seconds, the re-runnable ones left are handed
                to the other processes of a shared store; then it returns.
            **options: Passed to :func:`trio_mcp.serve_stdio`,
                :func:`trio_mcp.serve_websocket` or :func:`trio_mcp.serve_http`
                (e.g. ``tokens=``).

        Raises:
            ValueError: An unknown transport.
            RuntimeError: Called inside a running Trio program.
            SystemExit: Status 1 when serving could not start: the port is
                taken (or cannot be bound), or the App's task store cannot be
                opened; one line on stderr names the address or the store.
        """
        from ._worker import until_drained

        if transport == "stdio":
            serving: Callable[..., Awaitable[None]] = partial(serve_stdio, self, **options)
            where = None
        elif transport in ("ws", "http"):
            # Imported here: a stdio server never loads the WebSocket or HTTP stack.
            serve: Callable[..., Awaitable[None]]
            if transport == "ws":
                from .transports._websocket_server import serve_websocket as serve
            else:
                from .transports._http_server import serve_http as serve
            serving, where = partial(serve, self, host, port, **options), f"{host}:{port}"
        else:
            raise ValueError(f"transport must be 'stdio', 'ws' or 'http', not {transport!r}")
        main = partial(_serve, partial(until_drained, self, serving, grace=grace), self, where)
        self._run_until_stopped(main)


    def run_worker(self, *, grace: float = 30.0) -> None:
        """Run this App's task work without serving MCP, until SIGTERM or Ctrl-C.

        Its store (``App(store=...)``) must be shared by processes (Redis,
        PostgreSQL): the worker claims the tasks queued there (by front
        processes, or after the process running them stopped) for the tools it
        hosts. On SIGTERM it drains (``grace`` seconds for its running tasks,
        the re-runnable ones left handed to the others) and returns.

        Raises:
            ValueError: The store is not shared by processes.
            SystemExit: Status 1 when the store cannot be opened (one line on stderr).
        """
        from ._worker import serve_worker, until_drained

        if not self.registry.store.shared:
            raise ValueError("a worker needs a task store shared by processes (Redis, PostgreSQL)")
        main = partial(_serve, partial(until_drained, self, partial(serve_worker, self),
                                       grace=grace), self, None)
        self._run_until_stopped(main)


    def _run_until_stopped(self, main: Callable[[], Awaitable[None]]) -> None:
        """``trio.run(main)``; Ctrl-C returns, a failed start is one line and exit 1."""
        try:
            trio.run(main)
        except KeyboardInterrupt:
            return
        except BaseException as exc:
            failed = _leaf(exc, StartFailed)
            if failed is None:
                raise
            print(f"{os.path.basename(sys.argv[0]) or self.name}: {failed}", file=sys.stderr)
            raise SystemExit(1) from None


class StartFailed(Exception):
    """Serving could not start (the message is the one line ``App.run`` prints)."""


def _leaf(exc: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` in ``exc`` or in its (nested) exception groups."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _leaf(inner, kind)
            if found is not None:
                return found
    return None


def start_failure(exc: BaseException, app: _BaseApp, where: str | None) -> StartFailed | None:
    """What stopped ``serve`` before it started: the address, the store; else None (a bug)."""
    store = _leaf(exc, McpError)
    if store is not None:  # the store could not be opened (nothing else is at start)
        cause = store.__cause__
        why = store.message if cause is None else f"{type(cause).__name__}: {cause}"
        return StartFailed(f"cannot open the task store {_store_name(app.store)}: "
                            f"{' '.join(why.split())}")
    bind = _leaf(exc, OSError)
    if bind is not None and where is not None:
        return StartFailed(f"cannot serve on {where}: {bind.strerror or bind}")
    return None


def _store_name(store: object) -> str:
    """A store as a message names it: its URL without a password, or its class."""
    if not isinstance(store, str):
        return type(store).__name__
    parts = urllib.parse.urlsplit(store)
    if parts.password is None:
        return store
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class _Default:
    """A default shown by its constructor call (``TaskLimits()``), not as attrs' NOTHING."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _public_signature(cls: type) -> inspect.Signature:
    """``App(name, version='0.0.0', ...)``: the init fields, factories by their call."""
    parameters = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        default: Any = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            factory = default.factory
            default = _Default(f"{getattr(factory, '__name__', 'factory')}()")
        elif default is attrs.NOTHING:
            default = inspect.Parameter.empty
        parameters.append(inspect.Parameter(
            field.alias or field.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default
        ))
    return inspect.Signature(parameters)


App.__module__ = "trio_mcp"
for _public in (Peer, RequestContext, TaskHandle):  # help() names where users import them
    _public.__module__ = "trio_mcp"
App.__signature__ = _public_signature(App)  # type: ignore[attr-defined]
for _base in App.__mro__[1:-1]:  # "inherited from trio_mcp.peer.App", not a private module
    _base.__module__ = "trio_mcp.peer"


async def _serve(serve: Any, app: _BaseApp, where: str | None) -> None:
    """Run ``serve`` (started with ``nursery.start``); a failure to start becomes one line."""
    async with trio.open_nursery() as nursery:
        try:
            started = await nursery.start(serve)
        except BaseException as exc:
            failed = start_failure(exc, app, where)
            if failed is None:
                raise
            raise failed from exc
        if where is not None:
            print(f"serving on {started.url}", file=sys.stderr, flush=True)
