"""Small shared helpers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import trio
import trio_websocket

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


#: What a connection ending because of the interrupt can raise besides it.
_CONSEQUENCES = (
    KeyboardInterrupt,
    trio.Cancelled,
    ConnectionClosed,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
    trio_websocket.ConnectionClosed,
)


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
    return any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves) and all(
        isinstance(leaf, _CONSEQUENCES) for leaf in leaves
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
