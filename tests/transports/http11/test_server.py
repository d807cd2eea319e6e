"""The llhttp HTTP/1.1 server (``serve_http``'s default): framing, limits, timeouts, smuggling.

Real sockets on loopback, a raw client writing bytes. RFC 9112 (HTTP/1.1
messages: §3.2 Host, §6.1 Transfer-Encoding, §6.3 message length, §7.1
chunks, §9.3 persistence and pipelining), RFC 9110 (§10.1.1 Expect, §15
status codes: 408, 413, 414, 417, 431, 505), RFC 6585 (431).
"""

from __future__ import annotations

import datetime
import ssl

import httpx
import pytest
import trio
import trio.testing

import trio_mcp
from trio_mcp import HttpServerSettings

from tests.helpers import example_app
from tests.http11_support import (
    HOST,
    EchoApp,
    exchange,
    only_answer,
    parse_answers,
    read_all,
    running,
)
from tests.http_support import INITIALIZE

pytestmark = pytest.mark.timeout(60)

GET = b"GET /x HTTP/1.1\r\n" + HOST + b"\r\n"
#: The same request, last on its connection (the server closes it after the answer).
LAST_GET = b"GET /x HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n"


def post(body: bytes, path: bytes = b"/p", extra: bytes = b"") -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\n" + HOST + b"Content-Length: %d\r\n" % len(body)
            + extra + b"\r\n" + body)


# --- keep-alive, versions, pipelining, HEAD, Date/Server --------------------------------------


async def test_http11_keep_alive_serves_requests_in_turn_with_date() -> None:
    app = EchoApp()
    async with running(app) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            for i in range(3):
                await stream.send_all(post(b"hello %d" % i))
                data = b""
                while not parse_answers(data)[0]:
                    data += await stream.receive_some(65536)
                answer = only_answer(data)
                assert answer.status == 200
                assert answer.body == b"POST /p 7\nhello %d" % i
                assert answer.header(b"connection") is None  # persistent (RFC 9112 §9.3)
                assert answer.header(b"date") is not None  # RFC 9110 §6.6.1
                assert answer.header(b"server") is None  # none unless configured
    assert len(app.seen) == 3


async def test_http11_server_header_as_configured() -> None:
    settings = HttpServerSettings(server_header="trio-mcp", date_header=False)
    async with running(EchoApp(), settings) as (port, _, _):
        answer = only_answer(await exchange(port, GET))
    assert answer.header(b"server") == b"trio-mcp"
    assert answer.header(b"date") is None


async def test_http11_pipelined_requests_answered_in_order() -> None:
    """RFC 9112 §9.3.2: a server MUST send its responses in the order of the requests."""
    app = EchoApp()
    requests = (post(b"a", b"/one") + GET.replace(b"/x", b"/two") + post(b"ccc", b"/three")
                + b"GET /four?q=1 HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")
    async with running(app) as (port, _, _):
        answers, rest = parse_answers(await exchange(port, requests, eof=False))
    assert rest == b""
    assert [a.body.split(b"\n")[0] for a in answers] == [
        b"POST /one 1", b"GET /two 0", b"POST /three 3", b"GET /four?q=1 0"]
    assert answers[-1].header(b"connection") == b"close"


async def test_http11_many_pipelined_requests_in_one_write() -> None:
    """More pipelined requests than are parsed ahead: reading pauses, none is lost."""
    app = EchoApp()
    requests = b"".join(post(b"%d" % i, b"/n%d" % i) for i in range(50))
    async with running(app) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(requests + b"GET /end HTTP/1.1\r\n" + HOST
                                  + b"Connection: close\r\n\r\n")
            answers, rest = parse_answers(await read_all(stream))
    assert rest == b""
    assert [a.body.split(b" ")[1] for a in answers] == [b"/n%d" % i for i in range(50)] + [b"/end"]


