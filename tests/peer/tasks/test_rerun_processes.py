"""Work that outlives its process (issue 32), with real processes on a real store.

``examples/task_server.py`` processes share a private redis-server or PostgreSQL
(``shared_store``); its ``resumable_sleep`` tool (``Rerun(attempts=3)``) appends
``task_id attempt pid`` to ``RESUMABLE_SLEEP_LOG`` at each run. A process is
SIGKILLed: its re-runnable tasks run again elsewhere (twice in all), the others once;
both eras; a front with two workers; a drain on SIGTERM hands over and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp import TaskStatus

from tests.helpers import serving
from tests.redis_cluster import cluster_store_url

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "task_server.py"
LEASE = 2  # seconds: short, so a SIGKILL is noticed quickly
TOKEN = "s3cret"  # every client is the same identity, whichever process it reaches


def _store(redis: str, tmp_path: Path) -> str:
    sep = "&" if "?" in redis else "?"
    return f"{redis}{sep}lease={LEASE}&prefix=r{tmp_path.name[-12:]}"


def store_of(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> str:
    """The URL of a store of this test's own: a Redis prefix or a fresh PostgreSQL database."""
    if kind == "redis":
        return _store(request.getfixturevalue("redis_url"), tmp_path)
    if kind == "redis-cluster":  # a prefix of its own on a three-master Redis Cluster
        return cluster_store_url(request.getfixturevalue("redis_cluster"), lease=LEASE)
    return f"{request.getfixturevalue('postgres_url')}&lease={LEASE}"


#: (store, era) pairs: each store and each era runs, without running every pair.
PAIRS = [("redis", "2025-11-25"), ("postgres", "2026-07-28"), ("redis-cluster", "2026-07-28")]


