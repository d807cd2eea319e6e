"""Fuzzing the llhttp server with random and mutated requests over real sockets.

A seeded generator writes valid requests (methods, targets, fields, bodies
with Content-Length or chunked with extensions and trailers, HTTP/1.0 and
1.1, pipelined by threes), then cuts, splices, flips, inserts, deletes,
duplicates lines, swaps CRLF for LF, or writes random bytes. Each case goes
on a connection of its own, then the client half-closes. The server must
answer what it answers with well-formed responses of the expected statuses,
close the connection, and stay alive: a well-formed request after every
batch of cases is answered, and every unmutated case is answered in full.

The default budget is small; ``-m slow`` runs 10,000 cases.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio

from trio_mcp import HttpServerSettings

from tests.http11_support import HOST, exchange, parse_answers, running

pytestmark = pytest.mark.timeout(600)

STATUSES = {200, 400, 413, 414, 417, 431, 501, 505}
TOKEN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-!#$%&'*+.^_`|~"


async def fuzz_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer with the method, path and body length (JSON-free, no special paths)."""
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = f"{scope['method']} {scope['path']} {size}".encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


def valid_request(rng: random.Random) -> bytes:
    """A request within the fuzz server's limits (HEAD is left to tests/transports/http11/test_server.py)."""
    method = rng.choice([b"GET", b"POST", b"POST", b"DELETE", b"PUT", b"OPTIONS"])
    path = b"/" + "".join(rng.choice("abcxyz019-._~%20") for _ in range(rng.randint(0, 12))
                          ).replace("%", "%25").encode()
    if rng.random() < 0.3:
        path += b"?q=" + str(rng.randint(0, 999)).encode()
    version = b"HTTP/1.0" if rng.random() < 0.15 else b"HTTP/1.1"
    fields = [] if version == b"HTTP/1.0" and rng.random() < 0.5 else [HOST]
    if version == b"HTTP/1.0":
        fields.append(b"Connection: keep-alive\r\n")  # the next request is read too
    for _ in range(rng.randint(0, 5)):
        name = "".join(rng.choice(TOKEN) for _ in range(rng.randint(1, 10))).encode()
        value = "".join(rng.choice(TOKEN + " /:;=,") for _ in range(rng.randint(0, 20))
                        ).strip().encode()
        if name.lower() not in (b"host", b"content-length", b"transfer-encoding", b"expect",
                                b"connection", b"upgrade"):
            fields.append(name + b": " + value + b"\r\n")
    body = b""
    if method in (b"POST", b"PUT"):
        data = rng.randbytes(rng.randint(0, 200))
        if version == b"HTTP/1.1" and rng.random() < 0.4:
            fields.append(b"Transfer-Encoding: chunked\r\n")
            at = 0
            while at < len(data):
                size = rng.randint(1, 100)
                piece = data[at:at + size]
                extension = b";x=y" if rng.random() < 0.2 else b""
                body += b"%x%s\r\n%s\r\n" % (len(piece), extension, piece)
                at += size
            body += b"0\r\n" + (b"T: 1\r\n" if rng.random() < 0.2 else b"") + b"\r\n"
        else:
            fields.append(b"Content-Length: %d\r\n" % len(data))
            body = data
    rng.shuffle(fields)
    return method + b" " + path + b" " + version + b"\r\n" + b"".join(fields) + b"\r\n" + body


