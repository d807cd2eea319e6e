"""Drive our ``everything_server.py --http`` with FastMCP's tasks client (``fastmcp-tasks``).

    python fastmcp_tasks_client.py MODE URL

``MODE`` is the FastMCP ``Client``'s ``mode=``: ``auto`` (probes ``server/discover``) or
``2026-07-28`` (pinned). The client runs as shipped: nothing of fastmcp-tasks is patched
(its ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` carry no ``Mcp-Name`` header,
which our server accepts). Runs under ``.interop/fastmcp`` (not our venv) and prints one
JSON report on stdout, each step as ``{"ok": true, "value": ...}`` or ``{"ok": false,
"error": ...}`` so that one failure does not hide the others.

``fastmcp-tasks`` 4.1.4 has a requester: importing ``fastmcp_tasks`` registers its
``TasksClientExtension`` on every FastMCP ``Client`` (it declares
``io.modelcontextprotocol/tasks`` in each request's client capabilities and claims
``resultType: "task"``); ``Client.call_tool`` then polls ``tasks/get`` to the end,
answering ``input_required`` through the ``elicitation_handler`` and ``tasks/update``;
``fastmcp_tasks.call_tool_task`` returns a ``ToolTask`` handle (``status``/``wait``/
``result``/``cancel``).

Steps:

* ``completed``: ``Client.call_tool("slow_compute", {"seconds": 0.3})`` (transparent);
* ``completed_handle``: ``call_tool_task("slow_compute", ...)``, then ``await task``;
* ``input_required``: ``Client.call_tool("confirm_delete", {"filename": "notes.txt"})``;
  the handler accepts with ``{"confirm": true}``;
* ``cancelled``: ``call_tool_task("slow_compute", {"seconds": 60})``, ``tasks/cancel``,
  then ``wait()`` to a terminal status.

``wire`` lists every HTTP POST the client made: its JSON-RPC body and its ``Mcp-Method``,
``Mcp-Name`` and ``MCP-Protocol-Version`` headers.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from collections.abc import Awaitable
from typing import Any

import anyio
import fastmcp_tasks
import httpx2
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp_tasks import call_tool_task

warnings.simplefilter("ignore", DeprecationWarning)


def dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value


async def step(report: dict[str, Any], key: str, work: Awaitable[Any]) -> Any:
    try:
        value = await work
    except Exception as exc:
        report[key] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                       "code": getattr(getattr(exc, "error", None), "code", None),
                       "trace": traceback.format_exc()[-3000:]}
        return None
    report[key] = {"ok": True, "value": dump(value)}
    return value


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def main(mode: str, url: str) -> dict[str, Any]:
    wire: list[dict[str, Any]] = []
    elicitations: list[dict[str, Any]] = []

    async def record(request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        try:
            body = json.loads(request.content)
        except (ValueError, TypeError):
            body = None
        wire.append({
            "body": body,
            "mcp_method": request.headers.get("mcp-method"),
            "mcp_name": request.headers.get("mcp-name"),
            "protocol_version": request.headers.get("mcp-protocol-version"),
        })

    def factory(**kwargs: Any) -> httpx2.AsyncClient:
        kwargs = {key: value for key, value in kwargs.items() if value is not None}
        kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
        kwargs["event_hooks"] = {"request": [record]}
        return httpx2.AsyncClient(**kwargs)

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        elicitations.append(dump(params))
        return {"confirm": True}

    report: dict[str, Any] = {"mode": mode, "fastmcp_tasks": fastmcp_tasks.__version__}
    transport = StreamableHttpTransport(url, httpx_client_factory=factory)
    async with Client(transport, mode=mode, elicitation_handler=on_elicit) as client:
        report["protocol_version"] = client.protocol_version

        async def completed() -> dict[str, Any]:
            result = await client.call_tool("slow_compute", {"seconds": 0.3})
            return {"text": text_of(result), "is_error": result.is_error}

        async def completed_handle() -> dict[str, Any]:
            task = await call_tool_task(client, "slow_compute",
                                        {"seconds": 0.3, "label": "handle"})
            created = dump(task.create_result)
            result = await task
            final = await task.status()
            return {"task_id": task.task_id, "created": created, "text": text_of(result),
                    "final": dump(final)}

        async def input_required() -> dict[str, Any]:
            result = await client.call_tool("confirm_delete", {"filename": "notes.txt"})
            return {"text": text_of(result), "is_error": result.is_error}

        async def cancelled() -> dict[str, Any]:
            task = await call_tool_task(client, "slow_compute", {"seconds": 60})
            before = await task.status()
            await task.cancel()
            final = await task.wait(timeout=20)
            return {"task_id": task.task_id, "before": dump(before), "final": dump(final)}

        with anyio.fail_after(60):
            await step(report, "completed", completed())
            await step(report, "completed_handle", completed_handle())
            await step(report, "input_required", input_required())
            await step(report, "cancelled", cancelled())
    report["elicitations"] = elicitations
    report["wire"] = wire
    return report


if __name__ == "__main__":
    _, MODE, URL = sys.argv
    print(json.dumps(anyio.run(main, MODE, URL), default=str))
