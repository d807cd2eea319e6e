"""Task trees across peers (issue 34): ``ctx.children()``, questions that travel up, the tree
``_meta``, ``trio-mcp tasks tree``, and what a SIGKILLed parent leaves behind.

Most tests run three ``examples/relay_server.py`` processes, A -> B -> C, on loopback
Streamable HTTP (A also over stdio): a client calls ``relay(2, seconds)`` on A as a task;
C asks ``confirm``; the question reaches the client as A's ``input_required``; the answer
flows down and the result up. Each relay has its own token; a relay's upstream token is
its own credential for the next one. The spawned relays are shared by the tests of this
module (started once, concurrently). Nothing asserts timings: waits poll with generous
bounds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_mcp

from tests.relay_support import (
    RelayProcess,
    answering_app,
    descendants,
    spawn_relay,
    wait_on,
    wait_status,
)

pytestmark = pytest.mark.timeout(120)

E25, E26 = "2025-11-25", "2026-07-28"
DONE = "relay depth 2 <- relay depth 1 <- relay depth 0: confirmed"


class Relays:
    """The module's relay processes: C, the B's (one per era spoken to C) and the A's."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.all: list[RelayProcess] = []
        self.c = self._spawn("c", "tok-c")
        for proc in self.all:
            proc.wait_serving()
        self.b = {era: self._spawn(f"b-{era}", "tok-b", upstream=self.c, era=era)
                  for era in (E25, E26)}
        for proc in self.b.values():
            proc.wait_serving()
        self.a = {(ab, bc): self._spawn(f"a-{ab}-{bc}", "tok-a", upstream=self.b[bc], era=ab)
                  for ab, bc in ((E25, E25), (E26, E26), (E25, E26))}
        for proc in self.a.values():
            proc.wait_serving()

    def _spawn(self, name: str, token: str, **options: Any) -> RelayProcess:
        proc = spawn_relay(self.tmp / f"{name}.log", token, **options)
        self.all.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.all:
            proc.stop()


@pytest.fixture(scope="module")
def relays(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relays]:
    started = Relays(tmp_path_factory.mktemp("relays"))
    try:
        yield started
    finally:
        started.stop()


async def _run_chain(a: RelayProcess, client_era: str) -> tuple[str, list[str], list[Any]]:
    """Call relay(2, 1.0) on A as a task and answer C's question; the result, A's statuses
    and the questions the client saw."""
    asked: list[dict[str, Any]] = []
    statuses: list[str] = []
    with trio.fail_after(60):
        async with trio_mcp.open_http_client(
            a.url, answering_app(asked), token=a.token, era=client_era
        ) as peer:
            handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 1.0})
            assert handle.task_id
            async for snapshot in handle:
                statuses.append(snapshot.status.value)
            result = await handle.result()
    assert not result.is_error, result
    return result.text, statuses, [handle.task_id, *asked]


@pytest.mark.parametrize(
    ("client_era", "a_to_b", "b_to_c"),
    [(E25, E25, E25), (E26, E26, E26), (E26, E25, E26)],
    ids=["2025-chain", "2026-chain", "mixed-2026-client-2025-hop-2026-leaf"],
)
async def test_trees_the_leafs_question_reaches_the_client_as_as_input_required(
    relays: Relays, client_era: str, a_to_b: str, b_to_c: str
) -> None:
    text, statuses, (a_task, *asked) = await _run_chain(relays.a[(a_to_b, b_to_c)], client_era)
    assert text == DONE
    # C's question was A's input_required, asked once of the client, and answered down.
    assert "input_required" in statuses
    assert statuses[-1] == "completed"
    assert [q["message"] for q in asked] == ["confirm"]
    assert asked[0]["schema"]["properties"]["confirm"]["type"] == "boolean"
    if client_era == E25:  # pushed by A with A's task as the related task
        assert asked[0]["meta"][trio_mcp.RELATED_TASK_META]["taskId"] == a_task


@pytest.mark.parametrize("client_era", [E25, E26])
async def test_trees_a_over_stdio(relays: Relays, client_era: str) -> None:
    b = relays.b[E26]
    command = [sys.executable, str(Path(__file__).parents[3] / "examples" / "relay_server.py"),
               "--upstream", b.url, "--upstream-token", b.token]
    asked: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with trio_mcp.open_stdio_client(command, answering_app(asked),
                                              era=client_era) as peer:
            handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 1.0})
            result = await handle.result()
    assert result.text == DONE
    assert [q["message"] for q in asked] == ["confirm"]


