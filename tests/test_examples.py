"""Every script in examples/ runs, as a real subprocess, so none of them can rot."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from functools import partial

import httpx
import pytest
import trio
import trio_websocket

import trio_mcp

from tests.helpers import EXAMPLES, ROOT, TASK_SERVER, free_port
from tests.redis_server import require_redis

pytestmark = pytest.mark.timeout(90)

CLI = [sys.executable, "-m", "trio_mcp"]


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>.py`` to completion."""
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_examples_are_all_tested() -> None:
    tested = {"task_server", "task_client", "agent_pair", "websocket_server", "traced_server",
              "everything_server", "cancel_a_task", "http_server", "cluster"}
    assert {path.stem for path in EXAMPLES.glob("*.py")} == tested


def test_examples_task_client() -> None:
    proc = run_example("task_client")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "progress 4/4 step 4 of 4" in out
    assert "result: slept 1 seconds" in out
    assert "the server asks: 'Ship it?' -> yes" in out
    assert "approve ended completed: approved: Ship it?" in out
    assert re.search(r"wants a model reply \(as our task [0-9a-f]{8}\)", out)
    assert "summarize: Tasks make long MCP calls easy to follow." in out


def test_examples_cluster() -> None:
    require_redis()
    proc = run_example("cluster")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    pids = re.findall(r"server ([ABC]): pid (\d+)", out)
    assert [name for name, _ in pids] == ["A", "B", "C"] and len({p for _, p in pids}) == 3
    assert re.search(r"created on A: task [0-9a-f]{32}\ntasks/get on B: working\n", out)
    assert "tasks/result on C: 'slept 1 seconds'" in out
    assert "tasks/cancel on B: cancelled" in out
    assert "tasks/get on C: cancelled (The task was cancelled by request.)" in out


def test_examples_agent_pair() -> None:
    proc = run_example("agent_pair")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "plan_trip is input_required" in out  # while the assistant hosts the sampling
    assert re.search(r"assistant: thinking, as task [0-9a-f]{8}", out)
    assert "result: 3 days in Lisbon: the tram" in out
    assert re.search(r"planner hosted [0-9a-f]{8}: completed", out)
    assert re.search(r"assistant hosted [0-9a-f]{8}: completed", out)


def test_examples_task_server_over_stdio() -> None:
    proc = subprocess.run(
        [*CLI, "call", "--stdio", f"{sys.executable} {TASK_SERVER}", "echo", "--args",
         '{"text": "over stdio"}'],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "over stdio\n"



async def test_examples_task_server_over_websocket() -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}/"
    argv = [sys.executable, str(TASK_SERVER), "--ws", f"127.0.0.1:{port}", "--token", "tok"]
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(partial(trio.run_process, argv, check=False))
        try:
            with trio.fail_after(30):
                while True:  # until the server listens
                    try:
                        async with trio_mcp.open_websocket_client(url, token="tok") as peer:
                            result = await peer.call_tool("echo", {"text": "over ws"})
                            break
                    except (OSError, trio_websocket.HandshakeError):
                        await trio.sleep(0.1)
            assert result.text == "over ws"
        finally:
            proc.terminate()


@pytest.fixture
def websocket_server() -> Iterator[str]:
    """``examples/websocket_server.py --port 0``; yields its URL."""
    with subprocess.Popen(
        [sys.executable, str(EXAMPLES / "websocket_server.py"), "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.search(r"listening on (ws://\S+)", line)
            assert match, line
            yield match.group(1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_examples_websocket_server(websocket_server: str) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=60)

    def as_user(token: str, *args: str) -> list[str]:
        return ["--ws", websocket_server, "--token", token, "--quiet", *args]

    whoami = cli("call", *as_user("alice-secret", "whoami"))
    assert (whoami.returncode, whoami.stdout) == (0, "you are alice\n")
    countdown = cli("call", *as_user("alice-secret", "countdown", "--args", '{"n": 1}',
                                     "--task"))
    assert (countdown.returncode, countdown.stdout) == (0, "liftoff\n")
    # Alice's task outlives her connection; Bob cannot see it.
    alice = cli("tasks", *as_user("alice-secret", "list"))
    assert alice.returncode == 0 and '"status": "completed"' in alice.stdout
    bob = cli("tasks", *as_user("bob-secret", "list"))
    assert bob.returncode == 0 and '"tasks": []' in bob.stdout
    refused = cli("call", *as_user("mallory", "whoami"))
    assert refused.returncode == 2
    assert "HTTP 401" in refused.stderr


async def test_examples_everything_server_over_websocket() -> None:
    """``everything_server.py --ws``; over stdio it runs in tests/peer/features/test_features.py."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}/"
    argv = [sys.executable, str(EXAMPLES / "everything_server.py"), "--ws", f"127.0.0.1:{port}"]
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(partial(trio.run_process, argv, check=False))
        try:
            with trio.fail_after(30):
                while True:  # until the server listens
                    try:
                        async with trio_mcp.open_websocket_client(url) as peer:
                            text = (await peer.read_resource("test://static-text")).text
                            prompts = await peer.list_all_prompts()
                            break
                    except (OSError, trio_websocket.HandshakeError):
                        await trio.sleep(0.1)
            assert text == "This is the content of the static text resource."
            assert len(prompts) == 5
        finally:
            proc.terminate()


# --- the README's walk-through works as written ----------------------------------------------


def test_api_readme_walkthrough_runs_and_is_the_example_file() -> None:
    code = (EXAMPLES / "cancel_a_task.py").read_text()
    body = code.split('"""', 2)[2].strip()
    assert body in (ROOT / "README.md").read_text(), "README's walk-through != the example file"
    proc = run_example("cancel_a_task")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "server: the tool saw its cancellation and stopped" in lines
    assert lines[-1].startswith("client: the task was cancelled")
    assert "counted to" not in proc.stdout


@pytest.fixture
def http_server() -> Iterator[str]:
    """``examples/http_server.py --port 0``; yields its URL."""
    with subprocess.Popen(
        [sys.executable, str(EXAMPLES / "http_server.py"), "--port", "0"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.search(r"listening on (http://\S+)", line)
            assert match, line
            yield match.group(1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def test_examples_http_server(http_server: str) -> None:
    async with trio_mcp.open_http_client(http_server, token="alice-secret") as alice:
        assert (await alice.call_tool("whoami")).text == "you are alice"
        handle = await alice.call_tool_task("countdown", {"n": 1})
        task_id = handle.task_id
    # Alice's task outlives her session; Bob cannot see it.
    async with trio_mcp.open_http_client(http_server, token="alice-secret") as alice:
        assert (await alice.task_result(task_id))["content"][0]["text"] == "liftoff"
    async with trio_mcp.open_http_client(http_server, token="bob-secret") as bob:
        assert (await bob.list_tasks()).tasks == []
    with pytest.raises(httpx.HTTPStatusError) as info:
        async with trio_mcp.open_http_client(http_server, token="mallory"):
            pass  # pragma: no cover
    assert info.value.response.status_code == 401