@pytest.fixture(params=[pytest.param(pair, id=f"{pair[0]}-{pair[1]}") for pair in PAIRS])
def store_era(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A store URL of this test's own, and the era the clients speak."""
    kind, era = request.param
    return store_of(request, kind, tmp_path), era


OTHER_PAIRS = [("postgres", "2025-11-25"), ("redis", "2026-07-28"), ("redis-cluster", "2025-11-25")]


@pytest.fixture(params=OTHER_PAIRS, ids=[f"{s}-{e}" for s, e in OTHER_PAIRS])
def other_store_era(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """As :func:`store_era`, the other way round (PostgreSQL with 2025, Redis with 2026)."""
    kind, era = request.param
    return store_of(request, kind, tmp_path), era


def _env(log: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(EXAMPLE.parent.parent), "RESUMABLE_SLEEP_LOG": str(log)}


@asynccontextmanager
async def server(
    store: str, log: Path, *extra: str, transport: str = "--http"
) -> AsyncIterator[tuple[trio.Process, str]]:
    """An example server process on ``store``; yields it and its URL."""
    argv = [sys.executable, str(EXAMPLE), transport, "127.0.0.1:0", "--store", store,
            "--token", TOKEN, *extra]
    async with serving(argv, _env(log)) as (proc, words):
        yield proc, words[0]


@asynccontextmanager
async def worker(store: str, log: Path, *, cli: bool = False) -> AsyncIterator[trio.Process]:
    """A worker process on ``store`` (task work only): the example's ``--worker``, or
    ``trio-mcp worker`` (``cli``; the example's tools by default)."""
    argv = [sys.executable, str(EXAMPLE), "--worker", "--store", store]
    if cli:
        argv = [sys.executable, "-m", "trio_mcp", "worker", "--store", store]
    proc = await trio.lowlevel.open_process(argv, stderr=subprocess.PIPE, env=_env(log))
    try:
        assert proc.stderr is not None
        seen = b""
        with trio.fail_after(30):
            while b"worker running" not in seen:
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, f"the worker exited before starting: {seen!r}"
                seen += chunk
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        if proc.stderr is not None:
            await proc.stderr.aclose()


def runs(log: Path) -> dict[str, list[tuple[int, int]]]:
    """Each task's runs: (attempt, pid), in order."""
    out: dict[str, list[tuple[int, int]]] = {}
    if not log.exists():
        return out
    for line in log.read_text().splitlines():
        task_id, attempt, pid = line.split()[:3]
        out.setdefault(task_id, []).append((int(attempt), int(pid)))
    return out


async def wait_runs(log: Path, task_ids: list[str], timeout: float = 20) -> None:
    """Until each task has made at least one run (its first line is in the log)."""
    with trio.fail_after(timeout):
        while not set(task_ids) <= set(runs(log)):  # noqa: ASYNC110 (a file, not an event)
            await trio.sleep(0.05)


def client(url: str, era: str) -> Any:
    """A client of the example over its URL's transport (WebSocket or Streamable HTTP)."""
    if url.startswith("ws"):
        return trio_mcp.open_websocket_client(url, token=TOKEN, era=era)
    return trio_mcp.open_http_client(url, token=TOKEN, era=era)


async def test_sigkill_reruns_the_killed_process_tasks_elsewhere_and_no_other(
    store_era: tuple[str, str], tmp_path: Path
) -> None:
    shared_store, era = store_era
    log = tmp_path / "runs.log"
    async with AsyncExitStack() as stack:
        # WebSocket with 2025-11-25 on Redis, Streamable HTTP with 2026-07-28 on PostgreSQL
        transport = "--ws" if era == "2025-11-25" else "--http"
        procs = [
            await stack.enter_async_context(server(shared_store, log, transport=transport))
            for _ in range(3)
        ]
        (proc_a, a), (_, b), (_, c) = procs
        handles: dict[str, str] = {}
        async with client(a, era) as on_a, client(c, era) as on_c:
            for _ in range(10):
                handle = await on_a.call_tool_task("resumable_sleep", {"seconds": 3.0})
                handles[handle.task_id] = "a"
            for _ in range(5):
                handle = await on_c.call_tool_task("resumable_sleep", {"seconds": 0.5})
                handles[handle.task_id] = "c"
            plain = await on_a.call_tool_task("sleep", {"seconds": 30})
        await wait_runs(log, list(handles))
        proc_a.send_signal(signal.SIGKILL)
        await proc_a.wait()
        async with client(b, era) as on_b:
            with trio.fail_after(LEASE * 4 + 20):
                for task_id in handles:
                    result = await on_b.task_handle(task_id, trio_mcp.CallToolResult).result()
                    attempt = 2 if handles[task_id] == "a" else 1
                    duration = 3.0 if handles[task_id] == "a" else 0.5
                    assert result.text == f"slept {duration} s (attempt {attempt})"
            # the CLI shows the attempt that finished it
            rerun_id = next(t for t, where in handles.items() if where == "a")
            option = "--ws" if b.startswith("ws") else "--http"
            cli = await trio.run_process(
                [sys.executable, "-m", "trio_mcp", "tasks", "get", rerun_id, option, b,
                 "--token", TOKEN, "--era", era],
                capture_stdout=True, capture_stderr=True, env=_env(log),
            )  # fmt: skip
            shown = json.loads(cli.stdout)
            assert shown["status"] == "completed"
            assert shown["_meta"]["io.github.trio-mcp/attempt"] == 2
            task = await on_b.get_task(plain.task_id)
            with trio.fail_after(LEASE * 4 + 10):
                while task.status is TaskStatus.WORKING:
                    await trio.sleep(0.1)
                    task = await on_b.get_task(plain.task_id)
            assert task.status is TaskStatus.FAILED  # not re-runnable: fails as before
    seen = runs(log)
    pid_a = proc_a.pid
    for task_id, where in handles.items():
        if where == "a":
            assert [att for att, _ in seen[task_id]] == [1, 2]
            assert seen[task_id][0][1] == pid_a and seen[task_id][1][1] != pid_a
        else:
            assert [att for att, _ in seen[task_id]] == [1]


async def test_a_front_and_two_workers_one_sigkilled_its_tasks_rerun_on_the_other(
    other_store_era: tuple[str, str], tmp_path: Path
) -> None:
    shared_store, era = other_store_era
    log = tmp_path / "runs.log"
    async with server(shared_store, log, "--front") as (_, front):
        async with client(front, era) as on_front:
            # no worker yet: queued, and the status message says so
            early = await on_front.call_tool_task("resumable_sleep", {"seconds": 0.2})
            task = await on_front.get_task(early.task_id)
            assert task.status is TaskStatus.WORKING
            assert task.status_message == "queued: no worker process is alive to run it"
            async with worker(shared_store, log) as w1, worker(shared_store, log, cli=True) as w2:
                ids = [early.task_id]
                for _ in range(8):
                    handle = await on_front.call_tool_task("resumable_sleep", {"seconds": 4.0})
                    ids.append(handle.task_id)
                plain = await on_front.call_tool_task("sleep", {"seconds": 0.2})
                # a tool without rerun= runs on a worker too (once: were its worker
                # killed, it would fail)
                done = on_front.task_handle(plain.task_id, trio_mcp.CallToolResult)
                assert (await done.result()).text == "slept 0.2 seconds"
                await wait_runs(log, ids[1:])
                first = runs(log)
                # The worker that runs some of them is killed (one may have claimed them all).
                on_w1 = {t for t in ids[1:] if first[t][0][1] == w1.pid}
                victim, survivor = (w1, w2) if on_w1 else (w2, w1)
                killed = {t for t in ids[1:] if first[t][0][1] == victim.pid}
                victim.send_signal(signal.SIGKILL)
                await victim.wait()
                with trio.fail_after(LEASE * 4 + 30):
                    for task_id in ids:
                        handle = on_front.task_handle(task_id, trio_mcp.CallToolResult)
                        result = await handle.result()
                        attempt = 2 if task_id in killed else 1
                        assert result.text.endswith(f" s (attempt {attempt})")
                assert survivor.returncode is None
    seen = runs(log)
    assert killed
    for task_id in ids:
        pids = [pid for _, pid in seen[task_id]]
        if task_id in killed:
            assert [att for att, _ in seen[task_id]] == [1, 2] and pids[1] == survivor.pid
        else:
            assert len(pids) == 1 and pids[0] in (w1.pid, w2.pid)


@pytest.mark.parametrize(("kind", "era"), [
    ("redis", "2025-11-25"),
    ("postgres", "2026-07-28"),
    ("redis-cluster", "2026-07-28"),
])
async def test_rolling_sigterm_restart_fails_nothing_and_reruns_only_what_outlived_the_grace(
    kind: str, era: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    shared_store = store_of(request, kind, tmp_path)
    log = tmp_path / "runs.log"
    grace = "1.5"
    async with AsyncExitStack() as stack:
        procs = [
            await stack.enter_async_context(server(shared_store, log, "--grace", grace))
            for _ in range(3)
        ]
        short: list[str] = []
        long: list[str] = []
        for turn in range(3):
            proc, url = procs[turn]
            async with client(url, era) as on_it:  # load on the process restarted next
                for _ in range(3):
                    short.append((await on_it.call_tool_task(
                        "resumable_sleep", {"seconds": 0.5})).task_id)
                long.append((await on_it.call_tool_task(
                    "resumable_sleep", {"seconds": 5.0})).task_id)
            await wait_runs(log, short[-3:] + long[-1:])
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                assert await proc.wait() == 0  # drained, exit 0
            # restarted: the next turn drains the next one
            procs[turn] = await stack.enter_async_context(
                server(shared_store, log, "--grace", grace)
            )
        async with client(procs[0][1], era) as on_any:
            with trio.fail_after(60):
                for task_id in short + long:
                    handle = on_any.task_handle(task_id, trio_mcp.CallToolResult)
                    result = await handle.result()  # raises TaskFailed if failed
                    assert result.text.startswith("slept")
    seen = runs(log)
    for task_id in short:  # finished within the grace: never run again
        assert len(seen[task_id]) == 1
    for task_id in long:  # outlived the grace: handed over, run again
        assert len(seen[task_id]) >= 2


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_sqlite_restart_runs_a_rerunnable_working_task_again_in_the_new_process(
    era: str, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with server(store, log) as (first, url):
        async with client(url, era) as on_first:
            resumable = await on_first.call_tool_task("resumable_sleep", {"seconds": 30.0})
            plain = await on_first.call_tool_task("sleep", {"seconds": 30})
        await wait_runs(log, [resumable.task_id])
        first.send_signal(signal.SIGKILL)
        await first.wait()
    # the restarted process runs it again (the same arguments: 30 s); the test waits
    # for the second run to start, reads the status, and cancels it
    async with server(store, log) as (_, url):
        with trio.fail_after(20):
            while len(runs(log).get(resumable.task_id, [])) < 2:  # noqa: ASYNC110
                await trio.sleep(0.05)
        async with client(url, era) as on_second:
            task = await on_second.get_task(resumable.task_id)
            assert task.status is TaskStatus.WORKING
            assert task.status_message == "re-running after its process stopped, attempt 2 of 3"
            lost = await on_second.get_task(plain.task_id)
            assert lost.status is TaskStatus.FAILED  # not re-runnable: fails as before
            await on_second.cancel_task(resumable.task_id)
    assert [att for att, _ in runs(log)[resumable.task_id]] == [1, 2]


QUESTION_SERVER = Path(__file__).resolve().parents[2] / "rerun_server.py"


@asynccontextmanager
async def question_server(store: str, log: Path) -> AsyncIterator[tuple[trio.Process, str]]:
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parent.parent)}
    async with serving([sys.executable, str(QUESTION_SERVER), store, str(log)], env) as (
        proc, words,
    ):  # fmt: skip
        yield proc, words[0]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_input_required_when_its_process_died_starts_over_and_asks_again(
    era: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = store_of(request, "redis" if era == "2025-11-25" else "postgres", tmp_path)
    log = tmp_path / "runs.log"
    asked: list[str] = []
    first_asked = trio.Event()
    app = trio_mcp.App("answering-client")

    @app.on_elicitation
    async def answer(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:  # the first run's question: never answered (its process dies)
            first_asked.set()
            await trio.sleep_forever()
        return trio_mcp.ElicitResult(action="accept", content={"ok": True})

    async with question_server(store, log) as (proc_a, a), question_server(store, log) as (
        _, b,
    ):  # fmt: skip
        # (the creating client declares elicitation: a 2025 task asks within its capabilities)
        async with trio_mcp.open_http_client(a, app, token=TOKEN, era=era) as on_a:
            created = await on_a.call_tool_task("ask_then_sleep", {"question": "ship it?"})
        async with trio_mcp.open_http_client(b, app, token=TOKEN, era=era) as on_b:
            async with trio.open_nursery() as nursery:
                got: list[str] = []

                async def follow() -> None:
                    handle = on_b.task_handle(created.task_id, trio_mcp.CallToolResult)
                    got.append((await handle.result()).text)

                nursery.start_soon(follow)
                with trio.fail_after(20):
                    await first_asked.wait()
                task = await on_b.get_task(created.task_id)
                assert task.status is TaskStatus.INPUT_REQUIRED
                proc_a.send_signal(signal.SIGKILL)
                await proc_a.wait()
                with trio.fail_after(LEASE * 4 + 20):
                    while not got:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
    assert got == ["yes (attempt 2)"]
    assert asked == ["ship it?", "ship it?"]  # asked again by the second run
    assert [att for att, _ in runs(log)[created.task_id]] == [1, 2]


async def test_an_answer_sent_to_another_process_before_the_question_reached_the_store_counts(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """tasks/update through another process while the question is not in the store yet (the
    requestor read it from the actor's own process, behind a load balancer): the answer is
    kept for the actor, not dropped (it was, leaving the task input_required for ever)."""
    store = store_of(request, "redis", tmp_path)
    log = tmp_path / "runs.log"
    app = trio_mcp.App("declining-client")  # answers "no": only the early answer says yes

    @app.on_elicitation
    async def decline(
        ctx: trio_mcp.RequestContext, params: trio_mcp.ElicitParams
    ) -> trio_mcp.ElicitResult:
        return trio_mcp.ElicitResult(action="accept", content={"ok": False})

    async with question_server(store, log) as (_, a), question_server(store, log) as (_, b):
        async with trio_mcp.open_http_client(a, app, token=TOKEN, era="2026-07-28") as on_a, \
                trio_mcp.open_http_client(b, app, token=TOKEN, era="2026-07-28") as on_b:  # fmt: skip
            created = await on_a.call_tool_task(
                "ask_then_sleep", {"question": "ship it?", "delay": 1.0}
            )
            assert (await on_b.get_task(created.task_id)).status is TaskStatus.WORKING
            # the key the question will have (the first elicitation of the task)
            await on_b.request_raw("tasks/update", {
                "taskId": created.task_id,
                "inputResponses": {"elicitation-1": {"action": "accept", "content": {"ok": True}}},
            })  # fmt: skip
            with trio.fail_after(15):
                result = await on_b.task_handle(created.task_id, trio_mcp.CallToolResult).result()
            assert result.text == "yes (attempt 1)"


async def test_a_websocket_server_no_client_ever_reached_claims_a_rerun(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = store_of(request, "redis", tmp_path)
    log = tmp_path / "runs.log"
    async with server(store, log, transport="--ws") as (proc_a, a), server(
        store, log, transport="--ws"
    ) as (proc_b, b):
        async with client(a, "2025-11-25") as on_a:
            handle = await on_a.call_tool_task("resumable_sleep", {"seconds": 0.5})
        await wait_runs(log, [handle.task_id])
        proc_a.send_signal(signal.SIGKILL)
        await proc_a.wait()
        with trio.fail_after(LEASE * 3 + 10):  # B runs it again with no connection of its own
            while len(runs(log)[handle.task_id]) < 2:  # noqa: ASYNC110 (a file)
                await trio.sleep(0.05)
        assert runs(log)[handle.task_id][1] == (2, proc_b.pid)
        async with client(b, "2025-11-25") as on_b:
            result = await on_b.task_handle(handle.task_id, trio_mcp.CallToolResult).result()
            assert result.text == "slept 0.5 s (attempt 2)"
