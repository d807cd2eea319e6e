"""Streamable HTTP servers of ``bench.http`` on trio-mcp's two HTTP/1.1 servers (trio-mcp's venv).

    python bench/peers/http_trio.py PORT --json-response   # trio-mcp, every answer JSON
    python bench/peers/http_trio.py PORT --floor           # the HTTP floor, JSON answers
    python bench/peers/http_trio.py PORT --floor --sse     # the HTTP floor, SSE answers
    ... --server llhttp|hypercorn                          # which server (default hypercorn)

``--json-response`` serves ``examples/task_server.py``'s App (its ``build_app``, its GC
tuning) through ``trio_mcp.serve_http(..., json_response=True)``: the same server as
``examples/task_server.py --http 127.0.0.1:PORT`` except that a ``tools/call`` is answered
``application/json`` instead of ``text/event-stream``.

``--floor`` is what HTTP alone costs on this stack: a fixed-answer ASGI app (it reads
the request body and answers one constant JSON-RPC result, whatever was asked) on the
same hypercorn Trio worker with the same configuration as ``serve_http`` (backlog 1024,
no access log, graceful timeout 0.5 s), or with ``--server llhttp`` on trio-mcp's own
llhttp server (``Http11Server`` with ``serve_http``'s default settings). With ``--sse``
the constant answer is one SSE event (``text/event-stream``, chunked, as trio-mcp's SSE
answers are framed).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from functools import partial
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import trio  # noqa: E402

ANSWER = (b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],'
          b'"isError":false,"protocolVersion":"2025-11-25"}}')
JSON_HEADERS = [(b"content-type", b"application/json"),
                (b"content-length", str(len(ANSWER)).encode())]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
SSE_ANSWER = b"event: message\ndata: " + ANSWER + b"\n\n"


def floor_app(sse: bool) -> Any:
    start = {"type": "http.response.start", "status": 200,
             "headers": SSE_HEADERS if sse else JSON_HEADERS}
    body = {"type": "http.response.body", "body": SSE_ANSWER if sse else ANSWER}
    if sse:
        body["more_body"] = True
    end = {"type": "http.response.body", "body": b""}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        while True:  # the whole request body, as any JSON-RPC endpoint reads it
            message = await receive()
            if not message.get("more_body"):
                break
        await send(start)
        await send(body)
        if sse:
            await send(end)

    return app


async def serve_floor(port: int, sse: bool) -> None:
    """``floor_app`` on hypercorn's Trio worker, configured as ``trio_mcp.serve_http`` does."""
    import hypercorn.config
    import hypercorn.trio

    config = hypercorn.config.Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.backlog = 1024
    config.errorlog = logging.getLogger("hypercorn.error")
    config.accesslog = None
    config.graceful_timeout = 0.5
    await hypercorn.trio.serve(floor_app(sse), config)


async def serve_floor_llhttp(port: int, sse: bool) -> None:
    """``floor_app`` on trio-mcp's llhttp server, with ``serve_http``'s default settings."""
    from trio_mcp import HttpServerSettings
    from trio_mcp.transports._http11._server import Http11Server

    settings = HttpServerSettings()
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1", backlog=settings.backlog)
    await Http11Server(floor_app(sse), settings).serve(listeners)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--json-response", action="store_true")
    mode.add_argument("--floor", action="store_true")
    parser.add_argument("--sse", action="store_true", help="the floor answers SSE")
    parser.add_argument("--server", choices=("llhttp", "hypercorn"), default="hypercorn")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if args.floor:
        trio.run(serve_floor_llhttp if args.server == "llhttp" else serve_floor, args.port,
                 args.sse)
        return
    import trio_mcp
    from examples.task_server import _tune_gc, build_app

    app = build_app()
    _tune_gc()
    trio.run(partial(trio_mcp.serve_http, app, "127.0.0.1", args.port, json_response=True,
                     server=args.server))


if __name__ == "__main__":
    main()
