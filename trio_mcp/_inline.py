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

A coroutine started inline may also wait *without* a task: for an
:class:`InlineEvent` that another task will set (a batch of creates stored, a
commit). Awaiting one that is not set parks it: :func:`run_inline` returns a
:class:`Parked`, which its caller either awaits in a task of its own (as the
rest of one that left the reader) or hands a callback (:meth:`Parked.then`):
once the event is set, the coroutine goes on in the task that set it, started
again as :func:`run_inline` started it (so the same rules hold: it may return,
leave the reader or park again). A thousand creates waiting for their batch
then cost the task that stores it a thousand calls, not a thousand Trio tasks.

A reader that can go on reading in a new task goes one step further and lends
its task (:class:`ReaderTask`): the request's task coroutine runs in the
reader's task with no :func:`leave_reader` stop, so an ``async def`` tool that
does not wait costs no task either; the first one that waits keeps the task
(its traps have recorded it, rightly: it stays there), and the reader moves
instead. A reader that cannot move starts each request's task as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from functools import partial
from typing import Any, Final, Generic, TypeVar, cast, final

import trio

T = TypeVar("T")
log = logging.getLogger("trio_mcp.peer")


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


def started_inline() -> bool:
    """True in a coroutine :func:`run_inline` is stepping (no Trio task of its own:
    it may park on an :class:`InlineEvent`, but no timer can wake it)."""
    return _inline


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
        an awaitable that runs the rest of it (await it in a task of its own):
        a :class:`Parked` when it waits for an :class:`InlineEvent` (which
        may instead be left to call back, :meth:`Parked.then`).

    Raises:
        Exception: Whatever ``coro`` raised before it returned or left.
        RuntimeError: ``coro`` reached a Trio trap without :func:`leave_reader`.
    """
    return _step(coro, contextvars.copy_context(), enter=True)


def _step(
    coro: Coroutine[Any, Any, T], context: contextvars.Context, *, enter: bool
) -> tuple[bool, T | Awaitable[T]]:
    """Run ``coro`` inline until it returns, leaves or parks (``enter``: in ``context``;
    else the caller already runs in it)."""
    global _inline
    outer, _inline = _inline, True
    try:
        signal = context.run(coro.send, None) if enter else coro.send(None)
    except StopIteration as done:
        return True, done.value
    finally:
        _inline = outer
    if signal is _LEAVE:
        return False, cast("Awaitable[T]", _rest(coro, context))
    if type(signal) is InlineEvent:
        return False, Parked(coro, context, signal)
    coro.close()
    raise RuntimeError(f"{coro!r} waited inline without leave_reader() first")


@final
class InlineEvent:
    """An event that a coroutine started inline waits for without a Trio task.

    Awaited (:meth:`wait`) by a coroutine :func:`run_inline` runs, an event not
    yet set parks it (see the module's docs); awaited in a Trio task, it is a
    :class:`trio.Event`. :meth:`set` wakes both kinds: a parked coroutine's
    callback runs right there, in the task that sets it.
    """

    __slots__ = ("_event", "_flag", "_parked")

    def __init__(self) -> None:
        self._flag = False
        self._event: trio.Event | None = None  # made for the first waiter in a task
        self._parked: list[Callable[[], None]] | None = None

    def is_set(self) -> bool:
        """True once :meth:`set`."""
        return self._flag

    def set(self) -> None:
        """Set the event: wake its waiters (parked ones run on here, one by one).

        A parked coroutine's callback that raises is logged: the others still run.
        """
        if self._flag:
            return
        self._flag = True
        if self._event is not None:
            self._event.set()
        parked, self._parked = self._parked, None
        for resume in parked or ():
            try:
                resume()
            except Exception:
                log.exception("a request waiting on %r failed as it went on", self)

    @types.coroutine
    def wait(self) -> Generator[Any, Any, None]:
        """Wait until set: parked when started inline (no checkpoint), else as
        :meth:`trio.Event.wait` (a checkpoint even when set).

        Cancellation: in a task, as :meth:`trio.Event.wait`; a parked coroutine
        is not in one (its caller decides, see :meth:`Parked.then`).
        """
        if _inline:
            if not self._flag:
                yield self  # to _step: parked until set
            return
        event = self._event
        if event is None:
            event = self._event = trio.Event()
            if self._flag:
                event.set()
        yield from event.wait().__await__()

    def _then(self, resume: Callable[[], None]) -> None:
        if self._flag:
            resume()
        elif self._parked is None:
            self._parked = [resume]
        else:
            self._parked.append(resume)

    def _forget(self, resume: Callable[[], None]) -> None:
        if self._parked is not None:
            with contextlib.suppress(ValueError):  # (called already)
                self._parked.remove(resume)


@final
class Parked(Generic[T]):
    """A coroutine started inline that waits for an :class:`InlineEvent`.

    Await it in a task of its own (the wait happens there, then the rest), or
    :meth:`then`: never both (unless :meth:`recall` took the callback back first).
    """

    __slots__ = ("_callback", "_context", "_coro", "_event")

    def __init__(
        self, coro: Coroutine[Any, Any, T], context: contextvars.Context, event: InlineEvent
    ) -> None:
        self._coro = coro
        self._context = context
        self._event = event
        self._callback: Callable[[], None] | None = None

    def __await__(self) -> Generator[Any, Any, T]:
        return _after(self._event, self._coro, self._context)

    def then(self, resume: Callable[[Parked[T]], None]) -> None:
        """Call ``resume(self)`` once the event is set (at once if it is), in the task that
        sets it and in the coroutine's context; there :meth:`step` runs it on."""
        self._callback = callback = partial(self._context.run, resume, self)
        self._event._then(callback)

    def recall(self) -> None:
        """Take back :meth:`then`'s callback before it is called (it never will be), to
        await the coroutine in a task after all: e.g. a request cancelled while it
        waits, which should see its cancellation now, not when the event is set."""
        if self._callback is not None:
            self._event._forget(self._callback)
            self._callback = None

    def step(self) -> tuple[bool, T | Awaitable[T]]:
        """Run the coroutine on, as :func:`run_inline` started it (and with its answer):
        only in the callback of :meth:`then`."""
        return _step(self._coro, self._context, enter=False)


def _after(
    event: InlineEvent, coro: Coroutine[Any, Any, T], context: contextvars.Context
) -> Generator[Any, Any, T]:
    """A parked coroutine's rest in a task: the wait (its cancellation goes into the
    coroutine, where it waited), then the rest of it. (A plain generator: what
    ``__await__`` returns may not be a coroutine.)"""
    error: BaseException | None = None
    try:
        yield from event.wait()
    except BaseException as exc:
        error = exc
    return (yield from _rest(coro, context, error=error))


@types.coroutine
def _rest(
    coro: Coroutine[Any, Any, T],
    context: contextvars.Context,
    waiting: Any = _STEP,
    error: BaseException | None = None,
) -> Generator[Any, Any, T]:
    """The rest of a coroutine that left the reader, stepped in its own context;
    ``waiting``: the Trio trap its last step reached, to be yielded first; ``error``:
    to be thrown in first."""
    value: Any = None
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
