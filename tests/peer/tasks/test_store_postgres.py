"""The PostgreSQL task store against a real, private PostgreSQL server.

Two :class:`PostgresTaskStore` objects on one database stand for two server processes.
What every store must do is in tests/peer/tasks/test_store_contract.py; here is what is specific:
URLs, the versioned schema, records and their compare-and-set writes, the cap across
processes, the input queue, hints through LISTEN/NOTIFY, leases, the purge of expired
rows in bounded batches, and an outage of the server.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import trio

from trio_mcp import McpError, TaskRegistry
from trio_mcp.peer._messages import ErrorData, TaskStatus
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE
from trio_mcp.peer._tasks._store import CapReached, InputAnswer, InputItem, TaskStore, now_iso

from tests.helpers import EXAMPLES, ROOT
from tests.postgres_server import PostgresServer, require_postgres
from tests.shared_store_support import Hints
from tests.shared_store_support import opened as opened_store
from tests.shared_store_support import record as _record


def _store(url: str, **kwargs: Any) -> Any:
    from trio_mcp.peer._tasks._postgres import PostgresTaskStore

    return PostgresTaskStore(url, **kwargs)


def opened(url: str, *, run: bool = True, **kwargs: Any) -> Any:
    """An open store (with its background run unless ``run=False``) and its hints."""
    return opened_store(_store(url, **kwargs), run=run)


def _sql(url: str, query: str, *args: Any) -> list[Any]:
    """Run one statement on the store's database (a test's side door)."""
    import psycopg

    from trio_mcp.peer._tasks._postgres_conn import parse_url

    with psycopg.connect(parse_url(url)[0], autocommit=True) as conn:
        cur = conn.execute(query.encode(), args)
        return cur.fetchall() if cur.description else []


async def _eventually(check: Callable[[], Any], timeout: float) -> None:
    with trio.fail_after(timeout):
        for _ in iter(int, 1):  # until check() holds
            if await check():
                return
            await trio.sleep(0.05)


# --- URLs and the schema -----------------------------------------------------------------


def test_postgres_urls() -> None:
    require_postgres()
    from trio_mcp.peer._tasks._open import open_task_store
    from trio_mcp.peer._tasks._postgres import PostgresTaskStore
    from trio_mcp.peer._tasks._postgres_conn import parse_url

    store = open_task_store("postgresql://app@db.internal:6543/tasks?lease=1.5&sslmode=require")
    assert isinstance(store, PostgresTaskStore) and isinstance(store, TaskStore) and store.shared
    assert (store.lease_seconds, store.hint_seconds, store.schema, store.pool_size) == (
        1.5, 0.5, "trio_mcp", 8,
    )  # fmt: skip
    assert store._libpq_url == "postgresql://app@db.internal:6543/tasks?sslmode=require"
    sock = open_task_store("postgres://u@/db?host=/run/postgresql&schema=app_1&pool=3&hint=0.2")
    assert (sock.schema, sock.pool_size, sock.hint_seconds, sock.lease_seconds) == (
        "app_1", 3, 0.2, 30.0,
    )  # fmt: skip
    assert parse_url("postgres://u@/db?host=/run/postgresql&lease=2") == (
        "postgres://u@/db?host=%2Frun%2Fpostgresql", {"lease": "2"},
    )  # fmt: skip
    own = PostgresTaskStore("postgresql:///db?lease=9", lease_seconds=2, schema="s", instance="me")
    assert (own.lease_seconds, own.schema, own.instance) == (2, "s", "me")
    for bad in ("postgresql:///db?lease=0", "postgresql:///db?schema=a-b", "postgresql:///db?pool=0",
                'postgresql:///db?schema=x";drop', "redis://h/0"):  # fmt: skip
        with pytest.raises(ValueError):
            PostgresTaskStore(bad)


def test_postgres_url_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from trio_mcp.peer._tasks._open import open_task_store

    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "trio_mcp.peer._tasks._postgres", raising=False)
    monkeypatch.delitem(sys.modules, "trio_mcp.peer._tasks._postgres_loops", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'trio-mcp\[postgres\]'"):
        open_task_store("postgresql://localhost/tasks")


async def test_postgres_schema_is_versioned_and_a_newer_one_is_refused(postgres_url: str) -> None:
    from trio_mcp.peer._tasks._postgres import SchemaVersionError

    async with opened(postgres_url, run=False) as (store, _):
        await store.create(_record("t-1"), max_live=10)
    # made on first use, with its version row; a second open keeps it
    assert _sql(postgres_url, "SELECT value FROM trio_mcp.meta WHERE key = 'schema_version'") == [
        ("2",)
    ]
    async with opened(postgres_url, run=False) as (store, _):
        assert (await store.get("t-1")).task_id == "t-1"
    # a newer trio-mcp migrated the tables: this one refuses them, and changes nothing
    _sql(postgres_url, "UPDATE trio_mcp.meta SET value = '3' WHERE key = 'schema_version'")
    newer = _store(postgres_url)
    with pytest.raises(SchemaVersionError) as info:
        await newer.open()
    assert str(info.value) == (
        "the task store's tables in schema 'trio_mcp' have version '3'; this trio-mcp knows"
        " version 2 (a newer trio-mcp made them: upgrade it, or use another schema=)"
    )
    assert _sql(postgres_url, "SELECT count(*) FROM trio_mcp.tasks") == [(1,)]
    assert _sql(postgres_url, "SELECT value FROM trio_mcp.meta WHERE key = 'schema_version'") == [
        ("3",)
    ]
    # ... and so does a server started on it
    reg = TaskRegistry(store=postgres_url)
    with pytest.raises(SchemaVersionError):
        async with reg.running():
            raise AssertionError("started on a newer schema")
    # a version row that is not ours at all is refused too
    _sql(postgres_url, "UPDATE trio_mcp.meta SET value = 'x' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match=r"version 'x'; .* \(not ours, or use"):
        await _store(postgres_url).open()
    # another schema of the same database is independent
    async with opened(postgres_url, run=False, schema="other") as (store, _):
        assert await store.get("t-1") is None


# --- records -----------------------------------------------------------------------------


async def test_postgres_records_round_trip(postgres_url: str) -> None:
    async with opened(postgres_url, run=False) as (store, _):
        assert await store.get("nope") is None
        assert await store.create(_record("t-forever", ttl=None), max_live=10) == 1
        got = await store.get("t-forever")
        assert got.deadline == math.inf and got.ttl is None and got.status is TaskStatus.WORKING

        record = _record("t-1")
        record.status_message = "starting"
        assert await store.create(record, max_live=10) == 2
        assert await store.create(record, max_live=10) == 2  # retried after a lost reply
        got = await store.get("t-1")
        assert (got.task_id, got.owner, got.seq, got.method, got.status) == (
            "t-1", "alice", 2, "tools/call", TaskStatus.WORKING,
        )  # fmt: skip
        assert (got.created_at, got.last_updated_at, got.ttl, got.poll_interval) == (
            record.created_at, record.last_updated_at, 60_000, 250,
        )  # fmt: skip
        assert got.status_message == "starting" and got.outcome is None
        assert got.deadline == pytest.approx(record.deadline, abs=0.05)

        record.status, record.status_message = TaskStatus.COMPLETED, None
        record.last_updated_at = now_iso()
        record.outcome = {"x": 0.1 + 0.2, "big": 2**70, "s": "é\u2028\x00"[:2]}
        assert await store.update(record) is True
        assert await store.update(record) is True  # the same write, retried: applied
        got = await store.get("t-1")
        assert got.status is TaskStatus.COMPLETED and got.status_message is None
        assert got.outcome == record.outcome and got.outcome["x"] == 0.30000000000000004

        failing, other = _record("t-2"), _record("t-3")
        for r in (failing, other):
            await store.create(r, max_live=10)
        failing.status = TaskStatus.FAILED
        failing.outcome = ErrorData(-32602, "bad", {"why": [1, 2.5]})
        other.status = TaskStatus.INPUT_REQUIRED
        assert await store.update_many([failing, record, other]) == [True, True, True]
        assert (await store.get("t-2")).outcome == ErrorData(-32602, "bad", {"why": [1, 2.5]})
        assert (await store.get("t-3")).status is TaskStatus.INPUT_REQUIRED
        assert await store.update_many([]) == []

        page, more = await store.page("alice", 0, 2)
        assert [r.task_id for r in page] == ["t-forever", "t-1"] and more
        page, more = await store.page("alice", 2, 2)
        assert [r.task_id for r in page] == ["t-2", "t-3"] and not more
        assert await store.page("bob", 0, 10) == ([], False)

        await store.delete("t-1")
        assert await store.get("t-1") is None
        assert await store.terminal_among(["t-forever", "t-1", "t-2", "t-3", "never"]) == {
            "t-1", "t-2", "never",
        }  # fmt: skip
        assert await store.terminal_among([]) == set()
        with pytest.raises(ValueError):
            await store.create(_record("t-2"), max_live=10)
        # text travels as text: array syntax, quotes, backslashes, non-ASCII survive
        odd_owner = 'identity:a "b",{c}\\d NULL é\u2028'
        odd = _record('t-{odd},"x"', odd_owner)
        odd.status_message = 'say "hi", {1,2} \\ NULL'
        await store.create(odd, max_live=10)
        got = await store.get('t-{odd},"x"')
        assert (got.owner, got.status_message) == (odd_owner, odd.status_message)
        assert [r.task_id for r in (await store.page(odd_owner, 0, 10))[0]] == [odd.task_id]
        assert await store.terminal_among([odd.task_id, "NULL"]) == {"NULL"}
        # PostgreSQL's text cannot hold NUL: a message with one is kept, NUL replaced
        odd.status, odd.status_message = TaskStatus.FAILED, "bad\x00byte"
        odd.outcome = ErrorData(-32603, "bad\x00byte")
        assert await store.update_many([odd]) == [True]
        got = await store.get(odd.task_id)
        assert got.status_message == "bad\ufffdbyte" and got.outcome == odd.outcome


async def test_postgres_cancel_wins_over_a_later_update(postgres_url: str) -> None:
    async with (
        opened(postgres_url, run=False) as (a, _),
        opened(postgres_url, run=False) as (b, _),
    ):
        record = _record("t-1")
        await a.create(record, max_live=10)
        when = now_iso()
        cancelled = await b.cancel("t-1", "Cancelled by the requestor.", when)
        assert (cancelled.status, cancelled.status_message, cancelled.last_updated_at) == (
            TaskStatus.CANCELLED, "Cancelled by the requestor.", when,
        )  # fmt: skip
        record.status, record.last_updated_at = TaskStatus.COMPLETED, now_iso()
        record.outcome = {"content": []}
        assert await a.update(record) is False
        assert await a.update_many([record]) == [False]
        got = await a.get("t-1")
        assert got.status is TaskStatus.CANCELLED and got.outcome is None
        again = await a.cancel("t-1", "other", now_iso())  # changes nothing
        assert (again.status_message, again.last_updated_at) == (
            "Cancelled by the requestor.", when,
        )  # fmt: skip
        assert await a.cancel("nope", "x", now_iso()) is None
        record.status = TaskStatus.INPUT_REQUIRED
        assert await a.update(record) is False


async def test_postgres_cap_is_atomic_across_processes(postgres_url: str) -> None:
    async with (
        opened(postgres_url, run=False) as (a, _),
        opened(postgres_url, run=False) as (b, _),
    ):
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
        assert sorted(made) == list(range(1, 11))
        await a.create(_record("bob-1", "bob"), max_live=1)  # bob has his own cap
        with pytest.raises(CapReached):
            await b.create(_record("bob-2", "bob"), max_live=1)
        page, _ = await b.page("alice", 0, 100)
        await b.cancel(page[0].task_id, "Cancelled", now_iso())  # a terminal task frees a place
        await a.create(_record("t-new"), max_live=10)
        with pytest.raises(CapReached):
            await a.create(_record("t-newer"), max_live=10)
        await a.delete("t-new")  # so does a deleted one
        await b.create(_record("t-newest"), max_live=10)


async def test_postgres_create_many_is_one_commit_with_an_answer_each(postgres_url: str) -> None:
    async with (
        opened(postgres_url, run=False) as (a, _),
        opened(postgres_url, run=False) as (b, _),
    ):
        await b.create(_record("taken"), max_live=10)
        batch = [_record("a-1"), _record("taken"), _record("b-1", "bob"), _record("a-2"),
                 _record("a-3"), _record("b-2", "bob")]  # fmt: skip
        answers = await a.create_many(batch, max_live=3)  # alice has one live task already
        assert answers[0] == 2 and answers[2:4] == [3, 4]
        assert isinstance(answers[1], ValueError) and "taken" in str(answers[1])
        assert isinstance(answers[4], CapReached)  # alice: taken, a-1, a-2 = 3
        assert answers[5] == 5  # bob has his own cap
        # the same batch again (a lost reply): each create answers as before
        again = await a.create_many(batch, max_live=3)
        assert again[0] == 2 and again[2:4] == [3, 4] and again[5] == 5
        assert isinstance(again[4], CapReached) and isinstance(again[1], ValueError)
        assert await a.create_many([], max_live=3) == []
        # batches of many owners, in opposite orders, from two processes at once: the
        # owners' locks are taken in one order (no deadlock), each cap still holds
        owners = [f"o{n}" for n in range(40)]

        async def batch(store: Any, order: list[str], tag: str) -> None:
            records = [_record(f"{tag}-{o}-{k}", o) for k in range(3) for o in order]
            for answer in await store.create_many(records, max_live=4):
                assert isinstance(answer, int | CapReached), answer

        async with trio.open_nursery() as nursery:
            for round_ in range(6):
                nursery.start_soon(batch, a, owners, f"a{round_}")
                nursery.start_soon(batch, b, owners[::-1], f"b{round_}")
        for owner in owners:
            assert len((await a.page(owner, 0, 100))[0]) == 4
        page, _ = await b.page("alice", 0, 10)
        assert [r.task_id for r in page] == ["taken", "a-1", "a-2"]


async def test_postgres_expired_rows_read_as_gone_and_are_purged_in_batches(
    postgres_url: str,
) -> None:
    async with opened(postgres_url, run=False) as (store, _):
        store.purge_batch = 3
        # a TTL long enough that a loaded machine reads short-0 before its deadline
        # (200 ms was not, once, in CI), then a sleep to just past that deadline
        made = trio.current_time()
        for i in range(7):
            await store.create(_record(f"short-{i}", ttl=1_000), max_live=100)
        assert (await store.get("short-0")).task_id == "short-0"
        await store.push_input("short-0", InputItem("1", "roots/list", {}))
        await store.answer_input("short-0", "1", InputAnswer(result={}))
        await store.create(_record("long"), max_live=100)
        await store.create(_record("never", ttl=None), max_live=100)
        await trio.sleep_until(made + 1.1)
        assert await store.get("short-0") is None
        assert [r.task_id for r in (await store.page("alice", 0, 10))[0]] == ["long", "never"]
        assert await store.terminal_among(["short-1", "long"]) == {"short-1"}
        assert await store.cancel("short-1", "x", now_iso()) is None
        late = _record("short-2")
        late.status = TaskStatus.COMPLETED
        assert await store.update(late) is False
        # the rows are still there until the purge: at most purge_batch per statement
        assert _sql(postgres_url, "SELECT count(*) FROM trio_mcp.tasks") == [(9,)]
        assert [await store.purge() for _ in range(4)] == [3, 3, 1, 0]
        left = _sql(postgres_url, "SELECT id FROM trio_mcp.tasks ORDER BY id")
        assert left == [("long",), ("never",)]
        for table in ("inputs", "answers"):  # their side channel went with them
            assert _sql(postgres_url, f"SELECT count(*) FROM trio_mcp.{table}") == [(0,)]
        # the background sweep purges too (lease 0.3 s: every 0.15 s)
        await store.create(_record("brief", ttl=50), max_live=100)
    async with opened(postgres_url, lease_seconds=0.3) as (store, _):

        async def purged() -> bool:
            return _sql(postgres_url, "SELECT count(*) FROM trio_mcp.tasks") == [(2,)]

        await _eventually(purged, 5)


async def test_postgres_terminal_records_are_kept_until_their_deadline() -> None:
    """What the store answers from memory: terminal records only (they never change),
    as copies, at most ``size``, never past their deadline, never once deleted."""
    from trio_mcp.peer._tasks._postgres_cache import TerminalCache

    cache = TerminalCache(size=2)
    live, short = _record("live"), _record("short", ttl=100)
    cache.keep(live)
    cache.keep(None)
    assert cache.get("live") is None  # a live task may change: never kept
    for record in (short, _record("a"), _record("b")):
        record.status = TaskStatus.COMPLETED
        cache.keep(record)
    assert len(cache) == 2 and cache.get("short") is None  # the oldest went first
    got = cache.get("a")
    assert got is not None and got.status is TaskStatus.COMPLETED
    got.status_message = "changed by a caller"
    assert cache.get("a").status_message is None  # a copy each time
    cache.drop("a")
    assert cache.get("a") is None
    nul = _record("nul")
    nul.status, nul.status_message = TaskStatus.FAILED, "a\x00b"
    cache.keep(nul)
    assert cache.get("nul") is None  # stored with U+FFFD: read it from the store
    expiring = _record("expiring", ttl=50)
    expiring.status = TaskStatus.FAILED
    cache.keep(expiring)
    await trio.sleep(0.1)
    assert cache.get("expiring") is None


# --- input_required side channel ---------------------------------------------------------


async def test_postgres_input_queue(postgres_url: str) -> None:
    async with (
        opened(postgres_url, run=False) as (a, _),
        opened(postgres_url, run=False) as (b, _),
    ):
        await a.create(_record("t-1"), max_live=10)
        one = InputItem("1", "elicitation/create", {"message": "name?", "n": 2**64 + 0.5})
        two = InputItem("12", "sampling/createMessage", {"messages": []})
        three = InputItem("2", "roots/list", {})
        for item in (one, two, three):
            await a.push_input("t-1", item)
        assert await b.peek_inputs("t-1") == [one, two, three]
        assert await b.claim_input("t-1", "2") == three  # by key ("2" is not "12")
        assert await b.claim_input("t-1", "2") is None
        assert await b.claim_input("t-1") == one  # the oldest
        await b.requeue_input("t-1", one)  # back at the head
        assert await a.peek_inputs("t-1") == [one, two]
        assert await a.claim_input("t-1") == one
        assert await a.claim_input("t-1") == two
        assert await a.claim_input("t-1") is None

        assert await a.take_answer("t-1", "1") is None
        await b.answer_input("t-1", "1", InputAnswer(result={"action": "accept"}))
        await b.answer_input("t-1", "12", InputAnswer(error={"code": -1, "message": "no"}))
        assert await a.take_answer("t-1", "1") == InputAnswer(result={"action": "accept"})
        assert await a.take_answer("t-1", "1") is None
        assert await a.take_answer("t-1", "12") == InputAnswer(error={"code": -1, "message": "no"})

        await a.push_input("t-1", one)  # the queues die with their task
        await a.answer_input("t-1", "9", InputAnswer(result={}))
        await a.delete("t-1")
        assert await b.claim_input("t-1") is None and await b.take_answer("t-1", "9") is None
        await a.push_input("t-1", one)  # a gone task: dropped
        await a.answer_input("t-1", "9", InputAnswer(result={}))
        assert await b.claim_input("t-1") is None and await b.take_answer("t-1", "9") is None


# --- across processes: hints, leases, the secret -----------------------------------------


async def test_postgres_hints_reach_the_other_process(postgres_url: str) -> None:
    async with opened(postgres_url) as (a, a_hints), opened(postgres_url) as (b, b_hints):
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
        await b_hints.wait_for(("cancel", "t-1"))  # every process hears every hint


async def test_postgres_lease_lapse_fails_the_dead_process_tasks(postgres_url: str) -> None:
    async with opened(postgres_url, lease_seconds=1.0) as (a, a_hints):
        b = _store(postgres_url, lease_seconds=1.0)
        await b.open()
        async with trio.open_nursery() as nursery:
            await nursery.start(b.run, Hints())
            await b.create(_record("b-1"), max_live=10)
            done = _record("b-2")
            await b.create(done, max_live=10)
            done.status, done.outcome = TaskStatus.COMPLETED, {"content": []}
            await b.update(done)
            await a.create(_record("a-1"), max_live=10)
            await trio.sleep(1.5)  # b renews its lease: nothing fails
            assert (await a.get("b-1")).status is TaskStatus.WORKING
            nursery.cancel_scope.cancel()
        pool, b._pool = b._pool, None  # b "crashes": no aclose, its lease stays
        pool.close()
        await a_hints.wait_for(("status", "b-1"), timeout=10.0)
        lost = await a.get("b-1")
        assert (lost.status, lost.status_message) == (TaskStatus.FAILED, LEASE_LOST_MESSAGE)
        assert (await a.get("b-2")).status is TaskStatus.COMPLETED
        assert (await a.get("a-1")).status is TaskStatus.WORKING
        leases = _sql(postgres_url, "SELECT instance FROM trio_mcp.leases")
        assert (b.instance,) not in leases and (a.instance,) in leases
        await a.create(_record("a-2"), max_live=2)  # its place under the cap is free again


async def test_postgres_aclose_fails_this_process_tasks(postgres_url: str) -> None:
    async with opened(postgres_url, run=False) as (a, _):
        b = _store(postgres_url)
        await b.open()
        await b.create(_record("b-1"), max_live=10)
        await b.aclose()
        lost = await a.get("b-1")
        assert (lost.status, lost.status_message) == (TaskStatus.FAILED, LEASE_LOST_MESSAGE)
        leases = _sql(postgres_url, "SELECT instance FROM trio_mcp.leases")
        assert leases == [(a.instance,)]
        await b.aclose()  # twice is fine
        with pytest.raises(McpError, match="not open"):
            await b.get("b-1")


async def test_postgres_shares_the_cursor_secret_and_schemas_isolate(postgres_url: str) -> None:
    one, two = _store(postgres_url), _store(postgres_url)
    other = _store(postgres_url, schema="other")
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


async def test_postgres_lost_notifications_cost_a_delay_never_a_hang(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two registries on one database (two processes), and no NOTIFY ever arrives: a
    ``tasks/result`` on B for a task on A, a cancel from B reaching the work on A, and
    an ``input_required`` answered through B still happen, by the re-reads alone."""
    from trio_mcp.peer._tasks import _postgres

    from tests.peer.tasks.test_store_contract import OWNER, Requestor, start

    async def deaf(*args: Any) -> None:  # every hint is lost
        args[-1].started()
        await trio.sleep_forever()

    monkeypatch.setattr(_postgres, "listen", deaf)
    url = f"{postgres_url}&lease=1&hint=0.2"
    a, b = TaskRegistry(store=url), TaskRegistry(store=url)
    async with a.running(), b.running():
        release, stopped = trio.Event(), trio.Event()

        async def held(actor: Any) -> dict[str, Any]:
            await release.wait()
            return {"content": [{"type": "text", "text": "done on A"}]}

        async def forever(actor: Any) -> dict[str, Any]:
            try:
                await trio.sleep_forever()
            finally:
                stopped.set()
            raise AssertionError

        async def asks(actor: Any) -> dict[str, Any]:
            raw, _ = await actor.ask("elicitation/create", {"message": "ok?"})
            return {"content": [{"type": "text", "text": raw["action"]}]}

        waited = await start(a, held)
        async with trio.open_nursery() as nursery:
            got: list[dict[str, Any]] = []

            async def collect() -> None:
                got.append(await b.result(OWNER, waited.task_id, Requestor()))

            nursery.start_soon(collect)
            await trio.sleep(0.3)
            release.set()
            with trio.fail_after(10):
                while not got:  # noqa: ASYNC110
                    await trio.sleep(0.05)
        assert got[0]["content"][0]["text"] == "done on A"

        running = await start(a, forever)
        assert (await b.cancel(OWNER, running.task_id)).status is TaskStatus.CANCELLED
        with trio.fail_after(10):
            await stopped.wait()  # the heartbeat (a third of the lease) found the cancel

        asking = await start(a, asks)
        requestor = Requestor()
        with trio.fail_after(10):
            answered = await b.result(OWNER, asking.task_id, requestor)
        assert answered["content"][0]["text"] == "accept"
        assert [m for m, _ in requestor.asked] == ["elicitation/create"]


