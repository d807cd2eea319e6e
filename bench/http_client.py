"""The one Streamable HTTP client of ``bench.http``: raw HTTP/1.1 keep-alive on plain sockets.

Far cheaper per request than any server it measures, so a round trip's time is
the server's: no HTTP library, no event loop for the sequential rows, request
bytes built once (only the JSON-RPC id, or a task id, changes), and a response
parsed just enough: the status line, the headers (``Content-Length`` or
``Transfer-Encoding: chunked``, ``Content-Type``, ``Mcp-Session-Id``), the body,
and the ``data:`` lines of a ``text/event-stream`` answer.

Standard library only. The concurrent rows run it in several processes
(``python -m bench.http_client worker PARAMS_JSON``, see :func:`worker`), each
driving its share of the connections with ``selectors``, one request in flight
per connection (a closed loop).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
TASKS_EXT = "io.modelcontextprotocol/tasks"
ACCEPT = b"application/json, text/event-stream"
CLIENT_INFO = {"name": "bench-http", "version": "1.0"}


def modern_meta(tasks: bool) -> dict[str, Any]:
    """The per-request ``_meta`` of a 2026-07-28 request (the tasks extension when ``tasks``)."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {TASKS_EXT: {}}} if tasks else {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


class HttpError(RuntimeError):
    pass


class Response:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: dict[bytes, bytes], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def message(self) -> dict[str, Any]:
        """The JSON-RPC answer in the body: JSON, or the SSE event that carries an id."""
        kind = self.headers.get(b"content-type", b"")
        if kind.startswith(b"text/event-stream"):
            found = None
            for line in self.body.split(b"\n"):
                if line.startswith(b"data:"):
                    data = line[5:].strip()
                    if data:
                        msg: dict[str, Any] = json.loads(data)
                        if "id" in msg and ("result" in msg or "error" in msg):
                            found = msg
            if found is None:
                raise HttpError(f"no answer in the event stream: {self.body[:300]!r}")
            return found
        out: dict[str, Any] = json.loads(self.body)
        return out

    def result(self) -> dict[str, Any]:
        """The JSON-RPC ``result`` (an HTTP or JSON-RPC error raises)."""
        if self.status != 200:
            raise HttpError(f"HTTP {self.status}: {self.body[:300]!r}")
        msg = self.message()
        if "result" not in msg:
            raise HttpError(f"error answer: {str(msg)[:300]}")
        result: dict[str, Any] = msg["result"]
        return result


