"""What the README promises about running the tests and the CLI's exit statuses."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from trio_mcp._cli._main import EPILOG

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n#", start + len(title))
    return README[start:end if end != -1 else None]


def test_readme_says_the_first_test_run_installs_the_interop_peers() -> None:
    """Sharp edge 14: the downloads are announced, with how to run without them."""
    section = _section("### Running the tests")
    for promise in ("first run", "network access", "npm ci", "mcp==1.30.0",
                    '-m "not interop"', "skipped with the reason shown"):
        assert promise in section, promise
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = markers["tool"]["pytest"]["ini_options"]["markers"]
    assert any(marker.startswith("interop:") for marker in declared)


def test_readme_not_interop_selects_no_interop_test() -> None:
    proc = subprocess.run(
        # -n 0: one process collects (the default -n 4 would start four workers to do it).
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-n", "0", "-m", "not interop"],
        capture_output=True, text=True, cwd=ROOT, timeout=110,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert collected and not [line for line in collected if "tests/interop/" in line]


def test_readme_exit_statuses_match_the_cli() -> None:
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", _section("Exit status:"), re.MULTILINE))
    assert sorted(table) == ["0", "1", "130", "143", "2"]
    assert "interrupted" in table["130"] and "130 interrupted" in EPILOG
    assert "SIGTERM" in table["143"] and "143 terminated (SIGTERM)" in EPILOG
    assert "--timeout" in table["2"] and "--timeout" in EPILOG
