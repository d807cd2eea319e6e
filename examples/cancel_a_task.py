"""A 3-second tool called as a task, cancelled after 1 s: the README's walk-through.

Run it: ``python examples/cancel_a_task.py``. The server and the client run in
one process here (``open_memory_pair``); over stdio or WebSocket only the
``open_*`` line changes.
"""

import trio

import trio_mcp

app = trio_mcp.App("slow-server")


@app.tool(task_support="optional")
async def slow_count(ctx: trio_mcp.RequestContext, seconds: int = 3) -> str:
    """Count to `seconds`, reporting progress every second."""
    try:
        for i in range(seconds):
            await ctx.report_progress(i, seconds, f"{i}/{seconds} s")
            await trio.sleep(1)
    except trio.Cancelled:
        print("server: the tool saw its cancellation and stopped")
        raise
    return f"counted to {seconds}"


async def main() -> None:
    async with trio_mcp.open_memory_pair(app) as pair:

        def show(update: trio_mcp.ProgressParams) -> None:
            print(f"client: progress {update.progress}/{update.total}")

        handle = await pair.client.call_tool_task("slow_count", {"seconds": 3}, progress=show)
        print(f"client: task {handle.task_id[:8]}... is {handle.task.status}")
        await trio.sleep(1)
        await handle.cancel()
        try:
            await handle.result()
        except trio_mcp.TaskCancelled:
            print(f"client: the task was cancelled ({handle.task.status_message})")


if __name__ == "__main__":
    trio.run(main)
