"""The Redis task store against a real, private ``redis-server``.

Two :class:`RedisTaskStore` objects on one server stand for two server processes. The
tests taking ``redis_url`` run twice: on a private ``redis-server`` and on a private
three-master Redis Cluster (``redis+cluster://``, a key prefix of the test's own).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import McpError
from trio_mcp.peer._messages import ErrorData, TaskStatus
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE
from trio_mcp.peer._tasks._store import CapReached, InputAnswer, InputItem, TaskStore, now_iso

from tests.redis_cluster import cluster_store_url
from tests.redis_server import RedisServer, require_redis
from tests.shared_store_support import Hints
from tests.shared_store_support import opened as opened_store
from tests.shared_store_support import record as _record


def _store(url: str, **kwargs: Any) -> Any:
    from trio_mcp.peer._tasks._redis import RedisTaskStore

    return RedisTaskStore(url, **kwargs)


def opened(url: str, *, run: bool = True, **kwargs: Any) -> Any:
    """An open store (with its background run unless ``run=False``) and its hints."""
    return opened_store(_store(url, **kwargs), run=run)


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    """A store URL of this test's own: a private Redis, or a prefix on a private Redis Cluster."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return server.url
    return cluster_store_url(request.getfixturevalue("redis_cluster"))


async def _eventually(check: Callable[[], Any], timeout: float) -> None:
    with trio.fail_after(timeout):
        for _ in iter(int, 1):  # until check() holds
            if await check():
                return
            await trio.sleep(0.05)


# --- URLs --------------------------------------------------------------------------------


def test_redis_urls() -> None:
    require_redis()
    from trio_mcp.peer._tasks._open import open_task_store
    from trio_mcp.peer._tasks._redis import RedisTaskStore

    store = open_task_store("redis://localhost:6379/2?lease=1.5&prefix=app&socket_keepalive=1")
    assert isinstance(store, RedisTaskStore) and isinstance(store, TaskStore) and store.shared
    assert (store.lease_seconds, store.prefix) == (1.5, "app")
    assert store._client_url == "redis://localhost:6379/2?socket_keepalive=1"
    unix = open_task_store("unix:///run/redis.sock?db=3")
    assert (unix.lease_seconds, unix.prefix, unix._client_url) == (
        30.0, "trio-mcp", "unix:///run/redis.sock?db=3",
    )  # fmt: skip
    assert isinstance(open_task_store("rediss://h:1/0"), RedisTaskStore)
    own = RedisTaskStore("redis://h/0?lease=9", lease_seconds=2, prefix="p", instance="me")
    assert (own.lease_seconds, own.prefix, own.instance) == (2, "p", "me")
    assert own.hint_seconds <= own.lease_seconds
    with pytest.raises(ValueError):
        RedisTaskStore("redis://h/0", lease_seconds=0)


def test_redis_url_without_coredis_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from trio_mcp.peer._tasks._open import open_task_store

    monkeypatch.setitem(sys.modules, "coredis", None)
    monkeypatch.delitem(sys.modules, "trio_mcp.peer._tasks._redis", raising=False)
    with pytest.raises(ImportError, match=r"trio-mcp\[redis\]"):
        open_task_store("redis://localhost:6379/0")


# --- records -----------------------------------------------------------------------------


