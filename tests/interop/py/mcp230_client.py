"""Drive our ``everything_server.py`` with the Python SDK ``mcp`` 2.3.0's ``Client``.

    python mcp230_client.py MODE stdio COMMAND [ARG...]
    python mcp230_client.py MODE http URL

``MODE`` is the ``Client``'s ``mode=``: ``auto`` (its default: probes ``server/discover``)
or ``2026-07-28`` (pinned, no probe). Runs under ``.interop/mcp230`` (not our venv) and
prints one JSON report on stdout: what the SDK saw, each step as ``{"ok": true, "value":
...}`` or ``{"ok": false, "error": ...}`` so that one failure does not hide the others.

Steps: tools/list; ``test_simple_text``; ``test_input_required_result_elicitation`` (a
multi round-trip request: the SDK answers the embedded ``elicitation/create`` with its
``elicitation_callback``, then retries), and the same by hand
(``allow_input_required=True``: the ``InputRequiredResult``, then the retry); prompts/list and prompts/get
(``test_simple_prompt``, ``test_prompt_with_arguments``); resources/list and
resources/read (``test://static-text``); ``Client.listen(tools_list_changed=True)``
(``subscriptions/listen``), then ``test_trigger_tool_change`` called by the same client
while the subscription is open, then the first event (a ``ToolsListChanged``) and the
tool list after it.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from collections.abc import Awaitable
from typing import Any

import anyio
import mcp_types as t
from mcp import Client, StdioServerParameters

warnings.simplefilter("ignore", DeprecationWarning)

NAME = "Ada"


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
                       "trace": traceback.format_exc()[-2000:]}
        return None
    report[key] = {"ok": True, "value": dump(value)}
    return value


async def main(argv: list[str]) -> dict[str, Any]:
    mode, kind, *target = argv
    if kind == "stdio":
        server: Any = StdioServerParameters(command=target[0], args=target[1:])
    else:
        (server,) = target
    elicitations: list[dict[str, Any]] = []

    async def on_elicit(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        elicitations.append(dump(params))
        return t.ElicitResult(action="accept", content={"name": NAME})

    report: dict[str, Any] = {"mode": mode, "transport": kind}
    async with Client(server, mode=mode, elicitation_callback=on_elicit,
                      client_info=t.Implementation(name="mcp230-interop-client",
                                                   version="2.3.0")) as client:
        report["protocol_version"] = client.protocol_version
        report["server_info"] = dump(client.server_info)
        report["server_capabilities"] = dump(client.server_capabilities)
        tools = await step(report, "tools", client.list_tools())
        if tools is not None:
            report["tool_names"] = sorted(tool.name for tool in tools.tools)
        await step(report, "simple_text", client.call_tool("test_simple_text", {}))
        await step(report, "elicitation",
                   client.call_tool("test_input_required_result_elicitation", {}))
        report["elicitations"] = elicitations
        await step(report, "elicitation_manual", manual_round_trip(client))
        await step(report, "prompts", client.list_prompts())
        await step(report, "simple_prompt", client.get_prompt("test_simple_prompt"))
        await step(report, "prompt_with_arguments", client.get_prompt(
            "test_prompt_with_arguments", {"arg1": "one", "arg2": "two"}))
        await step(report, "resources", client.list_resources())
        await step(report, "static_text", client.read_resource("test://static-text"))
        await step(report, "listen", listen(client))
        # A pinned client learns the server's identity from results' _meta, if at all.
        report["server_info_after"] = dump(client.server_info)
    return report


async def manual_round_trip(client: Client) -> dict[str, Any]:
    """The same tool driven by hand: the first answer is an InputRequiredResult, the retry
    carries inputResponses and the requestState echoed verbatim."""
    name = "test_input_required_result_elicitation"
    first = await client.session.call_tool(name, {}, allow_input_required=True)
    if not isinstance(first, t.InputRequiredResult):
        return {"first": dump(first)}
    responses = {key: t.ElicitResult(action="accept", content={"name": "Grace"})
                 for key in (first.input_requests or {})}
    second = await client.session.call_tool(
        name, {}, allow_input_required=True, input_responses=responses,
        request_state=first.request_state)
    return {"first": dump(first), "second": dump(second)}


async def listen(client: Client) -> dict[str, Any]:
    """subscriptions/listen for tool list changes; trigger one; wait for the event."""
    async with client.listen(tools_list_changed=True) as sub:
        honored = dump(sub.honored)
        triggered = await client.call_tool("test_trigger_tool_change", {})
        with anyio.fail_after(15):
            event = await sub.__anext__()
        after = await client.list_tools(cache_mode="bypass")
    return {
        "honored": honored,
        "subscription_id": sub.subscription_id,
        "triggered": dump(triggered),
        "event": type(event).__name__,
        "tools_after": sorted(tool.name for tool in after.tools),
    }


if __name__ == "__main__":
    result = anyio.run(main, sys.argv[1:])
    print(json.dumps(result))
