"""The task-store workloads of ``python -m bench.stores`` beyond bench.serveronly's.

* :func:`roundtrip_window`: task round trips (a task-augmented ``tools/call``
  of a zero-length task, then its ``tasks/result``) with ``window`` round trips
  in flight: each slot sends the next call as soon as its result arrives.
"""

from __future__ import annotations

import time
from typing import Any

from bench.serveronly import TTL, Client, Server, _task_id


def roundtrip_window(c: Client, s: Server, p: dict[str, Any]) -> dict[str, Any]:
    """``p["window"]`` task round trips in flight for ``p["duration"]`` seconds."""
    name, args = s.noop
    call = {"name": name, "arguments": args, "task": {"ttl": TTL}}
    # request id -> (kind, started): kind 0 is the call, 1 the tasks/result.
    pending: dict[int, tuple[int, float]] = {}

    def send(lines: list[bytes], method: str, params: dict[str, Any], kind: int,
             started: float) -> None:
        request_id, line = c.request_line(method, params)
        pending[request_id] = (kind, started)
        lines.append(line)

    def run(seconds: float) -> tuple[int, float]:
        done = 0
        deadline = time.perf_counter() + seconds
        lines: list[bytes] = []
        for _ in range(p["window"]):
            send(lines, "tools/call", call, 0, time.perf_counter())
        c.write(b"".join(lines))
        while pending:
            if not c.lines:
                c._read_lines()
            lines = []
            now = time.perf_counter()
            for msg in c.answers_now():
                entry = pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
                if entry is None:
                    continue
                if "error" in msg:
                    raise RuntimeError(f"round trip: {msg['error']}")
                kind, started = entry
                if kind == 0:
                    send(lines, "tasks/result", {"taskId": _task_id(msg["result"])}, 1, started)
                    continue
                if msg["result"].get("isError"):
                    raise RuntimeError(f"task failed: {msg['result']}")
                done += 1
                if now < deadline:
                    send(lines, "tools/call", call, 0, now)
            if lines:
                c.write(b"".join(lines))
        return done, time.perf_counter() - (deadline - seconds)

    run(p["duration"] / 10)  # warm-up
    cpu0 = c.cpu()
    done, elapsed = run(p["duration"])
    return {"rate": done / elapsed, "server_cpu_us": (c.cpu() - cpu0) / done * 1e6,
            "round_trips": done}
