"""What the shared stores (Redis, PostgreSQL) have in common, written once.

Every store implements the one :class:`~._store.TaskStore` contract. A store used
by one process (:class:`~._store.MemoryTaskStore`, :class:`~._sqlite.SqliteTaskStore`)
leaves the truth to that process's memory. A *shared* store (``shared = True``)
is the truth for every process attached to it: each one reads every record from
the store, so any process answers ``tasks/get|result|list|cancel`` for a task of
the identity, wherever its actor runs. The registry hands the cross-process
parts (waiting for a remote task, delivering a remote task's input requests,
cancelling a local actor on a remote cancel) to :class:`~._cluster.Cluster`.

Here: the "unavailable" error, the URL options both shared stores read
(:func:`url_options`), the periodic jobs' loop (:func:`repeat`), and the
protocols the ledger and the actors see the cluster through.

Conflicts between processes are settled in the store, atomically: a status
change of a task applies only while the stored status is not terminal, so a
cancel from one process and a result arriving in another resolve to whichever
reached the store first, on every process.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol, final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs
import trio

from ..._errors import INTERNAL_ERROR, McpError
from ._store import TaskRecord

_log = logging.getLogger("trio_mcp.tasks")

#: A shared store's lease by default, seconds.
DEFAULT_LEASE: Final = 30.0
#: Status message of a task whose process stopped renewing its lease.
LEASE_LOST_MESSAGE: Final = (
    "The server process running this task stopped (its lease lapsed); its work was lost."
)


@final
@attrs.frozen
class SharedOptions:
    """What a shared store's URL and arguments settle alike (Redis and PostgreSQL).

    Attributes:
        driver_url: The URL without our query options (for coredis or libpq).
        options: Our query options found in the URL, by name.
        lease_seconds: The lease: the argument, else ``lease=``, else the default.
        hint_seconds: ``hint=``, else a third of the lease (at most 2 s).
        instance: This process's id: the argument, else host, pid and a random part.
    """

    driver_url: str
    options: dict[str, str]
    lease_seconds: float
    hint_seconds: float
    instance: str

    @classmethod
    def parse(
        cls,
        url: str,
        *,
        schemes: tuple[str, ...],
        names: tuple[str, ...],
        lease_seconds: float | None,
        instance: str | None,
    ) -> SharedOptions:
        """Read ``url`` (a scheme of ``schemes``; query options ``names`` are ours).

        Raises:
            ValueError: Another scheme, or a lease that is not positive.
        """
        parts = urlsplit(url)
        if parts.scheme not in schemes:
            raise ValueError(f"not a {schemes[0]} URL: {url!r}")
        ours: dict[str, str] = {}
        rest: list[tuple[str, str]] = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name in names:
                ours[name] = value
            else:
                rest.append((name, value))
        lease = lease_seconds if lease_seconds is not None else ours.get("lease")
        seconds = float(lease) if lease is not None else DEFAULT_LEASE
        if not seconds > 0:
            raise ValueError(f"the lease must be positive: {seconds}")
        hint = ours.get("hint")
        return cls(
            driver_url=urlunsplit(parts._replace(query=urlencode(rest))),
            options=ours,
            lease_seconds=seconds,
            hint_seconds=float(hint) if hint else min(2.0, seconds / 3),
            instance=instance or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}",
        )


def store_unavailable(reason: str) -> McpError:
    """The JSON-RPC error a request gets while its store cannot be reached."""
    return McpError(INTERNAL_ERROR, f"Task store unavailable ({reason}); retry later")


class RecordMirror(Protocol):
    """Where the ledger copies every local change of a record, in order (the cluster)."""

    def written(self, record: TaskRecord) -> None:
        """``record`` changed (status, message, outcome): write it to the shared store."""
        ...

    def deleted(self, task_id: str) -> None:
        """The record's TTL ran out here: delete it from the shared store."""
        ...

    def released(self, task_id: str) -> None:
        """The task's actor here ended (its work done, cancelled or stopped)."""
        ...


class InputRelay(Protocol):
    """How a task actor asks its requestor for input when tasks are shared by processes."""

    async def ask(
        self, actor: Any, method: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        """Queue the request in the shared store, await the answer from any process.

        Returns:
            The raw result and the local connection that delivered it (``None``
            when another process delivered it).
        """
        ...

    async def ask_pulled(
        self, actor: Any, pulled: Any, key: str, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """A pulled question (posted in ``pulled``, the actor's ``PulledInputs``): queued
        in the store for any process to show; answered here or in any process."""
        ...


async def repeat(
    owner: object, what: str, period: float, job: Callable[[], Awaitable[object]]
) -> None:
    """Run ``job`` now and then every ``period`` seconds; log failures once per outage.

    A shared store's periodic jobs (lease renewal, the sweep of dead processes, the
    purge of expired records) run under this, in the store's :meth:`run`.
    """
    failing = False
    while True:
        try:
            await job()
        except Exception as exc:
            if not failing:
                _log.warning("%r: could not %s: %s", owner, what, brief_error(exc))
            failing = True
        else:
            if failing:
                _log.warning("%r: could %s again", owner, what)
            failing = False
        await trio.sleep(period)


def brief_error(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, unwrapping groups of one (for one-line logs)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
