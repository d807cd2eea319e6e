"""Pipes read and written directly, and the bus's ``write_now`` shortcut for them.

The stdio transport's fast path (see :mod:`._stdio`): a Trio ``FdStream``'s
``receive_some``/``send_all`` begin with a schedule point, which costs a
scheduler pass per message on the hot path; these do not.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from ..peer import WAKE_WRITER, BusEnds, Message, encode_for_wire

log = logging.getLogger("trio_mcp.transports")

#: Bytes asked of one read.
READ_SIZE: Final = 65_536
#: Answers to pipelined requests joined into one write (see DirectWriter).
FLUSH_EVERY: Final = 64


class DirectWriter:
    """The bus's ``write_now`` shortcut for a pipe: the sender's task writes its message.

    Only while the writer task waits on an empty bus, so every message
    before this one is already written in full: then the message is encoded
    and written with one non-blocking ``os.write``, saving the writer task's
    scheduler pass. A partial write leaves the rest in :attr:`leftover` and
    wakes the writer, which writes it before anything else.

    While :attr:`burst` (set by the reader as it dispatches several messages
    from one read), messages are collected instead and written together by
    :meth:`flush`, every :data:`FLUSH_EVERY` messages and when the read is
    dispatched: fewer writes, yet the other side starts on the first answers
    while this side works on the rest (one write of all 200 answers to 200
    pipelined requests made each side wait for the other).
    """

    __slots__ = ("_pending", "_soon", "_stream", "_wake", "burst", "idle", "leftover")

    def __init__(self, stream: trio.lowlevel.FdStream, ends: BusEnds) -> None:
        self._stream = stream
        #: Set by the bus's sender side: how to wake the writer (see write_now).
        self._wake = ends.shortcuts.wake_writer
        self.leftover = b""
        self.burst = False
        #: Set by the writer task while it waits on an empty bus.
        self.idle = False
        #: A write_soon collection is open (the writer was woken for it).
        self._soon = False
        self._pending: list[bytes] = []

    def write_now(self, msg: Message) -> bool:
        # idle: the writer waits on an empty bus. A refusal clears it (and
        # closes a write_soon collection): the message then goes on the bus,
        # and nothing may overtake it.
        if not self.idle or self.leftover:
            self.idle = self._soon = False
            return False
        if self._stream.fileno() < 0:
            return False
        data = _encode(msg)
        if data is None:
            return True
        if not self.burst and not self._pending:  # the usual lone answer: no list, no join
            self._write(data + b"\n")
            return True
        self._pending.append(data)
        self._pending.append(b"\n")
        if not self.burst:
            self.flush()
        return True

    def write_soon(self, msg: Message) -> bool:
        """Collect ``msg`` for the writer's next pass (woken once for the lot).

        Only while nothing is queued on the bus ahead of the collection: the
        writer writes what was collected before anything on the bus.
        """
        if self.leftover:  # the pipe is full: the bus, and its backpressure, from here
            self.idle = self._soon = False
            return False
        if not self._soon:
            if not self.idle or self._stream.fileno() < 0:
                return False
            self.idle = False
            self._soon = True
            self._wake()
        encode_line(msg, self._pending)
        if self.full():
            self.flush()  # the other side starts on these meanwhile (see flush)
        return True

    def full(self) -> bool:
        """True when :data:`FLUSH_EVERY` messages wait for :meth:`flush`."""
        return len(self._pending) >= 2 * FLUSH_EVERY

    def flush(self) -> None:
        """Write the collected messages now (the rest, if the pipe is full, by the writer)."""
        self.burst = False
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._write(data)

    def _write(self, data: bytes) -> None:
        if self.leftover:  # behind what is still unwritten: the writer writes both
            self.leftover += data
            return
        try:
            sent = os.write(self._stream.fileno(), data)
        except OSError:  # full (BlockingIOError) or broken: the writer sees to it
            sent = 0
        if sent < len(data):
            self.leftover = data[sent:]
            self._wake()

    def take_unwritten(self) -> bytes:
        """What was handed over but not yet written: the writer writes it first."""
        self._soon = False
        if self._pending:
            self.flush()
        rest, self.leftover = self.leftover, b""
        return rest


def _encode(msg: Message) -> bytes | None:
    """``msg`` as JSON, or ``None`` (logged) for one that cannot be encoded: it is dropped."""
    data = encode_for_wire(msg)
    if data is None:
        log.error("dropped a message that cannot be encoded as JSON: %r", msg)
    return data


def encode_line(msg: Message, chunks: list[bytes]) -> int:
    """Append ``msg`` as one line to ``chunks``; return the bytes added."""
    if msg is WAKE_WRITER:
        return 0
    data = _encode(msg)
    if data is None:
        return 0
    chunks.append(data)
    chunks.append(b"\n")
    return len(data) + 1


# Pipes (trio FdStream) are read and written directly: FdStream's
# receive_some/send_all begin with a schedule point, which costs a scheduler
# pass per message on the hot path. Here the reader yields once per read (it
# waits for the pipe to be readable after a short read, which drained it, and
# takes a plain schedule point after a full one, so a flood of input cannot
# starve the other tasks), and the writer's only schedule point is its wait
# on the bus; both stay cancellable.


def fd_reader(stream: trio.lowlevel.FdStream) -> Callable[[], Awaitable[bytes]]:
    drained = False  # the last read was short: wait for data before reading

    async def read() -> bytes:
        nonlocal drained
        while True:
            fd = stream.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("file was already closed")
            if drained:
                await trio.lowlevel.wait_readable(fd)
            else:
                await trio.lowlevel.checkpoint()
            fd = stream.fileno()
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                drained = True
                continue
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("file was already closed") from None
                raise trio.BrokenResourceError from exc
            drained = len(data) < READ_SIZE
            return data

    return read


def fd_writer(stream: trio.lowlevel.FdStream) -> Callable[[bytes], Awaitable[None]]:
    async def write(data: bytes) -> None:
        fd = stream.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("file was already closed")
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("file was already closed") from None
            raise trio.BrokenResourceError from exc
        if sent < len(data):
            await stream.send_all(memoryview(data)[sent:])

    return write
