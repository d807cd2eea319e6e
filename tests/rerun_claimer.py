"""One process racing to claim queued re-runnable tasks, for the claim race test.

Usage: ``python tests/rerun_claimer.py STORE_URL INSTANCE FOLDER TOOL``: opens the store
as INSTANCE and prints ``ready``; once the file FOLDER/go exists (so every racer starts
together), runs the sweep (which queues a dead process's re-runnable tasks) and one
claim of TOOL's queued tasks, and prints the claimed ids as JSON; then holds what it
claimed until FOLDER/done exists (no racer's close hands it back while others race).
"""

import json
import sys
from pathlib import Path

import trio

from trio_mcp.peer._tasks._open import open_task_store


async def until(path: Path) -> None:
    while not await trio.Path(path).exists():  # noqa: ASYNC110 (a file another process makes)
        await trio.sleep(0.002)


async def main(url: str, instance: str, folder: str, tool: str) -> None:
    store = open_task_store(url)
    store.instance = instance
    await store.open()
    try:
        print("ready", flush=True)
        await until(Path(folder) / "go")
        await store.sweep()  # type: ignore[attr-defined]
        claimed = await store.claim([tool], 16)  # type: ignore[attr-defined]
        print(json.dumps([r.task_id for r in claimed]), flush=True)
        await until(Path(folder) / "done")
    finally:
        await store.aclose()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4])
