"""A small MCP server on the Python SDK ``mcp`` 2.3.0 (``MCPServer``), for our client.

    python mcp230_server.py                        # stdio
    python mcp230_server.py --http 127.0.0.1:8000  # Streamable HTTP at http://127.0.0.1:8000/mcp

Runs under ``.interop/mcp230`` (not our venv). The same server answers 2025-11-25 and
2026-07-28 on both transports (the SDK chooses per request). It offers:

* tool ``add {a, b}`` -> ``"<a+b>"`` (plain);
* tool ``greet`` -> ``"Hello, <name>!"``: its parameter is ``Annotated[Name,
  Resolve(ask_name)]`` where the resolver returns ``Elicit(...)``: on 2026-07-28 an
  ``InputRequiredResult`` (multi round-trip request), on 2025-11-25 an
  ``elicitation/create`` request;
* tool ``confirm {action}``: the by-hand way: returns an ``InputRequiredResult`` with the
  elicitation under the key ``confirm`` and a ``request_state``, and reads
  ``ctx.input_responses`` / ``ctx.request_state`` on the retry: ``"<action>: yes
  (state <state>)"``;
* tool ``era`` -> the protocol version of the request (``ctx.protocol_version``);
* prompt ``hello {name}``, resource ``test://hello`` (text ``"hello from mcp 2.3.0"``).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Annotated

import mcp_types as t
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel

warnings.simplefilter("ignore", DeprecationWarning)

STATE = "confirm-state-1"

app = MCPServer("mcp230-interop", version="2.3.0-test", instructions="mcp 2.3.0 interop server",
                log_level="WARNING")


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@app.tool(description="Adds two integers")
def add(a: int, b: int) -> str:
    return str(a + b)


@app.tool(description="Asks the user's name (Resolve(Elicit)) and greets them")
def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    return f"Hello, {who.name}!"


@app.tool(description="Asks for a confirmation by returning an InputRequiredResult by hand")
def confirm(action: str, ctx: Context) -> str | t.InputRequiredResult:
    responses = ctx.input_responses or {}
    answer = responses.get("confirm")
    if answer is None:
        return t.InputRequiredResult(
            input_requests={
                "confirm": t.ElicitRequest(params=t.ElicitRequestFormParams(
                    message=f"Really {action}?",
                    requested_schema={
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                )),
            },
            request_state=STATE,
        )
    content = getattr(answer, "content", None) or {}
    ok = "yes" if content.get("ok") is True else "no"
    return f"{action}: {ok} (state {ctx.request_state})"


@app.tool(description="The protocol version of this request")
def era(ctx: Context) -> str:
    return str(ctx.protocol_version)


@app.prompt(description="Greets someone")
def hello(name: str) -> str:
    return f"Say hello to {name}."


@app.resource("test://hello", name="hello", mime_type="text/plain")
def hello_resource() -> str:
    return "hello from mcp 2.3.0"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", metavar="HOST:PORT")
    args = parser.parse_args()
    if args.http:
        host, _, port = args.http.rpartition(":")
        app.run("streamable-http", host=host, port=int(port), streamable_http_path="/mcp")
    else:
        app.run()


if __name__ == "__main__":
    sys.exit(main())
