"""Inline answers: a handler's coroutine started in the task that read its request.

Most requests are answered by code that never has to wait: a task created in the
memory store, ``tasks/get`` of a record held in memory, an inline tool. Spawning a
Trio task for each costs more than the answer itself, yet writing each operation
twice (a sync copy for when nothing waits, an async one for when something may)
doubles every layer. So each operation is written once, ``async``, and whoever
reads a request may *start* its coroutine in its own task with :func:`run_inline`:

* if the coroutine returns without waiting, its value is the answer, at once;
* before its first wait it awaits :func:`leave_reader`, which hands it back to
  :func:`run_inline` unfinished; the caller then awaits the rest in a task of its
  own (where :func:`leave_reader` does nothing).

The rule for code that may run inline is therefore one line: ``await
leave_reader()`` before anything that may suspend (a Trio checkpoint, a channel,
an event, a lock, I/O, user code) and before entering a cancel scope or a nursery
(they belong to the task that enters them). A Trio trap reached inline is a bug:
the trap has already recorded the reader's task as the waiter, so it cannot be
moved; :func:`run_inline` raises :class:`RuntimeError` to say so.

The coroutine runs in a copy of the reader's :mod:`contextvars` context, inline
and after it moves (a variable it sets and resets stays its own).

A reader that can go on reading in a new task goes one step further and lends
its task (:class:`ReaderTask`): the request's task coroutine runs in the
reader's task with no :func:`leave_reader` stop, so an ``async def`` tool that
does not wait costs no task either; the first one that waits keeps the task
(its traps have recorded it, rightly: it stays there), and the reader moves
instead. A reader that cannot move starts each request's task as before.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, TypeVar, cast, final

import trio

T = TypeVar("T")


@final
class _Leave:
    """The value :func:`leave_reader` yields to :func:`run_inline`: not a Trio trap."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<leave the reader>"


_LEAVE: Final = _Leave()
#: :func:`_rest`'s "no trap pending: step the coroutine".
_STEP: Final = object()
#: True while :func:`run_inline` runs a coroutine's first step (one thread: exact).
_inline = False


@types.coroutine
def leave_reader() -> Generator[Any, Any, None]:
    """Leave the reader's task before waiting: a no-op unless run by :func:`run_inline`.

    Cancellation: no checkpoint; nothing to cancel.
    """
    if _inline:
        yield _LEAVE


def run_inline(coro: Coroutine[Any, Any, T]) -> tuple[bool, T | Awaitable[T]]:
    """Start ``coro`` here, in a copy of the current context.

    Returns:
        ``(True, value)`` when it returned without waiting; else ``(False, rest)``,
        an awaitable that runs the rest of it (await it in a task of its own).

    Raises:
        Exception: Whatever ``coro`` raised before it returned or left.
        RuntimeError: ``coro`` reached a Trio trap without :func:`leave_reader`.
    """
    global _inline
    context = contextvars.copy_context()
    outer, _inline = _inline, True
    try:
        signal = context.run(coro.send, None)
    except StopIteration as done:
        return True, done.value
    finally:
        _inline = outer
    if signal is not _LEAVE:
        coro.close()
        raise RuntimeError(f"{coro!r} waited inline without leave_reader() first")
    return False, cast("Awaitable[T]", _rest(coro, context))


@types.coroutine
def _rest(
    coro: Coroutine[Any, Any, T], context: contextvars.Context, waiting: Any = _STEP
) -> Generator[Any, Any, T]:
    """The rest of a coroutine that left the reader, stepped in its own context;
    ``waiting``: the Trio trap its last step reached, to be yielded first."""
    value: Any = None
    error: BaseException | None = None
    signal = waiting
    while True:
        if signal is _STEP:
            try:
                if error is None:
                    signal = context.run(coro.send, value)
                else:
                    signal = context.run(coro.throw, error)
            except StopIteration as done:
                result: T = done.value
                return result
            error = None
        try:
            value = yield signal
        except BaseException as exc:  # cancellation and the like go into the coroutine
            error = exc
            value = None
        signal = _STEP


@final
class ReaderTask:
    """A reader's own task, lent to the requests it dispatches (see the module's docs).

    A transport's read loop makes one per pass and hands it to the session's
    dispatch. :meth:`take` runs a request's whole coroutine (handler, answer)
    in the reader's task, in a copy of its context, until the coroutine first
    waits. One that never waits cost no Trio task at all. The first that waits
    keeps the task (:attr:`kept`); the reader then goes on reading in a new
    task of its own and awaits :attr:`kept` in this one, which is the request's
    task from then on: its traps, cancel scopes and nurseries are this task's,
    so nothing is moved between tasks (what :func:`run_inline` cannot do).
    """

    __slots__ = ("kept", "scope")

    def __init__(self) -> None:
        #: The rest of the request that waits, for the reader's task to await; ``None``
        #: while the task is free.
        self.kept: Awaitable[None] | None = None
        #: The cancel scope of the request that keeps the task (``notifications/cancelled``
        #: cancels it). The reader enters it before it dispatches anything, so a request
        #: that does not wait needs no scope of its own, and exits it once that
        #: request is done: it catches the request's cancellation.
        self.scope = trio.CancelScope()

    @property
    def free(self) -> bool:
        """No request keeps the task yet, and none runs inline (:func:`run_inline`)."""
        return self.kept is None and not _inline

    def take(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run ``fn(*args)`` here (while :attr:`free`) until it returns or first waits: then
        it keeps the task (:attr:`kept`)."""
        coro = fn(*args)
        context = contextvars.copy_context()
        try:
            signal = context.run(coro.send, None)
        except StopIteration:
            return
        self.kept = cast("Awaitable[None]", _rest(coro, context, signal))


def in_context(coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
    """``coro``, to be awaited in any task, stepped in a copy of the current context.

    What a Trio task started here would inherit (the request being served, a
    tracing span), without starting one: the awaiting task may be another's.
    """
    return cast("Awaitable[T]", _rest(coro, contextvars.copy_context()))


def at_once(coro: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that returns without waiting (e.g. an operation of a
    store that answers at once), got without a Trio task or an ``await``.

    Raises:
        Exception: Whatever ``coro`` raised.
        RuntimeError: ``coro`` would have waited (it is closed).
    """
    try:
        coro.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    coro.close()
    raise RuntimeError(f"{coro!r} would wait: it cannot complete at once")
