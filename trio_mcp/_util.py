"""Small shared helpers."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import trio

from ._errors import ConnectionClosed


@contextmanager
def unwrap_group() -> Iterator[None]:
    """Re-raise the lone exception of a one-item ExceptionGroup as itself.

    Public context managers wrap their nurseries in this, so callers catch
    ``ConnectionClosed`` rather than ``ExceptionGroup[ConnectionClosed]``.
    Groups of several exceptions pass through unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        exc: BaseException = group
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if exc is group:
            raise
        raise exc from exc.__cause__


#: What a connection ending because of the interrupt can raise besides it (and, once
#: trio_websocket is loaded, its ``ConnectionClosed``: see :func:`_consequences`).
_CONSEQUENCES: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    trio.Cancelled,
    ConnectionClosed,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)


def _consequences() -> tuple[type[BaseException], ...]:
    """:data:`_CONSEQUENCES`, with ``trio_websocket.ConnectionClosed`` when that is loaded.

    A WebSocket connection's exception can only exist once trio_websocket was
    imported, so a process that never opened one (a stdio server) need not
    import it here.
    """
    websocket = sys.modules.get("trio_websocket")
    if websocket is None:
        return _CONSEQUENCES
    closed: type[BaseException] = websocket.ConnectionClosed
    return (*_CONSEQUENCES, closed)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside groups, and inside a ``TrioInternalError``'s cause."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    elif isinstance(exc, trio.TrioInternalError) and isinstance(exc.__cause__, BaseException):
        yield from _leaves(exc.__cause__)
    else:
        yield exc


def is_interrupt(exc: BaseException) -> bool:
    """True when ``exc`` is, or holds, a KeyboardInterrupt and only its consequences."""
    leaves = list(_leaves(exc))
    consequences = _consequences()
    return any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves) and all(
        isinstance(leaf, consequences) for leaf in leaves
    )


@contextmanager
def interrupt_wins() -> Iterator[None]:
    """Re-raise a KeyboardInterrupt that met a closing connection as itself.

    Turns ``TrioInternalError`` from ``Nursery.start`` whose cause holds a
    ``KeyboardInterrupt``, and an ExceptionGroup of a ``KeyboardInterrupt``
    with connection errors (:class:`ConnectionClosed`, broken or closed
    streams, ``Cancelled``), into a plain ``KeyboardInterrupt`` chained to
    the original. Any other exception, or a group holding anything else,
    passes through unchanged.
    """
    try:
        yield
    except (trio.TrioInternalError, BaseExceptionGroup) as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise


def quiet_interrupted_coroutines() -> None:
    """After a Ctrl-C, silence Python's "coroutine ... was never awaited" warnings.

    A KeyboardInterrupt can land between a coroutine's creation and its first
    step (``await self._send(msg)``); Python then warns when the program
    exits, which would bury the one line the CLI prints about the interrupt.
    """
    warnings.filterwarnings(
        "ignore", message=r"coroutine .* was never awaited", category=RuntimeWarning
    )


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for names imported on first use (PEP 562).

    ``where`` maps each lazy name to the module defining it, relative to
    ``package``. The package imports them under ``if TYPE_CHECKING:`` too, so
    type checkers see the real types; at run time the module is imported the
    first time the name is asked for (``package.name`` or ``from package import
    name``), and the value is kept in the package's namespace from then on.
    Heavy optional dependencies (httpx, trio_websocket, h11) thus load only for
    the transports that use them.
    """

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
