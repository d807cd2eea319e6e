"""``trio-mcp`` over Streamable HTTP, and durable task stores, as real subprocesses.

``call``/``tasks --http``, ``serve-example --http`` and ``--store``, the
examples' ``--http`` and ``--store`` flags, and a task store that survives a
SIGKILL of the server. No test asserts a duration.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trio_mcp

from tests.cli_support import (
    CLI,
    TOKEN,
    ctrl_c,
    one_line_error,
    read_until,
    run_cli,
    run_cli_here,
    serving,
    start_cli,
)
from tests.helpers import EXAMPLES, HTTP_SERVERS, TASK_SERVER, load_example

pytestmark = pytest.mark.timeout(120)

RELATED = "io.modelcontextprotocol/related-task"
RESTARTED = "The server stopped while this task was running"


@pytest.fixture(scope="module", params=HTTP_SERVERS)
def http_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """``trio-mcp serve-example --http 127.0.0.1:0 --token TOKEN --http-server S`` as a
    subprocess, on each HTTP/1.1 server."""
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0", "--token", TOKEN,
            "--http-server", request.param]
    with serving(argv, "http") as (url, _):
        yield url


def tasks_cli(option: str, url: str, *args: str) -> tuple[int, Any]:
    """Run ``trio-mcp tasks OPTION URL --token TOKEN ARGS``; return (status, JSON or the error)."""
    proc = run_cli("tasks", option, url, "--token", TOKEN, "--quiet", *args)
    if proc.returncode == 2:
        return 2, one_line_error(proc)
    return proc.returncode, json.loads(proc.stdout)


def task_id_of(result: dict[str, Any]) -> str:
    """The related-task id of a ``call --task --json`` result."""
    task_id: str = result["_meta"][RELATED]["taskId"]
    return task_id


# --- call and tasks over --http ----------------------------------------------------------------


def test_cli_http_call_as_a_task_with_progress(http_url: str) -> None:
    proc = run_cli("call", "--http", http_url, "--token", TOKEN, "sleep", "--args",
                   '{"seconds": 0.2, "steps": 2}', "--task", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "slept 0.2 seconds"
    assert "progress 2/2" in proc.stderr
    assert "completed" in proc.stderr


def test_cli_http_call_answers_sampling_and_elicitation(http_url: str) -> None:
    summarize = run_cli("call", "--http", http_url, "--token", TOKEN, "summarize", "--args",
                        '{"text": "x"}', "--task", "--sampling-reply", "over http")
    assert (summarize.returncode, summarize.stdout) == (0, "over http\n"), summarize.stderr
    approve = run_cli("call", "--http", http_url, "--token", TOKEN, "approve", "--args",
                      '{"question": "ship?"}', "--task", "--elicit-reply", '{"approve": true}')
    assert (approve.returncode, approve.stdout) == (0, "approved: ship?\n"), approve.stderr


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["no-token", "wrong-token"])
def test_cli_http_without_a_valid_token_exits_2(http_url: str, token: str | None) -> None:
    proc = run_cli_here("call", "--http", http_url, *(["--token", token] if token else []),
                        "echo", "--args", '{"text": "x"}')
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        "trio-mcp: the server refused the HTTP connection: HTTP 401 "
        "(a missing or unknown --token?)")
    assert proc.stdout == ""


def test_cli_http_wrong_path_is_refused_with_its_status(http_url: str) -> None:
    proc = run_cli_here("call", "--http", http_url.replace("/mcp", "/nope"), "--token", TOKEN,
                        "echo", "--args", '{"text": "x"}')
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"trio-mcp: the server refused the HTTP connection: HTTP 404 (is the path right? "
        f"trio-mcp serves {http_url})")


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_cli_http_cannot_connect_exits_2(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/mcp"
    proc = run_cli("call", "--http", url, "echo")
    assert proc.returncode == 2
    assert one_line_error(proc).startswith(f"trio-mcp: cannot connect to {url}: ")
    bad = run_cli_here("tasks", "list", "--http", "ws://127.0.0.1:1/")
    assert bad.returncode == 2
    assert one_line_error(bad) == "trio-mcp: cannot connect: not an HTTP URL: 'ws://127.0.0.1:1/'"
    token = run_cli_here("call", "--http", url, "--token", "two\nlines", "echo")
    assert token.returncode == 2
    assert one_line_error(token) == "trio-mcp: cannot connect: token must be printable ASCII text"


def test_cli_http_timeout_bounds_the_handshake() -> None:
    """A server that accepts the connection and never answers: --timeout ends the wait."""
    with socket.socket() as silent:  # the kernel accepts; nobody ever reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        proc = run_cli("call", "--http", url, "echo", "--timeout", "0.5")
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"trio-mcp: {url} did not answer initialize within 0.5 s: is it an MCP server? "
        "(--timeout SECONDS waits longer)")


def test_cli_http_tasks_outlive_the_session_that_made_them(http_url: str) -> None:
    called = run_cli("call", "--http", http_url, "--token", TOKEN, "fail", "--args",
                     '{"message": "kept"}', "--task", "--json")
    assert called.returncode == 1
    task_id = task_id_of(json.loads(called.stdout))
    status, listed = tasks_cli("--http", http_url, "list")
    assert status == 0
    assert task_id in [task["taskId"] for task in listed["tasks"]]
    status, task = tasks_cli("--http", http_url, "get", task_id)
    assert (status, task["status"]) == (0, "failed")
    status, result = tasks_cli("--http", http_url, "result", task_id, "--json")
    assert (status, result["content"][0]["text"]) == (1, "kept")
    status, message = tasks_cli("--http", http_url, "cancel", task_id)
    assert status == 2
    assert "already in terminal status" in message


def test_cli_http_ctrl_c_during_a_task_names_the_task(http_url: str) -> None:
    proc = start_cli("call", "--http", http_url, "--token", TOKEN, "sleep", "--args",
                     '{"seconds": 60}', "--task")
    task_id = read_until(proc, r"task ([0-9a-f]{32}) created").group(1)
    status, _, err = ctrl_c(proc)
    assert status == 130, err
    assert err.splitlines()[-1] == (
        f"trio-mcp: interrupted; task {task_id} keeps running on the server; fetch its "
        f"result with: trio-mcp tasks --http {http_url} --token TOKEN result {task_id}")
    assert tasks_cli("--http", http_url, "get", task_id)[1]["status"] == "working"
    assert tasks_cli("--http", http_url, "cancel", task_id)[0] == 0


def test_cli_http_sigterm_during_a_task_names_the_task(http_url: str) -> None:
    """SIGTERM (a service manager, ``timeout``, ``kill``) ends ``call --task`` as Ctrl-C
    does: the task's id and the command that fetches its result; 143 = 128 + SIGTERM."""
    proc = start_cli("call", "--http", http_url, "--token", TOKEN, "sleep", "--args",
                     '{"seconds": 60}', "--task")
    task_id = read_until(proc, r"task ([0-9a-f]{32}) created").group(1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.splitlines()[-1] == (
        f"trio-mcp: terminated (SIGTERM); task {task_id} keeps running on the server; fetch "
        f"its result with: trio-mcp tasks --http {http_url} --token TOKEN result {task_id}")
    assert tasks_cli("--http", http_url, "cancel", task_id)[0] == 0


@pytest.fixture(scope="module")
def open_url() -> Iterator[str]:
    """``trio-mcp serve-example --http 127.0.0.1:0`` without a token."""
    with serving([*CLI, "serve-example", "--http", "127.0.0.1:0"], "http") as (url, _):
        yield url


def test_cli_http_2026_ctrl_c_without_token_gives_the_command_that_fetches_it(
    open_url: str,
) -> None:
    """2026-07-28 over HTTP has no session: a task made without a token is reached by its
    id alone, so the message gives the command, and that command prints the result."""
    proc = start_cli("call", "--era", "2026-07-28", "--http", open_url, "sleep", "--args",
                     '{"seconds": 3}', "--task")  # long enough to be interrupted
    task_id = read_until(proc, r"task ([0-9a-f]{32}) created").group(1)
    status, _, err = ctrl_c(proc)
    assert status == 130, err
    command = f"trio-mcp tasks --http {open_url} --era 2026-07-28 result {task_id}"
    assert err.splitlines()[-1] == (
        f"trio-mcp: interrupted; task {task_id} keeps running on the server, not bound to a "
        f"session (without --token its id is the key to it); see its state and result with: "
        f"{command}")
    fetched = run_cli(*command.split()[1:], "--quiet")
    assert (fetched.returncode, fetched.stdout) == (0, "slept 3 seconds\n"), fetched.stderr


def test_cli_http_2026_without_a_valid_token_exits_2_with_the_hint(http_url: str) -> None:
    for token in ([], ["--token", "wrong-token"]):
        proc = run_cli_here("call", "--era", "2026-07-28", "--http", http_url, *token, "echo",
                            "--args", '{"text": "x"}')
        assert proc.returncode == 2
        assert one_line_error(proc) == (
            "trio-mcp: the server refused the HTTP connection: HTTP 401 "
            "(a missing or unknown --token?)")


def test_cli_http_trailing_slash_and_websocket_get_their_hints(http_url: str) -> None:
    slash = run_cli_here("call", "--http", http_url + "/", "--token", TOKEN, "echo")
    assert one_line_error(slash) == (
        f"trio-mcp: the server refused the HTTP connection: HTTP 404 (is the path right? "
        f"trio-mcp serves {http_url})")
    ws_url = "ws" + http_url.removeprefix("http")
    ws = run_cli_here("call", "--ws", ws_url, "--token", TOKEN, "echo")
    assert ws.returncode == 2
    assert one_line_error(ws) == (
        "trio-mcp: the server refused the WebSocket connection: HTTP 400: this is a Streamable "
        "HTTP MCP endpoint, not a WebSocket one: POST to /mcp over HTTP "
        f"(connect with --http {http_url})")


def test_cli_tasks_result_prints_as_call_prints_2026(open_url: str) -> None:
    called = run_cli("call", "--era", "2026-07-28", "--http", open_url, "sleep", "--args",
                     '{"seconds": 0}', "--task")
    assert called.returncode == 0, called.stderr
    found = re.search(r"task ([0-9a-f]{32}) created", called.stderr)
    assert found, called.stderr
    task_id = found.group(1)
    text = run_cli("tasks", "--era", "2026-07-28", "--http", open_url, "result", task_id, "-q")
    assert (text.returncode, text.stdout) == (0, "slept 0 seconds\n"), text.stderr
    raw = run_cli("tasks", "--era", "2026-07-28", "--http", open_url, "result", task_id,
                  "--json", "-q")
    assert json.loads(raw.stdout)["content"] == [{"type": "text", "text": "slept 0 seconds"}]


# --- the examples' --http ----------------------------------------------------------------------


@pytest.mark.parametrize("example", ["task_server", "everything_server"])
def test_cli_examples_serve_over_http_with_a_token(example: str) -> None:
    argv = [sys.executable, str(EXAMPLES / f"{example}.py"), "--http", "127.0.0.1:0",
            "--token", TOKEN]
    with serving(argv, "http") as (url, _):
        assert url.endswith("/mcp")
        tool = "echo" if example == "task_server" else "test_simple_text"
        proc = run_cli("call", "--http", url, "--token", TOKEN, tool, "--args",
                       '{"text": "over http"}' if tool == "echo" else "{}")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout in ("over http\n", "This is a simple text response for testing.\n")
        refused = run_cli("call", "--http", url, tool)
        assert refused.returncode == 2
        assert "HTTP 401" in one_line_error(refused)


@pytest.mark.parametrize("example", ["task_server", "everything_server"])
def test_cli_examples_refuse_bad_flags(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The script itself once (its exit status), then its main() in this process for the
    # flags refused by its argument checks, before it serves (or tunes the GC).
    proc = run_cli_script(str(EXAMPLES / f"{example}.py"), "--http", "127.0.0.1")
    assert proc.returncode == 2
    assert "wants HOST:PORT" in proc.stderr
    main = load_example(example).main
    for args, message in ((["--store", "mysql://x"], "--store: "),
                          (["--token", "t"], "--token applies to --ws or --http"),
                          (["--ws", "127.0.0.1:0", "--http", "127.0.0.1:0"], "not allowed"),
                          (["--http-server", "hypercorn"], "--http-server applies to --http"),
                          (["--http", "127.0.0.1:0", "--http-server", "h11"], "invalid choice")):
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 2, args
        assert message in capsys.readouterr().err, args


def test_cli_serve_example_http_server_needs_http() -> None:
    proc = run_cli_here("serve-example", "--ws", "127.0.0.1:0", "--http-server", "hypercorn")
    assert proc.returncode == 2
    assert one_line_error(proc) == "trio-mcp: --http-server only applies to --http"


def test_cli_an_unreachable_redis_store_is_one_clear_line() -> None:
    pytest.importorskip("coredis", reason="the optional 'redis' extra")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
        cli = run_cli("serve-example", "--ws", "127.0.0.1:0", "--store", url)
        assert cli.returncode == 2, cli.stderr
        assert one_line_error(cli).startswith(  # it names the store
            f"trio-mcp: cannot open the task store {url}: ConnectionError: ")
        for proc in (
            run_cli_script(str(EXAMPLES / "everything_server.py"), "--ws", "127.0.0.1:0",
                           "--store", url),
            run_cli_script(str(EXAMPLES / "task_server.py"), "--ws", "127.0.0.1:0", "--store", url),
        ):
            assert proc.returncode in (1, 2), proc.stderr  # the CLI's error status, sys.exit's
            assert "Task store unavailable (ConnectionError" in proc.stderr
            assert "Traceback" not in proc.stderr


def test_cli_serve_example_port_in_use_is_one_line_naming_it(http_url: str) -> None:
    where = http_url.removeprefix("http://").removesuffix("/mcp")
    proc = run_cli("serve-example", "--http", where)
    assert proc.returncode == 2
    assert one_line_error(proc) == f"trio-mcp: cannot serve on {where}: Address already in use"


#: ``app.run`` in a script of a user's (the port and the store from argv).
APP_RUN = """
import sys
import trio_mcp

app = trio_mcp.App("runner", store=sys.argv[2] if len(sys.argv) > 2 else None)
app.run("http", port=int(sys.argv[1]))
"""


def test_cli_app_run_start_up_failures_are_one_line_exit_1(http_url: str) -> None:
    """Under ``app.run``: a port in use, an unreachable store: one line that names the port
    or the store (no ExceptionGroup traceback), exit status 1."""
    port = http_url.removeprefix("http://127.0.0.1:").removesuffix("/mcp")
    taken = run_cli_script("-c", APP_RUN, port)
    assert taken.returncode == 1
    assert taken.stderr == f"-c: cannot serve on 127.0.0.1:{port}: Address already in use\n"
    pytest.importorskip("coredis", reason="the optional 'redis' extra")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        store = f"redis://user:secret@127.0.0.1:{sock.getsockname()[1]}/0"
        unreachable = run_cli_script("-c", APP_RUN, "0", store)
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("\n") == 1, unreachable.stderr
    assert unreachable.stderr.startswith(  # the password is not shown
        f"-c: cannot open the task store {store.replace('secret', '***')}: ConnectionError: ")


def run_cli_script(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python SCRIPT ARGS`` (a server that should refuse to start)."""
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


# --- serve-example --http and --store ----------------------------------------------------------


def test_cli_serve_example_refuses_a_bad_store_and_address() -> None:
    store = run_cli_here("serve-example", "--store", "mysql://localhost/0")
    assert store.returncode == 2
    assert one_line_error(store).startswith("trio-mcp: --store: unsupported task store URL")
    address = run_cli_here("serve-example", "--http", "nowhere")
    assert address.returncode == 2
    assert one_line_error(address) == "trio-mcp: --http wants HOST:PORT, not 'nowhere'"
    token = run_cli_here("serve-example", "--token", "t")
    assert one_line_error(token) == "trio-mcp: --token only applies to --ws or --http"


def test_cli_serve_example_stdio_with_a_sqlite_store(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    server = shlex.join([*CLI, "serve-example", "--store", f"sqlite:///{db}"])
    proc = run_cli("call", "--stdio", server, "sleep", "--args", '{"seconds": 0}', "--task")
    assert (proc.returncode, proc.stdout) == (0, "slept 0 seconds\n"), proc.stderr
    assert db.is_file()  # the task went through the file


async def create_running_task(option: str, url: str) -> str:
    """A 60-second task created with the Python client, over ``--ws`` or ``--http``."""
    opener = trio_mcp.open_websocket_client if option == "--ws" else trio_mcp.open_http_client
    async with opener(url, trio_mcp.App("store-test"), token=TOKEN) as peer:
        handle = await peer.call_tool_task("sleep", {"seconds": 60}, ttl=600_000)
    return handle.task_id


@pytest.mark.parametrize("option", ["--ws", "--http"])
async def test_cli_tasks_survive_a_sigkill_with_a_sqlite_store(
    option: str, tmp_path: Path
) -> None:
    """``serve-example --store sqlite:///...``: killed (SIGKILL) and started again, it knows
    the finished task and its result, and says the running one was lost."""
    argv = [*CLI, "serve-example", option, "127.0.0.1:0", "--token", TOKEN,
            "--store", f"sqlite:///{tmp_path / 'tasks.db'}"]
    scheme = option.removeprefix("--")
    with serving(argv, scheme) as (url, server):
        called = run_cli("call", option, url, "--token", TOKEN, "fail", "--args",
                         '{"message": "kept on disk"}', "--task", "--json")
        assert called.returncode == 1, called.stderr
        finished = task_id_of(json.loads(called.stdout))
        running = await create_running_task(option, url)
        server.send_signal(signal.SIGKILL)
        server.wait()
    with serving(argv, scheme) as (url, _):
        status, task = tasks_cli(option, url, "get", finished)
        assert (status, task["status"]) == (0, "failed")
        status, result = tasks_cli(option, url, "result", finished, "--json")
        assert (status, result["content"][0]["text"]) == (1, "kept on disk")
        status, task = tasks_cli(option, url, "get", running)
        assert (status, task["status"]) == (0, "failed")
        assert RESTARTED in task["statusMessage"]
        status, listed = tasks_cli(option, url, "list")
        assert {finished, running} <= {t["taskId"] for t in listed["tasks"]}


def test_cli_task_server_example_takes_a_store(tmp_path: Path) -> None:
    db = tmp_path / "example.db"
    server = shlex.join([sys.executable, str(TASK_SERVER), "--store", f"sqlite:///{db}"])
    proc = run_cli("call", "--stdio", server, "fail", "--args", '{"message": "m"}', "--task")
    assert proc.returncode == 1, proc.stderr
    assert db.is_file()