async def test_http11_http10_closes_unless_keep_alive() -> None:
    """HTTP/1.0: no Host needed; persistent only with Connection: keep-alive (RFC 9112 §9.3)."""
    async with running(EchoApp()) as (port, _, _):
        answer = only_answer(await exchange(port, b"GET /old HTTP/1.0\r\n\r\n", eof=False))
        assert answer.status == 200 and answer.header(b"connection") == b"close"
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            two = b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
            await stream.send_all(two + b"GET /b HTTP/1.0\r\n\r\n")
            answers, rest = parse_answers(await read_all(stream))
    assert rest == b""
    assert [a.header(b"connection") for a in answers] == [b"keep-alive", b"close"]
    assert [a.body.split(b"\n")[0] for a in answers] == [b"GET /a 0", b"GET /b 0"]


async def test_http11_connection_close_is_honoured() -> None:
    async with running(EchoApp()) as (port, _, _):
        data = await exchange(port, b"GET / HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n"
                              + GET, eof=False)
    answer = only_answer(data)  # the request after close is not read
    assert answer.header(b"connection") == b"close"


async def test_http11_head_answer_has_no_body() -> None:
    """RFC 9110 §9.3.2: the server MUST NOT send content in the response to HEAD."""
    async with running(EchoApp()) as (port, _, _):
        data = await exchange(port, b"HEAD /h HTTP/1.1\r\n" + HOST + b"\r\n" + LAST_GET, eof=False)
    head, _, rest = data.partition(b"\r\n\r\n")
    head += b"\r\n"
    assert head.startswith(b"HTTP/1.1 200 ")
    assert head.lower().count(b"content-length: 10\r\n") == 1  # what GET would have said
    answer = only_answer(rest)  # the next answer follows at once: no body bytes between
    assert answer.body == b"GET /x 0\n"


# --- bodies: chunked, 100-continue, streamed ---------------------------------------------------


async def test_http11_chunked_body_with_extensions_and_trailers() -> None:
    """RFC 9112 §7.1: chunks, chunk extensions ignored, trailer fields not merged."""
    app = EchoApp()
    body = b"4;name=value\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trail: 1\r\n\r\n"
    request = b"POST /c HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n" + body
    async with running(app) as (port, _, _):
        answers, _ = parse_answers(await exchange(port, request + LAST_GET, eof=False))
    assert answers[0].body == b"POST /c 24\nWikipedia in \r\n\r\nchunks."
    assert answers[1].body == b"GET /x 0\n"
    assert all(name != b"x-trail" for name, _ in app.seen[0]["headers"])


async def test_http11_expect_100_continue() -> None:
    """RFC 9110 §10.1.1: 100 before the body is read; 413 instead when the length is refused."""
    async with running(EchoApp()) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"POST /e HTTP/1.1\r\n" + HOST + b"Content-Length: 5\r\n"
                                  b"Expect: 100-continue\r\n\r\n")
            interim = await stream.receive_some(65536)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            await stream.send_all(b"hello")
            data = b""
            while not parse_answers(data)[0]:
                data += await stream.receive_some(65536)
            assert only_answer(data).body == b"POST /e 5\nhello"
        refused = only_answer(await exchange(
            port, b"POST /e HTTP/1.1\r\n" + HOST + b"Content-Length: 5000\r\n"
            b"Expect: 100-continue\r\n\r\n"))
        assert refused.status == 413 and refused.header(b"connection") == b"close"
        other = only_answer(await exchange(
            port, b"POST /e HTTP/1.1\r\n" + HOST + b"Content-Length: 1\r\nExpect: magic\r\n\r\nx"))
        assert other.status == 417


async def test_http11_body_reaches_the_app_as_it_arrives() -> None:
    """A body is streamed to the app (more_body), not buffered whole first."""
    async with running(EchoApp()) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"POST /echo-parts HTTP/1.1\r\n" + HOST
                                  + b"Content-Length: 300\r\n\r\n" + b"a" * 100)
            data = b""
            while b"part 100;" not in data:  # the app saw 100 bytes while 200 are unsent
                data += await stream.receive_some(65536)
            await stream.send_all(b"b" * 200)
            while not data.endswith(b"0\r\n\r\n"):
                data += await stream.receive_some(65536)
    answer = only_answer(data)
    assert answer.body == b"part 100;part 200;"