def parse(buf: bytes) -> tuple[Response, int] | None:
    """One complete response at the start of ``buf`` and its length, or None (need more)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = buf[:end].split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    pos = end + 4
    length = headers.get(b"content-length")
    if length is not None:
        stop = pos + int(length)
        if len(buf) < stop:
            return None
        return Response(status, headers, buf[pos:stop]), stop
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        parts: list[bytes] = []
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if size == 0:
                if buf[pos:pos + 2] == b"\r\n":
                    return Response(status, headers, b"".join(parts)), pos + 2
                trailer = buf.find(b"\r\n\r\n", pos)  # trailers: skipped
                if trailer < 0:
                    return None
                return Response(status, headers, b"".join(parts)), trailer + 4
            if len(buf) < pos + size + 2:
                return None
            parts.append(buf[pos:pos + size])
            pos += size + 2
    if status in (204, 304) or status < 200:
        return Response(status, headers, b""), pos
    raise HttpError(f"a response without Content-Length or chunked framing: {buf[:300]!r}")


class Request:
    """A POST built once: ``render(id, task)`` fills in the JSON-RPC id and, where the
    message or a header says ``TASK``, a task id (a few byte replacements, no JSON)."""

    TASK = "@@TASK@@"

    def __init__(self, path: str, host: str, headers: dict[str, str], message: dict[str, Any]):
        head = [f"POST {path} HTTP/1.1", f"Host: {host}",
                "Accept: application/json, text/event-stream",
                "Content-Type: application/json"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self.head = ("\r\n".join(head) + "\r\nContent-Length: ").encode("latin-1")
        message = {"jsonrpc": "2.0", "id": "@@ID@@",
                   **{k: v for k, v in message.items() if k != "id"}}
        self.body = json.dumps(message, separators=(",", ":")).encode()
        self.has_task = b"@@TASK@@" in self.head + self.body

    def render(self, request_id: int, task: bytes = b"") -> bytes:
        head, body = self.head, self.body.replace(b'"@@ID@@"', b"%d" % request_id, 1)
        if self.has_task:
            head, body = head.replace(b"@@TASK@@", task), body.replace(b"@@TASK@@", task)
        return b"".join((head, b"%d\r\n\r\n" % len(body), body))


def notification(path: str, host: str, headers: dict[str, str], method: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "method": method}, separators=(",", ":")).encode()
    head = [f"POST {path} HTTP/1.1", f"Host: {host}",
            "Accept: application/json, text/event-stream", "Content-Type: application/json"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Conn:
    """One keep-alive connection; one request in flight."""

    def __init__(self, port: int, path: str = "/mcp", host: str = "127.0.0.1") -> None:
        self.address = (host, port)
        self.path, self.authority = path, f"{host}:{port}"
        self.next_id = 0
        self.reconnects = 0
        self.headers: dict[str, str] = {}  # the session's: Mcp-Session-Id, version
        self.open()

    def open(self) -> None:
        self.sock = socket.create_connection(self.address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def done(self, response: Response) -> None:
        """After a response: a new connection if the server closes this one (hypercorn
        does after ``keep_alive_max_requests``, 1,000 requests by default), as any HTTP
        client would."""
        if response.headers.get(b"connection", b"").lower() == b"close":
            self.sock.close()
            self.reconnects += 1
            self.open()

    def close(self) -> None:
        self.sock.close()

    def roundtrip(self, data: bytes) -> Response:
        self.sock.sendall(data)
        while True:
            if self.buf:
                got = parse(self.buf)
                if got is not None:
                    response, used = got
                    self.buf = self.buf[used:]
                    self.done(response)
                    return response
            chunk = self.sock.recv(262144)
            if not chunk:
                raise HttpError("the server closed the connection")
            self.buf += chunk

    def request(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> Request:
        return Request(self.path, self.authority, {**self.headers, **(headers or {})}, message)

    def call(self, method: str, params: dict[str, Any], headers: dict[str, str] | None = None,
             ) -> dict[str, Any]:
        self.next_id += 1
        req = self.request({"method": method, "params": params}, headers)
        return self.roundtrip(req.render(self.next_id)).result()

    # --- the two eras ---------------------------------------------------------------

    def initialize(self) -> str:
        """The 2025-11-25 handshake: a session (when the server makes one); its version."""
        self.next_id += 1
        req = self.request({"method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}})
        response = self.roundtrip(req.render(self.next_id))
        version = str(response.result().get("protocolVersion", LEGACY))
        session = response.headers.get(b"mcp-session-id")
        if session is not None:
            self.headers["Mcp-Session-Id"] = session.decode("latin-1")
        self.headers["MCP-Protocol-Version"] = version
        done = self.roundtrip(notification(self.path, self.authority, self.headers,
                                           "notifications/initialized"))
        if done.status // 100 != 2:
            raise HttpError(f"notifications/initialized: HTTP {done.status}")
        return version

    def modern_call(self, method: str, params: dict[str, Any], name: str | None) -> dict[str, Any]:
        """One stateless 2026-07-28 request (``params`` carry their ``_meta``)."""
        return self.call(method, params, modern_headers(method, name))


def modern_headers(method: str, name: str | None) -> dict[str, str]:
    out = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        out["Mcp-Name"] = name
    return out


# --- one round trip of each workload -----------------------------------------------------
#
# ``setup(conn, spec)`` opens what the workload's era needs on ``conn`` and returns
# ``once() -> None``: one round trip (raises on a wrong answer). ``spec`` names the
# server's tools: {"echo": name, "task": [name, args]}.


def _check_plain(result: dict[str, Any]) -> None:
    if result.get("isError") or result.get("resultType", "complete") != "complete":
        raise HttpError(f"not a plain result: {str(result)[:300]}")


def setup(conn: Conn, workload: str, spec: dict[str, Any]) -> Callable[[], None]:
    if workload in ("seq-json", "seq-sse", "c50"):
        conn.initialize()
        req = conn.request({"method": "tools/call",
                            "params": {"name": spec["echo"], "arguments": {"text": "hello"}}})

        def plain() -> None:
            conn.next_id += 1
            _check_plain(conn.roundtrip(req.render(conn.next_id)).result())

        return plain
    if workload == "task-2025":
        conn.initialize()
        name, args = spec["task"]
        create = conn.request({"method": "tools/call", "params": {
            "name": name, "arguments": args, "task": {"ttl": 600_000}}})
        fetch = conn.request({"method": "tasks/result", "params": {"taskId": Request.TASK}})

        def task() -> None:
            conn.next_id += 1
            created = conn.roundtrip(create.render(conn.next_id)).result()
            conn.next_id += 1
            task_id = created["task"]["taskId"].encode()
            result = conn.roundtrip(fetch.render(conn.next_id, task_id)).result()
            if result.get("isError"):
                raise HttpError(f"task failed: {str(result)[:300]}")

        return task
    if workload == "modern":
        conn.modern_call("server/discover", {"_meta": modern_meta(False)}, None)
        req = conn.request({"method": "tools/call", "params": {
            "_meta": modern_meta(False), "name": spec["echo"], "arguments": {"text": "hello"}}},
            modern_headers("tools/call", spec["echo"]))

        def modern() -> None:
            conn.next_id += 1
            _check_plain(conn.roundtrip(req.render(conn.next_id)).result())

        return modern
    if workload == "task-2026":
        meta = modern_meta(True)
        conn.modern_call("server/discover", {"_meta": meta}, None)
        name, args = spec["task"]
        create = conn.request({"method": "tools/call", "params": {
            "_meta": meta, "name": name, "arguments": args}}, modern_headers("tools/call", name))
        get = conn.request({"method": "tasks/get", "params": {"_meta": meta, "taskId": Request.TASK}},
                           modern_headers("tasks/get", Request.TASK))

        def modern_task() -> None:
            conn.next_id += 1
            created = conn.roundtrip(create.render(conn.next_id)).result()
            if created.get("resultType") != "task":
                raise HttpError(f"not a CreateTaskResult: {str(created)[:300]}")
            task_id = created["taskId"].encode()
            while True:
                conn.next_id += 1
                got = conn.roundtrip(get.render(conn.next_id, task_id)).result()
                status = got.get("status")
                if status == "completed":
                    if got["result"].get("isError"):
                        raise HttpError(f"task failed: {str(got)[:300]}")
                    return
                if status != "working":
                    raise HttpError(f"task is {status}: {str(got)[:300]}")

        return modern_task
    raise ValueError(f"unknown workload {workload!r}")


def timed(once: Callable[[], None], warmup: int, duration: float) -> dict[str, Any]:
    """``warmup`` round trips, then as many as fit in ``duration`` s: count, latencies, CPU."""
    for _ in range(warmup):
        once()
    lat: list[float] = []
    clock = time.perf_counter
    cpu0 = time.process_time()
    start = clock()
    deadline = start + duration
    while True:
        t0 = clock()
        once()
        t1 = clock()
        lat.append(t1 - t0)
        if t1 >= deadline:
            break
    return {"n": len(lat), "elapsed": clock() - start, "lat": lat,
            "client_cpu": time.process_time() - cpu0}


# --- the concurrent rows: one process's share of the connections ---------------------------


def worker(params: dict[str, Any]) -> dict[str, Any]:
    """Open ``conns`` connections (a legacy session each), say ``ready`` on stdout, wait for
    a line on stdin, then run the closed loop for ``duration`` s; return the counts."""
    conns = [Conn(params["port"], params["path"]) for _ in range(params["conns"])]
    reqs = []
    for conn in conns:
        once = setup(conn, params["workload"], params["spec"])
        for _ in range(params["warmup"]):
            once()
        reqs.append(conn.request({"method": "tools/call", "params": {
            "name": params["spec"]["echo"], "arguments": {"text": "hello"}}}))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    sel = selectors.DefaultSelector()
    clock = time.perf_counter
    lat: list[float] = []
    sent_at = [0.0] * len(conns)
    cpu0 = time.process_time()
    start = clock()
    deadline = start + params["duration"]
    for i, conn in enumerate(conns):
        sel.register(conn.sock, selectors.EVENT_READ, i)
        conn.next_id += 1
        sent_at[i] = clock()
        conn.sock.sendall(reqs[i].render(conn.next_id))
    active = len(conns)
    while active:
        for key, _ in sel.select():
            i = key.data
            conn = conns[i]
            chunk = conn.sock.recv(262144)
            if not chunk:
                raise HttpError("the server closed the connection")
            conn.buf += chunk
            got = parse(conn.buf)
            if got is None:
                continue
            response, used = got
            conn.buf = conn.buf[used:]
            now = clock()
            if response.headers.get(b"connection", b"").lower() == b"close":
                sel.unregister(conn.sock)
                conn.done(response)
                sel.register(conn.sock, selectors.EVENT_READ, i)
            lat.append(now - sent_at[i])
            _check_plain(response.result())
            if now >= deadline:
                sel.unregister(conn.sock)
                active -= 1
                continue
            conn.next_id += 1
            sent_at[i] = now
            conn.sock.sendall(reqs[i].render(conn.next_id))
    elapsed = clock() - start
    out = {"n": len(lat), "elapsed": elapsed, "client_cpu": time.process_time() - cpu0,
           "lat": [round(x * 1e3, 4) for x in lat]}
    for conn in conns:
        conn.close()
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "worker":
        sys.exit("usage: python -m bench.http_client worker PARAMS_JSON")
    try:
        result = worker(json.loads(argv[1]))
    except Exception as exc:  # reported to the harness, which shows it in the table
        sys.stdout.write("ready\n")
        result = {"error": repr(exc)[:300]}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
