"""Serve ``examples/task_server.py``'s tools over Streamable HTTP, for outside judges.

Usage: ``python tests/interop/http_task_server.py PORT [--stateless] [--json]``;
the endpoint is ``http://127.0.0.1:PORT/mcp``. Runs until interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from functools import partial
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import trio_mcp  # noqa: E402
from tests.helpers import example_app  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true", help="answer every request with JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    serve = partial(trio_mcp.serve_http, example_app(), "127.0.0.1", args.port,
                    stateless=args.stateless, json_response=args.json)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve)


if __name__ == "__main__":
    main()