# --- limits -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("request_bytes", "status"), [
    pytest.param(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + HOST + b"\r\n", 414, id="long-target"),
    pytest.param(b"GET /" + b"a" * 9000, 414, id="long-target-unfinished"),
    pytest.param(b"GET / HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: v\r\n" % i for i in range(101))
                 + b"\r\n", 431, id="too-many-fields"),
    pytest.param(b"GET / HTTP/1.1\r\n" + HOST + b"X: " + b"v" * 70000 + b"\r\n\r\n", 431,
                 id="big-field"),
    pytest.param(b"GET / HTTP/1.1\r\n" + HOST + b"X: " + b"v" * 200000, 431,
                 id="head-never-ends"),
    pytest.param(b"GET / HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 900)
                                                     for i in range(80)) + b"\r\n", 431,
                 id="many-big-fields"),
    pytest.param(post(b"x" * 1025), 413, id="content-length-over-max"),
    pytest.param(b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                 + b"200\r\n" + b"x" * 512 + b"\r\n" + b"200\r\n" + b"x" * 512 + b"\r\n"
                 + b"1\r\nx\r\n0\r\n\r\n", 413, id="chunked-over-max"),
])
async def test_http11_limits_refuse_and_close(request_bytes: bytes, status: int) -> None:
    """RFC 9110 §15.5.14 (413), §15.5.15 (414), RFC 6585 §5 (431): refused, then closed."""
    app = EchoApp()
    async with running(app) as (port, _, _):
        answer = only_answer(await exchange(port, request_bytes, eof=False))
        assert answer.status == status
        assert answer.header(b"connection") == b"close"
        assert only_answer(await exchange(port, GET)).status == 200  # the server lives on
    assert all(scope["path"] == "/x" for scope in app.seen[:-1] if status != 413)


async def test_http11_body_within_max_is_served() -> None:
    async with running(EchoApp()) as (port, _, _):
        answer = only_answer(await exchange(port, post(b"x" * 1024)))
    assert answer.status == 200 and answer.body.startswith(b"POST /p 1024\n")


async def test_http11_connections_beyond_max_get_503() -> None:
    settings = HttpServerSettings(max_body=1024, max_connections=1)
    async with running(EchoApp(), settings) as (port, server, _):
        first = await trio.open_tcp_stream("127.0.0.1", port)
        async with first:
            await first.send_all(GET)
            data = b""
            while not parse_answers(data)[0]:
                data += await first.receive_some(65536)
            assert len(server.connections) == 1
            refused = only_answer(await exchange(port, GET, eof=False))
            assert refused.status == 503 and refused.header(b"connection") == b"close"
        with trio.fail_after(10):
            while server.connections:  # noqa: ASYNC110 (until the server sees the close)
                await trio.sleep(0.01)
        assert only_answer(await exchange(port, GET)).status == 200


# --- request smuggling and malformed framing ------------------------------------------------

