"""A session's stream bookkeeping: pruning looks at few streams, and keeps exactly what it kept.

``HttpSession._prune`` used to scan every stream and every request entry on
each new request (a session keeps its 64 latest ended streams for resumes:
65 items per request). It now looks only at the streams open at the last
prune. These tests replay random request histories (JSON and SSE answers,
reused request ids, cancels, answers out of order) against the old scan and
check that both keep the same streams and request entries after every step.
"""

from __future__ import annotations

import random

import pytest

from trio_mcp.transports._http_session import MAX_ENDED_STREAMS, STANDALONE, HttpSession
from trio_mcp.transports._http_store import MemoryEventStore
from trio_mcp.transports._http_stream import SseStream


def reference_prune(
    streams: dict[str, SseStream], by_request: dict[object, SseStream]
) -> None:
    """The scan of every stream and request entry that ``_prune`` replaced."""
    ended = [s for s in streams.values() if s.ended and s.stream_id != STANDALONE]
    for stream in ended[: max(0, len(ended) - MAX_ENDED_STREAMS)]:
        del streams[stream.stream_id]
    for request_id, stream in list(by_request.items()):
        if stream.ended and stream.stream_id not in streams:
            del by_request[request_id]


@pytest.mark.parametrize("seed", range(6))
async def test_prune_keeps_what_the_full_scan_kept(seed: int) -> None:
    """The latest 64 ended streams stay resumable and every live one stays, as before."""
    rng = random.Random(seed)
    session = HttpSession("s", None, MemoryEventStore(), {})
    streams = dict(session.streams)  # the reference's copy, as the old code kept it
    by_request: dict[object, SseStream] = {}
    live: list[SseStream] = []
    for step in range(600):
        request_id = rng.randrange(40)  # ids are reused
        json = rng.random() < 0.3
        # The reference prunes before the new stream is added, as open_stream does.
        reference_prune(streams, by_request)
        stream = session.open_stream(request_id, json=json)
        if not json:
            streams[stream.stream_id] = stream
        by_request[request_id] = stream
        live.append(stream)
        # Answers (or cancels) arrive in any order; a few requests stay in flight.
        while live and (len(live) > rng.randrange(1, 6) or rng.random() < 0.5):
            live.pop(rng.randrange(len(live))).end()
        assert session.streams == streams, step
        assert session.by_request == by_request, step
    session.open_stream("last", json=False)  # prunes what ended since the last prune
    ended = [s for i, s in session.streams.items() if i != STANDALONE and s.ended]
    assert len(ended) == MAX_ENDED_STREAMS
