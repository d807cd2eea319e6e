"""``trio-mcp resources``, ``prompts`` and log messages, against ``examples/everything_server.py``.

Every command runs as a real subprocess (``python -m trio_mcp``); the server
runs over stdio, WebSocket and Streamable HTTP. No test asserts a duration.
"""

from __future__ import annotations

import base64
import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import SERVER, one_line_error, run_cli, run_cli_here, serving
from tests.helpers import EXAMPLES

pytestmark = pytest.mark.timeout(120)

EVERYTHING = shlex.join([sys.executable, str(EXAMPLES / "everything_server.py")])
STDIO = ["--stdio", EVERYTHING]
#: The conformance fixture's 1x1 PNG (examples/everything_server.py's ``PNG``).
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


@pytest.fixture(scope="module", params=["stdio", "ws", "http"])
def target(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The connection options for the everything server over each transport."""
    if request.param == "stdio":
        yield STDIO
        return
    argv = [sys.executable, str(EXAMPLES / "everything_server.py"), f"--{request.param}",
            "127.0.0.1:0"]
    with serving(argv, request.param) as (url, _):
        yield [f"--{request.param}", url]


# --- over every transport ---------------------------------------------------------------------


def test_cli_resources_list_and_read(target: list[str]) -> None:
    listed = run_cli("resources", "list", *target, "-q")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "test://static-text  static-text  text/plain",
        "test://static-binary  static-binary  image/png",
        "test://watched-resource  watched-resource  text/plain",
    ]
    read = run_cli("resources", "read", "test://template/7/data", *target, "-q")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == {"id": "7", "templateTest": True, "data": "Data for ID: 7"}


def test_cli_prompts_list_and_get(target: list[str]) -> None:
    listed = run_cli("prompts", "list", *target, "-q")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "test_simple_prompt()  Simple Test Prompt",
        "test_prompt_with_arguments(arg1, arg2)  Prompt With Arguments",
        "test_prompt_with_embedded_resource(resourceUri)  Prompt With Embedded Resource",
        "test_prompt_with_image()  Prompt With Image",
        "test_input_required_result_prompt()  MRTR: prompt that requires elicitation input",
    ]
    got = run_cli("prompts", "get", "test_prompt_with_arguments", "--args",
                  '{"arg1": "a", "arg2": "b"}', *target, "-q")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == [
        "# A prompt with required arguments",
        "user: Prompt with arguments: arg1='a', arg2='b'",
    ]


def test_cli_call_shows_the_servers_log_messages(target: list[str]) -> None:
    proc = run_cli("call", "test_tool_with_logging", *target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Tool with logging executed successfully\n"  # logs never on stdout
    logs = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert logs == ["[info] Tool execution started", "[info] Tool processing data",
                    "[info] Tool execution completed"]


# --- resources ---------------------------------------------------------------------------------


def test_cli_resources_list_templates_and_json() -> None:
    templates = run_cli("resources", "list", "--templates", *STDIO, "-q")
    assert templates.returncode == 0, templates.stderr
    assert templates.stdout == "test://template/{id}/data  template  application/json\n"
    raw = run_cli("resources", *STDIO, "list", "--json")
    assert raw.returncode == 0, raw.stderr
    resources = json.loads(raw.stdout)["resources"]
    assert resources[0]["uri"] == "test://static-text"
    assert resources[0]["annotations"] == {"audience": ["user"], "priority": 0.5}
    assert "resources/list" in raw.stderr  # the status line without -q


def test_cli_resources_read_text_blob_and_out(tmp_path: Path) -> None:
    text = run_cli("resources", "read", "test://static-text", *STDIO, "-q")
    assert (text.returncode, text.stdout) == (
        0, "This is the content of the static text resource.\n"), text.stderr
    blob = run_cli("resources", "read", "test://static-binary", *STDIO, "-q")
    assert blob.returncode == 0, blob.stderr
    assert blob.stdout == (
        f"<blob test://static-binary: {len(PNG)} bytes, image/png; --out FILE saves it>\n")
    out = tmp_path / "image.png"
    saved = run_cli("resources", "read", "test://static-binary", "--out", str(out), *STDIO)
    assert (saved.returncode, saved.stdout) == (0, ""), saved.stderr
    assert out.read_bytes() == PNG
    assert f"wrote {len(PNG)} bytes to {out}" in saved.stderr
    raw = run_cli("resources", "read", "test://static-binary", "--json", *STDIO, "-q")
    assert json.loads(raw.stdout)["contents"][0]["blob"] == base64.b64encode(PNG).decode()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["read", "test://nope", *STDIO], "Resource not found (code -32002)"),
        (["read", "test://static-text", "--out", "x", "--json", *STDIO],
         "--out and --json do not go together"),
        (["read", "test://static-text", "--out", "/no/such/dir/f", *STDIO], "cannot write"),
        (["list", "--stdio", SERVER], "the server does not offer resources"),
    ],
    ids=["unknown-uri", "out-and-json", "unwritable", "no-resources"],
)
def test_cli_resources_failures_exit_2(args: list[str], message: str) -> None:
    proc = run_cli_here("resources", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in one_line_error(proc)
    assert proc.stdout == ""


# --- prompts -----------------------------------------------------------------------------------


def test_cli_prompts_get_shows_images_and_embedded_resources() -> None:
    image = run_cli("prompts", "get", "test_prompt_with_image", *STDIO, "-q")
    assert image.returncode == 0, image.stderr
    assert image.stdout.splitlines() == [
        "# A prompt that includes image content",
        "user: [image image/png]",
        "user: Please analyze the image above.",
    ]
    embedded = run_cli("prompts", "get", "test_prompt_with_embedded_resource", *STDIO, "-q",
                       "--args", '{"resourceUri": "test://doc"}')
    assert embedded.stdout.splitlines()[1] == (
        "user: [resource test://doc] Embedded resource content for testing.")
    raw = run_cli("prompts", "get", "test_simple_prompt", "--json", *STDIO, "-q")
    assert json.loads(raw.stdout)["messages"] == [
        {"role": "user", "content": {"type": "text",
                                     "text": "This is a simple prompt for testing."}}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get", "test_prompt_with_arguments", *STDIO],
         "Missing required arguments for prompt test_prompt_with_arguments: arg1, arg2"),
        (["get", "test_prompt_with_arguments", "--args", '{"arg1": 1}', *STDIO],
         "--args: prompt arguments are strings; not arg1"),
        (["get", "x", "--args", "[]", *STDIO], "--args must be a JSON object"),
        (["list", "--stdio", SERVER], "the server does not offer prompts"),
    ],
    ids=["missing-argument", "not-a-string", "not-an-object", "no-prompts"],
)
def test_cli_prompts_failures_exit_2(args: list[str], message: str) -> None:
    proc = run_cli_here("prompts", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in one_line_error(proc)


# --- log messages and --log-level ----------------------------------------------------------------


def test_cli_call_log_level_filters_the_servers_messages() -> None:
    proc = run_cli("call", "test_log_levels", *STDIO, "--log-level", "error")
    assert (proc.returncode, proc.stdout) == (0, "logged\n"), proc.stderr
    logs = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert logs == [f'[{level} everything-server] {{"level": "{level}"}}'
                    for level in ("error", "critical", "alert", "emergency")]


#: A bare stdio MCP server declaring tools only: any other method is -32601.
BARE_SERVER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, answer = msg["method"], {"jsonrpc": "2.0", "id": msg["id"]}
    if method == "initialize":
        answer["result"] = {"protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "bare", "version": "1"}}
    elif method == "tools/list":
        answer["result"] = {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        answer["result"] = {"content": [{"type": "text", "text": "hello"}]}
    else:
        answer["error"] = {"code": -32601, "message": "Method not found: " + method}
    print(json.dumps(answer), flush=True)
"""


def test_cli_call_log_level_without_logging_on_the_server() -> None:
    """A server that does not declare logging is not sent logging/setLevel (it would be -32601)."""
    bare = shlex.join([sys.executable, "-c", BARE_SERVER])
    proc = run_cli_here("call", "hi", "--stdio", bare, "--log-level", "debug")
    assert (proc.returncode, proc.stdout) == (0, "hello\n"), proc.stderr
    assert "the server does not declare logging: --log-level debug not sent" in proc.stderr
    for command in ("resources", "prompts"):
        refused = run_cli_here(command, "list", "--stdio", bare)
        assert refused.returncode == 2
        assert one_line_error(refused) == (
            f"trio-mcp: the server does not offer {command} (it did not declare them)")


def test_cli_call_quiet_hides_log_messages_and_bad_levels_are_refused() -> None:
    quiet = run_cli("call", "test_tool_with_logging", *STDIO, "-q")
    assert (quiet.returncode, quiet.stderr) == (0, "")
    bad = run_cli_here("call", "test_log_levels", *STDIO, "--log-level", "loud")
    assert bad.returncode == 2
    assert "argument --log-level: invalid choice: 'loud'" in bad.stderr
