"""Every code block of the documentation (``docs/**/*.md``) runs, so the docs cannot rot.

Each page's blocks run in order, in a temporary directory of the page's own, as
real processes with timeouts (no mocks):

* the directory has the checkout's ``examples/`` (pages say "from the root of the
  checkout");
* a ``python`` block runs as a script (``python block.py``) and must exit 0;
* a ``sh`` block runs with ``bash -e`` and must exit 0 (``trio-mcp`` and ``python``
  are this environment's);
* an HTML comment just before a block changes that:
  ``<!-- file: NAME -->`` writes the block to ``NAME`` instead (a server, a module,
  a test file that later blocks use), ``<!-- background -->`` starts a ``sh`` block
  and goes on once it printed ``serving`` (or Redis's ``Ready to accept connections``;
  it is stopped when the page ends), ``<!-- output -->`` before a ``text`` block: each of its lines must be
  a whole line of the output (stdout, then stderr) of the block before it, ``...`` standing
  for any text (an id, a time; a line of its own: lines left out), and
  ``<!-- skip: REASON -->`` leaves a block out (kept few: installs and the like);
* the ports ``8000``, ``8001``, ``8765`` and ``6379`` in a page are replaced with free
  ones, so pages never clash with other servers on the machine;
* ``<!-- requires: TOOL -->`` anywhere in a page skips it when ``TOOL`` is not on the
  PATH (a failure under CI, which installs it); ``<!-- requires: python:MODULE -->`` skips
  it when an optional package is not installed (CI's second venv has the test extra only).

``test_docs_reference_has_every_public_name`` checks the API reference names every
entry of ``trio_mcp.__all__`` in an autodoc directive (the Sphinx build, run by
``.ci/run`` with warnings as errors, fails when a directive names nothing).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

import trio_mcp

from tests.helpers import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "_intersphinx" not in p.parts)
RUN_TIMEOUT = 60
FENCE = re.compile(
    r"(?:<!--\s*(?P<marker>[^>]*?)\s*-->\s*\n)?^```(?P<lang>[\w-]+)[^\n]*\n(?P<body>.*?)^```\s*$",
    re.MULTILINE | re.DOTALL,
)
RUNNABLE = {"python", "sh", "text"}
PORTS = ("8000", "8001", "8765", "6379")
REQUIRES = re.compile(r"<!--\s*requires:\s*(\S+)\s*-->")
READY = re.compile(r"serving|Ready to accept connections")


@attrs.frozen
class Block:
    """One fenced code block of a page and the marker before it."""

    lang: str
    body: str
    marker: str
    line: int


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` (directives such as ```` ```{autoclass} ```` excluded)."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        lang = match["lang"]
        if lang not in RUNNABLE:
            if lang in ("python3", "console", "bash", "shell", "py", "pycon"):
                raise AssertionError(f"{page}: use ```python or ```sh, not ```{lang}")
            continue
        found.append(Block(lang, match["body"], (match["marker"] or "").strip(),
                           text.count("\n", 0, match.start("body"))))
    return found


def shows(shown: str, printed: list[str]) -> bool:
    """Whether a line of an ``<!-- output -->`` block is a whole line of ``printed``
    (stripped lines); ``...`` in it stands for any text, the rest is literal."""
    pattern = re.compile(".*".join(re.escape(part) for part in shown.split("...")))
    return any(pattern.fullmatch(line) for line in printed)


def test_docs_output_lines_are_whole_lines() -> None:
    """A line of an output block is a whole printed line, not a fragment of one."""
    printed = ["task 3f2a is working", "result: Oslo: sunny for 2 days"]
    assert shows("task ... is working", printed)
    assert shows("result: Oslo: sunny for 2 days", printed)
    assert shows("result: ...", printed)
    assert not shows("is working", printed)
    assert not shows("task", printed)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@attrs.define
class PageRun:
    """Runs one page's blocks in ``workdir``; stops its background servers at the end."""

    page: Path
    workdir: Path
    ports: dict[str, str]
    background: list[subprocess.Popen[str]] = attrs.field(factory=list)
    last_output: str = ""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def where(self, block: Block) -> str:
        return f"{self.page.relative_to(ROOT)}:{block.line}"

    def body(self, block: Block) -> str:
        text = block.body
        for old, new in self.ports.items():
            text = text.replace(old, new)
        return text

    def run(self, block: Block) -> None:
        marker = block.marker
        if marker.startswith("skip:"):
            return
        if marker.startswith("file:"):
            (self.workdir / marker.removeprefix("file:").strip()).write_text(self.body(block))
            return
        if marker == "output":
            assert block.lang == "text", f"{self.where(block)}: <!-- output --> wants ```text"
            printed = [line.strip() for line in self.last_output.splitlines()]
            for line in self.body(block).splitlines():
                if line.strip() and line.strip() != "...":
                    assert shows(line.strip(), printed), (
                        f"{self.where(block)}: {line.strip()!r} is not a whole line of the "
                        f"output (`...` stands for any text):\n{self.last_output}")
            return
        if block.lang == "text":
            return  # prose in a box (a diagram, a file listing): nothing to run
        if marker == "background":
            assert block.lang == "sh", f"{self.where(block)}: only sh blocks run in background"
            self._start(block)
            return
        assert not marker, f"{self.where(block)}: unknown marker {marker!r}"
        if block.lang == "python":
            script = self.workdir / f"_block_{block.line}.py"
            script.write_text(self.body(block))
            argv = [sys.executable, script.name]
        else:
            argv = ["bash", "-e", "-c", self.body(block)]
        try:
            proc = subprocess.run(argv, cwd=self.workdir, env=self.env(), capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{self.where(block)}: still running after "
                                 f"{RUN_TIMEOUT} s:\n{exc.stdout}\n{exc.stderr}") from None
        self.last_output = proc.stdout + proc.stderr
        assert proc.returncode == 0, (
            f"{self.where(block)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")

    def _start(self, block: Block) -> None:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", f"exec {self.body(block).strip()}"], cwd=self.workdir,
            env=self.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.background.append(proc)
        assert proc.stdout is not None
        deadline = time.monotonic() + RUN_TIMEOUT
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if READY.search(line):
                # Keep reading what it prints, so a full pipe never blocks it.
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                return
            assert time.monotonic() < deadline, f"{self.where(block)}: no 'serving' line"
        raise AssertionError(f"{self.where(block)}: ended without serving: {''.join(seen)}")

    def stop(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover
                    os.killpg(proc.pid, 9)
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def page_run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PageRun]:
    page: Path = request.param
    for tool in REQUIRES.findall(page.read_text()):
        if tool.startswith("python:"):  # an optional package (an extra): skipped without it
            module = tool.removeprefix("python:")
            try:
                found = importlib.util.find_spec(module)
            except ModuleNotFoundError:  # its parent package is not there either
                found = None
            if found is None:
                pytest.skip(f"{page.name} needs the {module} package (an optional extra)")
            continue
        if shutil.which(tool) is None:
            if os.environ.get("CI"):
                raise AssertionError(f"{page}: {tool} is not on the PATH (CI installs it)")
            pytest.skip(f"{page.name} needs {tool} on the PATH")
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # pages run from a checkout's root
    run = PageRun(page, tmp_path, {port: str(_free_port()) for port in PORTS})
    try:
        yield run
    finally:
        run.stop()


