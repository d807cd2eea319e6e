"""Newline-delimited JSON framing, sans-IO.

:class:`LineBuffer` takes bytes as they arrive (any split: partial lines,
many lines per read) and yields complete lines. A line longer than
``max_line`` is not buffered: its bytes are discarded up to the next newline
and the caller is told once, so it can answer with an error and carry on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, final

#: Default longest accepted line (one message), in bytes: 4 MiB.
DEFAULT_MAX_LINE: Final = 4 * 1024 * 1024


@final
class LineTooLong:
    """Marker yielded in place of a line that exceeded the limit."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __repr__(self) -> str:
        return f"LineTooLong({self.size})"


@final
class LineBuffer:
    """Split a byte stream into lines (without their ``\\n``).

    Args:
        max_line: Longest line kept, in bytes (``\\r`` before ``\\n`` is
            dropped and blank lines are skipped).
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = 0  # >0: bytes of an over-long line dropped so far

    def feed(self, data: bytes) -> Iterator[bytes | LineTooLong]:
        """Add ``data`` and yield every line it completes."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            chunk = data[start:end]
            start = end + 1
            if self._discarding:
                size = self._discarding + len(chunk)
                self._discarding = 0
                yield LineTooLong(size)
                continue
            if self._buf:
                self._buf += chunk
                line = bytes(self._buf)
                self._buf.clear()
            else:
                line = chunk
            if len(line) > self.max_line:
                yield LineTooLong(len(line))
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if line and not line.isspace():  # skip blank lines (no copy, unlike strip())
                yield line
        rest = data[start:]
        if self._discarding:
            self._discarding += len(rest)
        elif len(self._buf) + len(rest) > self.max_line:
            self._discarding = len(self._buf) + len(rest)
            self._buf.clear()
        else:
            self._buf += rest

    def lines(self, data: bytes) -> list[bytes | LineTooLong]:
        """:meth:`feed` as a list; one whole line (the usual read) without the generator."""
        if (
            not self._buf
            and not self._discarding
            and data.find(b"\n") == len(data) - 1
            and 1 < len(data) <= self.max_line
            and data[-2:-1] != b"\r"
            and not data.isspace()
        ):
            return [data[:-1]]
        return list(self.feed(data))

    def close(self) -> Iterator[bytes | LineTooLong]:
        """At end of input: yield the final unterminated line, if any."""
        if self._discarding:
            size, self._discarding = self._discarding, 0
            yield LineTooLong(size)
        elif self._buf and not self._buf.isspace():
            line = bytes(self._buf)
            self._buf.clear()
            yield line
