"""What ``import trio_mcp`` loads: a stdio server or client starts without the HTTP,
WebSocket, terminal, JWT and store libraries, and the public names stay where they were.

Every test here runs a fresh interpreter: in the test process every transport is already
loaded by other tests, so only a new process shows what an import costs.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from tests.helpers import ROOT, TASK_SERVER

#: The libraries a stdio peer never uses: Streamable HTTP's client and servers (httpx,
#: h11, hypercorn), WebSocket (trio_websocket, wsproto), the CLI's terminal (rich, and
#: click which httpx's command line pulls in), JWT (joserfc), the shared stores.
HEAVY = ("httpx", "h11", "hypercorn", "trio_websocket", "wsproto", "rich", "click", "joserfc",
         "coredis", "psycopg")

#: Prints, as the process exits, which of HEAVY it loaded (one JSON line on stderr).
REPORT = (
    "import atexit, json, sys; atexit.register(lambda: print('HEAVY ' + json.dumps(sorted("
    f"{{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))), file=sys.stderr)); "
)


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def _loaded(stderr: str) -> list[list[str]]:
    """Every HEAVY report in ``stderr``, one per process that wrote one."""
    reports = [line.removeprefix("HEAVY ") for line in stderr.splitlines()
               if line.startswith("HEAVY ")]
    return [json.loads(report) for report in reports]


def test_import_trio_mcp_loads_no_transport_library() -> None:
    proc = _python(
        "import trio_mcp, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in"
        f" {set(HEAVY)!r}))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_import_trio_mcp_auth_verifiers_load_no_http_client() -> None:
    # A server that verifies tokens (examples/task_server.py imports the verifiers) loads
    # httpx only when it fetches a JWKS or introspects; joserfc only when it verifies.
    proc = _python(
        REPORT + "from trio_mcp.auth import CallbackVerifier, IntrospectionVerifier, JWTVerifier"
    )
    assert proc.returncode == 0, proc.stderr
    assert _loaded(proc.stderr) == [[]]


def test_import_every_public_name_resolves_in_a_fresh_interpreter() -> None:
    # The HTTP and WebSocket names are imported on first use (PEP 562): `from trio_mcp import
    # X`, `trio_mcp.X`, `import *` and dir() must all see them, in a process where nothing
    # else imported their modules first.
    code = """
import json, sys, trio_mcp, trio_mcp.auth
star = {}
exec("from trio_mcp import *", star)
result = {
    "missing_star": [n for n in trio_mcp.__all__ if n not in star],
    "missing_dir": [n for n in trio_mcp.__all__ if n not in dir(trio_mcp)]
    + [n for n in trio_mcp.auth.__all__ if n not in dir(trio_mcp.auth)],
    "auth": [n for n in trio_mcp.auth.__all__ if getattr(trio_mcp.auth, n) is None],
    "same": star["serve_http"] is trio_mcp.serve_http
    and trio_mcp.auth.ClientCredentials.__module__ == "trio_mcp.auth._client",
}
try:
    trio_mcp.no_such_name
except AttributeError as exc:
    result["error"] = str(exc)
print(json.dumps(result))
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "missing_star": [], "missing_dir": [], "auth": [], "same": True,
        "error": "module 'trio_mcp' has no attribute 'no_such_name'",
    }


def test_import_stdio_call_loads_no_transport_library_on_either_side() -> None:
    # The README's first command: `trio-mcp call --stdio "python examples/task_server.py"`.
    # Both processes, the CLI and the server it starts, report what they loaded.
    server = shlex.join([sys.executable, "-c", REPORT + "import runpy, sys; "
                         "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], "
                         "run_name='__main__')", str(TASK_SERVER)])
    proc = _python(REPORT + "import sys; from trio_mcp.__main__ import main; "
                   "sys.argv[0] = 'trio-mcp'; sys.exit(main())",
                   "call", "--stdio", server, "echo", "--args", '{"text": "hi"}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "hi"
    assert _loaded(proc.stderr) == [[], []]
