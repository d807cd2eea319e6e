"""``trio-mcp demo``: the story's length is the one figure the docs quote; its two eras.

The story runs on a mock clock here (both agents in memory, no real sleep),
so its length in story seconds is exact; the real run adds the interpreter's
start-up. ``--era 2026-07-28`` runs it on the tasks extension, in memory and
over WebSocket (agent B in a second process).
"""

from __future__ import annotations

import re
from functools import partial

import pytest
import trio
import trio.testing

from trio_mcp._cli._demo import _demo
from trio_mcp._cli._demo_scenario import ERAS, EXPECTED
from trio_mcp._cli._demo_view import Board, RichView
from trio_mcp._cli._main import DEMO_SECONDS, build_parser

from tests.cli_support import run_cli
from tests.helpers import ROOT


def test_demo_story_lasts_the_quoted_figure(capsys: pytest.CaptureFixture[str]) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    problems = trio.run(partial(_demo, "memory", False, None, 1.0), clock=clock)
    assert problems == []
    last = re.findall(r"^\[\s*(\d+\.\d)s\]", capsys.readouterr().out, re.MULTILINE)[-1]
    assert abs(float(last) - DEMO_SECONDS) <= 1, last


def test_demo_duration_is_quoted_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    """Sharp edge 13: the README and the CLI's help give the same figure."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.findall(r"trio-mcp demo\s+#[^\n]*?\(([^)]*\d[^)]*)\)", readme)
    assert quoted and set(quoted) == {f"about {DEMO_SECONDS} s"}, quoted
    assert not re.search(r"~\s*\d+ s|\d+-\d+ seconds", readme)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--help"])
    demo_help = " ".join(capsys.readouterr().out.split())
    assert f"Takes about {DEMO_SECONDS} seconds." in demo_help


# --- the era: 2025-11-25 (default) and 2026-07-28 (the tasks extension) -----------------------

MODERN = "2026-07-28"


def _summary(out: str) -> dict[tuple[str, str], str]:
    """(host, tool) -> status, from the plain summary."""
    rows = [line.split() for line in out[out.index("Summary:"):].splitlines()[2:] if line.strip()]
    return {(row[0], row[2].rstrip(":")): row[-2] for row in rows}


def test_demo_era_option() -> None:
    assert build_parser().parse_args(["demo"]).era == "2025-11-25"
    for era in ("2025-11-25", MODERN):
        assert build_parser().parse_args(["demo", "--era", era]).era == era
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--era", "2024-11-05"])


def test_demo_modern_story_lasts_the_quoted_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """The tasks extension: B's questions travel as inputRequests, A answers with tasks/update."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    problems = trio.run(partial(_demo, "memory", False, None, 1.0, MODERN), clock=clock)
    assert problems == []
    out = capsys.readouterr().out
    assert out.splitlines()[1] == ERAS[MODERN]
    assert "(sampling: a question of its task, in tasks/get's inputRequests)" in out
    assert "A: answers B's sampling question with the draft (tasks/update)" in out
    assert "input_required until A answers with tasks/update" in out
    assert "(tasks/update)\n" in out  # the publish decision
    assert "A hosts task" not in out and "tasks/list" not in out
    assert "A: check_links returned an error: 2 of 12 links are broken" in out
    assert "A: tasks/get on B: " in out
    assert _summary(out) == {("B", "write_report"): "completed",
                             ("B", "crunch_numbers"): "cancelled",
                             ("B", "check_links"): "completed"}  # isError: completed here
    last = re.findall(r"^\[\s*(\d+\.\d)s\]", out, re.MULTILINE)[-1]
    assert abs(float(last) - DEMO_SECONDS) <= 1, last


def test_demo_legacy_story_names_its_era(capsys: pytest.CaptureFixture[str]) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    assert trio.run(partial(_demo, "memory", False, None, 1.0), clock=clock) == []
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == ["trio-mcp demo: agent A ⇄ agent B over memory",
                                    ERAS["2025-11-25"]]
    assert "A: tasks/list on B: " in out and "tasks/update" not in out


@pytest.mark.parametrize("transport", ["memory", "ws"])
@pytest.mark.parametrize("era", ["2025-11-25", MODERN])
def test_cli_demo_in_each_era(transport: str, era: str) -> None:
    proc = run_cli("demo", "--fast", "--plain", "--transport", transport, "--era", era)
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr  # the story went as told
    assert proc.stdout.splitlines()[1] == ERAS[era]
    statuses = _summary(proc.stdout)
    expected = {("B", tool): status.value for tool, status in EXPECTED[era].items()}
    if era == MODERN:
        assert statuses == expected
        assert "(tasks/update)" in proc.stdout
    else:
        assert statuses == {**expected, ("A", "sampling"): "completed"}
    if transport == "ws":
        assert "serves over WebSocket on 127.0.0.1" in proc.stdout


def test_demo_live_view_names_its_era_in_an_80x24_terminal() -> None:
    pytest.importorskip("rich", reason="the live view needs rich (the `cli` extra)")
    from rich.console import Console

    async def render(final: bool) -> str:
        board = Board()
        for n in range(3):
            board.apply({"op": "task", "host": "B", "id": f"{n}" * 32,
                         "label": f"tool {n}", "status": "input_required"})
        for n in range(12):
            board.apply({"op": "say", "who": "A", "text": f"line {n} " + "word " * 40})
        console = Console(width=80, height=24, record=True, force_terminal=True,
                          color_system=None)
        view = RichView(board, console, "trio-mcp demo: agent A ⇄ agent B", ERAS[MODERN])
        console.print(view.render(final=final))
        return console.export_text()

    text = trio.run(render, False)
    lines = text.splitlines()
    assert len(lines) <= 23 and all(len(line) <= 80 for line in lines), text
    assert "MCP 2026-07-28 (tasks extension" in text and "line 11" in text
    assert "MCP 2026-07-28 (tasks extension" in trio.run(render, True)
