"""The tasks extension of 2026-07-28 (``io.modelcontextprotocol/tasks``, SEP-2663) at the edge.

The task runtime is the one 2025-11-25 uses (actors, stores, TTLs, identity
binding, caps, the reaper); this module is only its 2026-07-28 wire:

* a modern ``tools/call`` becomes a task when the request declared the
  extension and the tool's ``task_support`` says so (``required`` always:
  ``-32021`` without the extension; ``optional`` by the App's
  ``modern_task_policy``; ``forbidden`` never). :func:`prepare_call` puts
  that decision on the request's ``ModernRequest`` (``task``), which the
  tools feature asks, and whose ``task_created`` shapes the extension's
  ``CreateTaskResult`` (``resultType: "task"`` and the task's fields at the
  top level);
* the task's questions are pulled: its actor gets a
  :class:`~trio_mcp.peer._tasks.PulledInputs`, ``tasks/get`` shows them
  (``inputRequests``) and ``tasks/update`` answers them;
* ``tasks/get`` answers the detailed task (``result`` once completed, a
  tool error included; ``error`` once failed), ``tasks/cancel`` and
  ``tasks/update`` acknowledge; every ``tasks/*`` needs the extension
  declared on the request (``-32021``). A task created in a 2025-11-25
  session is readable and cancellable here by the same identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import trio

from ..._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    McpError,
)
from ..._inline import leave_reader
from .._features._base import PeerCore
from .._features._scopes import check_task_scopes
from .._messages import ErrorData, Request, TaskMetadata, TaskStatus, to_wire
from .._session import Reply
from .._tasks import (
    PUSHED,
    PulledInputs,
    TaskActor,
    TaskRecord,
    TaskRegistry,
    Work,
    followed,
)
from .._tasks._rerun import attempt_meta
from .._tasks._store import InputAnswer
from ._era import ModernRequest, Prelude
from ._mrtr import InputRequired

#: The extension's identifier.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: The related-task ``_meta`` key of 2025-11-25 (not part of the extension's results).
_RELATED: Final = "io.modelcontextprotocol/related-task"


def declares_tasks(modern: ModernRequest) -> bool:
    """Whether the request's ``clientCapabilities.extensions`` declares the extension."""
    extensions = modern.client_capabilities.extra.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def missing_extension() -> McpError:
    """The -32021 naming the tasks extension."""
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: the {TASKS_EXTENSION} extension (declare it "
        "in io.modelcontextprotocol/clientCapabilities.extensions)",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def require_tasks(req: Request) -> ModernRequest:
    """``req``'s modern fields, which must declare the extension (else -32021)."""
    modern = req.dialect
    if not isinstance(modern, ModernRequest) or not declares_tasks(modern):
        raise missing_extension()
    return modern


def prepare_call(peer: PeerCore, params: dict[str, Any], modern: ModernRequest) -> bool:
    """Decide whether a modern ``tools/call`` runs as a task (``modern.task``).

    Returns:
        True when the task's tool runs a prelude (``task_prelude=True``).

    Raises:
        McpError: -32021 for a ``required`` tool without the extension declared.
    """
    params.pop("task", None)  # the client does not choose (SEP-2663)
    name = params.get("name")
    spec = peer.app.tools.get(name) if isinstance(name, str) else None
    if spec is None:
        return False  # the tools feature answers the unknown tool
    support = spec.tool.task_support
    if support == "forbidden" or not peer.app.host_tasks:
        return False
    if not declares_tasks(modern):
        if support == "required":
            raise missing_extension()
        return False
    policy = peer.app.modern_task_policy
    if support == "required" or (policy(spec.tool.name) if callable(policy) else policy):
        modern.task = TaskMetadata()
        return spec.tool.name in peer.app.task_preludes
    return False


def _in_prelude(prelude: Prelude) -> Callable[[Work], Work]:
    def wrapper(work: Work) -> Work:
        async def run(actor: TaskActor) -> dict[str, Any]:
            try:
                result = await work(actor)
            except InputRequired as need:
                prelude.settle("input_required", need)
                await trio.sleep_forever()  # the request deletes the task: cancelled here
                raise  # pragma: no cover - sleep_forever only ends by cancellation
            except BaseException:
                prelude.settle("done")
                raise
            prelude.settle("done")
            return result
        return run
    return wrapper


async def run_prelude(peer: PeerCore, created: Reply, modern: ModernRequest) -> Reply:
    """Run a new task's work in its request until it starts the task.

    Returns:
        The ``CreateTaskResult`` reply (the task as it is then).

    Raises:
        InputRequired: The prelude asked what the request did not answer:
            the task is deleted and the request answers ``input_required``.

    Cancellation: the task is deleted (its work cancelled).
    """
    registry = peer.app.registry
    task_id = created.result["taskId"]
    actor = registry.running_actor(task_id)
    if actor is None:
        return created
    await leave_reader()  # the prelude runs the tool: it waits in a task of its own
    prelude = modern.prelude = Prelude()
    actor.questions = PUSHED  # until ctx.start_task(): the prelude's questions are the request's
    actor.wrap_work(_in_prelude(prelude))
    actor.launch()  # in this context: the prelude's questions are the request's
    try:
        await prelude.settled.wait()
    except BaseException:
        registry.expire(task_id)
        raise
    if prelude.outcome == "input_required" and prelude.need is not None:
        registry.expire(task_id)
        raise prelude.need
    return Reply(modern.task_created(actor.record, created.result.get("_meta")), _nothing)


def _nothing() -> None:
    """The prelude's task was launched already: nothing to do once the answer is sent."""


def task_fields(record: TaskRecord) -> dict[str, Any]:
    """A task's fields in the extension's shape (``ttlMs``, ``pollIntervalMs``)."""
    out: dict[str, Any] = {
        "taskId": record.task_id,
        "status": str(record.status),
        "createdAt": record.created_at,
        "lastUpdatedAt": record.last_updated_at,
        "ttlMs": record.ttl,
        "pollIntervalMs": record.poll_interval,
    }
    if record.status_message is not None:
        out["statusMessage"] = record.status_message
    return out


def detailed(
    record: TaskRecord, registry: TaskRegistry,
    queued: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``DetailedTask`` of ``record``: with its questions, result or error.

    ``queued``: the questions as the shared store has them (a task whose
    actor runs in another process).
    """
    out = task_fields(record)
    if (meta := attempt_meta(record)) is not None:  # a re-runnable task: its attempt
        out["_meta"] = meta
    status, outcome = record.status, record.outcome
    if isinstance(outcome, dict) and status in (TaskStatus.COMPLETED, TaskStatus.FAILED):
        # A tool error (isError) is a completed task in this extension.
        out["status"] = "completed"
        result = dict(outcome)
        meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != _RELATED}
        result.pop("_meta", None)
        if meta:
            result["_meta"] = meta
        # The structure of the request's own result: a 2026-07-28 CallToolResult
        # has resultType (the ext-tasks requester validates it).
        result.setdefault("resultType", "complete")
        out["result"] = result
    elif status is TaskStatus.FAILED:
        error = outcome if isinstance(outcome, ErrorData) else ErrorData(
            INTERNAL_ERROR, record.status_message or "Task failed"
        )
        out["error"] = to_wire(error)
    elif status is TaskStatus.INPUT_REQUIRED:
        actor = registry.running_actor(record.task_id)
        pulled = actor.questions if actor is not None else None
        out["inputRequests"] = (
            pulled.requests() if isinstance(pulled, PulledInputs) else (queued or {})
        )
    return out


def _task_id(req: Request) -> str:
    task_id = (req.params or {}).get("taskId")
    if not isinstance(task_id, str):
        raise McpError(INVALID_PARAMS, "Invalid params: taskId (a string) is required")
    return task_id


async def _record(peer: PeerCore, req: Request, task_id: str) -> TaskRecord:
    """The requestor's task, once durable (-32602 if unknown, expired or foreign)."""
    check_task_scopes(peer, req, "tasks/*")
    registry = peer.app.registry
    owner = peer.context_of(req)
    registry.check_rate(owner)
    return await registry.record(owner, task_id)


async def tasks_get(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/get``: the detailed task."""
    require_tasks(req)
    record = await _record(peer, req, _task_id(req))
    answer = detailed(record, peer.app.registry, await _queued(peer, record))
    tree = followed(peer.app.registry, record.task_id, (req.params or {}).get("_meta"))
    if tree is not None:  # its place in a task tree, under our own _meta namespace
        answer["_meta"] = {**answer.get("_meta", {}), **tree}
    return answer


async def _queued(peer: PeerCore, record: TaskRecord) -> dict[str, dict[str, Any]] | None:
    """The questions of a task whose actor runs in another process, from the store."""
    cluster = peer.app.registry.cluster
    if (
        cluster is None or record.status is not TaskStatus.INPUT_REQUIRED
        or peer.app.registry.running_actor(record.task_id) is not None
    ):
        return None
    items = await cluster.store.peek_inputs(record.task_id)
    return {item.key: {"method": item.method, "params": item.params} for item in items}


async def tasks_update(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/update``: deliver ``inputResponses`` to the task's outstanding questions; ack."""
    require_tasks(req)
    task_id = _task_id(req)
    responses = (req.params or {}).get("inputResponses")
    if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
        raise McpError(
            INVALID_PARAMS, "Invalid params: inputResponses must be an object of objects"
        )
    record = await _record(peer, req, task_id)
    actor = peer.app.registry.running_actor(task_id)
    cluster = peer.app.registry.cluster
    if actor is not None and isinstance(actor.questions, PulledInputs):
        actor.questions.answer(responses)
    elif cluster is not None and not record.status.is_terminal:
        # Its actor runs in another process: the answers go through the store, also for
        # a key not queued there yet (the requestor may have read the question from the
        # actor's own process before its queueing reached the store); the actor takes
        # only the answers to its own keys, so unknown ones are ignored all the same.
        for key, value in responses.items():
            await cluster.store.answer_input(task_id, key, InputAnswer(result=value))
    return {}


async def tasks_cancel(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/cancel``: cancel the task's actor (wherever it runs); ack, also when terminal."""
    require_tasks(req)
    task_id = _task_id(req)
    record = await _record(peer, req, task_id)
    if not record.status.is_terminal:
        try:
            await peer.app.registry.cancel(peer.context_of(req), task_id, peer)
        except McpError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            await _record(peer, req, task_id)  # still -32602 if it vanished meanwhile
    return {}
