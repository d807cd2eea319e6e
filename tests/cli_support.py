"""Running the ``trio-mcp`` command (and servers for it) as real subprocesses, for the CLI tests."""

from __future__ import annotations

import io
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout

from trio_mcp._cli import main

from .helpers import ROOT, TASK_SERVER

CLI = [sys.executable, "-m", "trio_mcp"]
SERVER = shlex.join([sys.executable, str(TASK_SERVER)])
TOKEN = "cli-test-token"


def run_cli(*args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m trio_mcp ARGS`` to completion, capturing its output."""
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def run_cli_here(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``trio-mcp ARGS`` run by the CLI's ``main()`` in this process, its output captured.

    For what the CLI decides (usage errors, one-line failures, help texts), where nothing
    of the process itself is under test: it saves an interpreter start (about half a
    second of CPU) per case. The exit status is ``main()``'s, or argparse's
    ``SystemExit``'s; a server the CLI spawns (``--stdio``) is still a real process.
    :func:`run_cli` runs the real command: exit statuses, signals and pipes are tested
    with it.
    """
    out, err = io.StringIO(), io.StringIO()
    real_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as exc:
                assert isinstance(exc.code, int), exc.code
                status = exc.code
    finally:
        sys.stdin = real_stdin
    return subprocess.CompletedProcess([*CLI, *args], status, out.getvalue(), err.getvalue())


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``trio-mcp: ...`` line a status-2 failure prints on stderr."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("trio-mcp:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def start_cli(*args: str) -> subprocess.Popen[str]:
    """Start ``python -m trio_mcp ARGS`` in a session of its own, as a shell runs a job.

    Its process group then stands for the terminal's foreground group:
    :func:`ctrl_c` signals the whole group, as the terminal does.
    """
    # SIGINT's own handler first: a shell's background job (`pytest &`, some CI
    # runners) starts with SIGINT ignored, and the CLI would inherit that.
    cli = [sys.executable, "-c", "import signal, sys; "
           "signal.signal(signal.SIGINT, signal.default_int_handler); "
           "from trio_mcp.__main__ import main; sys.exit(main())"]
    return subprocess.Popen([*cli, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)


def ctrl_c(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Press Ctrl-C: SIGINT to the CLI's whole process group; wait for the CLI to end.

    Pressed again every 10 s while the CLI runs, as a user would: CPython drops a
    KeyboardInterrupt that lands inside a weakref callback or ``__del__`` ("Exception
    ignored in ..."), which a loaded machine makes likely enough to be seen in CI.
    After 60 s the CLI is killed (reaped, its pipes closed) and the test fails.
    """
    for _ in range(6):
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        return proc.returncode, out, err
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    raise AssertionError(f"the CLI did not end on Ctrl-C within 60 s; stderr: {err[-2000:]}")


def read_until(proc: subprocess.Popen[str], pattern: str) -> re.Match[str]:
    """Read the CLI's stderr line by line until one matches ``pattern``."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    raise AssertionError(f"no line matched {pattern!r}: {seen}")


@contextmanager
def serving(argv: Sequence[str], scheme: str = "ws") -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run a server that prints ``... on URL`` on stderr; yield its URL and the process.

    The server is ended (SIGTERM, then SIGKILL) when the block ends, unless
    the block already ended it.
    """
    with subprocess.Popen(list(argv), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL, text=True, cwd=ROOT) as proc:
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            match = re.search(rf"{scheme}://\S+", line)
            assert match, line
            yield match.group(0), proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover
                    proc.kill()