SMUGGLING = {
    # RFC 9112 §6.1: Content-Length with Transfer-Encoding: the hidden request is never served.
    "cl-te": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: 4\r\nTransfer-Encoding: chunked"
              b"\r\n\r\n0\r\n\r\nGET /hidden HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    "te-cl": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\nContent-Length: 3"
              b"\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n", 400),
    "te-te-obfuscated": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n"
                         b"Transfer-Encoding: x\r\n\r\n0\r\n\r\n", 400),
    "te-not-chunked": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\nabc", 400),
    "te-space-before-colon": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding : chunked\r\n"
                              b"\r\n0\r\n\r\n", 400),
    "te-in-http10": (b"POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
                     400),
    "duplicate-cl": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: 1\r\nContent-Length: 1"
                     b"\r\n\r\nx", 400),
    "cl-list": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: 1, 1\r\n\r\nx", 400),
    "cl-not-digits": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: 1x\r\n\r\nx", 400),
    "cl-sign": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: +1\r\n\r\nx", 400),
    "cl-negative": (b"POST /p HTTP/1.1\r\n" + HOST + b"Content-Length: -1\r\n\r\nx", 400),
    "chunk-size-not-hex": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                           b"zz\r\nabc\r\n0\r\n\r\n", 400),
    "chunk-size-overflow": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                            b"fffffffffffffffff\r\nabc\r\n0\r\n\r\n", 400),
    "chunk-extension-bad": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                            b"3;a\x01\r\nabc\r\n0\r\n\r\n", 400),
    "chunk-bare-lf": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                      b"3\nabc\n0\n\n", 400),
    "chunk-data-too-long": (b"POST /p HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n"
                            b"3\r\nabcd\r\n0\r\n\r\n", 400),
    "obs-fold": (b"GET / HTTP/1.1\r\n" + HOST + b"X-A: a\r\n b\r\n\r\n", 400),
    "bare-lf-request-line": (b"GET / HTTP/1.1\n" + HOST + b"\r\n", 400),
    "bare-cr-request-line": (b"GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
    "bare-lf-header": (b"GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400),
    "space-in-name": (b"GET / HTTP/1.1\r\n" + HOST + b"X Y: b\r\n\r\n", 400),
    "space-before-colon": (b"GET / HTTP/1.1\r\n" + HOST + b"X : b\r\n\r\n", 400),
    "nul-in-value": (b"GET / HTTP/1.1\r\n" + HOST + b"X: a\x00b\r\n\r\n", 400),
    "del-in-value": (b"GET / HTTP/1.1\r\n" + HOST + b"X: a\x7fb\r\n\r\n", 400),
    "leading-space-first-field": (b"GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400),
    "space-in-target": (b"GET /a b HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    "lowercase-method": (b"get / HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    # RFC 9112 §3.2: Host.
    "no-host-http11": (b"GET / HTTP/1.1\r\n\r\n", 400),
    "two-hosts": (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    "bad-host": (b"GET / HTTP/1.1\r\nHost: a/b@c\r\n\r\n", 400),
    # RFC 9110 §15.6.6: versions.
    "http-9.9": (b"GET / HTTP/9.9\r\n" + HOST + b"\r\n", 505),
    "http-1.2": (b"GET / HTTP/1.2\r\n" + HOST + b"\r\n", 505),
    "http-2.0": (b"GET / HTTP/2.0\r\n" + HOST + b"\r\n", 505),
    "http-0.9": (b"GET / HTTP/0.9\r\n\r\n", 505),
    "h2-preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    # CONNECT is not served (a tunnel is not an origin server's business here).
    "connect": (b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501),
}


@pytest.mark.parametrize("case", list(SMUGGLING))
async def test_http11_malformed_framing_refused_and_closed(case: str) -> None:
    """Request smuggling and bad framing: 400 (505, 501) before the app, then the close."""
    request_bytes, status = SMUGGLING[case]
    app = EchoApp()
    async with running(app) as (port, _, _):
        data = await exchange(port, request_bytes, eof=False)
        answer = only_answer(data)  # one answer, then the connection closed
        assert answer.status == status, answer
        assert answer.header(b"connection") == b"close"
        assert only_answer(await exchange(port, GET)).status == 200  # the server lives on
    assert [scope["path"] for scope in app.seen] == ["/x"]  # the app never saw the bad one


async def test_http11_bad_request_after_good_ones_is_refused_in_order() -> None:
    """A framing error in the third pipelined request: the first two are answered first."""
    app = EchoApp()
    bad = SMUGGLING["cl-te"][0]
    async with running(app) as (port, _, _):
        answers, rest = parse_answers(await exchange(port, GET + GET + bad + GET, eof=False))
    assert [a.status for a in answers] == [200, 200, 400]
    assert rest == b""


async def test_http11_upgrade_is_ignored_and_the_connection_closed() -> None:
    """RFC 9110 §7.8: a server MAY ignore Upgrade: served as HTTP/1.1, then closed."""
    app = EchoApp()
    request = (b"GET /u HTTP/1.1\r\n" + HOST + b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
               b"\x81\x85not http at all")
    async with running(app) as (port, _, _):
        answer = only_answer(await exchange(port, request, eof=False))
        assert answer.status == 200 and answer.body == b"GET /u 0\n"
        assert answer.header(b"connection") == b"close"
        assert answer.header(b"upgrade") is None
        h2c = (b"GET /h HTTP/1.1\r\n" + HOST + b"Connection: Upgrade, HTTP2-Settings\r\n"
               b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
        assert only_answer(await exchange(port, h2c, eof=False)).status == 200


# --- timeouts (the virtual clock jumps while every task waits) --------------------------------


async def test_http11_slowloris_head_gets_408(autojump_clock: trio.testing.MockClock) -> None:
    """A head that does not arrive within headers_timeout: 408, closed (a byte now and then
    does not extend it)."""
    async with running(EchoApp()) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"GET / HTTP/1.1\r\n")
            for _ in range(30):  # one header byte a second: 30 s > headers_timeout (10 s)
                try:
                    await stream.send_all(b"X")
                except trio.BrokenResourceError:
                    break
                await trio.sleep(1)
            answer = only_answer(await read_all(stream))
    assert answer.status == 408


async def test_http11_idle_keep_alive_closes_silently(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running(EchoApp()) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(GET)
            answers, rest = parse_answers(await read_all(stream))  # ends: keep_alive_timeout
    assert [a.status for a in answers] == [200] and rest == b""


async def test_http11_silent_connection_closes(autojump_clock: trio.testing.MockClock) -> None:
    async with running(EchoApp()) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            assert await read_all(stream) == b""


async def test_http11_slow_body_gets_408(autojump_clock: trio.testing.MockClock) -> None:
    """A client that sends the head and never the whole body does not hold the connection."""
    app = EchoApp()
    async with running(app) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(post(b"0123456789")[:-5])
            answer = only_answer(await read_all(stream))
    assert answer.status == 408


# --- the app's side: disconnect, errors -------------------------------------------------------


async def test_http11_client_disconnect_seen_during_a_long_answer() -> None:
    app = EchoApp()
    async with running(app) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(b"GET /stream HTTP/1.1\r\n" + HOST + b"\r\n")
        data = b""
        while b"data: beat" not in data:
            data += await stream.receive_some(65536)
        assert b"transfer-encoding: chunked" in data
        await stream.aclose()
        with trio.fail_after(10):
            await app.disconnected.wait()


async def test_http11_client_that_stops_reading_is_closed_after_the_write_timeout() -> None:
    """A client that takes nothing (an SSE stream it never reads) does not hold its
    connection forever: once a write waits ``write_timeout``, the connection is closed
    and the app's ``receive()`` says the client is gone."""
    app = EchoApp()
    settings = HttpServerSettings(max_body=1024, write_timeout=0.5)
    async with running(app, settings) as (port, _, _):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"GET /flood HTTP/1.1\r\n" + HOST + b"\r\n")
            with trio.fail_after(30):  # the socket buffers fill, then the timeout runs
                await app.disconnected.wait()
            data = await read_all(stream)  # what was written, then the server's close
    assert data.startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize("path", [b"/fail", b"/silent"])
async def test_http11_app_failure_is_500_and_the_server_lives(path: bytes) -> None:
    async with running(EchoApp()) as (port, _, _):
        answer = only_answer(await exchange(port, b"GET " + path + b" HTTP/1.1\r\n" + HOST
                                            + b"\r\n", eof=False))
        assert answer.status == 500 and answer.header(b"connection") == b"close"
        assert only_answer(await exchange(port, GET)).status == 200


# --- graceful shutdown ------------------------------------------------------------------------


async def test_http11_shutdown_finishes_in_flight_and_closes_idle() -> None:
    app = EchoApp()
    async with running(app) as (port, _, scope):
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        busy = await trio.open_tcp_stream("127.0.0.1", port)
        async with idle, busy:
            await idle.send_all(GET)
            data = b""
            while not parse_answers(data)[0]:
                data += await idle.receive_some(65536)
            await busy.send_all(b"GET /slow HTTP/1.1\r\n" + HOST + b"\r\n")
            await app.slow_started.wait()
            scope.cancel()  # the server stops
            assert await read_all(idle) == b""  # idle: closed at once, nothing sent
            app.release.set()
            answer = only_answer(await read_all(busy))  # in flight: answered, then closed
            assert answer.status == 200 and answer.body == b"GET /slow 0\n"
            assert answer.header(b"connection") == b"close"
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", port)  # no longer listening


async def test_http11_shutdown_cancels_what_outlives_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = EchoApp()
    async with running(app) as (port, server, scope):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(b"GET /slow HTTP/1.1\r\n" + HOST + b"\r\n")
            await app.slow_started.wait()
            scope.cancel()
            assert await read_all(stream) == b""  # cancelled after shutdown_timeout
    assert not server.connections


# --- TLS and the MCP app ----------------------------------------------------------------------


def self_signed(tmp_path: object) -> tuple[str, str, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: (certfile, keyfile, a client context)."""
    import ipaddress
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    assert isinstance(tmp_path, Path)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    client = ssl.create_default_context(cadata=cert.public_bytes(
        serialization.Encoding.PEM).decode())
    return str(certfile), str(keyfile), client


@pytest.mark.parametrize("server", ["llhttp", "hypercorn"])
async def test_http11_tls_serves_mcp(tmp_path: object, server: trio_mcp.HttpServerName) -> None:
    """serve_http(certfile=, keyfile=): HTTPS; an MCP client initializes and calls a tool."""
    certfile, keyfile, client_context = self_signed(tmp_path)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(lambda task_status: trio_mcp.serve_http(
            example_app(), certfile=certfile, keyfile=keyfile, server=server,
            task_status=task_status))
        assert address.url.startswith("https://127.0.0.1:")
        async with httpx.AsyncClient(verify=client_context, trust_env=False) as client:
            response = await client.post(address.url, json=INITIALIZE, headers={
                "Accept": "application/json, text/event-stream"})
            assert response.status_code == 200, response.text
            assert response.json()["result"]["protocolVersion"] == "2025-11-25"
        # A plain-HTTP client on the TLS port gets no answer and the server lives on.
        assert await exchange(address.port, GET) in (b"", b"\x15\x03\x01\x00\x02\x02\x16")
        nursery.cancel_scope.cancel()


async def test_http11_tls_scope_scheme_is_https(tmp_path: object) -> None:
    certfile, keyfile, client_context = self_signed(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(certfile, keyfile)
    app = EchoApp()
    async with running(app, context=server_context) as (port, _, _):
        async with httpx.AsyncClient(verify=client_context, trust_env=False) as client:
            response = await client.post(f"https://127.0.0.1:{port}/t", content=b"abc")
    assert response.text == "POST /t 3\nabc"
    assert app.seen[0]["scheme"] == "https"


async def test_http11_default_server_is_llhttp_with_httptools() -> None:
    assert trio_mcp.default_http_server() == "llhttp"


async def test_http11_mcp_post_pipelined_with_the_real_app() -> None:
    """Two MCP POSTs written at once on one connection to StreamableHttpApp: two answers."""
    import json

    http_app = trio_mcp.StreamableHttpApp(example_app(), json_response=True)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(trio_mcp.serve_http, http_app)
        body = json.dumps(INITIALIZE).encode()
        one = (b"POST /mcp HTTP/1.1\r\n" + HOST + b"Accept: application/json, text/event-stream"
               b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
               + body)
        answers, _ = parse_answers(await exchange(
            address.port, one + one.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n"),
            eof=False))
        assert [a.status for a in answers] == [200, 200]
        ids = {a.header(b"mcp-session-id") for a in answers}
        assert len(ids) == 2 and None not in ids
        nursery.cancel_scope.cancel()


async def test_http11_hypercorn_mode_desyncs_where_llhttp_refuses() -> None:
    """What the docs say hypercorn mode does not defend (h11's framing): Content-Length with
    Transfer-Encoding is framed by the chunks and the request hidden after them is answered.
    If a hypercorn/h11 upgrade starts refusing it, this fails: then update the docs."""
    smuggled = (b"POST /mcp HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
                b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                b"GET /hidden HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")
    statuses = {}
    for server in ("llhttp", "hypercorn"):
        async with trio.open_nursery() as nursery:
            address = await nursery.start(lambda task_status, s=server: trio_mcp.serve_http(
                example_app(), server=s, task_status=task_status))
            with trio.fail_after(10):
                answers, _ = parse_answers(await exchange(address.port, smuggled, eof=False))
            statuses[server] = [a.status for a in answers]
            nursery.cancel_scope.cancel()
    assert statuses["llhttp"] == [400]
    assert len(statuses["hypercorn"]) == 2  # the POST's answer, then the hidden GET's (404)
    assert statuses["hypercorn"][1] == 404
