"""Work that outlives its process: tasks that may run again elsewhere.

A tool opts in with :class:`Rerun` (``@app.tool(task_support=..., rerun=Rerun(3))``).
Its task's record then carries a :class:`RerunTicket`: the request as it came
(method, params with their ``_meta``: the era's fields and the trace context), who
sent it (the requestor context, the principal, the identity's scopes), the tool
and the attempts allowed. A store that can hand work between processes
(:class:`RerunStore`: Redis, PostgreSQL) keeps the ticket beside the record:

- when a process's **lease** lapses (it stopped heartbeating: liveness is the
  lease, never a timeout on the work), the sweep puts each of its re-runnable
  live tasks back in a queue, ``working`` with a status message saying which
  attempt comes next (:func:`rerun_message`), or ``failed`` after the last one
  (:func:`exhausted_message`);
- every live process that hosts the tool **claims** queued tasks (one atomic
  claim per task: one process wins) and serves the stored request again, the
  task id and record unchanged and ``ctx.attempt`` one higher;
- a process that **drains** (SIGTERM) or closes hands its re-runnable tasks
  back at once, without waiting for its lease to lapse;
- a **front** process (``run_tasks=False``) queues every task it creates for
  the workers.

A store of one process (SQLite) re-runs its re-runnable ``working`` tasks itself
when it restarts.
"""

from __future__ import annotations

import contextvars
import json
import math
from collections.abc import Collection
from typing import Any, Final, Protocol, final, runtime_checkable

import attrs
import trio

from ..._errors import INVALID_PARAMS, McpError
from ._store import RerunTicket as RerunTicket
from ._store import TaskRecord
from ._tree import META_NAMESPACE

#: The largest stored request (its JSON, bytes) of a re-runnable task by default.
MAX_REQUEST_BYTES: Final = 256 * 1024


def _check_attempts(instance: Rerun, attribute: Any, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"Rerun.attempts must be an int >= 1, not {value!r}")


def _check_backoff(instance: Rerun, attribute: Any, value: float) -> None:
    if not value >= 0:
        raise ValueError(f"Rerun.backoff must be >= 0 seconds, not {value!r}")


