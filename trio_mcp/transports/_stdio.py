"""The stdio transport: NDJSON over a process's stdin and stdout.

Server side: :func:`serve_stdio` speaks MCP on this process's own stdin and
stdout. stdout carries protocol messages only: while serving, file
descriptor 1 is pointed at stderr, so a stray ``print`` cannot corrupt the
stream; logging goes to stderr through :mod:`logging`.

Client side: :func:`open_stdio_client` spawns a server command and talks to
it over its pipes. Closing follows the MCP stdio transport: close the
server's stdin, wait, then SIGTERM, wait, then SIGKILL.
"""

from __future__ import annotations

import collections
import logging
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Final

import attrs
import trio

from .._errors import INVALID_REQUEST
from .._inline import ReaderTask
from .._util import unwrap_group
from ..peer import (
    App,
    BusEnds,
    Implementation,
    Message,
    MessageBus,
    Peer,
    Role,
    Undecodable,
    decode_message,
    open_bus,
)
from ._client import DEFAULT_ERA, INIT_TIMEOUT, check_era, interrupt_wins, open_client_peer
from ._framing import DEFAULT_MAX_LINE, LineBuffer, LineTooLong
from ._pipes import READ_SIZE, DirectWriter, encode_line, fd_reader, fd_writer

log = logging.getLogger("trio_mcp.transports")

#: Seconds to wait at each step of closing a server process.
SHUTDOWN_GRACE: Final = 2.0
#: Most messages, and bytes, joined into one write when several are queued.
_WRITE_BATCH: Final = 256
_WRITE_BATCH_BYTES: Final = 1 << 20


async def run_stream_transport(
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    ends: BusEnds,
    *,
    max_line: int = DEFAULT_MAX_LINE,
) -> None:
    """Carry a bus over a byte stream pair with NDJSON framing.

    Reads lines into ``ends.to_peer`` until EOF; writes ``ends.from_peer``
    as lines until the peer closes it, then closes ``send``. A line over
    ``max_line`` bytes is discarded and answered with -32600; undecodable
    lines become :class:`Undecodable` for the peer to answer.

    Cancellation: stops both directions and closes ``send``.
    """
    direct = DirectWriter(send, ends) if isinstance(send, trio.lowlevel.FdStream) else None
    async with trio.open_nursery() as nursery:
        reader = _LineReader(receive, ends, LineBuffer(max_line), direct, nursery)
        nursery.start_soon(reader.run)
        await _write_lines(send, ends, direct)
        # The peer is done sending; let the reader finish on its own only if
        # the other side is still talking, otherwise stop here.
        nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class _LineReader:
    """Reads NDJSON lines onto the bus, in a task it may lend to a request.

    Each message goes straight to the session's dispatch when its receive
    loop waits on an empty bus (no receive-loop pass), with this task lent
    (:class:`~trio_mcp._inline.ReaderTask`): a request that answers without
    waiting (an ``async def`` tool that does not block, say) costs no task.
    One that waits keeps this task; reading goes on in a new one, where the
    rest of the lines already read come first. Else onto the bus without a
    schedule point while it has room (the reader still waits when it is full).
    """

    receive: trio.abc.ReceiveStream
    ends: BusEnds
    buffer: LineBuffer
    direct: DirectWriter | None
    nursery: trio.Nursery
    #: Read but not yet delivered (the rest of a read, after a request kept the task).
    _items: collections.deque[bytes | LineTooLong] = attrs.field(factory=collections.deque)
    #: Several messages in one read (a pipelining peer): their answers are
    #: joined into writes of up to FLUSH_EVERY messages (see DirectWriter.flush).
    _joining: DirectWriter | None = None
    _ended: bool = False

    async def run(self) -> None:
        """Read until end of input (then close the bus) or until a request keeps this task
        (then run the request: the reader goes on in a new task)."""
        receive, direct, items, buffer = self.receive, self.direct, self._items, self.buffer
        read = (fd_reader(receive) if isinstance(receive, trio.lowlevel.FdStream)
                else partial(receive.receive_some, READ_SIZE))  # fmt: skip
        shortcuts = self.ends.shortcuts
        to_peer = self.ends.to_peer
        lent = ReaderTask()
        with lent.scope:  # the scope of the request that comes to keep this task
            try:
                while lent.kept is None:
                    if not items:
                        if self._ended:
                            return
                        data = await read()
                        items.extend(buffer.lines(bytes(data)) if data else buffer.close())
                        self._ended = not data
                        self._joining = direct if len(items) > 1 else None
                    try:
                        while items:
                            msg = self._decode(items.popleft())
                            joining = self._joining
                            if joining is not None:
                                joining.burst = True
                            deliver = shortcuts.deliver
                            if deliver is not None and deliver(msg, lent):
                                if lent.kept is not None:
                                    break  # the rest of the lines are the next reader's
                                if joining is not None and joining.full():
                                    joining.flush()
                                continue
                            try:
                                to_peer.send_nowait(msg)
                            except trio.WouldBlock:
                                if direct is not None:
                                    direct.flush()  # nothing waits in it meanwhile
                                await to_peer.send(msg)
                    finally:
                        if direct is not None:
                            direct.flush()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            finally:
                if lent.kept is None:  # the reader that ends reading ends the bus
                    to_peer.close()
            # This task is the request's now: nothing may wait before it awaits
            # the request (whose first trap is pending).
            self.nursery.start_soon(self.run)
            await lent.kept

    def _decode(self, item: bytes | LineTooLong) -> Message | Undecodable:
        if isinstance(item, LineTooLong):
            log.warning("discarded a %d-byte line (limit %d)", item.size, self.buffer.max_line)
            return Undecodable(
                INVALID_REQUEST,
                f"Invalid request: message exceeds the {self.buffer.max_line}-byte limit",
            )
        return decode_message(item)


