"""The tasks extension of 2026-07-28 (``io.modelcontextprotocol/tasks``, SEP-2663) at the edge.

The task runtime is the one 2025-11-25 uses (actors, stores, TTLs, identity
binding, caps, the reaper); this module is only its 2026-07-28 wire:

* a modern ``tools/call`` becomes a task when the request declared the
  extension and the tool's ``task_support`` says so (``required`` always:
  ``-32021`` without the extension; ``optional`` by the App's
  ``modern_task_policy``; ``forbidden`` never). :func:`prepare_call` makes
  the call task-augmented for the tools feature, :func:`create_result`
  turns its ``CreateTaskResult`` into the extension's (``resultType:
  "task"`` and the task's fields at the top level);
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

from typing import Any, Final

from ..._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    McpError,
)
from .._messages import ErrorData, Request, TaskStatus, to_wire
from .._tasks import TaskRecord, TaskRegistry
from ._base import PeerCore
from ._era import ModernRequest, current_request

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


def require_tasks() -> ModernRequest:
    """The current modern request, which must declare the extension (else -32021)."""
    modern = current_request.get()
    if modern is None or not declares_tasks(modern):
        raise missing_extension()
    return modern


def prepare_call(peer: PeerCore, params: dict[str, Any], modern: ModernRequest) -> None:
    """Decide whether a modern ``tools/call`` runs as a task; mark ``params`` if so.

    Raises:
        McpError: -32021 for a ``required`` tool without the extension declared.
    """
    params.pop("task", None)  # the client does not choose (SEP-2663)
    spec = peer.app.tools.get(params.get("name"))  # type: ignore[arg-type]
    if spec is None:
        return  # the tools feature answers the unknown tool
    support = spec.tool.task_support
    if support == "forbidden" or not peer.app.host_tasks:
        return
    if not declares_tasks(modern):
        if support == "required":
            raise missing_extension()
        return
    policy = peer.app.modern_task_policy
    if support == "required" or (policy(spec.tool.name) if callable(policy) else policy):
        params["task"] = {}


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


def create_result(legacy: dict[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 ``CreateTaskResult`` (``{"task": {...}}``) in the extension's shape."""
    task = legacy["task"]
    out: dict[str, Any] = {"resultType": "task"}
    out.update({
        "taskId": task["taskId"], "status": task["status"], "createdAt": task["createdAt"],
        "lastUpdatedAt": task["lastUpdatedAt"], "ttlMs": task.get("ttl"),
    })
    if "pollInterval" in task:
        out["pollIntervalMs"] = task["pollInterval"]
    if "statusMessage" in task:
        out["statusMessage"] = task["statusMessage"]
    if "_meta" in legacy:
        out["_meta"] = legacy["_meta"]
    return out


def detailed(record: TaskRecord, registry: TaskRegistry) -> dict[str, Any]:
    """The ``DetailedTask`` of ``record``: with its questions, result or error."""
    out = task_fields(record)
    status, outcome = record.status, record.outcome
    if isinstance(outcome, dict) and status in (TaskStatus.COMPLETED, TaskStatus.FAILED):
        # A tool error (isError) is a completed task in this extension.
        out["status"] = "completed"
        result = dict(outcome)
        meta = {k: v for k, v in (result.get("_meta") or {}).items() if k != _RELATED}
        result.pop("_meta", None)
        if meta:
            result["_meta"] = meta
        out["result"] = result
    elif status is TaskStatus.FAILED:
        error = outcome if isinstance(outcome, ErrorData) else ErrorData(
            INTERNAL_ERROR, record.status_message or "Task failed"
        )
        out["error"] = to_wire(error)
    elif status is TaskStatus.INPUT_REQUIRED:
        actor = registry.running_actor(record.task_id)
        pulled = actor.pulled if actor is not None else None
        out["inputRequests"] = pulled.requests() if pulled is not None else {}
    return out


def _task_id(req: Request) -> str:
    task_id = (req.params or {}).get("taskId")
    if not isinstance(task_id, str):
        raise McpError(INVALID_PARAMS, "Invalid params: taskId (a string) is required")
    return task_id


async def _record(peer: PeerCore, task_id: str) -> TaskRecord:
    """The requestor's task, once durable (-32602 if unknown, expired or foreign)."""
    registry = peer.app.registry
    registry.check_rate(peer.context)
    if registry.cluster is None:
        record = registry.get_now(peer.context, task_id)
        await registry.settle()
        return record
    return await registry.cluster.lookup(peer.context, task_id)


async def tasks_get(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/get``: the detailed task."""
    require_tasks()
    record = await _record(peer, _task_id(req))
    return detailed(record, peer.app.registry)


async def tasks_update(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/update``: deliver ``inputResponses`` to the task's outstanding questions; ack."""
    require_tasks()
    task_id = _task_id(req)
    responses = (req.params or {}).get("inputResponses")
    if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
        raise McpError(
            INVALID_PARAMS, "Invalid params: inputResponses must be an object of objects"
        )
    record = await _record(peer, task_id)
    actor = peer.app.registry.running_actor(task_id)
    if actor is not None and actor.pulled is not None:
        actor.pulled.answer(responses)
    elif not record.status.is_terminal and actor is None and peer.app.registry.cluster is not None:
        raise McpError(
            INTERNAL_ERROR,
            "tasks/update must reach the process running the task; answering a task's "
            "questions across processes is not supported yet",
        )
    return {}


async def tasks_cancel(peer: PeerCore, req: Request) -> dict[str, Any]:
    """``tasks/cancel``: cancel the task's actor (wherever it runs); ack, also when terminal."""
    require_tasks()
    task_id = _task_id(req)
    record = await _record(peer, task_id)
    if not record.status.is_terminal:
        try:
            await peer.app.registry.cancel(peer.context, task_id, peer)
        except McpError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            await _record(peer, task_id)  # still -32602 if it vanished meanwhile
    return {}
