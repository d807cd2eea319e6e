"""The background tasks of :class:`~._redis.RedisTaskStore`.

* :func:`hold_client`: a Trio system task that keeps coredis's connection pool
  open (coredis requires its client to be used as an async context manager, whose
  task group must start and end in one task), so the store can be opened and
  closed from any task;
* :func:`listen`: the pub/sub subscription to the hints channel, reconnected
  with backoff whenever Redis goes away instead of crashing (the periodic jobs
  run under :func:`._shared.repeat`);

and the helpers that read what the store is given: :func:`client_url` and
:func:`cluster_nodes` (the store URL as coredis reads it; the options are
:class:`~._shared.SharedOptions`) and
:func:`unavailable_reason` (which errors mean "Redis cannot serve now").
"""

from __future__ import annotations

import logging
import random
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import anyio.streams.memory
import trio
from coredis.connection import TCPLocation
from coredis.exceptions import (
    ClusterDownError,
    ClusterError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from coredis.exceptions import ConnectionError as RedisConnectionError

from ._shared import brief_error

log = logging.getLogger("trio_mcp.tasks")

#: First and longest pause before re-subscribing after Redis went away (seconds).
BACKOFF_FIRST: Final = 0.1
BACKOFF_MAX: Final = 5.0


def closing_connections(client: Any) -> None:
    """Make ``client``'s pool close a failed connection's buffers (coredis 6 leaves
    them open when a connection attempt fails: a ``ResourceWarning`` per attempt)."""
    pool: Any = client.connection_pool
    base = pool.connection_class

    async def run(self: Any, **kwargs: Any) -> None:
        try:
            await base.run(self, **kwargs)
        finally:
            for value in list(vars(self).values()):
                if isinstance(value, _STREAMS):
                    value.close()

    pool.connection_class = type(f"Closing{base.__name__}", (base,), {"run": run})


_STREAMS: Final = (
    anyio.streams.memory.MemoryObjectSendStream,
    anyio.streams.memory.MemoryObjectReceiveStream,
)


async def hold_client(
    client: Any, ready: trio.Event, stop: trio.Event, stopped: trio.Event
) -> None:
    """Enter ``client`` (its pool), set ``ready``, wait for ``stop``, exit it."""
    try:
        async with client:
            ready.set()
            await stop.wait()
    except Exception:  # a coredis pool task failed: the store reports itself unavailable
        log.exception("Redis task store: the connection pool stopped")
    finally:
        # coredis 6's cluster layout never closes its error stream (a ResourceWarning)
        layout = getattr(client.connection_pool, "cluster_layout", None)
        for stream in getattr(layout, "_error_stream", ()):
            if isinstance(stream, _STREAMS):
                stream.close()
        stopped.set()
        ready.set()


async def listen(
    owner: object,
    client: Any,
    channel: str,
    events: Any,
    task_status: trio.TaskStatus[None],
) -> None:
    """Subscribe to ``channel`` and pass each ``kind|task_id`` hint to
    ``events.on_hint``; resubscribe with backoff when the connection drops."""
    started = False
    delay = BACKOFF_FIRST
    lost_since: float | None = None
    while True:
        try:
            async with client.pubsub(
                channels=[channel], ignore_subscribe_messages=True, retry_policy=None
            ) as pubsub:
                if lost_since is not None:
                    log.warning(
                        "%r: hints flow again (subscription lost for %.1f s)",
                        owner, trio.current_time() - lost_since,
                    )  # fmt: skip
                    lost_since = None
                delay = BACKOFF_FIRST
                if not started:
                    started = True
                    task_status.started()
                async for message in pubsub:
                    if message["type"] != "message":
                        continue
                    kind, _, task_id = str(message["data"]).partition("|")
                    try:
                        events.on_hint(kind, task_id)
                    except Exception:
                        log.exception("%r: on_hint(%r, %r) failed", owner, kind, task_id)
        except Exception as exc:
            if lost_since is None:
                lost_since = trio.current_time()
                log.warning(
                    "%r: hint subscription lost (%s); reconnecting", owner, brief_error(exc)
                )
        if not started:
            started = True
            task_status.started()
        await trio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, BACKOFF_MAX)


_BUSY_REPLIES: Final = frozenset({
    "OOM", "BUSY", "LOADING", "MISCONF", "MASTERDOWN", "READONLY", "NOREPLICAS", "TRYAGAIN",
    "CLUSTERDOWN",
})  # fmt: skip


#: What says Redis cannot be reached (on a cluster also: slots uncovered, or redirects
#: until coredis gave up).
_UNREACHABLE: Final = (
    RedisConnectionError, TimeoutError, OSError, ReadOnlyError,
    ClusterDownError, ClusterError, TryAgainError,
)  # fmt: skip


def client_url(url: str) -> str:
    """A store URL without our options as coredis reads it (``unix:`` with ``//``)."""
    if url.startswith("unix:") and not url.startswith("unix://"):
        return "unix://" + url[len("unix:") :]
    return url


def cluster_nodes(url: str) -> tuple[str, list[TCPLocation]]:
    """A ``redis+cluster://[user:password@]host:port,host:port/?options`` URL as coredis's
    cluster client reads it: a ``redis://`` (``rediss://``) URL of the first node, and
    every node as a startup node.

    Raises:
        ValueError: No node, a node without ``host:port``, or a database other than 0.
    """
    parts = urlsplit(url)
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError(f"a Redis Cluster has one database (no /{parts.path.strip('/')}): {url!r}")
    scheme = "rediss" if parts.scheme == "rediss+cluster" else "redis"
    auth, _, hosts = parts.netloc.rpartition("@")
    nodes: list[TCPLocation] = []
    for host_port in hosts.split(","):
        host, sep, port = host_port.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"a Redis Cluster URL names host:port nodes: {url!r}")
        nodes.append(TCPLocation(host.strip("[]"), int(port)))
    first = f"{auth}@{hosts.split(',')[0]}" if auth else hosts.split(",")[0]
    return urlunsplit((scheme, first, "", parts.query, "")), nodes


def unavailable_reason(exc: BaseException) -> str | None:
    """Why ``exc`` means Redis cannot serve now, or ``None`` if it is another error."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (reason := unavailable_reason(inner)) is not None:
                return reason
        return None
    if isinstance(exc, _UNREACHABLE):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ResponseError) and str(exc).split(" ", 1)[0] in _BUSY_REPLIES:
        return f"Redis: {exc}"
    return None