async def _write_lines(
    send: trio.abc.SendStream, ends: BusEnds, direct: DirectWriter | None = None
) -> None:
    write = fd_writer(send) if isinstance(send, trio.lowlevel.FdStream) else send.send_all
    shortcuts = ends.shortcuts
    if direct is not None:
        shortcuts.write_now = direct.write_now
        shortcuts.write_soon = direct.write_soon
    try:
        async with ends.from_peer as from_peer:
            while True:
                # As in the session's receive loop: receive() yields even
                # when a message is ready, so take a queued one without it.
                try:
                    msg = from_peer.receive_nowait()
                except trio.WouldBlock:
                    if direct is not None:
                        direct.idle = True  # see DirectWriter.write_now
                    try:
                        msg = await from_peer.receive()
                    except trio.EndOfChannel:
                        break
                    finally:
                        if direct is not None:
                            direct.idle = False
                except trio.EndOfChannel:
                    break
                if direct is not None:
                    # The rest of what a sender began to write directly.
                    rest = direct.take_unwritten()
                    if rest:
                        await send.send_all(rest)
                # Everything already queued goes out in one write.
                chunks: list[bytes] = []
                size = encode_line(msg, chunks)
                for _ in range(_WRITE_BATCH - 1):
                    if size >= _WRITE_BATCH_BYTES:
                        break
                    try:
                        msg = from_peer.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    size += encode_line(msg, chunks)
                if chunks:
                    await write(b"".join(chunks))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        if shortcuts.write_now is not None and direct is not None:
            shortcuts.write_now = shortcuts.write_soon = None
        with trio.CancelScope(shield=True):
            await send.aclose()


@asynccontextmanager
async def open_stdio_client(
    command: str | Sequence[str],
    app: App | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: Any = None,
    max_line: int = DEFAULT_MAX_LINE,
    client_info: Implementation | None = None,
    init_timeout: float | None = INIT_TIMEOUT,
    era: str = DEFAULT_ERA,
) -> AsyncIterator[Peer]:
    """Spawn an MCP server command and yield the client :class:`Peer` talking to it.

    Args:
        command: The command, as a list or a shell-like string (split with
            :func:`shlex.split`, not run by a shell).
        app: What this client offers (sampling/elicitation handlers, tasks).
            A bare App is used when omitted.
        env: Environment for the server (inherits ours when omitted).
        cwd: Working directory for the server.
        stderr: Where the server's stderr goes (inherited by default).
        max_line: Longest accepted message, in bytes.
        client_info: ``clientInfo`` to send instead of the App's.
        init_timeout: Seconds the server has to answer ``initialize``
            (:data:`INIT_TIMEOUT`, 30, by default); ``None`` waits forever.
        era: The protocol revision: ``"2025-11-25"`` (default, the
            ``initialize`` handshake), ``"2026-07-28"`` (``server/discover``
            and per-request ``_meta``) or ``"auto"`` (probe with
            ``server/discover``, fall back to ``initialize``; the choice is
            remembered per command line). ``peer.protocol_version`` tells
            which one is spoken. ``auto`` is opt-in: a 2026-07-28 connection
            has no 2025-11-25 tasks.

    The server runs in a session of its own, so a Ctrl-C in the
    terminal interrupts this program only; the server is then stopped the
    MCP way. The block starts after the ``initialize`` handshake. On exit
    the server's stdin is closed, then it is given :data:`SHUTDOWN_GRACE`
    seconds to exit, then its process group gets SIGTERM, then SIGKILL.

    Raises:
        ValueError: An unknown ``era``.
        OSError: The command could not be started.
        ConnectionFailed: The server went away before the handshake ended
            (e.g. it exited at once; the :class:`ConnectionClosed` as
            ``__cause__``), or did not answer ``initialize`` within
            ``init_timeout`` seconds (:class:`~trio_mcp.HandshakeTimeout`;
            the server is then stopped as on exit).
        RemoteError: The server refused the handshake.

    Cancellation: cancelling the handshake or the block stops the server
        as on exit (stdin closed, SIGTERM, SIGKILL), shielded, so it takes
        up to twice :data:`SHUTDOWN_GRACE` seconds. A Ctrl-C arrives as a
        plain ``KeyboardInterrupt``, never wrapped in a group.
    """
    check_era(era)
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    app = app if app is not None else App("trio-mcp-client")
    with interrupt_wins(), unwrap_group():
        async with trio.open_nursery() as nursery:
            proc = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,  # a terminal's Ctrl-C reaches us only
            )
            assert proc.stdin is not None and proc.stdout is not None
            bus, ends = open_bus(info={
                "transport": "stdio", "pid": proc.pid, "server_key": shlex.join(argv),
            })
            nursery.start_soon(_run_and_reap, proc, ends, max_line)
            try:
                async with open_client_peer(
                    app, bus, client_info=client_info, init_timeout=init_timeout, era=era
                ) as peer:
                    yield peer
            finally:
                bus.outgoing.close()


