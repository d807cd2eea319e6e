"""The llhttp server's sans-IO halves without sockets: RequestReader and Answer.

As h11's tests drive its ``Connection`` with bytes: fed in pieces, byte by
byte, pipelined; the answer's framing for each kind of ASGI answer.
"""

from __future__ import annotations

import pytest

from trio_mcp import HttpServerSettings
from trio_mcp.transports._http11._answer import Answer, refusal
from trio_mcp.transports._http11._request import MAX_AHEAD, RequestReader

SETTINGS = HttpServerSettings(max_body=100, max_headers=5, max_header_bytes=300,
                              max_request_target=50)
CHUNKED = (b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n")


def test_http11_reader_byte_by_byte_equals_all_at_once() -> None:
    """llhttp keeps its state across feeds: one byte at a time parses the same requests."""
    data = CHUNKED + b"GET /g?x=1 HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\r\n"
    whole, split = RequestReader(SETTINGS), RequestReader(SETTINGS)
    whole.feed(data)
    for i in range(len(data)):
        split.feed(data[i:i + 1])
    for reader in (whole, split):
        assert [(r.method, r.target, r.complete) for r in reader.queue] == [
            ("POST", b"/c", True), ("GET", b"/g?x=1", True)]
        assert b"".join(reader.queue[0].chunks) == b"abcde"
        assert (b"t", b"1") not in reader.queue[0].headers  # the trailer is dropped
        assert reader.queue[1].headers == [(b"host", b"a"), (b"x-a", b"1")]
        assert not reader.stopped


def test_http11_reader_refusal_stops_parsing_after_good_requests() -> None:
    reader = RequestReader(SETTINGS)
    reader.feed(b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"
                b"GET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
    assert [r.refusal for r in reader.queue] == [
        None, (400, "Bad Request: exactly one Host header is required")]
    assert reader.stopped and reader.queue[1].close_after
    reader.feed(b"GET /4 HTTP/1.1\r\nHost: a\r\n\r\n")  # nothing more is parsed
    assert len(reader.queue) == 2


@pytest.mark.parametrize(("data", "status"), [
    (b"GET /" + b"a" * 60, 414),
    (b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X%d: v\r\n" % i for i in range(6)), 431),
    (b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"v" * 400, 431),
    (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n" + b"x" * 101, 413),
    (b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417),
    (b"GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505),
])
def test_http11_reader_limits(data: bytes, status: int) -> None:
    reader = RequestReader(SETTINGS)
    reader.feed(data)
    assert reader.queue[-1].refusal is not None
    assert reader.queue[-1].refusal[0] == status


def test_http11_reader_head_limit_holds_across_small_feeds() -> None:
    """A head that never ends, a few bytes per read: refused once past the limit."""
    reader = RequestReader(SETTINGS)
    reader.feed(b"GET / HTTP/1.1\r\nHost: a\r\nX: ")
    while not reader.stopped:
        reader.feed(b"v" * 7)
    assert reader.queue[-1].refusal == (431, "Request Header Fields Too Large")


def test_http11_reader_expect_continue_only_with_a_body() -> None:
    reader = RequestReader(SETTINGS)
    reader.feed(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
    assert reader.queue[0].expect_continue and not reader.queue[0].complete
    reader.feed(b"abcGET / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n")
    assert [r.expect_continue for r in reader.queue] == [True, False]


def test_http11_reader_pipelining_bound() -> None:
    reader = RequestReader(SETTINGS)
    reader.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n" * MAX_AHEAD)
    assert reader.may_read_ahead()
    reader.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert not reader.may_read_ahead()


def test_http11_answer_framing() -> None:
    whole = Answer()
    whole.start(200, [(b"content-type", b"a/b"), (b"Connection", b"x")], b"", head=False,
                http10=False, close=False)
    assert whole.body(b"hello", False) == (
        b"HTTP/1.1 200 OK\r\ncontent-type: a/b\r\ncontent-length: 5\r\n\r\nhello")
    streamed = Answer()
    streamed.start(200, [], b"", head=False, http10=False, close=True)
    assert streamed.body(b"ab", True) == (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\nab\r\n")
    assert streamed.body(b"", False) == b"0\r\n\r\n" and streamed.finished
    old = Answer()
    old.start(200, [], b"", head=False, http10=True, close=False)
    assert old.body(b"ab", True).endswith(b"connection: close\r\n\r\nab") and old.close_after
    head = Answer()
    head.start(200, [(b"content-length", b"9")], b"", head=True, http10=True, close=False)
    assert head.body(b"123456789", False) == (
        b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nconnection: keep-alive\r\n\r\n")
    short = Answer()
    short.start(200, [(b"content-length", b"9")], b"", head=False, http10=False, close=False)
    short.body(b"1234", False)
    assert short.close_after  # shorter than announced: the close tells the client
    long = Answer()
    long.start(200, [(b"content-length", b"1")], b"", head=False, http10=False, close=False)
    with pytest.raises(RuntimeError):
        long.body(b"12", False)


def test_http11_refusal_bytes() -> None:
    assert refusal(431, "too big", b"date: x\r\n") == (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\ndate: x\r\ncontent-type: text/plain; "
        b"charset=utf-8\r\ncontent-length: 8\r\nconnection: close\r\n\r\ntoo big\n")
