"""The API's surface as a newcomer meets it: the task hint of ``call_tool`` before
``list_all_tools()``, a short ``help(trio_mcp.App)``, ``repr(TaskHandle)`` without private
fields.
"""

from __future__ import annotations

import pydoc
import socket

import pytest

import trio_mcp

pytestmark = pytest.mark.timeout(120)


def _closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- the API's surface ---------------------------------------------------------------------


async def test_sharp_call_tool_on_a_required_tool_before_listing_gives_the_hint() -> None:
    app = trio_mcp.App("s")

    @app.tool(task_support="required")
    async def long_job() -> str:
        return "done"

    async with trio_mcp.open_memory_pair(app) as pair:
        with pytest.raises(trio_mcp.RemoteError) as got:
            await pair.client.call_tool("long_job")  # never listed: no local check
        assert got.value.code == trio_mcp.METHOD_NOT_FOUND
        assert "use call_tool_task()" in got.value.message
        await pair.client.list_all_tools()
        with pytest.raises(trio_mcp.LocalUsageError, match=r"use call_tool_task\(\)"):
            await pair.client.call_tool("long_job")


def test_sharp_help_of_app_is_short() -> None:
    """The API and its docstrings only: no attrs machinery, no slots of inner state, no
    private module names, and a signature without attrs' ``NOTHING``."""
    text = pydoc.render_doc(trio_mcp.App, renderer=pydoc.plaintext)
    assert len(text.splitlines()) < 380, len(text.splitlines())  # was 452, 396 when filed
    for private in ("_runner", "peer._features", "_app_server", "_app_client", "__attrs_",
                    "__setattr__", "__match_args__", "Data descriptors", "NOTHING"):
        assert private not in text, private
    assert " |  App(name, version='0.0.0', instructions=None, limits=TaskLimits()," in text
    for method in ("tool(self", "resource(self", "on_elicitation(self", "run(self"):
        assert f"\n |  {method}" in text, method
    for cls in (trio_mcp.App, trio_mcp.Peer, trio_mcp.TaskHandle, trio_mcp.RequestContext):
        assert cls.__module__ == "trio_mcp", cls


async def test_sharp_task_handle_repr_has_no_private_fields() -> None:
    app = trio_mcp.App("s")

    @app.tool(task_support="optional")
    async def quick() -> str:
        return "ok"

    async with trio_mcp.open_memory_pair(app) as pair:
        handle = await pair.client.call_tool_task("quick")
        await handle.result()
        text = repr(handle)
    assert "_outcome" not in text and "_collecting" not in text and "outcome=" not in text
    assert text.startswith(f"TaskHandle(task_id={handle.task_id!r}, status=")