# --- outages -----------------------------------------------------------------------------


async def test_postgres_unreachable_at_open_is_a_clear_error(postgres_server: PostgresServer) -> None:
    postgres_server.stop()
    store = _store(postgres_server.url)
    store.op_timeout = 2.0
    with trio.fail_after(15), pytest.raises(McpError) as info:
        await store.open()
    assert info.value.code == -32603
    assert info.value.message.startswith("Task store unavailable (OperationalError: ")
    assert "No such file or directory" in info.value.message  # libpq's reason: no socket
    assert info.value.message.endswith("; retry later")


async def test_postgres_outage_is_a_clear_error_and_nothing_is_lost(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trio_mcp.peer._tasks import _cluster

    from tests.peer.tasks.test_store_contract import OWNER, Requestor, answer, start

    monkeypatch.setattr(_cluster, "SETTLE_TIMEOUT", 1.0)
    reg = TaskRegistry(store=f"{postgres_server.url}&lease=30")
    async with reg.running():
        assert reg.cluster is not None
        reg.cluster.store.op_timeout = 1.0  # type: ignore[attr-defined]
        done = await start(reg, answer("before"))
        await reg.result(OWNER, done.task_id, Requestor())
        release = trio.Event()

        async def finishes_during_the_outage(actor: Any) -> dict[str, Any]:
            await release.wait()
            return {"content": [{"type": "text", "text": "during"}]}

        late = await start(reg, finishes_during_the_outage)

        postgres_server.stop()  # immediate shutdown: no checkpoint, as in a crash
        for op in (lambda: reg.get(OWNER, late.task_id), lambda: reg.list(OWNER, None)):
            with trio.fail_after(10), pytest.raises(McpError) as info:
                await op()
            assert info.value.code == -32603
            assert info.value.message.startswith("Task store unavailable (")
            assert info.value.message.endswith("; retry later")
        # A task this process saw finish never changes again: answered from memory.
        assert (await reg.get(OWNER, done.task_id)).status is TaskStatus.COMPLETED
        known = await reg.result(OWNER, done.task_id, Requestor())
        assert known["content"][0]["text"] == "before"
        with trio.fail_after(10), pytest.raises(McpError, match="Task store unavailable"):
            await start(reg, answer("refused"))
        release.set()  # the task completes while PostgreSQL is down: its write waits
        await trio.sleep(0.2)

        postgres_server.start()  # crash recovery: every committed change is back
        with trio.fail_after(15):
            while True:
                try:
                    task = await reg.get(OWNER, late.task_id)
                except McpError:
                    await trio.sleep(0.2)
                    continue
                break
        assert task.status is TaskStatus.COMPLETED  # the queued write landed
        kept = await reg.result(OWNER, done.task_id, Requestor())
        assert kept["content"][0]["text"] == "before"
        after = await reg.result(OWNER, late.task_id, Requestor())
        assert after["content"][0]["text"] == "during"
        again = await start(reg, answer("after"))
        assert (await reg.result(OWNER, again.task_id, Requestor()))["content"][0]["text"] == "after"
        # hints flow again: a cancel stored by "another process" reaches the actor here
        stopped = trio.Event()

        async def forever(actor: Any) -> dict[str, Any]:
            try:
                await trio.sleep_forever()
            finally:
                stopped.set()
            raise AssertionError

        running = await start(reg, forever)
        other = _store(postgres_server.url)
        await other.open()
        try:
            await other.cancel(running.task_id, "from elsewhere", now_iso())
        finally:
            await other.aclose()
        with trio.fail_after(10):
            await stopped.wait()


# --- the examples and the command line on PostgreSQL -------------------------------------


def test_postgres_examples_cluster_runs_on_a_postgresql_store(postgres_url: str) -> None:
    """``examples/cluster.py --store postgresql://...``: three ``task_server.py --store``
    processes on one database; created on A, read on B, collected on C, cancelled from B."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "cluster.py"), "--store", postgres_url],
        capture_output=True, text=True, cwd=ROOT, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    pids = re.findall(r"server ([ABC]): pid (\d+)", out)
    assert [name for name, _ in pids] == ["A", "B", "C"] and len({p for _, p in pids}) == 3
    assert re.search(r"created on A: task [0-9a-f]{32}\ntasks/get on B: working\n", out)
    assert "tasks/result on C: 'slept 1 seconds'" in out
    assert "tasks/cancel on B: cancelled" in out
    assert "tasks/get on C: cancelled (The task was cancelled by request.)" in out
    statuses = _sql(postgres_url, "SELECT status FROM trio_mcp.tasks ORDER BY seq")
    assert statuses == [("completed",), ("cancelled",)]  # they live in PostgreSQL


def test_postgres_unreachable_store_is_one_clear_line_from_serve_example() -> None:
    require_postgres()
    url = "postgresql://postgres@/tasks?host=/nonexistent-trio-mcp-socket-dir"
    proc = subprocess.run(
        [sys.executable, "-m", "trio_mcp", "serve-example", "--ws", "127.0.0.1:0", "--store", url],
        capture_output=True, text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode in (1, 2), proc.stderr
    # One line naming the store and the driver's error (issue 35: start-up failures).
    assert proc.stderr.startswith(f"trio-mcp: cannot open the task store {url}: OperationalError: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
