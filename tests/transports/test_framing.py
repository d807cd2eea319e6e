"""NDJSON framing (``transports/_framing.py``): lines out of any split of the bytes."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from trio_mcp.transports._framing import LineBuffer, LineTooLong

# --- NDJSON framing -----------------------------------------------------------------------


@given(
    messages=st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b
                                                                 and b.strip() != b""),
                      max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
@settings(max_examples=200)
def test_framing_any_split_yields_the_same_lines(messages: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(m + b"\n" for m in messages)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    buffer = LineBuffer()
    out: list[bytes | LineTooLong] = []
    for a, b in zip(points, points[1:], strict=False):
        out.extend(buffer.feed(stream[a:b]))
    out.extend(buffer.close())
    expected = [m[:-1] if m.endswith(b"\r") else m for m in messages]
    assert out == [m for m in expected if m.strip()]


@given(
    messages=st.lists(st.binary(max_size=40), max_size=6),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
    max_line=st.sampled_from([1, 5, 20, 1000]),
)
@settings(max_examples=300)
def test_framing_lines_is_feed_as_a_list(
    messages: list[bytes], cuts: list[int], max_line: int
) -> None:
    """LineBuffer.lines (the reader's call, with a one-line shortcut) gives what feed gives."""
    stream = b"".join(m.replace(b"\n", b"") + b"\n" for m in messages)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})

    def seen(items: Iterable[bytes | LineTooLong]) -> list[bytes | int]:
        return [i.size if isinstance(i, LineTooLong) else i for i in items]

    fast, slow = LineBuffer(max_line), LineBuffer(max_line)
    for a, b in zip(points, points[1:], strict=False):
        assert seen(fast.lines(stream[a:b])) == seen(slow.feed(stream[a:b]))
    assert seen(fast.close()) == seen(slow.close())
    for line in (b"x\n", b"\r\n", b" \n", b"x\r\n", b"\n", b"toolong\n", b"a\nb\n"):
        assert seen(LineBuffer(5).lines(line)) == seen(LineBuffer(5).feed(line)), line


def test_framing_eof_flushes_unterminated_line_and_rejects_long_lines() -> None:
    buffer = LineBuffer(max_line=10)
    assert list(buffer.feed(b'{"a":1}\n{"b"')) == [b'{"a":1}']
    assert list(buffer.close()) == [b'{"b"']
    buffer = LineBuffer(max_line=10)
    out = list(buffer.feed(b"x" * 8))
    out += list(buffer.feed(b"y" * 8))
    out += list(buffer.feed(b"z\nok\n"))
    assert len(out) == 2 and isinstance(out[0], LineTooLong) and out[0].size == 17
    assert out[1] == b"ok"