@pytest.mark.parametrize(
    ("chain", "moment"),
    [((E25, E25), "waits"), ((E25, E25), "works"), ((E26, E26), "waits"),
     ((E25, E26), "works")],
    ids=["2025-while-c-waits", "2025-while-c-works", "2026-while-c-waits",
         "mixed-while-c-works"],
)
async def test_trees_cancel_at_a_cancels_b_and_c(
    relays: Relays, chain: tuple[str, str], moment: str
) -> None:
    a, b, c = relays.a[chain], relays.b[chain[1]], relays.c
    asked: list[dict[str, Any]] = []
    gate = trio.Event()  # never set: the client never answers
    seconds = 0.2 if moment == "waits" else 60.0
    with trio.fail_after(60):
        async with trio_mcp.open_http_client(
            a.url, answering_app(asked, gate=gate), token=a.token, era=chain[0]
        ) as peer:
            handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": seconds})
            b_task, c_task = await descendants(peer, handle.task_id, 2)
            if moment == "waits":
                await wait_on(peer, handle.task_id, "input_required")
                await wait_status(c.url, c.token, c_task, "input_required")
            await handle.cancel()
            # Seen on B and C with the relays' own tokens (A's credential on B is B's token).
            await wait_status(b.url, b.token, b_task, "cancelled")
            await wait_status(c.url, c.token, c_task, "cancelled")
            assert (await handle.wait()).status.value == "cancelled"


async def test_trees_tasks_tree_cli_draws_the_tree_across_peers(relays: Relays) -> None:
    a, c = relays.a[(E25, E26)], relays.c
    gate = trio.Event()
    asked: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with trio_mcp.open_http_client(
            a.url, answering_app(asked, gate=gate), token=a.token
        ) as peer:
            handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 0.1})
            b_task, c_task = await descendants(peer, handle.task_id, 2)
            await wait_status(c.url, c.token, c_task, "input_required")
            await wait_on(peer, handle.task_id, "input_required")
            cli = [sys.executable, "-m", "trio_mcp", "tasks", "--http", a.url, "--token",
                   a.token, "tree", handle.task_id]
            shown = await trio.run_process(cli, capture_stdout=True, capture_stderr=True,
                                           check=False, env={**os.environ, "NO_COLOR": "1"})
            as_json = await trio.run_process([*cli, "--json"], capture_stdout=True,
                                             capture_stderr=True, check=False)
            await handle.cancel()
    out = shown.stdout.decode()
    assert shown.returncode == 0, shown.stderr.decode()
    lines = out.splitlines()
    assert len(lines) == 3, out
    for line, task_id in zip(lines, (handle.task_id, b_task, c_task), strict=True):
        assert task_id in line and "input_required" in line
    assert "question: elicitation/create 'confirm'" in lines[2]
    assert lines[1].lstrip().startswith("└─ ") and lines[2].lstrip().startswith("└─ ")
    # B and C want their own tokens: the CLI shows them as A and B last saw them.
    assert "(as its parent last saw it)" in lines[1]
    tree = __import__("json").loads(as_json.stdout)
    assert tree["taskId"] == handle.task_id and tree["seen"] == "directly"
    assert tree["children"][0]["taskId"] == b_task
    assert tree["children"][0]["children"][0]["taskId"] == c_task
    assert tree["children"][0]["children"][0]["question"]["message"] == "confirm"


async def test_trees_a_sigkilled_parent_leaves_children_that_cancel_themselves(
    tmp_path: Path, relays: Relays
) -> None:
    """The choice (documented): ``TaskLimits.orphan_after`` (the relay's --orphan-after) makes
    a child whose parent stopped following it cancel itself; its own children follow."""
    c = relays.c
    b = spawn_relay(tmp_path / "b.log", "tok-b2", upstream=c, era=E26,
                    extra=["--orphan-after", "3"])
    a: RelayProcess | None = None
    try:
        await trio.to_thread.run_sync(b.wait_serving)
        a = spawn_relay(tmp_path / "a.log", "tok-a2", upstream=b, era=E25)
        await trio.to_thread.run_sync(a.wait_serving)
        with trio.fail_after(60):
            async with trio_mcp.open_http_client(a.url, token=a.token) as peer:
                handle = await peer.call_tool_task("relay", {"depth": 2, "seconds": 60.0})
                b_task, c_task = await descendants(peer, handle.task_id, 2)
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            await wait_status(b.url, b.token, b_task, "cancelled")
            await wait_status(c.url, c.token, c_task, "cancelled")
    finally:
        if a is not None:
            a.stop()
        b.stop()


async def test_trees_an_unreachable_upstream_fails_the_task_and_the_relay_stays(
    tmp_path: Path
) -> None:
    a = spawn_relay(tmp_path / "a.log", "tok", extra=["--upstream", "http://127.0.0.1:9/mcp"])
    try:
        await trio.to_thread.run_sync(a.wait_serving)
        async with trio_mcp.open_http_client(a.url, token=a.token) as peer:
            for _ in range(2):  # and the relay still serves
                handle = await peer.call_tool_task("relay", {"depth": 1, "seconds": 0})
                with pytest.raises(trio_mcp.TaskFailed, match="upstream relay cannot be reached"):
                    await handle.result()
            answer = await peer.call_tool_task("relay", {"depth": 0, "seconds": 0})
            result = await answer.result()  # this client declares no elicitation: a tool error
            assert result.is_error and "elicitation" in result.text
    finally:
        a.stop()


def test_trees_relay_refuses_bad_options() -> None:
    relay = str(Path(__file__).parents[3] / "examples" / "relay_server.py")
    for args in (["--token", "t"], ["--era", "2024-01-01"]):
        proc = subprocess.run([sys.executable, relay, *args], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
