"""Task work apart from the connections: worker processes, and draining on SIGTERM.

With a store shared by processes that can hand work over (Redis, PostgreSQL):

- :func:`serve_worker` runs an App's task work without serving MCP: it claims the
  tasks queued in the store (by a front, whose ``run_tasks`` is off, or after the
  process that ran them stopped) for the tools it hosts, and runs them;
- :func:`until_drained` runs a server (or a worker) until SIGTERM, then drains:
  no new task work here (new tasks are queued for the others), the running tasks
  get ``grace`` seconds to finish, the re-runnable ones still running are handed
  to the other processes at once (no lease wait), requests in flight are answered,
  and it returns (the process exits 0).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from .peer import App, host_reruns

#: Seconds a draining process gives its running tasks to finish, by default.
DEFAULT_GRACE: Final = 30.0


async def serve_worker(
    app: App, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Run ``app``'s task work without serving MCP, until cancelled.

    The App's store must be shared (``redis://...``, ``postgresql://...``): the
    worker claims the tasks queued there for the tools it hosts (every tool that
    may run as a task) and runs them; their requestors follow them through any
    server process on the same store.

    Raises:
        ValueError: The App's store is not shared by processes.
        McpError: The store cannot be opened.
    """
    registry = app.registry
    if not registry.store.shared:
        raise ValueError("a worker needs a task store shared by processes (Redis, PostgreSQL)")
    host_reruns(app)
    registry.run_tasks = True
    async with registry.running():
        task_status.started()
        await trio.sleep_forever()


async def until_drained(
    app: App,
    serve: Callable[..., Awaitable[Any]],
    *,
    grace: float = DEFAULT_GRACE,
    signals: tuple[int, ...] = (signal.SIGTERM,),
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``serve`` (started with ``nursery.start``; what it reports is reported)
    until it returns or one of ``signals`` arrives; then drain ``app``
    (:meth:`App.drain`) and stop ``serve``.

    Cancellation: stops at once, without draining.
    """
    async with trio.open_nursery() as nursery:

        async def run(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            await serve(task_status=task_status)
            nursery.cancel_scope.cancel()  # it ended on its own (stdin closed)

        with trio.open_signal_receiver(*signals) as received:
            task_status.started(await nursery.start(run))
            async for _ in received:
                break
            await app.drain(grace)
            nursery.cancel_scope.cancel()
