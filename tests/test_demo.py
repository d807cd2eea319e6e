"""``trio-mcp demo``: the story's length is the one figure the docs quote.

The story runs on a mock clock here (both agents in memory, no real sleep),
so its length in story seconds is exact; the real run adds the interpreter's
start-up.
"""

from __future__ import annotations

import re
from functools import partial

import pytest
import trio
import trio.testing

from trio_mcp._cli._demo import _demo
from trio_mcp._cli._main import DEMO_SECONDS, build_parser

from .helpers import ROOT


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
