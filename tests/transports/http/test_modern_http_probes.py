"""What a hostile client tried from outside, over Streamable HTTP (MCP 2026-07-28), against the
examples as real subprocesses (``examples/everything_server.py --http`` and
``examples/task_server.py --http``), spoken to with raw JSON-RPC POSTs (httpx).

* Unasked answers (2026-07-28 basic/patterns/mrtr, "Error Handling": "If additional,
  unexpected parameters are provided in the ``InputResponses`` object, the server SHOULD
  ignore any information it does not recognize or need"): this server knows what it asked,
  because the signed ``requestState`` lists the keys of its last ``input_required``. A retry
  without a state gets no answer used (the tool asks its first question); an answer to a key
  the state does not list (a later round's) is ignored and asked when the tool gets there.
  A person's confirmation cannot be skipped by pre-answering it. The tasks extension's
  ``tasks/update`` delivers only answers to questions outstanding now.
* Reserved ``_meta`` keys (2026-07-28 schema, ``RequestMetaObject``): each of
  ``io.modelcontextprotocol/protocolVersion`` (string), ``.../clientCapabilities``
  (``ClientCapabilities``), ``.../clientInfo`` (``Implementation``), ``.../logLevel``
  (``LoggingLevel``) and ``progressToken`` (string or integer) with a value of another type is
  invalid params: -32602, HTTP 400 ("basic/transports": the status of -32602 is 400), and the
  server keeps serving.
* ``Mcp-Name`` on ``tasks/*`` (SEP-2663, "Streamable HTTP: Routing Headers": the client MUST
  set it to ``params.taskId``, for intermediaries to route by): a missing one is accepted
  (fastmcp-tasks 4.1.4 sends none; the body's ``taskId`` is authoritative and the caller's
  identity decides access), one that disagrees with the body is -32020; on ``tools/call``,
  ``prompts/get`` and ``resources/read`` a missing one stays -32020 (SEP-2243, "Server
  Validation").

Every answer is validated against the official schemas (the core 2026-07-28 one, and the
tasks extension's for its messages) with the helpers of ``test_modern_tasks_server.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import EXAMPLES, ROOT, TASK_SERVER
from tests.peer.dialects.test_modern_tasks_server import EXT_CAPS, validate_tasks

pytestmark = pytest.mark.timeout(120)

MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
               "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


def _start(argv: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``argv`` (a server printing ``serving on URL`` on stderr, into ``log``)."""
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"serving on (http://\S+)", log.read_text(errors="replace"))
        if found:
            return proc, found[1]
        if proc.poll() is not None:
            raise AssertionError(f"{argv} exited: {log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{argv} did not start serving: {log.read_text()[-3000:]}")


