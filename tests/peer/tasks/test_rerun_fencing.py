"""Fencing (issue 32: "no second run while the first process is alive").

A process cut off from its shared store cannot renew its lease; once a whole lease
has passed without a renewal, the others may find it dead and run its re-runnable
tasks again. So it stops that work itself by then: the second run never overlaps
the first. Here the cut is real: process A's Redis connections go through a unix
socket proxy in the test that drops them all and refuses new ones (a partition);
B, a worker on the same private ``redis-server`` or PostgreSQL, claims the task and
runs it again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import trio_mcp
from trio_mcp import Rerun, TaskStatus

LEASE = 1.0


class Partition:
    """A unix socket proxy to ``target`` that can be cut (every connection dropped,
    new ones refused) and healed."""

    def __init__(self, listen: Path, target: Path) -> None:
        self.listen, self.target = listen, target
        self.connected = True
        self._scopes: set[trio.CancelScope] = set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(self.listen))
        sock.listen(128)
        task_status.started()
        await trio.serve_listeners(self._relay, [trio.SocketListener(sock)])

    def cut(self) -> None:
        self.connected = False
        for scope in self._scopes:
            scope.cancel()

    def heal(self) -> None:
        self.connected = True

    async def _relay(self, client: trio.SocketStream) -> None:
        async with client:
            if not self.connected:
                return
            upstream = await trio.open_unix_socket(str(self.target))
            async with upstream:
                with trio.CancelScope() as scope:
                    self._scopes.add(scope)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_pipe, client, upstream, nursery.cancel_scope)
                        nursery.start_soon(_pipe, upstream, client, nursery.cancel_scope)
                self._scopes.discard(scope)


async def _pipe(src: trio.SocketStream, dst: trio.SocketStream, done: trio.CancelScope) -> None:
    try:
        async for chunk in src:
            await dst.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    done.cancel()


def _stores(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> tuple[str, str, Path, Path]:
    """A's store URL (through the proxy), B's, the proxy's socket and the real one."""
    if kind == "redis":
        url: str = request.getfixturevalue("redis_url")
        real = Path(url.removeprefix("unix://").split("?", 1)[0])
        proxy = tmp_path / "a.sock"
        options = f"db=0&lease={LEASE:g}&prefix=f{tmp_path.name[-12:]}"
        return f"unix://{proxy}?{options}", f"unix://{real}?{options}", proxy, real
    url = request.getfixturevalue("postgres_url")  # postgresql://postgres@/DB?host=FOLDER
    folder = url.split("host=", 1)[1].split("&", 1)[0]
    (tmp_path / "pg").mkdir()
    proxy, real = tmp_path / "pg" / ".s.PGSQL.5432", Path(folder) / ".s.PGSQL.5432"
    b_url = f"{url}&lease={LEASE:g}"
    return b_url.replace(f"host={folder}", f"host={tmp_path / 'pg'}"), b_url, proxy, real


@pytest.mark.parametrize("kind", ["redis", "postgres"])
async def test_a_process_cut_off_from_its_store_stops_its_rerunnable_work_before_another_runs_it(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    a_url, b_url, proxy, real = _stores(request, kind, tmp_path)
    partition = Partition(proxy, real)
    runs: list[tuple[str, int, str, float]] = []
    first_started, second_started = trio.Event(), trio.Event()

    def app_named(name: str, url: str) -> trio_mcp.App:
        app = trio_mcp.App(name, store=url)

        @app.tool(task_support="optional", rerun=Rerun(attempts=3))
        async def long(ctx: trio_mcp.RequestContext, seconds: float) -> str:
            runs.append((name, ctx.attempt, "start", trio.current_time()))
            (first_started if ctx.attempt == 1 else second_started).set()
            try:
                await trio.sleep(seconds if ctx.attempt == 1 else 0.1)
            except trio.Cancelled:
                runs.append((name, ctx.attempt, "stopped", trio.current_time()))
                raise
            runs.append((name, ctx.attempt, "end", trio.current_time()))
            return f"{name} attempt {ctx.attempt}"

        return app

    a, b = app_named("a", a_url), app_named("b", b_url)
    async with trio.open_nursery() as nursery:
        await nursery.start(partition.serve)
        await nursery.start(trio_mcp.serve_worker, b)
        async with trio_mcp.open_memory_pair(a) as (client, _):
            handle = await client.call_tool_task("long", {"seconds": 60.0})
            with trio.fail_after(5):
                await first_started.wait()
            assert runs[0][:3] == ("a", 1, "start")
            partition.cut()  # A can no longer renew its lease
            with trio.fail_after(10):
                await second_started.wait()
            partition.heal()
            with trio.fail_after(10):
                result = await handle.result()
            assert result.text == "b attempt 2"
            record = await client.get_task(handle.task_id)
            assert record.status is TaskStatus.COMPLETED
        nursery.cancel_scope.cancel()
    events = [(name, attempt, what) for name, attempt, what, _ in runs]
    assert events == [
        ("a", 1, "start"), ("a", 1, "stopped"), ("b", 2, "start"), ("b", 2, "end"),
    ]  # fmt: skip
    stopped, restarted = runs[1][3], runs[2][3]
    assert stopped <= restarted  # the first run ended before the second began

