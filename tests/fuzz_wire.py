"""Raw-wire targets for the fuzz and fault tests: a live server peer, fed bytes.

A target is a running server :class:`trio_mcp.Peer` (the fuzz app of
``tests/reliability/apps.py``) that the test feeds exact bytes and reads JSON
from:

* :class:`MemoryTarget`: the peer in this process on a bounded bus; bytes go
  through the same framing and decoding as a transport, and what the peer
  sends is encoded with ``encode_for_wire`` exactly as a transport does (so an
  encoding failure surfaces here too);
* :class:`StdioTarget`: the fuzz app as a real subprocess over its pipes.

Both can be restarted when an example killed them, so hypothesis can shrink
the example that did it. :func:`expected_answers` says which answers a byte
stream is owed, from the same framing rules.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import trio
import trio.lowlevel
import trio.testing

import trio_mcp
from trio_mcp.peer._messages._jsonrpc import (
    Notification,
    Request,
    Undecodable,
    decode_message,
    encode_for_wire,
)
from trio_mcp.peer._session import open_bus
from trio_mcp.transports._framing import DEFAULT_MAX_LINE, LineBuffer, LineTooLong

from .helpers import ROOT
from .reliability.apps import build_fuzz_app

INIT = {
    "jsonrpc": "2.0",
    "id": "~~init~~",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fuzzer", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
#: Ids the harness uses; the fuzz strategies never produce them.
SENTINEL = "~~sentinel~~"


class TargetDied(AssertionError):
    """The peer under test crashed, closed the connection or hung."""


def id_key(value: Any) -> str:
    """A hashable key for a JSON-RPC id (1 and "1" differ; null is null)."""
    return json.dumps(value, sort_keys=True)


#: Nesting deeper than this may or may not parse: Python's JSON decoder stops at
#: the recursion limit, which depends on how deep the caller's stack already is.
UNCERTAIN_DEPTH = 800


def nesting_depth(line: bytes) -> int:
    """An upper bound of the JSON nesting depth of ``line`` (brackets in strings count)."""
    if line.count(b"[") + line.count(b"{") < UNCERTAIN_DEPTH:
        return 0
    depth = deepest = 0
    for byte in line:
        if byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def expected_answers(
    data: bytes,
) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """What a peer owes for ``data`` (whole lines).

    Returns:
        ``exact``: answers owed per id key; ``maybe``: answers allowed but not
        owed per id key (ids named by a ``notifications/cancelled``, and lines
        nested so deeply that whether they parse depends on the stack).
    """
    exact: collections.Counter[str] = collections.Counter()
    maybe: collections.Counter[str] = collections.Counter()
    cancelled: set[str] = set()
    buffer = LineBuffer(DEFAULT_MAX_LINE)
    for item in buffer.feed(data):
        if isinstance(item, LineTooLong):
            exact[id_key(None)] += 1
            continue
        msg = decode_message(item)
        owed = exact
        if nesting_depth(item) >= UNCERTAIN_DEPTH:
            owed = maybe
            maybe[id_key(None)] += 1  # a parse error, when the parser gives up
        if isinstance(msg, Request):
            owed[id_key(msg.id)] += 1
        elif isinstance(msg, Undecodable):
            if owed is exact or msg.id is not None:
                owed[id_key(msg.id)] += 1
        elif isinstance(msg, Notification) and msg.method == "notifications/cancelled":
            rid = (msg.params or {}).get("requestId")
            if isinstance(rid, str | int) and not isinstance(rid, bool):
                cancelled.add(id_key(rid))
    for key in cancelled:
        # A cancelled request is never answered; one cancelled too late is.
        maybe[key] += exact.pop(key, 0)
    assert not list(buffer.close()), "an example must end with a newline"
    return exact, maybe


class Target:
    """A live server peer fed raw bytes."""

    kind = "?"

    def __init__(self) -> None:
        self.seq = 0
        self.examples = 0
        self.broken = False
        self.baseline: dict[str, Any] = {}
        #: What the answers were: "result" or the error code, for coverage checks.
        self.kinds: collections.Counter[str | int] = collections.Counter()

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    async def read(self) -> dict[str, Any]:
        raise NotImplementedError

    def next_id(self, what: str) -> str:
        self.seq += 1
        return f"{SENTINEL}{what}-{self.seq}"

    async def send(self, obj: Any) -> None:
        await self.write(json.dumps(obj).encode() + b"\n")

    async def read_response(
        self, request_id: str, other: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Read until the answer to ``request_id``; other answers go to ``other``."""
        while True:
            msg = await self.read()
            if "method" in msg:
                continue
            if msg.get("id") == request_id:
                return msg
            if other is None:
                raise AssertionError(f"unexpected answer while waiting: {str(msg)[:300]}")
            other(msg)

    async def call(
        self,
        method: str,
        params: Any = None,
        other: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        rid = self.next_id(method)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        with trio.fail_after(30):
            return await self.read_response(rid, other)

    async def initialize(self) -> None:
        await self.send(INIT)
        with trio.fail_after(30):
            answer = await self.read_response(INIT["id"])  # type: ignore[arg-type]
        assert "result" in answer, answer
        await self.send(INITIALIZED)

    async def stats(
        self, other: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """The server's bookkeeping (the ``stats`` tool of the fuzz app)."""
        answer = await self.call("tools/call", {"name": "stats", "arguments": {}}, other)
        stats: dict[str, Any] = answer["result"]["structuredContent"]
        return stats

    async def restart(self) -> None:
        await self.stop()
        await self.start()
        await self.initialize()
        self.broken = False

    async def settle(
        self, other: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Wait until no request is in flight on the server; return its stats."""
        with trio.fail_after(30):
            while True:
                stats = await self.stats(other)
                if stats["inflight"] == 0:
                    return stats
                await trio.sleep(0.002)

    async def exchange(self, chunks: list[bytes]) -> list[dict[str, Any]]:
        """Send one example (``chunks`` joined end with a newline) and check the answers.

        Every request and every undecodable line gets exactly one answer (ids
        named by a ``notifications/cancelled`` at most one), nothing else is
        answered, a ping still answers, and nothing is left in flight.

        Returns:
            The answers, in arrival order.
        """
        data = b"".join(chunks)
        exact, maybe = expected_answers(data)
        if self.broken:
            await self.restart()
        self.broken = True
        self.examples += 1
        for chunk in chunks:
            await self.write(chunk)
            if len(chunks) > 1:
                await trio.lowlevel.checkpoint()
        sentinel = self.next_id("ping")
        await self.send({"jsonrpc": "2.0", "id": sentinel, "method": "ping"})
        got: collections.Counter[str] = collections.Counter()
        answers: list[dict[str, Any]] = []
        pong = False
        try:
            with trio.fail_after(60):
                while not pong or any(got[k] < n for k, n in exact.items()):
                    msg = await self.read()
                    if "method" in msg:
                        continue  # notifications (status, progress) are not answers
                    if msg.get("id") == sentinel:
                        assert msg.get("result") == {}, msg
                        pong = True
                        continue
                    self._count(msg, got, exact, maybe)
                    answers.append(msg)

                def late(msg: dict[str, Any]) -> None:
                    # Answers to ids a notifications/cancelled named, arriving late.
                    self._count(msg, got, exact, maybe)
                    answers.append(msg)

                stats = await self.settle(late)
        except trio.TooSlowError:
            missing = {k: n - got[k] for k, n in exact.items() if got[k] < n}
            raise TargetDied(f"{self.kind}: hung; still owed {missing}, ping={pong}") from None
        except (EOFError, trio.EndOfChannel, trio.BrokenResourceError,
                trio.ClosedResourceError) as exc:
            raise TargetDied(f"{self.kind}: the connection died ({exc!r})") from exc
        assert stats["inflight"] == 0
        self.broken = False
        return answers

    def _count(self, msg: dict[str, Any], got: collections.Counter[str],
               exact: collections.Counter[str], maybe: collections.Counter[str]) -> None:
        assert ("result" in msg) != ("error" in msg), msg
        key = id_key(msg.get("id"))
        got[key] += 1
        allowed = exact[key] + maybe[key]
        assert got[key] <= allowed, (
            f"{self.kind}: answer #{got[key]} for id {key[:80]} (owed {allowed}): {str(msg)[:300]}"
        )
        if "error" in msg:
            error = msg["error"]
            assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
            assert "Traceback" not in error["message"]
            self.kinds[error["code"]] += 1
        else:
            self.kinds["result"] += 1


class MemoryTarget(Target):
    """The server peer in this process, on a bounded in-memory bus."""

    kind = "memory"

    def __init__(self, nursery: trio.Nursery) -> None:
        super().__init__()
        self.nursery = nursery
        self.scope: trio.CancelScope | None = None
        self.crashed: BaseException | None = None

    async def start(self) -> None:
        app = build_fuzz_app()
        bus, self.ends = open_bus(info={"transport": "memory-fuzz"})
        self.peer = trio_mcp.Peer(app, bus, trio_mcp.Role.SERVER)
        self.buffer = LineBuffer(DEFAULT_MAX_LINE)
        self.crashed = None
        self.scope = trio.CancelScope()
        await self.nursery.start(self._run, self.peer, self.scope)

    async def _run(self, peer: trio_mcp.Peer, scope: trio.CancelScope,
                   *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with scope:
                await peer.run(task_status=task_status)  # type: ignore[arg-type]
        except Exception as exc:
            self.crashed = exc
        finally:
            self.ends.to_peer.close()

    async def stop(self) -> None:
        if self.scope is not None:
            self.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()

    async def write(self, data: bytes) -> None:
        for item in self.buffer.feed(data):
            if isinstance(item, LineTooLong):
                incoming: Any = Undecodable(trio_mcp.INVALID_REQUEST,
                                            "Invalid request: message too long")
            else:
                incoming = decode_message(item)
            try:
                await self.ends.to_peer.send(incoming)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise TargetDied(f"memory: peer gone ({self.crashed!r})") from exc

    async def read(self) -> dict[str, Any]:
        try:
            msg = await self.ends.from_peer.receive()
        except trio.EndOfChannel:
            raise TargetDied(f"memory: the peer closed its bus (crash: {self.crashed!r})") from None
        data = encode_for_wire(msg)  # what every transport does; must never raise
        assert data is not None, f"a message the transport would drop: {msg!r}"[:300]
        out: dict[str, Any] = json.loads(data)
        return out


class StdioTarget(Target):
    """The fuzz app as a subprocess over stdin/stdout (one per test, reused)."""

    kind = "stdio"
    proc: trio.Process | None = None

    async def start(self) -> None:
        self.proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tests.reliability.apps", "fuzz"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=str(ROOT),
        )
        self.buffer = LineBuffer(64 * 1024 * 1024)
        self.lines: collections.deque[bytes] = collections.deque()

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        with trio.CancelScope(shield=True):
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.aclose()
            with trio.move_on_after(5):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            await proc.stdout.aclose()
        self.proc = None

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)

    async def write(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            await self.proc.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise TargetDied(f"stdio: server stdin closed (exit {self.proc.poll()})") from exc

    async def read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        while not self.lines:
            data = await self.proc.stdout.receive_some(1 << 16)
            if not data:
                raise TargetDied(f"stdio: server closed stdout (exit {self.proc.poll()})")
            for item in self.buffer.feed(bytes(data)):
                assert isinstance(item, bytes), "the server wrote an over-long line"
                self.lines.append(item)
        out: dict[str, Any] = json.loads(self.lines.popleft())
        return out
