"""Small shared helpers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


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
