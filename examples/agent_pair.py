"""Two agents in one Trio program, each hosting tasks and calling the other's.

* The planner hosts a `plan_trip` tool that runs as a task. Halfway, it asks
  the caller's model for ideas (sampling), as a task hosted by the caller.
* The assistant hosts sampling (as tasks) and calls `plan_trip` as a task.
* At the end, each side lists the tasks the other hosted for it.

open_memory_pair joins them in memory; messages cross as JSON, exactly as
they would over stdio or WebSocket.

    python examples/agent_pair.py
"""

from __future__ import annotations

import trio

import trio_mcp

# --- the planner: a tool that runs as a task -------------------------------------------

planner = trio_mcp.App("planner", "1.0")


@planner.tool(task_support="required")
async def plan_trip(ctx: trio_mcp.RequestContext, city: str, days: int) -> str:
    """Plan a trip to `city`, asking the caller's model for ideas."""
    await ctx.report_progress(1, 3, "looking at the map")
    # as_task=True: the assistant hosts this sampling request as its own task,
    # and this task polls it (tasks/get, then tasks/result).
    ideas = await ctx.sample(f"Three things to do in {city}?", as_task=True)
    await ctx.report_progress(2, 3, "got ideas")
    await trio.sleep(0.2)
    await ctx.report_progress(3, 3, "booked")
    return f"{days} days in {city}: {ideas.text}"


# --- the assistant: hosts sampling, as tasks when asked -----------------------------------

assistant = trio_mcp.App("assistant", "1.0", host_tasks=True)


@assistant.on_sampling
async def think(
    ctx: trio_mcp.RequestContext, params: trio_mcp.CreateMessageParams
) -> trio_mcp.CreateMessageResult:
    print(f"assistant: thinking, as task {ctx.task_id and ctx.task_id[:8]}")
    await trio.sleep(0.3)  # a real agent would call its model here
    return trio_mcp.CreateMessageResult(
        role="assistant",
        content={"type": "text", "text": "the tram, the castle, pastéis de nata"},
        model="pretend-model",
    )


def show_progress(progress: trio_mcp.ProgressParams) -> None:
    print(f"assistant: plan_trip progress {progress.progress:g}/{progress.total:g} "
          f"{progress.message}")


async def main() -> None:
    # The planner plays the MCP server, the assistant the client; both host tasks.
    async with trio_mcp.open_memory_pair(planner, assistant) as (to_planner, to_assistant):
        handle = await to_planner.call_tool_task(
            "plan_trip", {"city": "Lisbon", "days": 3}, progress=show_progress
        )
        print(f"assistant: plan_trip runs as the planner's task {handle.task_id[:8]}")
        async for task in handle:
            print(f"assistant: plan_trip is {task.status.value}")
        print("assistant: result:", (await handle.result()).text)

        # Each side asks the other which tasks it hosts for it (tasks/list).
        async for task in to_planner.iter_tasks():
            print(f"planner hosted {task.task_id[:8]}: {task.status.value}")
        async for task in to_assistant.iter_tasks():
            print(f"assistant hosted {task.task_id[:8]}: {task.status.value}")


if __name__ == "__main__":
    trio.run(main)
