"""The server's own CPU per request, in one process, against the echo floor's loop.

``python -m bench.serverloop [--calls N] [--rounds R] [--only seq|create]``

One Trio process holds a server and a raw NDJSON client (``os.write`` of
prepared request lines, ``os.read`` of the answers: no JSON-RPC client, no
MCP) joined by two ``os.pipe``\\ s; the process's CPU time per request is
printed, best of R rounds:

* ``seq``: sequential ``tools/call echo`` against trio-mcp's server (the
  example app, served by ``_serve_streams`` and ``Peer`` exactly as
  ``serve_stdio`` serves it) and against the echo floor's loop
  (``bench/echo.py``) in the same harness: the difference is what the
  server spends on MCP beyond reading and writing the lines;
* ``create``/``cancel``: 200 in flight, ``tools/call park`` as a task, then
  ``tasks/cancel`` of each; and the floor of a cancel: Trio alone cancelling
  as many tasks parked in cancel scopes of their own (no MCP, no I/O).

CPU time of one process is steadier than the cross-process harness's wall
clock on a shared machine, and a change to the server moves it alone (the
client's share is the same on both sides). ``python -m bench.instr`` is
steadier still, and much slower.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence

import trio
import trio.testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import task_server  # type: ignore[import-not-found]  # noqa: E402

import trio_mcp  # noqa: E402
from trio_mcp.peer import Peer, Role, open_bus  # noqa: E402
from trio_mcp.transports._stdio import _serve_streams  # noqa: E402

_ECHO = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
    b'"params":{"name":"echo","arguments":{"text":"hello"}}}\n'
)
_PARK = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",'
    b'"params":{"name":"park","arguments":{},"task":{"ttl":600000}}}\n'
)
_CANCEL = b'{"jsonrpc":"2.0","id":%d,"method":"tasks/cancel","params":{"taskId":"%s"}}\n'


async def _floor(receive: trio.lowlevel.FdStream, send: trio.lowlevel.FdStream) -> None:
    # bench/echo.py's server loop, on the given streams.
    pending = b""
    while data := await receive.receive_some(65_536):
        pending += data
        end = pending.rfind(b"\n") + 1
        if end:
            await send.send_all(pending[:end])
            pending = pending[end:]


async def _sequential(wfd: int, rfd: int, lines: Sequence[bytes]) -> None:
    buf = b""
    for line in lines:
        os.write(wfd, line)
        while b"\n" not in buf:
            await trio.lowlevel.wait_readable(rfd)
            buf += os.read(rfd, 65_536)
        buf = buf[buf.index(b"\n") + 1 :]


async def _pipelined(
    wfd: int, rfd: int, lines: Sequence[bytes], on_answer: Callable[[bytes], None] | None = None
) -> None:
    buf = b""
    sent = got = 0
    while sent < min(200, len(lines)):
        os.write(wfd, lines[sent])
        sent += 1
    while got < len(lines):
        await trio.lowlevel.wait_readable(rfd)
        buf += os.read(rfd, 1 << 20)
        *done, buf = buf.split(b"\n")
        more = []
        for line in done:
            got += 1
            if on_answer is not None:
                on_answer(line)
            if sent < len(lines):
                more.append(lines[sent])
                sent += 1
        if more:
            os.write(wfd, b"".join(more))


async def _handshake(wfd: int, rfd: int) -> None:
    init = {
        "jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "serverloop", "version": "1"}},
    }
    await _sequential(wfd, rfd, [json.dumps(init).encode() + b"\n"])
    os.write(wfd, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


async def trio_cancel_floor(n: int) -> float:
    """CPU us for Trio alone to cancel a parked task: ``scope.cancel()``, the unwinding, the exit.

    ``n`` tasks each await ``trio.sleep_forever()`` in a cancel scope of their own (as a
    running task's actor does); no MCP, no I/O.
    """

    async def parked(scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        scopes = [trio.CancelScope() for _ in range(n)]
        for scope in scopes:
            nursery.start_soon(parked, scope)
        await trio.testing.wait_all_tasks_blocked()
        t0 = time.process_time()
        for scope in scopes:
            scope.cancel()
        await trio.testing.wait_all_tasks_blocked()  # every task unwound and exited
        return _cpu_us(t0, n)


def _cpu_us(t0: float, n: int) -> float:
    return (time.process_time() - t0) / n * 1e6


async def measure(server: str, workload: str, calls: int, rounds: int) -> dict[str, float]:
    """CPU us per request of ``workload`` against ``server`` ("trio-mcp" or "floor")."""
    c2s_r, c2s_w = os.pipe()
    s2c_r, s2c_w = os.pipe()
    os.set_blocking(c2s_w, False)
    os.set_blocking(s2c_r, False)
    receive, send = trio.lowlevel.FdStream(c2s_r), trio.lowlevel.FdStream(s2c_w)
    out: dict[str, float] = {}
    try:
        async with trio.open_nursery() as nursery:
            if server == "floor":
                nursery.start_soon(_floor, receive, send)
            else:
                limits = trio_mcp.TaskLimits(
                    max_live_per_requestor=10 * calls, max_tasks=40 * calls
                )
                bus, ends = open_bus(info={"transport": "stdio"})
                nursery.start_soon(
                    _serve_streams, receive, send, ends, 1 << 20, nursery.cancel_scope
                )
                await nursery.start(Peer(task_server.build_app(limits), bus, Role.SERVER).run)
                await _handshake(c2s_w, s2c_r)
            for _ in range(rounds):
                if workload == "seq":
                    lines = [_ECHO % i for i in range(calls)]
                    t0 = time.process_time()
                    await _sequential(c2s_w, s2c_r, lines)
                    out["seq"] = min(out.get("seq", 1e9), _cpu_us(t0, calls))
                    continue
                ids: list[bytes] = []

                def created(line: bytes, ids: list[bytes] = ids) -> None:
                    ids.append(json.loads(line)["result"]["task"]["taskId"].encode())

                t0 = time.process_time()
                await _pipelined(c2s_w, s2c_r, [_PARK % i for i in range(calls)], created)
                out["create"] = min(out.get("create", 1e9), _cpu_us(t0, calls))
                t0 = time.process_time()
                await _pipelined(c2s_w, s2c_r, [_CANCEL % (i, t) for i, t in enumerate(ids)])
                out["cancel"] = min(out.get("cancel", 1e9), _cpu_us(t0, calls))
            nursery.cancel_scope.cancel()
    finally:
        for fd in (c2s_w, s2c_r):
            os.close(fd)
        await receive.aclose()
        await send.aclose()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("seq", "create"), help="create includes cancel")
    args = parser.parse_args(argv)
    task_server._tune_gc()
    rows: list[str] = []
    if args.only in (None, "seq"):
        ours = trio.run(measure, "trio-mcp", "seq", args.calls, args.rounds)["seq"]
        floor = trio.run(measure, "floor", "seq", args.calls, args.rounds)["seq"]
        rows.append(f"seq: trio-mcp {ours:.1f} us, echo floor {floor:.1f} us per call "
                    f"(the server's MCP work: {ours - floor:.1f} us)")
    if args.only in (None, "create"):
        got = trio.run(measure, "trio-mcp", "create", args.calls, max(1, args.rounds // 2))
        rows.append(f"create {got['create']:.1f} us, cancel {got['cancel']:.1f} us per task "
                    "(200 in flight)")
        floor = min(trio.run(trio_cancel_floor, args.calls) for _ in range(args.rounds))
        rows.append(f"Trio alone, cancelling a parked task in its own cancel scope "
                    f"(cancel, unwind, exit): {floor:.1f} us")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
