"""The ``trio-mcp`` command, run as real subprocesses (``python -m trio_mcp``).

Every subcommand and every exit status (0 success, 1 error result, 2 usage,
protocol or connection error). No test asserts a duration.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp
from trio_mcp._cli._commands import load_example_server
from trio_mcp._cli._connect import CliError
from trio_mcp._cli._main import describe_error
from trio_mcp._cli._terminal import _convert, _elicit_action, elicit_reply

from tests.cli_support import (
    CLI,
    SERVER,
    TOKEN,
    ctrl_c,
    one_line_error,
    read_until,
    run_cli,
    run_cli_here,
    serving,
    start_cli,
)
from tests.helpers import ROOT

pytestmark = pytest.mark.timeout(90)



# --- help ---------------------------------------------------------------------------------


def test_cli_help_lists_the_commands() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    for command in ("demo", "call", "tasks", "resources", "prompts", "serve-example"):
        assert command in proc.stdout
    assert "demo-agent-b" not in proc.stdout  # internal to `demo --transport ws`
    assert "exit status" in proc.stdout


@pytest.mark.parametrize(
    "command", ["demo", "call", "tasks", "resources", "prompts", "serve-example"])
def test_cli_each_command_has_help(command: str) -> None:
    proc = run_cli_here(command, "--help")
    assert proc.returncode == 0
    assert f"usage: trio-mcp {command}" in proc.stdout


def test_cli_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert trio_mcp.__version__ in proc.stdout


def test_cli_console_script_is_installed() -> None:
    script = shutil.which("trio-mcp", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the trio-mcp console script is not installed in this environment")
    proc = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert trio_mcp.__version__ in proc.stdout


def test_cli_usage_errors_exit_2() -> None:
    # The real command once (the interpreter's exit status and stderr), then main() itself.
    none = run_cli()  # no command
    assert none.returncode == 2
    assert none.stderr.startswith("usage: trio-mcp") and "required: COMMAND" in none.stderr
    assert run_cli_here().returncode == 2
    assert run_cli_here("call", "echo").returncode == 2  # neither --stdio nor --ws
    assert run_cli_here("call", "--stdio", SERVER, "--ws", "ws://x/", "echo").returncode == 2
    both = run_cli_here("call", "--ws", "ws://x/", "--http", "http://x/mcp", "echo")
    assert both.returncode == 2
    assert "--http: not allowed with argument --ws" in both.stderr
    for command in ("tasks", "resources", "prompts"):
        proc = run_cli_here(command, "list", "--stdio", SERVER, "--http", "http://x/mcp")
        assert proc.returncode == 2, command
        assert "argument --http: not allowed with argument --stdio" in proc.stderr
        neither = run_cli_here(command, "list")
        assert "one of the arguments --stdio --ws --http is required" in neither.stderr


# --- the pieces, in process ------------------------------------------------------------------


def test_cli_elicit_reply_is_content_or_a_whole_result() -> None:
    assert elicit_reply('{"approve": true}') == trio_mcp.ElicitResult("accept", {"approve": True})
    assert elicit_reply('{"action": "decline"}') == trio_mcp.ElicitResult("decline")
    assert elicit_reply('{"action": "accept", "content": {"a": 1}}') == trio_mcp.ElicitResult(
        "accept", {"a": 1})
    # "action" beside other keys is just content.
    assert elicit_reply('{"action": "x", "b": 2}').content == {"action": "x", "b": 2}
    for bad in ("yes", "[1]", '{"action": "cancel", "content": 3}'):
        with pytest.raises(ValueError):
            elicit_reply(bad)


def test_cli_terminal_converts_answers_to_the_schema_type() -> None:
    assert _convert("y", "boolean", []) is True
    assert _convert("No", "boolean", []) is False
    assert _convert("42", "integer", []) == 42
    assert _convert("2.5", "number", []) == 2.5
    assert _convert("red", "string", ["red", "blue"]) == "red"
    for text, kind, choices in (("maybe", "boolean", []), ("4.2", "integer", []),
                                ("green", "string", ["red", "blue"])):
        with pytest.raises(ValueError):
            _convert(text, kind, choices)


def test_cli_describe_error_finds_known_errors_in_groups() -> None:
    group = BaseExceptionGroup("x", [KeyError("bug"), trio_mcp.ConnectionClosed("gone")])
    assert describe_error(group) == "connection closed: gone"
    assert describe_error(ExceptionGroup("x", [KeyError("bug")])) is None
    assert describe_error(trio_mcp.RemoteError(-32602, "nope")) == (
        "the server answered with an error: nope (code -32602)")


# --- call over stdio ------------------------------------------------------------------------


def test_cli_call_approve_as_task_prints_json_result() -> None:
    proc = run_cli("call", "--stdio", SERVER, "approve", "--args", '{"question":"ship?"}',
                   "--task", "--elicit-reply", '{"approve": true}', "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # stdout holds the result object and nothing else
    assert result["isError"] is False
    assert "approved" in json.dumps(result)
    assert "input_required" in proc.stderr  # the live status went to stderr


def test_cli_call_summarize_hosts_sampling_as_a_task() -> None:
    proc = run_cli("call", "--stdio", SERVER, "summarize", "--args", '{"text":"x"}',
                   "--task", "--sampling-reply", "hello", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["content"][0]["text"] == "hello"
    assert re.search(r"sampling request from the server \(hosted as task [0-9a-f]+\)",
                     proc.stderr), proc.stderr


def test_cli_call_plain_shows_status_and_progress_on_stderr() -> None:
    proc = run_cli("call", "--stdio", SERVER, "sleep", "--args",
                   '{"seconds": 0.2, "steps": 2}', "--task", "--ttl", "60000")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "slept 0.2 seconds\n"
    assert "progress 2/2" in proc.stderr
    assert "completed" in proc.stderr


def test_cli_call_without_task() -> None:
    proc = run_cli("call", "--stdio", SERVER, "echo", "--args", '{"text": "hi"}', "--quiet")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "hi\n", "")


@pytest.mark.parametrize("as_task", [False, True], ids=["plain", "task"])
def test_cli_call_error_result_exits_1(as_task: bool) -> None:
    proc = run_cli("call", "--stdio", SERVER, "fail", "--args", '{"message": "boom"}',
                   "--json", *(["--task"] if as_task else []))
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["isError"] is True
    assert result["content"][0]["text"] == "boom"


def test_cli_call_elicitation_asked_on_the_terminal() -> None:
    approve = ["call", "--stdio", SERVER, "approve", "--args", '{"question": "ship?"}', "--task"]
    accepted = run_cli(*approve, stdin="a\ny\n")
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stdout == "approved: ship?\n"
    assert "ship?" in accepted.stderr and "[y/n]" in accepted.stderr
    declined = run_cli(*approve, stdin="d\n")
    assert declined.stdout == "declined: ship?\n"
    by_option = run_cli(*approve, "--elicit-reply", '{"action": "decline"}')
    assert by_option.stdout == "declined: ship?\n"


def test_cli_call_sampling_asked_on_the_terminal() -> None:
    summarize = ["call", "--stdio", SERVER, "summarize", "--args", '{"text": "x"}']
    answered = run_cli(*summarize, stdin="typed by a human\n")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "typed by a human\n"
    rejected = run_cli(*summarize, stdin="")  # end of input rejects the request
    assert rejected.returncode == 1
    assert "User rejected sampling request" in rejected.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stdio", "trio-mcp-no-such-command", "echo"], "No such file"),
        (["--stdio", SERVER, "no_such_tool"], "has no tool 'no_such_tool'"),
        (["--stdio", SERVER, "approve"], "add --task"),
        (["--stdio", SERVER, "echo", "--task"], "without --task"),
        (["--stdio", SERVER, "echo", "--args", "[1]"], "--args must be a JSON object"),
        (["--stdio", SERVER, "echo", "--args", "{"], "--args is not JSON"),
        (["--stdio", SERVER, "approve", "--task", "--elicit-reply", "yes"], "not JSON"),
        (["--stdio", f"{shlex.quote(sys.executable)} -c pass", "echo"], "connection closed"),
        (["--stdio", SERVER, "echo", "--token", "t"], "--token only applies to --ws or --http"),
        (["--stdio", SERVER, "echo", "--ttl", "5"], "--ttl only applies with --task"),
        (["--ws", "http://127.0.0.1:1/", "echo"], "not a WebSocket URL"),
        (["--ws", "ws://127.0.0.1:1/", "echo"], "cannot connect to ws://127.0.0.1:1/: "),
    ],
    ids=["no-command", "unknown-tool", "needs-task", "forbids-task", "args-not-object",
         "args-not-json", "bad-reply", "server-exits", "token-without-ws", "ttl-without-task", "bad-url",
         "refused"],
)
def test_cli_call_failures_exit_2_with_one_line(args: list[str], message: str) -> None:
    proc = run_cli_here("call", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in one_line_error(proc)
    assert proc.stdout == ""


# --- tasks and serve-example --------------------------------------------------------------


def test_cli_tasks_over_stdio() -> None:
    listed = run_cli("tasks", "--stdio", SERVER, "list")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"tasks": []}  # a fresh server process has none
    unknown = run_cli("tasks", "--stdio", SERVER, "get", "no-such-task")
    assert unknown.returncode == 2
    assert "Task not found" in one_line_error(unknown)


def test_cli_serve_example_over_stdio() -> None:
    server = shlex.join([*CLI, "serve-example"])
    proc = run_cli("call", "--stdio", server, "echo", "--args", '{"text": "served"}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "served\n"


def test_cli_serve_example_needs_the_examples_directory(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="source checkout"):
        load_example_server(tmp_path / "task_server.py")


@pytest.fixture(scope="module")
def ws_url() -> Iterator[str]:
    """``trio-mcp serve-example --ws 127.0.0.1:0 --token TOKEN`` as a subprocess."""
    with serving([*CLI, "serve-example", "--ws", "127.0.0.1:0", "--token", TOKEN]) as (url, _):
        yield url


def test_cli_call_over_websocket(ws_url: str) -> None:
    proc = run_cli("call", "--ws", ws_url, "--token", TOKEN, "sleep", "--args",
                   '{"seconds": 0.1, "steps": 1}', "--task", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "slept 0.1 seconds"


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["no-token", "wrong-token"])
def test_cli_websocket_without_a_valid_token_exits_2(ws_url: str, token: str | None) -> None:
    proc = run_cli("call", "--ws", ws_url, *(["--token", token] if token else []), "echo",
                   "--args", '{"text": "x"}')
    assert proc.returncode == 2
    assert "HTTP 401" in one_line_error(proc)


def tasks_cli(ws_url: str, *args: str) -> tuple[int, Any]:
    """Run ``trio-mcp tasks --ws URL --token TOKEN ARGS``; return (status, JSON or stderr)."""
    proc = run_cli("tasks", "--ws", ws_url, "--token", TOKEN, "--quiet", *args)
    if proc.returncode == 2:
        return 2, one_line_error(proc)
    return proc.returncode, json.loads(proc.stdout)


def test_cli_tasks_outlive_the_connection_that_made_them(ws_url: str) -> None:
    called = run_cli("call", "--ws", ws_url, "--token", TOKEN, "fail", "--args",
                     '{"message": "kept"}', "--task", "--json")
    assert called.returncode == 1
    task_id = json.loads(called.stdout)["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]

    status, listed = tasks_cli(ws_url, "list")
    assert status == 0
    assert task_id in [task["taskId"] for task in listed["tasks"]]
    status, task = tasks_cli(ws_url, "get", task_id)
    assert (status, task["status"]) == (0, "failed")
    status, result = tasks_cli(ws_url, "result", task_id, "--json")
    assert (status, result["content"][0]["text"]) == (1, "kept")  # an error result: 1
    printed = run_cli("tasks", "--ws", ws_url, "--token", TOKEN, "--quiet", "result", task_id)
    assert (printed.returncode, printed.stdout) == (1, "kept\n")  # as call prints it
    status, message = tasks_cli(ws_url, "cancel", task_id)
    assert status == 2
    assert "already in terminal status" in message


async def test_cli_tasks_cancel_a_running_task(ws_url: str) -> None:
    client = trio_mcp.App("test-client")
    async with trio_mcp.open_websocket_client(ws_url, client, token=TOKEN) as peer:
        handle = await peer.call_tool_task("sleep", {"seconds": 60})
    # That connection is closed; the task lives on, bound to the token's identity.
    proc = await trio.run_process(
        [*CLI, "tasks", "--ws", ws_url, "--token", TOKEN, "cancel", handle.task_id],
        capture_stdout=True, capture_stderr=True, check=False, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "cancelled"


# --- demo ---------------------------------------------------------------------------------
# The demo runs twice: in memory answering interactively, and over WebSocket (two
# processes) answering automatically. --fast shortens its delays tenfold.


def check_demo_output(proc: subprocess.CompletedProcess[str]) -> list[list[str]]:
    """Check a plain-mode demo run and return its summary rows."""
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # plain mode when piped
    out = proc.stdout
    assert "A hosts task" in out  # the sampling, hosted by A as a task
    assert "its task is input_required" in out  # B's elicitation
    assert "cancels crunch_numbers" in out
    summary = out[out.index("Summary:"):].splitlines()[2:]
    rows = [line.split() for line in summary if line.strip()]
    statuses = {(row[0], row[2]): row[-2] for row in rows}
    assert statuses == {
        ("B", "write_report:"): "completed",
        ("B", "crunch_numbers:"): "cancelled",
        ("B", "check_links:"): "failed",
        ("A", "sampling:"): "completed",
    }
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{32}", row[1])
        assert re.fullmatch(r"\d+\.\d+s", row[-1])
    return rows


def test_cli_demo_in_memory_interactive() -> None:
    proc = run_cli("demo", "--fast", "--interactive", stdin="a\ny\nshipped by a test\n")
    check_demo_output(proc)
    assert "Agent B asks: Publish the report" in proc.stderr  # the prompt
    assert "published (note: shipped by a test)" in proc.stdout


def test_cli_demo_over_websocket() -> None:
    proc = run_cli("demo", "--fast", "--transport", "ws")
    check_demo_output(proc)
    assert "serves over WebSocket on 127.0.0.1" in proc.stdout
    assert "answering yes" in proc.stdout


# --- sharp edges: Ctrl-C, timeouts, options, not-a-server, the demo's prompts and view ------


#: A "server" that says it started (and its pid) on stderr, then never answers.
SILENT_SERVER = shlex.join([sys.executable, "-c", (
    "import os, sys, time; sys.stderr.write(f'started {os.getpid()}\\n'); sys.stderr.flush(); "
    "time.sleep(100)")])


@pytest.mark.parametrize("attempt", range(3))
def test_cli_ctrl_c_before_initialize_exits_130_quietly(attempt: int) -> None:
    """Sharp edge 2: Ctrl-C while the server has not answered initialize.

    The server runs in its own session: the terminal's SIGINT reaches the CLI
    only (no KeyboardInterrupt traceback from the server, no TrioInternalError),
    and the CLI stops the server itself.
    """
    proc = start_cli("call", "--stdio", SILENT_SERVER, "echo")
    pid = int(read_until(proc, r"started (\d+)").group(1))
    status, out, err = ctrl_c(proc)
    assert (status, out, err) == (130, "", "trio-mcp: interrupted\n")
    with pytest.raises(ProcessLookupError):  # stopped (SIGTERM after the grace) and reaped
        os.kill(pid, 0)


def test_cli_ctrl_c_during_a_task_over_stdio_is_quiet() -> None:
    """Sharp edge 4: no traceback from the example server; the message says the task ended."""
    proc = start_cli("call", "--stdio", SERVER, "sleep", "--args", '{"seconds": 60}', "--task")
    task_id = read_until(proc, r"task ([0-9a-f]{32}) created").group(1)
    status, _, err = ctrl_c(proc)
    assert status == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"trio-mcp: interrupted; task {task_id} stopped with the server process")


def test_cli_ctrl_c_during_a_task_over_websocket_names_the_task(ws_url: str) -> None:
    """Sharp edge 4: over --ws the task keeps running; the message says how to fetch it."""
    proc = start_cli("call", "--ws", ws_url, "--token", TOKEN, "sleep", "--args",
                     '{"seconds": 60}', "--task")
    task_id = read_until(proc, r"task ([0-9a-f]{32}) created").group(1)
    status, _, err = ctrl_c(proc)
    assert status == 130, err
    assert err.splitlines()[-1] == (
        f"trio-mcp: interrupted; task {task_id} keeps running on the server; fetch its "
        f"result with: trio-mcp tasks --ws {ws_url} --token TOKEN result {task_id}")
    assert tasks_cli(ws_url, "get", task_id)[1]["status"] == "working"  # it does keep running
    assert tasks_cli(ws_url, "cancel", task_id)[0] == 0


def test_cli_help_documents_exit_130_and_timeout() -> None:
    for args in (["--help"], ["call", "--help"]):
        out = run_cli_here(*args).stdout
        assert "130 interrupted" in out, args
        assert "--timeout" in out, args


def test_cli_timeout_bounds_the_initialize_handshake() -> None:
    """Sharp edge 3: a server that never answers initialize no longer hangs the CLI."""
    proc = run_cli_here("call", "--stdio", SILENT_SERVER, "echo", "--timeout", "0.5")
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"trio-mcp: {SILENT_SERVER!r} did not answer initialize within 0.5 s: is it an MCP "
        "server? (--timeout SECONDS waits longer)")


@pytest.mark.parametrize("as_task", [False, True], ids=["plain", "task"])
def test_cli_timeout_bounds_the_call(as_task: bool) -> None:
    # --timeout applies to initialize, then afresh to the call: 8 s lets even a
    # loaded machine start the server; the call (10 minutes) cannot finish.
    proc = run_cli_here("call", "--stdio", SERVER, "sleep", "--args", '{"seconds": 600}',
                        "--timeout", "8", *(["--task"] if as_task else []))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith("trio-mcp: no result within --timeout 8 s"), line
    assert ("stopped with the server process" in line) is as_task


def test_cli_rejects_a_timeout_that_is_not_positive() -> None:
    for bad in ("0", "-1", "soon"):
        proc = run_cli_here("call", "--stdio", SERVER, "echo", "--timeout", bad)
        assert proc.returncode == 2 and "--timeout" in proc.stderr, bad


def test_cli_tasks_options_after_the_action() -> None:
    """Sharp edge 13: `tasks ... list -q` and friends; the options go either side."""
    # The real command once (nothing on stderr, the server's included), then main().
    for run, args in ((run_cli, ["--stdio", SERVER, "list", "-q"]),
                      (run_cli_here, ["list", "--stdio", SERVER, "--quiet"]),
                      (run_cli_here, ["-q", "list", "--stdio", SERVER, "--timeout", "30"])):
        proc = run("tasks", *args)
        assert (proc.returncode, proc.stderr) == (0, ""), args
        assert json.loads(proc.stdout) == {"tasks": []}
    unknown = run_cli_here("tasks", "get", "no-such-task", "--stdio", SERVER, "-q")
    assert unknown.returncode == 2 and "Task not found" in one_line_error(unknown)
    for args in (["list"], ["--stdio", SERVER, "list", "--ws", "ws://127.0.0.1:1/"]):
        proc = run_cli_here("tasks", *args)
        assert proc.returncode == 2, args
        assert "usage: trio-mcp tasks list" in proc.stderr


def test_cli_a_program_that_echoes_is_not_an_mcp_server() -> None:
    """Sharp edge 13: `--stdio cat` answered our initialize with our own error."""
    proc = run_cli_here("call", "--stdio", "cat", "echo")
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "trio-mcp: 'cat' is not an MCP server: it sent our own messages back "
        "(it echoes its input)")


def test_cli_describe_error_initialize_method_not_found() -> None:
    echoed = trio_mcp.RemoteError(-32601, "Method not found: initialize (this side is a client)")
    assert describe_error(echoed) == (
        "the other side is not an MCP server: it sent our own messages back "
        "(it echoes its input)")
    other = trio_mcp.RemoteError(-32601, "Method not found: initialize")
    assert describe_error(other) == (
        "the other side is not an MCP server: it does not know initialize "
        "(Method not found: initialize)")


@pytest.mark.parametrize(
    ("typed", "action"),
    [("", "accept"), ("a", "accept"), ("Accept", "accept"), ("d", "decline"),
     (" DECL ", "decline"), ("c", "cancel"), ("cancel", "cancel"), ("maybe", None),
     ("y", None), ("x", None)],
)
def test_cli_terminal_elicit_choice(typed: str, action: str | None) -> None:
    assert _elicit_action(typed) == action


def test_cli_demo_interactive_asks_again_on_an_unknown_answer() -> None:
    """Sharp edge 13: "maybe" is not an Accept; the question comes again, "d" declines."""
    proc = run_cli("demo", "--fast", "--interactive", stdin="maybe\nd\n")
    assert proc.returncode == 0, proc.stderr
    assert "answer a (accept, the default), d (decline) or c (cancel)" in proc.stderr
    assert "keeps the report as a draft (A answered decline)" in proc.stdout


def test_cli_demo_live_view_fits_an_80x24_terminal() -> None:
    """Sharp edge 13: the table and the story panel fit; input_required is never cut."""
    pytest.importorskip("rich", reason="the live view needs rich (the `cli` extra)")
    from rich.console import Console

    from trio_mcp._cli._demo_view import Board, RichView

    async def render() -> str:
        board = Board()
        labels = ["write_report: tasks in trio-mcp", "crunch_numbers: 40 rows",
                  "check_links: 12 links", "sampling: a draft for B"]
        for n, label in enumerate(labels):
            board.apply({"op": "task", "host": "AB"[n < 3], "id": f"{n}" * 32,
                         "label": label, "status": "working"})
        board.apply({"op": "task", "host": "B", "id": "0" * 32, "label": labels[0],
                     "status": "input_required",
                     "message": "Publish the report on tasks in trio-mcp? " * 2})
        board.apply({"op": "progress", "host": "A", "id": "3" * 32, "progress": 40,
                     "total": 40, "message": "polishing the draft for agent B " * 3})
        for n in range(12):  # long story lines, as the demo's result line is
            board.apply({"op": "say", "who": "A", "text": f"line {n} " + "word " * 40})
        console = Console(width=80, height=24, record=True, force_terminal=True,
                          color_system=None)
        console.print(RichView(board, console, "trio-mcp demo: agent A ⇄ agent B").render())
        return console.export_text()

    text = trio.run(render)
    lines = text.splitlines()
    assert len(lines) <= 23, text  # leaves the line the cursor rests on
    assert all(len(line) <= 80 for line in lines), text
    assert "input_required" in text
    assert "40/40" in text  # progress is never cut either
    assert "story" in text and "line 11" in text  # the newest story line is on screen