def valid_case(rng: random.Random) -> list[bytes]:
    return [valid_request(rng) for _ in range(rng.choice([1, 1, 2, 3]))]


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    kind = rng.randrange(9)
    if kind == 0 and data:  # cut
        return data[:rng.randrange(len(data))]
    if kind == 1:  # splice
        return data[:rng.randint(0, len(data))] + other[rng.randint(0, len(other)):]
    if kind == 2 and data:  # flip bytes
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 3:  # insert bytes
        at = rng.randint(0, len(data))
        noise = rng.choice([rng.randbytes(rng.randint(1, 8)), b"\r\n", b"\n", b"\r", b" ",
                            b"\t", b":", b"\x00", b"Transfer-Encoding: chunked\r\n",
                            b"Content-Length: 5\r\n", b"Host: b\r\n"])
        return data[:at] + noise + data[at:]
    if kind == 4 and data:  # delete a range
        at = rng.randrange(len(data))
        return data[:at] + data[at + rng.randint(1, 10):]
    if kind == 5:  # duplicate a line
        lines = data.split(b"\r\n")
        line = rng.choice(lines)
        lines.insert(rng.randint(0, len(lines)), line)
        return b"\r\n".join(lines)
    if kind == 6:  # CRLF -> LF or CR somewhere
        count = data.count(b"\r\n")
        if count:
            nth = rng.randrange(count)
            at = -1
            for _ in range(nth + 1):
                at = data.index(b"\r\n", at + 1)
            return data[:at] + rng.choice([b"\n", b"\r", b"\r\r\n", b"\n\r"]) + data[at + 2:]
        return data
    if kind == 7:  # random bytes
        return rng.randbytes(rng.randint(0, 300))
    return data.replace(b"HTTP/1.1", rng.choice([b"HTTP/1.2", b"HTTP/2.0", b"HTTP/11", b"http/1.1",
                                                 b"HTTP/1.1 ", b"HTTP /1.1"]), 1)


async def run_fuzz(cases: int, seed: int) -> None:
    rng = random.Random(seed)
    settings = HttpServerSettings(max_body=200, max_headers=8, max_header_bytes=400,
                                  max_request_target=64)
    controls = 0
    seen: set[int] = set()
    async with running(fuzz_echo, settings) as (port, _, _):

        async def one(case: int, requests: list[bytes], data: bytes) -> None:
            nonlocal controls
            with trio.fail_after(30):  # a hang is a failure, not a timing claim
                reply = await exchange(port, data)
            answers, rest = parse_answers(reply, head_only=data.startswith(b"HEAD "))
            if b"HEAD" not in data:
                assert rest == b"", (data, reply)
            for answer in answers:
                assert answer.status in STATUSES, (data, reply)
                seen.add(answer.status)
            if case % 10 == 0:  # unmutated: every request answered, in order
                assert [a.status for a in answers] == [200] * len(requests), (data, reply)
                assert [a.body.split(b" ")[0] for a in answers] == [
                    r.split(b" ")[0] for r in requests]
                controls += 1

        slots = trio.Semaphore(8)  # cases at once

        async def guarded(case: int, requests: list[bytes], data: bytes) -> None:
            try:
                await one(case, requests, data)
            finally:
                slots.release()

        async with trio.open_nursery() as nursery:
            for case in range(cases):
                requests = valid_case(rng)
                data = b"".join(requests)
                if case % 10:
                    data = mutate(rng, data, b"".join(valid_case(rng)))
                    if rng.random() < 0.3:
                        data = mutate(rng, data, b"".join(valid_case(rng)))
                await slots.acquire()
                nursery.start_soon(guarded, case, requests, data)
                if case % 500 == 499:  # the server lives and answers a well-formed request
                    well_formed = b"GET /alive HTTP/1.1\r\n" + HOST + b"\r\n"
                    answers, _ = parse_answers(await exchange(port, well_formed))
                    assert [a.body for a in answers] == [b"GET /alive 0"]
        answers, _ = parse_answers(await exchange(port, b"GET /end HTTP/1.1\r\n" + HOST + b"\r\n"))
        assert [a.body for a in answers] == [b"GET /end 0"]
    assert controls == (cases + 9) // 10
    assert {200, 400, 505} <= seen, seen  # the mutations reach the refusals


async def test_http11_fuzz_random_and_mutated_requests() -> None:
    await run_fuzz(1_500, seed=33)


@pytest.mark.slow
@pytest.mark.skipif("'slow' not in (config.option.markexpr or '')",
                    reason="a larger budget: run with -m slow")
async def test_http11_fuzz_ten_thousand() -> None:
    await run_fuzz(10_000, seed=3333)
