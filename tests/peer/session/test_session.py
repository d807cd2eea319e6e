"""The JSON-RPC session alone: no MCP feature, no transport, only memory channels.

Like h11's ``Connection`` tests: the test plays the other side by writing
envelopes into the bus's transport end and reading what the session writes.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_mcp import ConnectionClosed, McpError, RemoteError, RemoteProtocolError
from trio_mcp._inline import InlineEvent, Parked, leave_reader, run_inline
from trio_mcp.peer._messages import (
    ErrorData,
    ErrorResponse,
    Notification,
    ProgressParams,
    Request,
    Response,
    Undecodable,
)
from trio_mcp.peer._session import BusEnds, Reply, Session, current_request_id, open_bus


@asynccontextmanager
async def running_session(**kwargs: Any) -> AsyncIterator[tuple[Session, BusEnds]]:
    bus, ends = open_bus()
    session = Session(bus, **kwargs)
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        try:
            yield session, ends
        finally:
            session.close()


async def _next(ends: BusEnds) -> Any:
    with trio.fail_after(5):
        return await ends.from_peer.receive()


async def test_session_unknown_method_is_method_not_found() -> None:
    async with running_session() as (_, ends):
        await ends.to_peer.send(Request(1, "nothing/here"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse)
        assert (reply.id, reply.error.code) == (1, -32601)


async def test_session_handler_result_becomes_the_response() -> None:
    async def echo(req: Request) -> dict[str, Any]:
        return {"echo": req.params}

    async with running_session(request_handlers={"echo": echo}) as (_, ends):
        await ends.to_peer.send(Request("a", "echo", {"x": 1}))
        assert await _next(ends) == Response("a", {"echo": {"x": 1}})


async def test_session_attrs_result_is_converted_to_wire_json() -> None:
    async def progress(req: Request) -> ProgressParams:
        return ProgressParams("tok", 0.5, total=1.0)

    async with running_session(request_handlers={"p": progress}) as (_, ends):
        await ends.to_peer.send(Request(1, "p"))
        reply = await _next(ends)
        assert reply.result == {"progressToken": "tok", "progress": 0.5, "total": 1.0}


async def test_session_mcp_error_is_answered_with_its_code_and_data() -> None:
    async def refuse(req: Request) -> None:
        raise McpError(-32002, "Resource not found", {"uri": "x://y"})

    async with running_session(request_handlers={"r": refuse}) as (_, ends):
        await ends.to_peer.send(Request(7, "r"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse)
        assert (reply.error.code, reply.error.message, reply.error.data) == (
            -32002,
            "Resource not found",
            {"uri": "x://y"},
        )


async def test_session_handler_crash_is_internal_error_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def crash(req: Request) -> None:
        raise RuntimeError("secret detail /etc/passwd")

    async with running_session(request_handlers={"c": crash}) as (_, ends):
        await ends.to_peer.send(Request(1, "c"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse)
        assert reply.error.code == -32603
        assert "secret" not in reply.error.message and reply.error.data is None


async def test_session_cancelled_request_is_never_answered() -> None:
    started = trio.Event()
    stopped = trio.Event()

    async def slow(req: Request) -> dict[str, Any]:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    async def fast(req: Request) -> dict[str, Any]:
        return {}

    async with running_session(request_handlers={"slow": slow, "fast": fast}) as (_, ends):
        await ends.to_peer.send(Request(1, "slow"))
        await started.wait()
        await ends.to_peer.send(Notification("notifications/cancelled", {"requestId": 1}))
        await stopped.wait()
        await ends.to_peer.send(Request(2, "fast"))
        # The next thing on the wire answers request 2: request 1 got nothing.
        assert await _next(ends) == Response(2, {})


async def test_session_uncancellable_request_ignores_cancellation() -> None:
    release = trio.Event()

    async def guarded(req: Request) -> dict[str, Any]:
        session.uncancellable.add(req.id)
        await release.wait()
        return {"done": True}

    async with running_session(request_handlers={"g": guarded}) as (session, ends):
        await ends.to_peer.send(Request(1, "g"))
        await trio.testing.wait_all_tasks_blocked()
        await ends.to_peer.send(Notification("notifications/cancelled", {"requestId": 1}))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
        assert await _next(ends) == Response(1, {"done": True})


async def test_session_duplicate_inflight_id_is_invalid_request() -> None:
    async def hang(req: Request) -> None:
        await trio.sleep_forever()

    async with running_session(request_handlers={"h": hang}) as (_, ends):
        await ends.to_peer.send(Request(1, "h"))
        await ends.to_peer.send(Request(1, "h"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse) and reply.error.code == -32600


async def test_session_admission_hook_refuses_before_the_handler_runs() -> None:
    ran: list[str] = []

    async def handler(req: Request) -> dict[str, Any]:
        ran.append(req.method)
        return {}

    def admit(req: Request) -> ErrorData | None:
        return None if req.method == "open" else ErrorData(-32600, "not yet")

    handlers = {"open": handler, "closed": handler}
    async with running_session(request_handlers=handlers, admit=admit) as (_, ends):
        await ends.to_peer.send(Request(1, "closed"))
        refused = await _next(ends)
        assert isinstance(refused, ErrorResponse) and refused.error.message == "not yet"
        await ends.to_peer.send(Request(2, "open"))
        assert await _next(ends) == Response(2, {})
    assert ran == ["open"]


async def test_session_undecodable_input_is_answered() -> None:
    async with running_session() as (_, ends):
        await ends.to_peer.send(Undecodable(-32700, "Parse error", None))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse) and reply.error.code == -32700


async def test_session_notification_dispatch_through_the_table() -> None:
    seen: list[Any] = []
    handlers = {"notifications/x": lambda note: seen.append(note.params)}
    async with running_session(notification_handlers=handlers) as (_, ends):
        await ends.to_peer.send(Notification("notifications/x", {"a": 1}))
        await ends.to_peer.send(Notification("notifications/unknown"))
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [{"a": 1}]


async def test_session_request_typed_by_the_recorded_result_type() -> None:
    async with running_session() as (session, ends):
        async with trio.open_nursery() as nursery:
            results: list[Any] = []

            async def call() -> None:
                results.append(await session.request("p", None, ProgressParams))

            nursery.start_soon(call)
            sent = await _next(ends)
            assert isinstance(sent, Request) and sent.method == "p"
            await ends.to_peer.send(Response(sent.id, {"progressToken": 3, "progress": 1}))
        assert results == [ProgressParams(3, 1)]


async def test_session_result_not_fitting_the_type_is_a_protocol_error() -> None:
    async with running_session() as (session, ends):
        async with trio.open_nursery() as nursery:

            async def answer() -> None:
                sent = await _next(ends)
                await ends.to_peer.send(Response(sent.id, {"progress": "nope"}))

            nursery.start_soon(answer)
            with pytest.raises(RemoteProtocolError):
                await session.request("p", None, ProgressParams)


async def test_session_error_answer_raises_remote_error() -> None:
    async with running_session() as (session, ends):
        async with trio.open_nursery() as nursery:

            async def answer() -> None:
                sent = await _next(ends)
                await ends.to_peer.send(ErrorResponse(sent.id, ErrorData(-32602, "bad")))

            nursery.start_soon(answer)
            with pytest.raises(RemoteError) as info:
                await session.request_raw("m")
        assert info.value.code == -32602


async def test_session_every_waiter_wakes_with_connection_closed() -> None:
    async with running_session() as (session, ends):
        failures: list[BaseException] = []

        async def call(n: int) -> None:
            try:
                await session.request_raw(f"m{n}")
            except ConnectionClosed as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(call, n)
            for _ in range(3):
                await _next(ends)
            await ends.to_peer.aclose()  # the other side goes away
        assert len(failures) == 3
        with pytest.raises(ConnectionClosed):
            await session.request_raw("later")


async def test_session_cancelled_caller_of_a_closed_connection_sees_the_cancellation() -> None:
    """A caller whose own scope is cancelled (and closed the transport) gets Cancelled, so its
    move_on_after catches it; an uncancelled caller still gets ConnectionClosed."""
    async with running_session() as (session, ends):
        await ends.to_peer.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert not session.is_open
        with trio.CancelScope() as scope:
            scope.cancel()
            await session.request_raw("ping")
        assert scope.cancelled_caught
        with pytest.raises(ConnectionClosed):
            await session.request_raw("ping")


async def test_session_cancelled_caller_sends_notifications_cancelled() -> None:
    async with running_session() as (session, ends):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.request_raw, "slow")
            sent = await _next(ends)
            nursery.cancel_scope.cancel()
        cancelled = await _next(ends)
        assert isinstance(sent, Request)
        assert cancelled.method == "notifications/cancelled"
        assert cancelled.params["requestId"] == sent.id


async def test_session_progress_reaches_sync_and_async_callbacks() -> None:
    seen: list[tuple[str, float]] = []

    def sync_cb(params: ProgressParams) -> None:
        seen.append(("sync", params.progress))

    async def async_cb(params: ProgressParams) -> None:
        await trio.lowlevel.checkpoint()
        seen.append(("async", params.progress))

    async with running_session() as (session, ends):
        async with trio.open_nursery() as nursery:

            async def answer() -> None:
                for _ in range(2):
                    sent = await _next(ends)
                    token = sent.params["_meta"]["progressToken"]
                    await ends.to_peer.send(
                        Notification(
                            "notifications/progress", {"progressToken": token, "progress": 0.5}
                        )
                    )
                    await trio.testing.wait_all_tasks_blocked()
                    await ends.to_peer.send(Response(sent.id, {}))

            nursery.start_soon(answer)
            await session.request_raw("a", progress=sync_cb)
            await session.request_raw("b", progress=async_cb)
    assert seen == [("sync", 0.5), ("async", 0.5)]


async def test_session_messages_sent_by_a_handler_carry_its_request_id() -> None:
    async def chatty(req: Request) -> Reply:
        session.notify_soon("notifications/note", {"n": 1})
        assert current_request_id.get() == req.id
        return Reply({}, lambda: None)

    async with running_session(request_handlers={"c": chatty}) as (session, ends):
        await ends.to_peer.send(Request("r1", "c"))
        note = await _next(ends)
        reply = await _next(ends)
        assert note.method == "notifications/note" and note.related_request_id == "r1"
        assert reply == Response("r1", {})
        session.notify_soon("notifications/free")
        free = await _next(ends)
        assert free.related_request_id is None


async def test_session_gate_holds_requests_until_set(autojump_clock: trio.abc.Clock) -> None:
    gate = trio.Event()
    async with running_session(gate=gate, gate_exempt=frozenset({"hello"})) as (session, ends):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.request_raw, "later")
            nursery.start_soon(session.request_raw, "hello")
            first = await _next(ends)
            assert first.method == "hello"
            with trio.move_on_after(60):
                await ends.from_peer.receive()
                raise AssertionError("the gated request went out early")
            gate.set()
            second = await _next(ends)
            assert second.method == "later"
            await ends.to_peer.send(Response(first.id, {}))
            await ends.to_peer.send(Response(second.id, {}))


def test_session_related_request_id_is_not_part_of_equality() -> None:
    a = Request(1, "m", None, related_request_id=5)
    assert a == Request(1, "m", None) and attrs.evolve(a).related_request_id == 5


# --- inline methods: answered in the dispatching task ----------------------------------


async def test_session_inline_handler_answers_without_a_task_of_its_own() -> None:
    seen: list[Any] = []
    sent: list[str] = []

    async def now(req: Request) -> Reply:
        seen.append((current_request_id.get(), trio.lowlevel.current_task().name))
        return Reply({"n": req.params}, lambda: sent.append("after"))

    async with running_session(request_handlers={"now": now}, inline={"now"}) as (session, ends):
        await ends.to_peer.send(Request(1, "now", {"x": 1}))
        reply = await _next(ends)
        assert isinstance(reply, Response) and reply.result == {"n": {"x": 1}}
        assert seen[0][0] == 1  # the request's id is current while it runs
        assert "_serve" not in seen[0][1] and "now" not in seen[0][1]
        assert sent == ["after"]  # after_send, once the answer is on the bus
        assert current_request_id.get() is None and not session._inflight


async def test_session_inline_handler_errors_become_error_responses() -> None:
    async def refuse(req: Request) -> Any:
        raise McpError(-32602, "no")

    async def crash(req: Request) -> Any:
        raise ZeroDivisionError("secret")

    handlers = {"refuse": refuse, "crash": crash}
    async with running_session(request_handlers=handlers, inline=set(handlers)) as (_, ends):
        await ends.to_peer.send(Request(1, "refuse"))
        await ends.to_peer.send(Request(2, "crash"))
        first, second = await _next(ends), await _next(ends)
        assert isinstance(first, ErrorResponse) and first.error == ErrorData(-32602, "no")
        assert isinstance(second, ErrorResponse) and second.error.code == -32603
        assert "secret" not in second.error.message


async def test_session_inline_coroutine_that_does_not_wait_is_answered_inline() -> None:
    """An inline method's handler is started in the dispatching task: if it returns
    without waiting it is answered there (no Trio task, one async path)."""
    seen: list[Any] = []
    flag: contextvars.ContextVar[int] = contextvars.ContextVar("flag", default=0)

    async def answer(req: Request) -> dict[str, Any]:
        flag.set(7)  # set in the coroutine's own context, not the reader's
        seen.append((current_request_id.get(), trio.lowlevel.current_task().name))
        if req.params:
            await leave_reader()  # the rest runs as the request's own task
        return {"ok": req.id}

    async with running_session(request_handlers={"now": answer}, inline={"now"}) as (
        session, ends
    ):
        await ends.to_peer.send(Request(1, "now"))
        reply = await _next(ends)
        assert isinstance(reply, Response) and reply.result == {"ok": 1}
        assert seen[0][0] == 1 and "_serve" not in seen[0][1]
        await ends.to_peer.send(Request(2, "now", {"wait": True}))
        reply = await _next(ends)
        assert isinstance(reply, Response) and reply.result == {"ok": 2}
        assert flag.get() == 0 and not session._inflight


async def test_session_inline_coroutine_that_waits_without_leaving_is_an_internal_error() -> None:
    """A Trio trap reached inline has recorded the reader's task as the waiter: it
    cannot be moved, so the request fails (-32603) instead of blocking the reader."""

    async def bad(req: Request) -> Any:
        await trio.lowlevel.cancel_shielded_checkpoint()

    async with running_session(request_handlers={"bad": bad}, inline={"bad"}) as (_, ends):
        await ends.to_peer.send(Request(1, "bad"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse) and reply.error.code == -32603


async def test_session_inline_handler_may_defer_to_a_cancellable_task() -> None:
    stopped = trio.Event()

    async def wait_forever() -> Any:
        await leave_reader()  # started inline: leave the reader before waiting
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async def later(req: Request) -> Any:
        return await wait_forever()  # must wait: the rest runs as the request's own task

    async with running_session(request_handlers={"later": later}, inline={"later"}) as (
        session, ends
    ):
        await ends.to_peer.send(Request(1, "later"))
        await trio.testing.wait_all_tasks_blocked()
        assert 1 in session._inflight
        await ends.to_peer.send(Notification("notifications/cancelled", {"requestId": 1}))
        with trio.fail_after(5):
            await stopped.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert not session._inflight
        await ends.to_peer.send(Request(2, "nothing/here"))
        reply = await _next(ends)  # the cancelled request got no answer
        assert isinstance(reply, ErrorResponse) and reply.id == 2


async def test_session_parked_request_is_answered_by_the_task_that_sets_its_event() -> None:
    """An inline handler that waits for an InlineEvent (a create waiting for its batch)
    has no task of its own: it goes on, and is answered, in the task that sets it, in
    its own context; meanwhile it is in flight (its id taken, cancellable)."""
    event = InlineEvent()
    seen: list[Any] = []
    flag: contextvars.ContextVar[int] = contextvars.ContextVar("flag", default=0)

    async def batched(req: Request) -> dict[str, Any]:
        flag.set(req.id)  # type: ignore[arg-type]
        await event.wait()
        seen.append((current_request_id.get(), flag.get(), trio.lowlevel.current_task().name))
        if req.params:
            await leave_reader()  # the rest needs a task: it gets one
            await trio.lowlevel.checkpoint()
        return {"ok": req.id}

    async def setter() -> None:
        event.set()

    async with running_session(request_handlers={"b": batched}, inline={"b"}) as (
        session, ends
    ):
        await ends.to_peer.send(Request(1, "b"))
        await ends.to_peer.send(Request(2, "b", {"task": True}))
        await trio.testing.wait_all_tasks_blocked()
        assert set(session._inflight) == {1, 2} and not seen
        await ends.to_peer.send(Request(1, "b"))  # its id is in use while it waits
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse) and reply.error.code == -32600
        async with trio.open_nursery() as nursery:
            nursery.start_soon(setter, name="the setter")
        replies = [await _next(ends), await _next(ends)]
        assert sorted(r.result["ok"] for r in replies) == [1, 2]
        assert [s[:2] for s in seen] == [(1, 1), (2, 2)]
        assert all("setter" in s[2] for s in seen)
        assert flag.get() == 0 and not session._inflight


async def test_session_parked_request_cancelled_meanwhile_is_never_answered() -> None:
    """Cancelled while parked: it sees the cancellation at its wait at once (moved to a
    task of its own, not left until the event is set, which may be an hour away for a
    ``tasks/result``), its id is free again, and it is never answered (MCP 2025-11-25,
    basic/utilities/cancellation: the receiver SHOULD stop processing the cancelled
    request and not send a response)."""
    event = InlineEvent()
    stopped: list[str] = []

    async def batched(req: Request) -> dict[str, Any]:
        try:
            await event.wait()
        except trio.Cancelled:
            stopped.append("cancelled")
            raise
        return {"ok": req.id}

    async with running_session(request_handlers={"b": batched}, inline={"b"}) as (
        session, ends
    ):
        await ends.to_peer.send(Request(1, "b"))
        await trio.testing.wait_all_tasks_blocked()
        await ends.to_peer.send(Notification("notifications/cancelled", {"requestId": 1}))
        await trio.testing.wait_all_tasks_blocked()
        assert stopped == ["cancelled"] and not session._inflight  # the event is not set
        await ends.to_peer.send(Request(1, "b"))  # its id is free: parked again, no -32600
        await trio.testing.wait_all_tasks_blocked()
        assert set(session._inflight) == {1}
        event.set()
        reply = await _next(ends)  # the second request 1's answer, the first got none
        assert isinstance(reply, Response) and reply.id == 1 and reply.result == {"ok": 1}
        assert stopped == ["cancelled"] and not session._inflight
        await ends.to_peer.send(Request(2, "nothing/here"))
        reply = await _next(ends)
        assert isinstance(reply, ErrorResponse) and reply.id == 2


async def test_inline_event_parks_inline_and_waits_in_a_task() -> None:
    """A coroutine started inline that waits for an unset InlineEvent is Parked: it can
    be awaited in a task (its wait there) as well as called back; a waiter in a task
    waits as on a trio.Event."""
    event = InlineEvent()

    async def waiter() -> str:
        await event.wait()
        return "done"

    done, parked = run_inline(waiter())
    assert not done and isinstance(parked, Parked)
    got: list[str] = []

    async def in_task() -> None:
        got.append(await parked)

    async def plain() -> None:
        got.append(await waiter())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(in_task)
        nursery.start_soon(plain)
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        event.set()
    assert got == ["done", "done"]
    assert run_inline(waiter()) == (True, "done")  # set: no wait at all inline


async def test_session_inline_answers_wait_for_room_when_the_bus_is_full() -> None:
    """Answers that do not fit on a full bus are sent from tasks, in time, none lost."""
    async def now(req: Request) -> dict[str, Any]:
        return {"i": req.id}

    bus, ends = open_bus(capacity=4)
    session = Session(bus, request_handlers={"now": now}, inline={"now"})
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        for i in range(40):
            await ends.to_peer.send(Request(i, "now"))
        got = set()
        with trio.fail_after(5):
            while len(got) < 40:
                msg = await ends.from_peer.receive()
                assert isinstance(msg, Response)
                got.add(msg.result["i"])
        assert got == set(range(40))
        session.close()