class Server:
    """A server subprocess and a raw HTTP client of its ``/mcp`` endpoint."""

    def __init__(self, argv: list[str], plain: tuple[str, dict[str, Any]]) -> None:
        #: A tools/call that completes at once (name, arguments).
        self.plain = plain
        self.folder = tempfile.TemporaryDirectory(prefix="probe")
        self.log = Path(self.folder.name) / "stderr.txt"
        self.proc, self.url = _start(argv, self.log)
        self.client = httpx.Client(trust_env=False, timeout=httpx.Timeout(30))
        self.next_id = 0

    def close(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                self.proc.kill()
                self.proc.wait()
        self.folder.cleanup()

    def post(self, method: str, params: dict[str, Any], *, meta: dict[str, Any] | None = None,
             headers: dict[str, str | None] | None = None) -> tuple[int, dict[str, Any]]:
        """POST one request (``_meta``: valid with all client capabilities unless given);
        return the HTTP status and the JSON-RPC response (the last message of an SSE body)."""
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                "params": {**params, "_meta": full_meta() if meta is None else meta}}
        sent: dict[str, str] = {"Accept": "application/json, text/event-stream",
                                "Content-Type": "application/json",
                                "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        field = NAME_FIELDS.get(method)
        if field is not None and isinstance(params.get(field), str):
            sent["Mcp-Name"] = params[field]
        for key, value in (headers or {}).items():
            sent.pop(key, None)
            if value is not None:
                sent[key] = value
        response = self.client.post(self.url, content=json.dumps(body).encode(), headers=sent)
        if response.headers["content-type"].startswith("text/event-stream"):
            messages = [json.loads(line[5:]) for line in response.text.splitlines()
                        if line.startswith("data:") and line[5:].strip()]
        else:
            messages = [response.json()]
        for message in messages:
            validate_tasks(message, method if "id" in message else None)
        answer = messages[-1]
        assert answer.get("id") == self.next_id, messages
        return response.status_code, answer

    def result(self, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
        """A request that must succeed (HTTP 200): its result."""
        status, answer = self.post(method, params, **options)
        assert status == 200 and "result" in answer, (status, answer)
        result: dict[str, Any] = answer["result"]
        return result

    def error(self, method: str, params: dict[str, Any], status: int, code: int,
              **options: Any) -> str:
        """A request that must fail with ``status`` and JSON-RPC ``code``: its message."""
        got, answer = self.post(method, params, **options)
        assert (got, answer.get("error", {}).get("code")) == (status, code), (got, answer)
        message: str = answer["error"]["message"]
        return message

    def still_serving(self) -> None:
        """A plain tools/call still completes, and the process lives."""
        name, arguments = self.plain
        result = self.result("tools/call", {"name": name, "arguments": arguments})
        assert result["resultType"] == "complete"
        assert self.proc.poll() is None


def full_meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out = {PV: MODERN, CAPS: ALL_CAPS if caps is None else caps,
           INFO: {"name": "hostile-probe", "version": "0"}}
    out.update(extra)
    return out


@pytest.fixture(scope="module")
def everything() -> Iterator[Server]:
    server = Server([sys.executable, str(EXAMPLES / "everything_server.py"),
                     "--http", "127.0.0.1:0"], ("test_simple_text", {}))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def task_server() -> Iterator[Server]:
    server = Server([sys.executable, str(TASK_SERVER), "--http", "127.0.0.1:0"],
                    ("echo", {"text": "still here"}))
    try:
        yield server
    finally:
        server.close()


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def sampled(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "x"}


def asked(result: dict[str, Any]) -> dict[str, Any]:
    """The ``inputRequests`` of an ``input_required`` result (asserted one)."""
    assert result["resultType"] == "input_required", result
    assert isinstance(result["requestState"], str) and result["requestState"]
    questions: dict[str, Any] = result["inputRequests"]
    return questions


def text(result: dict[str, Any]) -> str:
    assert result["resultType"] == "complete", result
    (block,) = result["content"]
    return str(block["text"])


# --- finding 1: answers nobody asked for -------------------------------------------------------


def test_injected_sampling_answer_without_state_is_not_used(task_server: Server) -> None:
    """The hostile probe: ``summarize`` with an ``inputResponses`` answer to its sampling
    question (``sampling-1``) and no ``requestState`` was served with the injected text. Now
    the answer is ignored: the tool asks its question; the asked-for answer, with the state,
    completes it."""
    injected = {"sampling-1": sampled("INJECTED")}
    first = task_server.result("tools/call", {"name": "summarize",
                                              "arguments": {"text": "probe text"},
                                              "inputResponses": injected})
    questions = asked(first)
    assert list(questions) == ["sampling-1"]
    assert questions["sampling-1"]["method"] == "sampling/createMessage"
    assert "probe text" in json.dumps(questions["sampling-1"]["params"])
    done = task_server.result("tools/call", {
        "name": "summarize", "arguments": {"text": "probe text"},
        "inputResponses": {"sampling-1": sampled("A short summary.")},
        "requestState": first["requestState"]})
    assert text(done) == "A short summary."
    task_server.still_serving()


def test_confirmation_cannot_be_pre_answered(everything: Server) -> None:
    """``test_elicitation`` with the confirmation answered before anybody was shown it (no
    ``requestState``): the question comes back; only the answer to the question the server
    asked (with its state) is used."""
    args = {"message": "Delete everything?"}
    first = everything.result("tools/call", {
        "name": "test_elicitation", "arguments": args,
        "inputResponses": {"elicitation-1": accept(response="yes")}})
    (key,) = asked(first)
    assert asked(first)[key]["params"]["message"] == "Delete everything?"
    again = everything.result("tools/call", {
        "name": "test_elicitation", "arguments": args,
        "inputResponses": {key: accept(response="yes")}})  # still no state: asked again
    assert list(asked(again)) == [key]
    done = everything.result("tools/call", {
        "name": "test_elicitation", "arguments": args,
        "inputResponses": {key: accept(response="no")}, "requestState": again["requestState"]})
    assert text(done) == 'User response: action=accept, content={"response":"no"}'


def test_later_round_answer_is_not_used(everything: Server) -> None:
    """``test_input_required_result_multi_round`` asks ``step1``, then ``step2``. A retry with
    round 1's state answering both (``step2`` not asked yet) does not complete: ``step2``
    is asked in its round, and the answer given then is the one used."""
    name = "test_input_required_result_multi_round"
    first = everything.result("tools/call", {"name": name, "arguments": {}})
    assert list(asked(first)) == ["step1"]
    second = everything.result("tools/call", {
        "name": name, "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"step1": accept(name="Alice"), "step2": accept(color="INJECTED")}})
    assert list(asked(second)) == ["step2"]
    done = everything.result("tools/call", {
        "name": name, "arguments": {}, "requestState": second["requestState"],
        "inputResponses": {"step2": accept(color="green"), "step1": accept(name="Mallory")}})
    assert text(done) == "Multi-round complete for Alice who likes green"


def test_no_state_answers_are_not_used_on_prompts(everything: Server) -> None:
    """The same rule on ``prompts/get`` (no example resource asks: ``resources/read`` shares
    the code path, ``_modern._begin``): ``prompts/get`` of
    ``test_input_required_result_prompt`` pre-answered without a state asks its question."""
    first = everything.result("prompts/get", {
        "name": "test_input_required_result_prompt",
        "inputResponses": {"user_context": accept(context="INJECTED")}})
    assert list(asked(first)) == ["user_context"]
    done = everything.result("prompts/get", {
        "name": "test_input_required_result_prompt", "requestState": first["requestState"],
        "inputResponses": {"user_context": accept(context="real")}})
    assert done["messages"][0]["content"]["text"] == "Prompt with context: real"


def _wait_task(server: Server, task_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        task = server.result("tasks/get", {"taskId": task_id}, meta=full_meta(EXT_CAPS))
        if task["status"] in statuses or task["status"] in ("completed", "failed", "cancelled"):
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


def test_tasks_update_uses_only_outstanding_questions(everything: Server) -> None:
    """ext-tasks: ``tasks/update`` answers the task's outstanding ``inputRequests``.
    ``confirm_twice`` asks ``confirm``, then ``confirm-2``: a ``tasks/update`` answering both
    (and an unknown key) while only the first is outstanding answers the first; the second
    confirmation is still asked, and the task ends with the answer given to it then."""
    created = everything.result("tools/call", {"name": "confirm_twice", "arguments": {}},
                                meta=full_meta(EXT_CAPS))
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    task = _wait_task(everything, task_id, "input_required")
    assert list(task["inputRequests"]) == ["confirm"]
    ack = everything.result("tasks/update", {"taskId": task_id, "inputResponses": {
        "confirm": accept(confirm=True), "confirm-2": accept(confirm=True),
        "unknown": accept(confirm=True)}}, meta=full_meta(EXT_CAPS))
    assert ack["resultType"] == "complete"
    task = _wait_task(everything, task_id, "input_required")
    assert task["status"] == "input_required", task
    assert list(task["inputRequests"]) == ["confirm-2"]
    everything.result("tasks/update", {"taskId": task_id, "inputResponses": {
        "confirm-2": {"action": "decline"}}}, meta=full_meta(EXT_CAPS))
    task = _wait_task(everything, task_id)
    assert task["status"] == "completed", task
    assert task["result"]["content"][0]["text"] == "confirm_twice: accept, then decline"


# --- finding 2: reserved _meta keys of the wrong type --------------------------------------------

WRONG_META = [
    pytest.param(PV, 20260728, id="protocolVersion-integer"),
    pytest.param(CAPS, {"extensions": "io.modelcontextprotocol/tasks"}, id="caps-extensions-string"),
    pytest.param(CAPS, {"extensions": {"io.modelcontextprotocol/tasks": True}},
                 id="caps-extension-settings-boolean"),
    pytest.param(CAPS, {"sampling": "yes"}, id="caps-sampling-string"),
    pytest.param(CAPS, {"sampling": {"tools": 1}}, id="caps-sampling-tools-integer"),
    pytest.param(CAPS, {"elicitation": {"form": True}}, id="caps-elicitation-form-boolean"),
    pytest.param(CAPS, {"roots": None}, id="caps-roots-null"),
    pytest.param(CAPS, {"experimental": {"x": []}}, id="caps-experimental-array"),
    pytest.param(CAPS, ["sampling"], id="caps-array"),
    pytest.param(INFO, 42, id="clientInfo-integer"),
    pytest.param(INFO, None, id="clientInfo-null"),
    pytest.param(INFO, {"name": "x"}, id="clientInfo-no-version"),
    pytest.param(INFO, {"name": 1, "version": "1"}, id="clientInfo-name-integer"),
    pytest.param(INFO, {"name": "x", "version": "1", "websiteUrl": 5}, id="clientInfo-url"),
    pytest.param(INFO, {"name": "x", "version": "1", "icons": [{"src": 5}]},
                 id="clientInfo-icon-src"),
    pytest.param(INFO, {"name": "x", "version": "1", "icons": [{"src": "a", "theme": "blue"}]},
                 id="clientInfo-icon-theme"),
    pytest.param(LOG_LEVEL, "loud", id="logLevel-unknown"),
    pytest.param(LOG_LEVEL, None, id="logLevel-null"),
    pytest.param("progressToken", {"x": 1}, id="progressToken-object"),
    pytest.param("progressToken", True, id="progressToken-boolean"),
    pytest.param("progressToken", 1.5, id="progressToken-fraction"),
    pytest.param("progressToken", None, id="progressToken-null"),
]


@pytest.mark.parametrize(("key", "value"), WRONG_META)
def test_reserved_meta_key_of_the_wrong_type_is_invalid_params(
    everything: Server, key: str, value: Any
) -> None:
    """Each reserved ``_meta`` key with a value of another type than the schema's: -32602 and
    HTTP 400 on a ``tools/call`` and on ``tools/list``, the message naming the key; the
    server keeps serving."""
    meta = full_meta(**{key: value})
    for method, params in (("tools/call", {"name": "test_simple_text", "arguments": {}}),
                           ("tools/list", {})):
        message = everything.error(method, params, 400, -32602, meta=meta)
        assert key in message, message
    everything.still_serving()


def test_reserved_meta_key_of_the_wrong_type_on_tasks_and_discover(everything: Server) -> None:
    """The one check covers every method: ``tasks/get`` and ``server/discover`` too."""
    meta = full_meta(EXT_CAPS, progressToken={"x": 1})
    message = everything.error("tasks/get", {"taskId": "nope"}, 400, -32602, meta=meta)
    assert "progressToken" in message
    message = everything.error("server/discover", {}, 400, -32602,
                               meta=full_meta(**{INFO: 42}))
    assert INFO in message
    everything.still_serving()


@pytest.mark.parametrize(("key", "value"), [
    pytest.param("progressToken", "tok-1", id="progressToken-string"),
    pytest.param("progressToken", 7, id="progressToken-integer"),
    pytest.param(INFO, {"name": "x", "version": "1", "title": "X", "description": "d",
                        "websiteUrl": "https://x.example",
                        "icons": [{"src": "https://x.example/i.png", "mimeType": "image/png",
                                   "sizes": ["48x48"], "theme": "dark"}]}, id="clientInfo-full"),
    pytest.param(CAPS, {"sampling": {"tools": {}, "context": {}}, "elicitation": {"form": {}},
                        "roots": {"listChanged": True}, "experimental": {"x": {}},
                        "extensions": {"io.modelcontextprotocol/tasks": {}}}, id="caps-full"),
    pytest.param(LOG_LEVEL, "debug", id="logLevel-debug"),
    pytest.param("com.example/anything", [1, {"x": None}], id="client-key"),
])
def test_reserved_meta_keys_of_the_right_type_are_served(
    everything: Server, key: str, value: Any
) -> None:
    """The same keys with values of the schema's types (and a key of the client's own):
    served."""
    result = everything.result("tools/call", {"name": "test_simple_text", "arguments": {}},
                               meta=full_meta(**{key: value}))
    assert result["resultType"] == "complete"


# --- finding 3: Mcp-Name on tasks/* --------------------------------------------------------------


def test_tasks_requests_without_mcp_name_are_served(everything: Server) -> None:
    """fastmcp-tasks 4.1.4 sends no ``Mcp-Name`` on ``tasks/get``, ``tasks/update`` and
    ``tasks/cancel``: each is served (the body's ``taskId`` decides). One whose ``Mcp-Name``
    disagrees with the body is still -32020 (SEP-2243: "Servers that process the request
    body MUST reject requests where the values specified in the headers do not match")."""
    ext = full_meta(EXT_CAPS)
    no_name = {"Mcp-Name": None}
    created = everything.result("tools/call", {"name": "confirm_delete",
                                               "arguments": {"filename": "a.txt"}}, meta=ext)
    task_id = created["taskId"]
    deadline = time.monotonic() + 30
    while True:
        task = everything.result("tasks/get", {"taskId": task_id}, meta=ext, headers=no_name)
        if task["status"] != "working":
            break
        assert time.monotonic() < deadline, task
        time.sleep(0.05)
    assert task["status"] == "input_required", task
    for method, params in (("tasks/get", {"taskId": task_id}),
                           ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
                           ("tasks/cancel", {"taskId": task_id})):
        message = everything.error(method, params, 400, -32020, meta=ext,
                                   headers={"Mcp-Name": "another-task"})
        assert "Mcp-Name" in message
    everything.result("tasks/update", {"taskId": task_id, "inputResponses": {
        "confirm": accept(confirm=True)}}, meta=ext, headers=no_name)
    task = _wait_task(everything, task_id)
    assert task["result"]["content"][0]["text"] == "Deleted a.txt"
    slow = everything.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}},
                             meta=ext)
    ack = everything.result("tasks/cancel", {"taskId": slow["taskId"]}, meta=ext,
                            headers=no_name)
    assert ack["resultType"] == "complete"
    assert _wait_task(everything, slow["taskId"])["status"] == "cancelled"


@pytest.mark.parametrize(("method", "params"), [
    ("tools/call", {"name": "test_simple_text", "arguments": {}}),
    ("prompts/get", {"name": "test_simple_prompt"}),
    ("resources/read", {"uri": "test://static-text"}),
])
def test_missing_mcp_name_is_still_refused_where_conformance_asks(
    everything: Server, method: str, params: dict[str, Any]
) -> None:
    """SEP-2243: a request missing a required standard header (``Mcp-Name``) is rejected with
    400 and -32020 (the conformance suite's ``ServerRejectsMissingNameHeader``)."""
    message = everything.error(method, params, 400, -32020, headers={"Mcp-Name": None})
    assert "Mcp-Name header is required" in message
    everything.still_serving()
