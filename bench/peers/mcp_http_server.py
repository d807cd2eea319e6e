"""The Python SDK ``mcp``'s Streamable HTTP server for ``python -m bench.http``.

Runs under the SDK's own interpreter, never trio-mcp's:

    .interop/mcp230/bin/python bench/peers/mcp_http_server.py PORT [--json]
    .interop/mcp130/bin/python bench/peers/mcp_http_server.py PORT [--json]

* mcp 2.x: ``MCPServer`` with one tool, ``echo(text) -> text``, served by
  ``MCPServer.run("streamable-http", ...)`` (uvicorn) at ``/mcp``; the SDK answers
  2025-11-25 sessions and 2026-07-28 stateless requests on the same endpoint. mcp 2.x
  has no tasks.
* mcp 1.30: the low-level ``Server`` of ``bench/peers/mcp_server.py`` (``echo``, and
  ``noop``: a task that finishes at once, ``enable_tasks()`` + ``run_task()``) behind
  ``StreamableHTTPSessionManager`` in Starlette under uvicorn, as its docs show.

``--json`` makes every answer ``application/json`` (``json_response=True``); without it a
request is answered with an SSE stream.
"""

# No `from __future__ import annotations`: mcp 1.30 reads handler annotations at runtime.
import argparse
import contextlib
import os
import sys
import warnings
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
warnings.simplefilter("ignore", DeprecationWarning)

MAJOR = int(version("mcp").split(".")[0])


def serve_v2(port: int, json_response: bool) -> None:
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("mcp2-bench-http", version="1.0", log_level="WARNING")

    @app.tool(description="Echo the text.")
    def echo(text: str) -> str:
        return text

    app.run("streamable-http", host="127.0.0.1", port=port, streamable_http_path="/mcp",
            json_response=json_response)


def serve_v1(port: int, json_response: bool) -> None:
    sys.path.insert(0, HERE)
    import mcp_server  # bench/peers/mcp_server.py: build_v1()
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(app=mcp_server.build_v1(), json_response=json_response)

    @contextlib.asynccontextmanager
    async def lifespan(app):  # type: ignore[no-untyped-def]
        async with manager.run():
            yield

    app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--json", action="store_true", help="every answer application/json")
    args = parser.parse_args()
    (serve_v1 if MAJOR == 1 else serve_v2)(args.port, args.json)


if __name__ == "__main__":
    main()