@final
@attrs.frozen
class Rerun:
    """A tool's consent to run its task again when the process running it stops.

    Only for work that is idempotent or resumable: a re-run starts the tool
    over with the same arguments, the same task id and ``ctx.attempt`` one
    higher (the key to deduplicate side effects on). A task is re-run only
    when its process stopped (its heartbeat lease lapsed, or it drained on
    SIGTERM), never because the work is slow, and never when the tool raised.

    Attributes:
        attempts: The most runs of one task, the first included (``3``: the
            first run and up to two re-runs). After the last one the task is
            ``failed`` with the attempts in its status message.
        backoff: Seconds before a re-run may start; doubled for each later
            attempt (``0``: at once).
        max_request_bytes: The largest stored request (JSON bytes) of one
            task; a bigger call is refused with -32602 when it is made.
    """

    attempts: int = attrs.field(default=3, validator=_check_attempts)
    backoff: float = attrs.field(default=0.0, converter=float, validator=_check_backoff)
    max_request_bytes: int = MAX_REQUEST_BYTES

    def delay(self, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (2 or later) may start."""
        return float(self.backoff * 2 ** max(0, attempt - 2))


def encode_request(
    *,
    era: str | None,
    method: str,
    params: dict[str, Any] | None,
    context: str,
    principal: str | None,
    identity: dict[str, Any] | None,
    transport: str | None,
    client_capabilities: dict[str, Any] | None,
    limit: int,
) -> str:
    """The request of a re-runnable task as the JSON text a store keeps.

    Raises:
        McpError: -32602 when it is bigger than ``limit`` bytes.
    """
    text = json.dumps(
        {
            "era": era,
            "method": method,
            "params": params or {},
            "context": context,
            "principal": principal,
            "identity": identity,
            "transport": transport,
            "clientCapabilities": client_capabilities,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    size = len(text.encode("utf-8"))
    if size > limit:
        raise McpError(
            INVALID_PARAMS,
            f"Request too large for a re-runnable task: {size} bytes stored, at most {limit}",
            {"size": size, "limit": limit},
        )
    return text


def decode_request(text: str) -> dict[str, Any]:
    """The stored request (see :func:`encode_request`)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a stored request must be a JSON object")
    return value


def rerun_message(attempt: int, attempts: int) -> str:
    """The status message of a task queued to run again."""
    return f"re-running after its process stopped, attempt {attempt} of {attempts}"


def exhausted_message(attempts: int) -> str:
    """The status message of a re-runnable task whose last attempt's process stopped."""
    runs = "its only attempt" if attempts == 1 else f"each of its {attempts} attempts"
    return (
        f"The server process running this task stopped on {runs} "
        f"({attempts} attempt{'s' if attempts != 1 else ''}); its work was lost."
    )


#: The ``_meta`` key of a ``tasks/get`` answer that says which run of a re-runnable task
#: this is (present for a re-runnable task, and for any task past its first attempt).
ATTEMPT_META: Final = META_NAMESPACE + "attempt"  # our own namespace, as the task tree's


def attempt_meta(record: TaskRecord) -> dict[str, Any] | None:
    """The ``_meta`` a ``tasks/get`` answer of ``record`` carries, if any."""
    if record.rerun is None and record.attempt == 1:
        return None
    return {ATTEMPT_META: record.attempt}


#: The status message of a task a front process queued for the workers.
QUEUED_MESSAGE: Final = "queued: waiting for a worker process to run it"
#: ... when no worker process is alive.
NO_WORKER_MESSAGE: Final = "queued: no worker process is alive to run it"


@final
class LeaseClock:
    """Until when this process's lease in a shared store surely holds (Trio time).

    A renewal that started at ``t`` and succeeded holds the lease until at least
    ``t + seconds``: the store counts the lease from when the renewal reached it,
    not earlier. Past that time with no newer renewal, the store may have found
    the process dead and queued its re-runnable tasks for the others (the store
    unreachable, or this process too busy to renew): the cluster then stops that
    work here (fencing), so that no task runs twice while its first process lives.

    Args:
        seconds: The lease.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        #: The lease surely holds until then (``-inf``: never renewed yet).
        self.held_until = -math.inf
        self._renewed = trio.Event()

    def renewed(self, started: float) -> None:
        """A renewal that started at ``started`` (Trio time) succeeded."""
        self.held_until = max(self.held_until, started + self.seconds)
        self._renewed.set()
        self._renewed = trio.Event()

    async def wait_renewed(self) -> None:
        """Until the next successful renewal."""
        await self._renewed.wait()


@runtime_checkable
class RerunStore(Protocol):
    """What a shared store does to hand tasks between processes (Redis, PostgreSQL)."""

    #: This process's lease as last renewed (the cluster fences work by it).
    lease: LeaseClock

    async def requeue(
        self,
        task_ids: Collection[str],
        *,
        count: bool,
        spend: bool = True,
        message: str | None = None,
    ) -> int:
        """Put live re-runnable tasks this process runs back in the queue, at once.

        Args:
            task_ids: The tasks (those not re-runnable, or not live, are left alone).
            count: True: their run was interrupted (the attempt goes up by one,
                or the task fails after its last); False: they never ran (a
                front queued them).
            spend: False: the interruption was a drain (SIGTERM), not a crash: it
                does not use up one of the attempts allowed (the bound goes up
                with the attempt, so a rolling restart never fails a task).
            message: The status message to set (default :func:`rerun_message`).

        Returns:
            How many live worker processes there are (for a front's message).
        """
        ...

    async def claim(self, tools: Collection[str], limit: int) -> list[TaskRecord]:
        """Atomically take up to ``limit`` queued tasks of ``tools`` that are due: this
        process runs them now (each record with its :class:`RerunTicket` and attempt)."""
        ...

    async def set_worker(self, worker: bool) -> None:
        """Say whether this process runs queued task work (counted as a live worker)."""
        ...


def rerun_store(store: object) -> RerunStore | None:
    """``store`` as a :class:`RerunStore` when it hands tasks between processes (Redis,
    on one node or a cluster, and PostgreSQL); else None (memory and SQLite: one process)."""
    return store if isinstance(store, RerunStore) else None


class RerunHost(Protocol):
    """Who serves a claimed task's stored request again (the App's re-runner)."""

    @property
    def tools(self) -> frozenset[str]:
        """The re-runnable tools this process hosts."""
        ...

    def rerun(self, record: TaskRecord) -> None:
        """Serve ``record``'s stored request again, adopting the record (never waits)."""
        ...


#: Set while a claimed task's stored request is served again: ``TaskRegistry.create``
#: adopts this record (same id, attempt one up) instead of making a new one.
ADOPTING: contextvars.ContextVar[TaskRecord | None] = contextvars.ContextVar(
    "trio_mcp_adopting", default=None
)