async def _run_and_reap(proc: trio.Process, ends: BusEnds, max_line: int) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    try:
        await run_stream_transport(proc.stdout, proc.stdin, ends, max_line=max_line)
    finally:
        with trio.CancelScope(shield=True):
            await _stop_process(proc)


async def _stop_process(proc: trio.Process) -> None:
    """Close stdin (done by the writer), wait; SIGTERM, wait; SIGKILL."""
    if proc.stdin is not None:
        await proc.stdin.aclose()
    with trio.move_on_after(SHUTDOWN_GRACE):
        await proc.wait()
        return
    log.info("server %d did not exit after stdin closed; terminating", proc.pid)
    _signal_group(proc, signal.SIGTERM)
    with trio.move_on_after(SHUTDOWN_GRACE):
        await proc.wait()
        return
    log.warning("server %d did not exit after SIGTERM; killing", proc.pid)
    _signal_group(proc, signal.SIGKILL)
    await proc.wait()


def _signal_group(proc: trio.Process, signum: int) -> None:
    """Signal the server and its own children (its session's process group)."""
    try:
        os.killpg(proc.pid, signum)  # the server leads its own group
    except (ProcessLookupError, PermissionError):
        proc.send_signal(signum)


async def serve_stdio(
    app: App,
    *,
    max_line: int = DEFAULT_MAX_LINE,
    protect_stdout: bool = True,
    task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` as an MCP server on this process's stdin/stdout until EOF.

    Args:
        app: The tools and handlers to serve.
        max_line: Longest accepted message, in bytes.
        protect_stdout: Point file descriptor 1 at stderr while serving, so
            only protocol messages reach the real stdout.

    Returns when stdin reaches EOF (the client closed it) or on cancel.
    """
    in_fd = os.dup(sys.stdin.fileno())
    out_fd = os.dup(sys.stdout.fileno())
    saved_stdout: int | None = None
    if protect_stdout:
        sys.stdout.flush()
        saved_stdout = os.dup(1)
        os.dup2(2, 1)
    receive = trio.lowlevel.FdStream(in_fd)
    send = trio.lowlevel.FdStream(out_fd)
    bus, ends = open_bus(info={"transport": "stdio"})
    try:
        with unwrap_group():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    _serve_streams, receive, send, ends, max_line, nursery.cancel_scope
                )
                peer = Peer(app, bus, Role.SERVER)
                await nursery.start(peer.run)
                task_status.started(peer)
    finally:
        await receive.aclose()
        if saved_stdout is not None:
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)


async def _serve_streams(
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    ends: BusEnds,
    max_line: int,
    scope: trio.CancelScope,
) -> None:
    await run_stream_transport(receive, send, ends, max_line=max_line)
    scope.cancel()


def wrap_stdio_streams(
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
    nursery: trio.Nursery,
    *,
    context: str | None = None,
    max_line: int = DEFAULT_MAX_LINE,
) -> MessageBus:
    """Low level: run NDJSON framing over two byte streams in ``nursery``.

    Returns:
        The bus to hand to a :class:`Peer`.
    """
    bus, ends = open_bus(context=context, info={"transport": "stream"})
    nursery.start_soon(lambda: run_stream_transport(receive, send, ends, max_line=max_line))
    return bus
