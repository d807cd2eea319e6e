"""Re-runnable tasks in the shared stores (issue 32): queue, claim, attempts, cancel.

On a private redis-server, a private three-master Redis Cluster and a private
PostgreSQL (``rerun_store``): a dead process's
re-runnable task is queued again by the sweep and claimed by exactly one of ten real
processes racing for it; a cancel stored first wins over a claim; after the last
attempt the task is ``failed`` with its attempts in the message; PostgreSQL's
version-1 schema is migrated to version 2 in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import TaskStatus
from trio_mcp.peer._tasks._open import open_task_store
from trio_mcp.peer._tasks._rerun import RerunTicket, exhausted_message, rerun_message
from trio_mcp.peer._tasks._shared import LEASE_LOST_MESSAGE

from tests.redis_cluster import cluster_store_url
from tests.shared_store_support import opened, record

CLAIMER = Path(__file__).resolve().parents[2] / "rerun_claimer.py"
LEASE = 1.0


@pytest.fixture(params=["redis", "redis-cluster", "postgres"])
def rerun_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of this test's own (a Redis prefix, a prefix on a three-master Redis
    Cluster, or a fresh PostgreSQL database)."""
    if request.param == "redis-cluster":
        return cluster_store_url(request.getfixturevalue("redis_cluster"), lease=f"{LEASE:g}")
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        sep = "&" if "?" in url else "?"
        return f"{url}{sep}lease={LEASE:g}&prefix=q{tmp_path.name[-12:]}"
    return f"{request.getfixturevalue('postgres_url')}&lease={LEASE:g}"


def _store(url: str, instance: str) -> Any:
    store = open_task_store(url)
    store.instance = instance
    return store


def rerunnable(task_id: str, attempts: int = 3, tool: str = "resumable") -> Any:
    r = record(task_id)
    r.rerun = RerunTicket(tool, attempts, 0.0, json.dumps({"method": "tools/call"}))
    return r


async def _line(proc: trio.Process) -> str:
    """The next line ``proc`` prints."""
    assert proc.stdout is not None
    out = b""
    while not out.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(1)
        assert chunk, "the racer exited"
        out += chunk
    return out.decode().strip()


@pytest.mark.parametrize("rerun_store", ["redis", "redis-cluster", "postgres"], indirect=True)
async def test_ten_processes_race_to_claim_one_lapsed_task_and_one_wins(
    rerun_store: str, tmp_path: Path
) -> None:
    async with opened(_store(rerun_store, "dead"), run=False) as (dead, _):
        await dead.create(rerunnable("t-race"), max_live=10)
        await dead.create(record("t-plain"), max_live=10)
        await trio.sleep(LEASE + 0.2)  # its lease lapses: never renewed
        env = {**os.environ, "PYTHONPATH": str(CLAIMER.parent.parent)}
        procs = [
            await trio.lowlevel.open_process(
                [sys.executable, str(CLAIMER), rerun_store, f"racer-{n}", str(tmp_path),
                 "resumable"],
                stdout=subprocess.PIPE, env=env,
            )
            for n in range(10)
        ]
        try:
            with trio.fail_after(60):
                for proc in procs:  # each one connected, waiting for the start
                    assert await _line(proc) == "ready"
                (tmp_path / "go").touch()
                claimed = [json.loads(await _line(proc)) for proc in procs]
        finally:
            (tmp_path / "done").touch()
            for proc in procs:
                with trio.fail_after(30):
                    await proc.wait()
        assert [proc.returncode for proc in procs] == [0] * 10
        assert sorted(map(len, claimed)) == [0] * 9 + [1]  # one winner
        assert [ids for ids in claimed if ids] == [["t-race"]]
        plain = await dead.get("t-plain")
        assert plain.status is TaskStatus.FAILED and plain.status_message == LEASE_LOST_MESSAGE


