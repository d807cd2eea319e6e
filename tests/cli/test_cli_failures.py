"""The CLI's words when things go wrong: a server that dies under ``call --task``, ``tasks
list`` without a token, the exit status of ``tasks result`` for a failed task.
"""

from __future__ import annotations

import json
import signal
import socket

import pytest

from tests.cli_support import (
    CLI,
    TOKEN,
    one_line_error,
    read_until,
    run_cli,
    run_cli_here,
    serving,
    start_cli,
)

pytestmark = pytest.mark.timeout(120)


def _closed_port() -> int:
    """A loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- the CLI ---------------------------------------------------------------------------------


def test_sharp_cli_http_server_dies_during_a_task() -> None:
    """Not "the server answered with an error": the connection was lost; the task's id and
    the command that fetches its result, as after Ctrl-C."""
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0", "--token", TOKEN]
    with serving(argv, "http") as (url, server):
        cli = start_cli("call", "--http", url, "--token", TOKEN, "sleep", "--args",
                        '{"seconds": 60}', "--task")
        task_id = read_until(cli, r"task ([0-9a-f]{32}) created").group(1)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        _, err = cli.communicate(timeout=60)
    assert cli.returncode == 2, err
    last = err.splitlines()[-1]
    assert last.startswith("trio-mcp: the connection to the server was lost"), err
    assert "answered with an error" not in err
    assert last.endswith(
        f"task {task_id} may still run on the server (if it was not restarted); fetch its "
        f"result with: trio-mcp tasks --http {url} --token TOKEN result {task_id}")


def test_sharp_cli_tasks_list_without_token_says_why_it_is_empty() -> None:
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0"]
    with serving(argv, "http") as (url, _):
        proc = run_cli_here("tasks", "--http", url, "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().replace("\n", "").replace(" ", "") == '{"tasks":[]}'
    assert "without --token" in proc.stderr
    assert "bound to the connection or session that created them" in proc.stderr


def test_sharp_cli_tasks_result_of_a_failed_task_exits_1() -> None:
    """The README's exit table: 1 when the task failed or was cancelled."""
    argv = [*CLI, "serve-example", "--http", "127.0.0.1:0", "--token", TOKEN]
    with serving(argv, "http") as (url, _):
        failed = run_cli("call", "--http", url, "--token", TOKEN, "sleep", "--args",
                         '{"seconds": -1}', "--task", "--quiet")
        assert failed.returncode == 1, failed.stderr
        listed = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "list")
        (task,) = json.loads(listed.stdout)["tasks"]
        assert task["status"] == "failed"
        proc = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "result",
                       task["taskId"])
        unknown = run_cli("tasks", "--http", url, "--token", TOKEN, "--quiet", "result",
                          "0" * 32)
    assert proc.returncode == 1, proc.stderr
    assert one_line_error(proc) == (
        "trio-mcp: task failed: seconds must not be negative")
    assert unknown.returncode == 2  # an unknown id stays a usage/protocol error
