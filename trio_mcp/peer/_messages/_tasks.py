"""Types of tasks: ``Task``, ``CreateTaskResult``, ``tasks/*`` params and results."""

from __future__ import annotations

import enum
from typing import Any, Final

import attrs

from ._base import RELATED_TASK_META, Meta, _extra, _meta
from ._convert import KEEP, converter, from_wire


@attrs.frozen
class TaskMetadata:
    """The ``task`` field that augments a request: the requested ttl in ms."""

    ttl: int | None = None
    extra: dict[str, Any] = _extra()


class TaskStatus(enum.StrEnum):
    """The five task statuses of MCP 2025-11-25."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    #: True for ``completed``, ``failed`` and ``cancelled``. (A plain attribute
    #: of each member, set once: the task runtime reads it on every operation.)
    is_terminal: bool

    def __init__(self, value: str) -> None:
        self.is_terminal = value in ("completed", "failed", "cancelled")


@attrs.frozen
class Task:
    """A snapshot of a task's state, as in ``tasks/get`` and ``CreateTaskResult``.

    ``ttl`` is in milliseconds and ``None`` means unlimited; it is always
    written (``"ttl": null``). ``created_at``/``last_updated_at`` are ISO 8601.
    """

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    # Written always (null = unlimited); read leniently, as some peers omit it.
    ttl: int | None = attrs.field(default=None, metadata={KEEP: True})
    status_message: str | None = None
    poll_interval: int | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CreateTaskResult:
    """The immediate answer to a task-augmented request."""

    task: Task
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class TaskIdParams:
    """Parameters of ``tasks/get``, ``tasks/result`` and ``tasks/cancel``."""

    task_id: str
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


_ID_KEYS: Final = frozenset(("taskId", "_meta"))


def task_id_param(params: Any) -> str:
    """The ``taskId`` of ``tasks/get|result|cancel`` params, without a ``TaskIdParams``.

    The common shape is read directly (as the generated hook reads it);
    anything else goes through the converter.

    Raises:
        McpError: -32602 (Invalid params) when ``params`` does not fit.
    """
    if type(params) is dict and _ID_KEYS.issuperset(params):
        task_id, meta = params.get("taskId"), params.get("_meta")
        if type(task_id) is str and (meta is None or type(meta) is dict):
            return task_id
    return from_wire(params or {}, TaskIdParams).task_id


@attrs.frozen
class ListTasksResult:
    """Result of ``tasks/list``."""

    tasks: list[Task]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


def _structure_status(value: Any, _: Any) -> TaskStatus:
    return TaskStatus(value)


converter.register_structure_hook(TaskStatus, _structure_status)
converter.register_unstructure_hook(TaskStatus, lambda s: s.value)


def related_task_meta(task_id: str, meta: Meta = None) -> dict[str, Any]:
    """Return ``meta`` with the related-task key pointing at ``task_id``."""
    out = dict(meta or {})
    out[RELATED_TASK_META] = {"taskId": task_id}
    return out


def related_task_id(meta: Meta) -> str | None:
    """Return the related-task id carried in a ``_meta`` dict, if any."""
    if not meta:
        return None
    value = meta.get(RELATED_TASK_META)
    if isinstance(value, dict) and isinstance(value.get("taskId"), str):
        return str(value["taskId"])
    return None


# --- hand-written fast paths ------------------------------------------------------------
#
# A Task snapshot is unstructured for every CreateTaskResult, status
# notification, tasks/get and tasks/cancel answer. These give exactly the
# generated hooks' output (tests/peer/messages/test_fastpaths.py compares them) and leave
# anything with ``_meta`` or unknown fields to the generated hooks.

_generic_task = converter.get_unstructure_hook(Task)
_generic_create_result = converter.get_unstructure_hook(CreateTaskResult)


def task_wire(
    task_id: str,
    status: TaskStatus,
    created_at: str,
    last_updated_at: str,
    ttl: int | None,
    status_message: str | None,
    poll_interval: int | None,
) -> dict[str, Any]:
    """A ``Task``'s wire JSON (no ``_meta``), as the generated hook writes it, key order too."""
    wire: dict[str, Any] = {
        "taskId": task_id,
        "status": status._value_,  # (.value is a slow property)
        "createdAt": created_at,
        "lastUpdatedAt": last_updated_at,
        "ttl": ttl,
    }
    if status_message is not None:
        wire["statusMessage"] = status_message
    if poll_interval is not None:
        wire["pollInterval"] = poll_interval
    return wire


def _unstructure_task(task: Task) -> dict[str, Any]:
    if task.meta is not None or task.extra or type(task.status) is not TaskStatus:
        out: dict[str, Any] = _generic_task(task)
        return out
    return task_wire(
        task.task_id, task.status, task.created_at, task.last_updated_at, task.ttl,
        task.status_message, task.poll_interval,
    )


def _unstructure_create_result(result: CreateTaskResult) -> dict[str, Any]:
    if result.extra or type(result.task) is not Task:
        out: dict[str, Any] = _generic_create_result(result)
        return out
    wire: dict[str, Any] = {"task": _unstructure_task(result.task)}
    if result.meta is not None:
        wire["_meta"] = result.meta
    return wire


converter.register_unstructure_hook(Task, _unstructure_task)
converter.register_unstructure_hook(CreateTaskResult, _unstructure_create_result)