def test_docs_pages_exist() -> None:
    assert len(PAGES) >= 15, PAGES
    assert sum(len(blocks_of(page)) for page in PAGES) >= 30


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page_run", PAGES, indirect=True,
                         ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_docs_code_blocks_run(page_run: PageRun) -> None:
    for block in blocks_of(page_run.page):
        page_run.run(block)


def test_docs_few_blocks_are_skipped() -> None:
    blocks = [b for page in PAGES for b in blocks_of(page) if b.lang != "text"]
    skipped = [b for b in blocks if b.marker.startswith("skip:")]
    assert len(skipped) <= max(3, len(blocks) // 10), skipped


def test_docs_reference_has_every_public_name() -> None:
    """Every name of ``trio_mcp.__all__`` (and of ``trio_mcp.auth.__all__``) has an autodoc
    entry in docs/reference (``python docs/make_reference.py`` writes them)."""
    text = "\n".join(p.read_text() for p in (DOCS / "reference").glob("*.md"))
    documented = set(re.findall(
        r"^\.\. auto(?:class|function|exception|data|decorator):: (trio_mcp\.[\w.]+)\s*$",
        text, re.MULTILINE))
    public = {f"trio_mcp.{name}" for name in trio_mcp.__all__}
    for module_name in ("trio_mcp.auth",):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - an optional part
            continue
        public |= {f"{module_name}.{name}" for name in getattr(module, "__all__", ())}
    missing = sorted(public - documented)
    assert not missing, f"not in docs/reference (run python docs/make_reference.py): {missing}"
    extra = sorted(documented - public)
    assert not extra, f"documented but not public: {extra}"


def test_docs_readme_links_into_the_site_exist() -> None:
    """The README's links into docs/ name pages that are there."""
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def readme_shows_durable_tasks(readme: str) -> list[str]:
    """What the README's durable-task walk-through lacks (issue 27): an App of your own with a
    store, served with tokens, its task fetched with ``trio-mcp tasks ... result``, and the
    options of ``app.run``."""
    python = "\n".join(re.findall(r"```python\n(.*?)```", readme, re.DOTALL))
    shell = "\n".join(re.findall(r"```sh\n(.*?)```", readme, re.DOTALL))
    wanted = {
        "an App with a durable store": r'App\([^)]*store="sqlite:///',
        "app.run over HTTP with tokens": r'app\.run\("http",[^)]*tokens=',
    }
    missing = [what for what, pattern in wanted.items() if not re.search(pattern, python)]
    if not re.search(r"trio-mcp tasks --http \S+ --token \S+ result", shell):
        missing.append("trio-mcp tasks ... result")
    if "app.run(transport=" not in readme or "**options" not in readme:
        missing.append("app.run's options")
    return missing


def test_docs_readme_shows_durable_tasks_in_your_own_app() -> None:
    assert readme_shows_durable_tasks((ROOT / "README.md").read_text()) == []