async def test_a_requeued_task_is_claimed_once_with_its_attempt_and_message(
    rerun_store: str,
) -> None:
    async with opened(_store(rerun_store, "a"), run=False) as (a, _), opened(
        _store(rerun_store, "b"), run=False
    ) as (b, _):
        await a.create(rerunnable("t-1"), max_live=10)
        assert await b.claim(["resumable"], 16) == []  # not queued: running on a
        await a.requeue(["t-1"], count=True)  # a drains: handed over at once
        queued = await b.get("t-1")
        assert queued.status is TaskStatus.WORKING
        assert queued.status_message == rerun_message(2, 3)
        assert await b.claim(["other-tool"], 16) == []  # b must host the tool
        (got,) = await b.claim(["resumable"], 16)
        assert (got.task_id, got.attempt, got.rerun.tool) == ("t-1", 2, "resumable")
        assert await a.claim(["resumable"], 16) == []  # taken once
        # b's run stops too: its last attempt, then failed with the attempts
        await b.requeue(["t-1"], count=True)
        (got,) = await a.claim(["resumable"], 16)
        assert got.attempt == 3
        await a.requeue(["t-1"], count=True)
        final = await b.get("t-1")
        assert final.status is TaskStatus.FAILED
        assert final.status_message == exhausted_message(3)
        assert "3 attempts" in final.status_message
        assert await b.claim(["resumable"], 16) == []


async def test_a_cancel_stored_before_the_claim_wins(rerun_store: str) -> None:
    async with opened(_store(rerun_store, "a"), run=False) as (a, _), opened(
        _store(rerun_store, "b"), run=False
    ) as (b, _):
        await a.create(rerunnable("t-c"), max_live=10)
        await a.requeue(["t-c"], count=True)
        cancelled = await b.cancel("t-c", "Cancelled by the requestor", "2026-01-01T00:00:00Z")
        assert cancelled.status is TaskStatus.CANCELLED
        assert await b.claim(["resumable"], 16) == []
        assert (await a.get("t-c")).status is TaskStatus.CANCELLED


async def test_a_front_queue_says_whether_a_worker_is_alive(rerun_store: str) -> None:
    async with opened(_store(rerun_store, "front"), run=False) as (front, _), opened(
        _store(rerun_store, "w"), run=False
    ) as (w, _):
        await front.create(rerunnable("t-q1", attempts=1), max_live=10)
        assert await front.requeue(["t-q1"], count=False) == 0
        assert (await front.get("t-q1")).status_message == (
            "queued: no worker process is alive to run it"
        )
        await w.set_worker(True)
        await front.create(rerunnable("t-q2", attempts=1), max_live=10)
        assert await front.requeue(["t-q2"], count=False) == 1
        assert (await front.get("t-q2")).status_message == (
            "queued: waiting for a worker process to run it"
        )
        claimed = await w.claim(["resumable"], 16)
        assert sorted((r.task_id, r.attempt, r.status_message) for r in claimed) == [
            ("t-q1", 1, None), ("t-q2", 1, None),
        ]  # fmt: skip


async def test_postgres_version_1_schema_is_migrated_to_version_2(postgres_url: str) -> None:
    import psycopg

    from trio_mcp.peer._tasks import _postgres_sql as pg
    from trio_mcp.peer._tasks._postgres_conn import parse_url

    conninfo = parse_url(postgres_url)[0]
    with psycopg.connect(conninfo, autocommit=True) as conn:  # what version 1 made
        conn.execute(pg.ddl("trio_mcp").encode())
        conn.execute(b"INSERT INTO trio_mcp.meta VALUES ('schema_version', '1')")
        conn.execute(
            b"INSERT INTO trio_mcp.tasks VALUES ('old', 1, 'alice', 'gone', 'tools/call',"
            b" 'completed', 'c', 'u', NULL, 250, NULL, NULL, '{\"result\": {}}')"
        )
    async with opened(_store(postgres_url, "new"), run=False) as (store, _):
        assert (await store.get("old")).status is TaskStatus.COMPLETED
        await store.create(rerunnable("t-new"), max_live=10)
        await store.requeue(["t-new"], count=True)
        (got,) = await store.claim(["resumable"], 4)
        assert got.attempt == 2
    with psycopg.connect(conninfo, autocommit=True) as conn:
        version = conn.execute(b"SELECT value FROM trio_mcp.meta WHERE key = 'schema_version'")
        assert version.fetchall() == [("2",)]