async def test_redis_records_round_trip(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (store, _):
        assert await store.get("nope") is None
        forever = _record("t-forever", ttl=None)
        assert await store.create(forever, max_live=10) == 1
        got = await store.get("t-forever")
        assert got.deadline == math.inf and got.ttl is None and got.status is TaskStatus.WORKING

        record = _record("t-1")
        record.status_message = "starting"
        seq = await store.create(record, max_live=10)
        assert seq == 2
        got = await store.get("t-1")
        assert (got.task_id, got.owner, got.seq, got.method, got.status) == (
            "t-1", "alice", 2, "tools/call", TaskStatus.WORKING,
        )  # fmt: skip
        assert (got.created_at, got.last_updated_at, got.ttl, got.poll_interval) == (
            record.created_at, record.last_updated_at, 60_000, 250,
        )  # fmt: skip
        assert got.status_message == "starting" and got.outcome is None
        assert got.deadline == pytest.approx(record.deadline, abs=0.05)

        # numbers survive exactly: the outcome is never decoded by Lua
        record.status = TaskStatus.COMPLETED
        record.status_message = None
        record.last_updated_at = now_iso()
        record.outcome = {"x": 0.1 + 0.2, "big": 2**70, "s": "é\u2028"}
        assert await store.update(record) is True
        assert await store.update(record) is True  # the same write, retried: applied
        got = await store.get("t-1")
        assert got.status is TaskStatus.COMPLETED and got.status_message is None
        assert got.outcome == record.outcome and got.outcome["x"] == 0.30000000000000004
        assert got.last_updated_at == record.last_updated_at

        failing = _record("t-2")
        await store.create(failing, max_live=10)
        failing.status = TaskStatus.FAILED
        failing.outcome = ErrorData(-32602, "bad", {"why": [1, 2.5]})
        assert await store.update(failing)
        assert (await store.get("t-2")).outcome == ErrorData(-32602, "bad", {"why": [1, 2.5]})

        page, more = await store.page("alice", 0, 2)
        assert [r.task_id for r in page] == ["t-forever", "t-1"] and more
        page, more = await store.page("alice", 2, 2)
        assert [r.task_id for r in page] == ["t-2"] and not more
        assert await store.page("bob", 0, 10) == ([], False)

        await store.delete("t-1")
        assert await store.get("t-1") is None
        page, more = await store.page("alice", 0, 10)
        assert [r.task_id for r in page] == ["t-forever", "t-2"] and not more
        assert await store.terminal_among(["t-forever", "t-1", "t-2", "never"]) == {
            "t-1", "t-2", "never",
        }  # fmt: skip
        assert await store.terminal_among([]) == set()
        with pytest.raises(ValueError):
            await store.create(_record("t-2"), max_live=10)


async def test_redis_many_scripts_keep_every_string_byte_for_byte(redis_url: str) -> None:
    """create_many and update_many pass their records as one JSON argument (cjson in the
    script): messages, outcomes and owners with quotes, escapes, NUL, non-ASCII and
    astral characters come back exactly, as through the one-record scripts."""
    odd = 'q"uo\\te \x00 nul \n\t é \u2028 😀 [1,2] {"a":1e400}'
    async with opened(redis_url) as (store, _):
        owner = 'o"w\\n\x00er é 😀'  # (no braces: Redis Cluster's hash tags)
        records = [_record(f"odd-{i}", owner=f"{owner}-{i % 2}") for i in range(5)]
        for r in records:
            r.status_message = f"{odd} {r.task_id}"
        assert all(isinstance(seq, int) for seq in await store.create_many(records, max_live=9))
        for r in records:
            r.status, r.last_updated_at = TaskStatus.COMPLETED, now_iso()
            r.outcome = {"content": [{"type": "text", "text": odd}], "n": 12345678901234567890}
        assert await store.update_many(records) == [True] * 5
        for r in records:
            got = await store.get(r.task_id)
            assert got is not None and (got.owner, got.status_message) == (
                r.owner, r.status_message
            )
            assert got.status is TaskStatus.COMPLETED and got.outcome == r.outcome


async def test_redis_cancel_wins_over_a_later_update(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (a, _), opened(redis_url, run=False) as (b, _):
        record = _record("t-1")
        await a.create(record, max_live=10)
        when = now_iso()
        cancelled = await b.cancel("t-1", "Cancelled by the requestor.", when)
        assert cancelled.status is TaskStatus.CANCELLED
        assert (cancelled.status_message, cancelled.last_updated_at) == (
            "Cancelled by the requestor.", when,
        )  # fmt: skip
        record.status = TaskStatus.COMPLETED
        record.last_updated_at = now_iso()
        record.outcome = {"content": []}
        assert await a.update(record) is False
        got = await a.get("t-1")
        assert got.status is TaskStatus.CANCELLED and got.outcome is None
        # a second cancel changes nothing; an unknown task is None
        again = await a.cancel("t-1", "other", now_iso())
        assert (again.status_message, again.last_updated_at) == (
            "Cancelled by the requestor.", when,
        )  # fmt: skip
        assert await a.cancel("nope", "x", now_iso()) is None
        # a non-terminal update after the cancel is dropped as well
        record.status = TaskStatus.INPUT_REQUIRED
        assert await a.update(record) is False


async def test_redis_cap_is_atomic_across_processes(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (a, _), opened(redis_url, run=False) as (b, _):
        made: list[int] = []
        refused = 0

        async def create(store: Any, i: int) -> None:
            nonlocal refused
            try:
                made.append(await store.create(_record(f"t-{i}"), max_live=10))
            except CapReached:
                refused += 1

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(create, (a, b)[i % 2], i)
        assert (len(made), refused) == (10, 40)
        # one seq each (on Redis Cluster a create takes its seq before the owner's
        # slot admits it, so a refused one leaves a gap)
        assert len(set(made)) == 10 and (a.cluster or sorted(made) == list(range(1, 11)))
        # bob has his own cap
        await a.create(_record("bob-1", "bob"), max_live=1)
        with pytest.raises(CapReached):
            await b.create(_record("bob-2", "bob"), max_live=1)
        # a terminal task (here: cancelled from the other process) frees a place
        page, _ = await b.page("alice", 0, 100)
        await b.cancel(page[0].task_id, "Cancelled", now_iso())
        await a.create(_record("t-new"), max_live=10)
        with pytest.raises(CapReached):
            await a.create(_record("t-newer"), max_live=10)
        # so does a deleted one
        await a.delete("t-new")
        await b.create(_record("t-newest"), max_live=10)


async def test_redis_seq_is_global(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (a, _), opened(redis_url, run=False) as (b, _):
        seqs = [await (a, b)[i % 2].create(_record(f"t-{i}"), max_live=100) for i in range(6)]
        assert seqs == [1, 2, 3, 4, 5, 6]
        page, more = await b.page("alice", 3, 100)
        assert [r.seq for r in page] == [4, 5, 6] and not more


async def test_redis_expiry(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (store, _):
        made = trio.current_time()  # the TTL leaves a loaded machine time to read it
        await store.create(_record("short", ttl=600), max_live=10)
        assert (await store.get("short")).task_id == "short"
        await store.create(_record("long"), max_live=10)
        # Redis itself drops the hash a margin after the expiry
        pttl = await store._client.pttl(store._keys.task("short"))
        assert 0 < pttl <= 600 + 60_000
        await trio.sleep_until(made + 0.65)
        assert await store.get("short") is None
        page, _ = await store.page("alice", 0, 10)
        assert [r.task_id for r in page] == ["long"]
        assert await store.terminal_among(["short", "long"]) == {"short"}
        assert await store.cancel("short", "x", now_iso()) is None
        late = _record("short")
        late.status = TaskStatus.COMPLETED
        assert await store.update(late) is False
        # an index entry whose record vanished is dropped by paging
        await store._client.delete([store._keys.task("long")])
        assert await store.page("alice", 0, 10) == ([], False)
        assert await store._client.zcard(store._keys.index("alice")) == 1  # "short" stays


# --- input_required side channel ---------------------------------------------------------


async def test_redis_input_queue(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (a, _), opened(redis_url, run=False) as (b, _):
        await a.create(_record("t-1"), max_live=10)
        one = InputItem("1", "elicitation/create", {"message": "name?", "n": 2**64 + 0.5})
        two = InputItem("12", "sampling/createMessage", {"messages": []})
        three = InputItem("2", "roots/list", {})
        for item in (one, two, three):
            await a.push_input("t-1", item)
        assert await b.claim_input("t-1", "2") == three  # by key ("2" is not "12")
        assert await b.claim_input("t-1", "2") is None
        assert await b.claim_input("t-1") == one  # the oldest
        await b.requeue_input("t-1", one)  # back at the head
        assert await a.claim_input("t-1") == one
        assert await a.claim_input("t-1") == two
        assert await a.claim_input("t-1") is None

        assert await a.take_answer("t-1", "1") is None
        await b.answer_input("t-1", "1", InputAnswer(result={"action": "accept"}))
        await b.answer_input("t-1", "12", InputAnswer(error={"code": -1, "message": "no"}))
        assert await a.take_answer("t-1", "1") == InputAnswer(result={"action": "accept"})
        assert await a.take_answer("t-1", "1") is None
        assert await a.take_answer("t-1", "12") == InputAnswer(error={"code": -1, "message": "no"})

        # the queues die with their task
        await a.push_input("t-1", one)
        await a.answer_input("t-1", "9", InputAnswer(result={}))
        await a.delete("t-1")
        assert await b.claim_input("t-1") is None and await b.take_answer("t-1", "9") is None
        await a.push_input("t-1", one)  # a gone task: dropped
        await a.answer_input("t-1", "9", InputAnswer(result={}))
        assert await b.claim_input("t-1") is None and await b.take_answer("t-1", "9") is None


# --- across processes: hints and leases --------------------------------------------------


async def test_redis_hints_reach_the_other_process(redis_url: str) -> None:
    async with opened(redis_url) as (a, a_hints), opened(redis_url) as (b, b_hints):
        record = _record("t-1")
        await a.create(record, max_live=10)
        await b.push_input("t-1", InputItem("1", "roots/list", {}))
        await a_hints.wait_for(("input", "t-1"))
        await a.answer_input("t-1", "1", InputAnswer(result={}))
        await b_hints.wait_for(("answer", "t-1"))
        record.status = TaskStatus.INPUT_REQUIRED
        await a.update(record)
        await b_hints.wait_for(("status", "t-1"))
        await b.cancel("t-1", "stop", now_iso())
        await a_hints.wait_for(("cancel", "t-1"))
        assert ("cancel", "t-1") in b_hints.got  # every process hears every hint


async def test_redis_lease_lapse_fails_the_dead_process_tasks(redis_url: str) -> None:
    async with opened(redis_url, lease_seconds=1.0) as (a, a_hints):
        b = _store(redis_url, lease_seconds=1.0)
        await b.open()
        hints = Hints()
        async with trio.open_nursery() as nursery:
            await nursery.start(b.run, hints)
            await b.create(_record("b-1"), max_live=10)
            done = _record("b-2")
            await b.create(done, max_live=10)
            done.status = TaskStatus.COMPLETED
            done.outcome = {"content": []}
            await b.update(done)
            await a.create(_record("a-1"), max_live=10)
            await trio.sleep(1.5)  # b renews its lease: nothing fails
            assert (await a.get("b-1")).status is TaskStatus.WORKING
            nursery.cancel_scope.cancel()
        await b._release_client()  # b "crashes": no aclose, its lease is not released
        start = trio.current_time()
        await a_hints.wait_for(("status", "b-1"), timeout=5.0)
        assert trio.current_time() - start < 3.5  # lease 1 s + sweep every 0.5 s (+ load)
        lost = await a.get("b-1")
        assert (lost.status, lost.status_message) == (TaskStatus.FAILED, LEASE_LOST_MESSAGE)
        assert (await a.get("b-2")).status is TaskStatus.COMPLETED
        assert (await a.get("a-1")).status is TaskStatus.WORKING
        # On a cluster the sweep is single-slot steps: the dead instance leaves the set in a
        # step after its tasks' (their status hint may come first).
        with trio.fail_after(2.0):
            while b.instance in await a._client.smembers(a._keys.instances):  # noqa: ASYNC110 - Redis state
                await trio.sleep(0.05)
        # its place under the cap is free again
        await a.create(_record("a-2"), max_live=2)


async def test_redis_aclose_fails_this_process_tasks(redis_url: str) -> None:
    async with opened(redis_url, run=False) as (a, _):
        b = _store(redis_url)
        await b.open()
        await b.create(_record("b-1"), max_live=10)
        await b.aclose()
        lost = await a.get("b-1")
        assert (lost.status, lost.status_message) == (TaskStatus.FAILED, LEASE_LOST_MESSAGE)
        assert not await a._client.exists([a._keys.lease(b.instance)])
        await b.aclose()  # twice is fine


async def test_redis_shares_the_cursor_secret_and_prefixes_isolate(redis_url: str) -> None:
    one, two, other = _store(redis_url), _store(redis_url), _store(redis_url, prefix="other")
    secret = (await one.open()).cursor_secret
    try:
        assert len(secret) == 16 and (await two.open()).cursor_secret == secret
        assert (await other.open()).cursor_secret != secret
        await one.create(_record("t-1"), max_live=1)
        assert await other.get("t-1") is None
        await other.create(_record("t-1"), max_live=1)
    finally:
        for store in (one, two, other):
            await store.aclose()


# --- Redis settings and outages ----------------------------------------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        r.getMessage() for r in caplog.records
        if r.name == "trio_mcp.tasks" and r.levelno == logging.WARNING
    )  # fmt: skip


async def test_redis_warns_about_eviction_and_persistence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, redis_server: RedisServer
) -> None:
    caplog.set_level(logging.WARNING, "trio_mcp.tasks")
    async with opened(redis_server.url, run=False):
        pass
    assert _warnings(caplog) == ""
    folder = redis_server.folder / "lru"
    with RedisServer(folder, policy="allkeys-lru", extra=("--appendonly", "no")) as lru:
        async with opened(lru.url, run=False):
            pass
    text = _warnings(caplog)
    assert "maxmemory-policy is 'allkeys-lru', not 'noeviction'" in text
    assert "appendonly is 'no'" in text
    caplog.clear()
    with RedisServer(redis_server.folder / "nc", extra=("--rename-command", "CONFIG", "")) as nc:
        async with opened(nc.url, run=False):
            pass
    assert "could not check Redis's maxmemory-policy" in _warnings(caplog)


async def test_redis_down_then_back(redis_server: RedisServer) -> None:
    async with opened(redis_server.url, lease_seconds=1.0) as (a, hints):
        await a.create(_record("t-1"), max_live=10)
        redis_server.stop()
        for call in (a.get("t-1"), a.create(_record("t-2"), max_live=10), a.page("alice", 0, 5)):
            with pytest.raises(McpError) as caught:
                await call
            assert "Task store unavailable" in caught.value.message
            assert caught.value.code == -32603
        await trio.sleep(0.3)  # the background run keeps going
        redis_server.start()
        assert (await a.get("t-1")).status is TaskStatus.WORKING  # the AOF kept it
        record = _record("t-3")
        await a.create(record, max_live=10)

        # hints flow again, the lease is back, and the task was not swept as lost
        async def hinted() -> bool:
            record.last_updated_at = now_iso()
            await a.update(record)
            return ("status", "t-3") in hints.got

        await _eventually(hinted, timeout=10)
        assert await a._client.exists([f"{a.prefix}:lease:{a.instance}"])


async def test_redis_that_hangs_times_out(redis_server: RedisServer) -> None:
    async with opened(redis_server.url, run=False) as (a, _):
        a.op_timeout = 0.3
        assert redis_server.process is not None
        os.kill(redis_server.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises(McpError, match=r"Task store unavailable \(Redis did not answer"):
                await a.get("t-1")
        finally:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        assert await a.get("t-1") is None


async def test_redis_open_fails_clearly_without_a_server(
    tmp_path: Path, redis_available: None
) -> None:
    store = _store(f"unix://{tmp_path}/none.sock?db=0")
    with pytest.raises(McpError, match="Task store unavailable"):
        await store.open()
    with pytest.raises(McpError, match="Task store unavailable"):
        await store.get("t-1")
