"""MCP 2025-11-25 types used by trio-mcp, as frozen attrs classes.

Field names are ``snake_case``; :mod:`._convert` maps them to the wire's
``camelCase`` (``meta`` is ``_meta``). Every class that the peer may receive
carries an ``extra`` dict so that fields this library does not model survive
a round trip. Open-ended JSON (schemas, capability sub-objects, annotations)
stays a plain ``dict``.
"""

from __future__ import annotations

import enum
from typing import Any, Final, Literal, TypeAlias

import attrs

from ._convert import KEEP, converter

LATEST_PROTOCOL_VERSION: Final = "2025-11-25"
#: Versions this peer speaks, newest first.
SUPPORTED_PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
RELATED_TASK_META: Final = "io.modelcontextprotocol/related-task"
MODEL_IMMEDIATE_RESPONSE_META: Final = "io.modelcontextprotocol/model-immediate-response"

ProgressToken: TypeAlias = str | int
Meta: TypeAlias = dict[str, Any] | None


def _extra() -> Any:
    return attrs.field(factory=dict, kw_only=True, repr=False)


def _meta() -> Any:
    return attrs.field(default=None, kw_only=True)


# --- lifecycle ---------------------------------------------------------------


@attrs.frozen
class Implementation:
    """Name and version of an MCP implementation (``clientInfo``/``serverInfo``)."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ClientCapabilities:
    """What a client supports; each present member is a JSON object."""

    sampling: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None
    roots: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    experimental: dict[str, Any] | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ServerCapabilities:
    """What a server supports; each present member is a JSON object."""

    tools: dict[str, Any] | None = None
    tasks: dict[str, Any] | None = None
    logging: dict[str, Any] | None = None
    prompts: dict[str, Any] | None = None
    resources: dict[str, Any] | None = None
    completions: dict[str, Any] | None = None
    experimental: dict[str, Any] | None = None
    extra: dict[str, Any] = _extra()


def task_capability(caps: ClientCapabilities | ServerCapabilities | None, method: str) -> bool:
    """Tell whether ``caps`` declares task augmentation for ``method``.

    Args:
        caps: The receiver's declared capabilities (``None`` if unknown).
        method: A request method such as ``"tools/call"``.

    Returns:
        True when ``tasks.requests.<category>.<action>`` is present.
    """
    if caps is None or not isinstance(caps.tasks, dict):
        return False
    category, _, action = method.partition("/")
    requests = caps.tasks.get("requests")
    if not isinstance(requests, dict):
        return False
    group = requests.get(category)
    return isinstance(group, dict) and isinstance(group.get(action), dict)


@attrs.frozen
class InitializeParams:
    """Parameters of ``initialize``."""

    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class InitializeResult:
    """Result of ``initialize``."""

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class EmptyResult:
    """A result with no content (``ping``, acknowledgements)."""

    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


# --- content -------------------------------------------------------------------


@attrs.frozen
class TextContent:
    """Text for or from a model."""

    text: str
    type: Literal["text"] = attrs.field(default="text", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ImageContent:
    """A base64-encoded image."""

    data: str
    mime_type: str
    type: Literal["image"] = attrs.field(default="image", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class AudioContent:
    """Base64-encoded audio."""

    data: str
    mime_type: str
    type: Literal["audio"] = attrs.field(default="audio", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ResourceLink:
    """A link to a resource the server can read."""

    uri: str
    name: str
    type: Literal["resource_link"] = attrs.field(default="resource_link", metadata={KEEP: True})
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class EmbeddedResource:
    """Resource contents embedded in a result (``resource`` is the raw contents)."""

    resource: dict[str, Any]
    type: Literal["resource"] = attrs.field(default="resource", metadata={KEEP: True})
    annotations: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class OtherContent:
    """A content block of a type this library does not model (kept verbatim)."""

    type: str = attrs.field(metadata={KEEP: True})
    extra: dict[str, Any] = _extra()


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | OtherContent
)
_CONTENT_BY_TYPE: Final[dict[str, type[Any]]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource_link": ResourceLink,
    "resource": EmbeddedResource,
}


def _structure_content(value: Any, _: Any) -> Any:
    if not isinstance(value, dict):
        raise TypeError("a content block must be an object")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise TypeError('a content block needs a string "type"')
    cls = _CONTENT_BY_TYPE.get(kind, OtherContent)
    return converter.structure(value, cls)


converter.register_structure_hook(ContentBlock, _structure_content)


# --- tools ---------------------------------------------------------------------

TaskSupport: TypeAlias = Literal["forbidden", "optional", "required"]


@attrs.frozen
class ToolExecution:
    """Execution properties of a tool (``execution`` in ``tools/list``)."""

    task_support: str | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class Tool:
    """A tool as listed by ``tools/list``."""

    name: str
    input_schema: dict[str, Any]
    title: str | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    execution: ToolExecution | None = None
    icons: list[dict[str, Any]] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def task_support(self) -> str:
        """The tool's ``execution.taskSupport``, ``"forbidden"`` when absent."""
        if self.execution is None or self.execution.task_support is None:
            return "forbidden"
        return self.execution.task_support


@attrs.frozen
class PaginatedParams:
    """Parameters of a paginated list request."""

    cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ListToolsResult:
    """Result of ``tools/list``."""

    tools: list[Tool]
    next_cursor: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class TaskMetadata:
    """The ``task`` field that augments a request: the requested ttl in ms."""

    ttl: int | None = None
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CallToolParams:
    """Parameters of ``tools/call``."""

    name: str
    arguments: dict[str, Any] | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CallToolResult:
    """Result of ``tools/call`` (and of ``tasks/result`` for a tool task)."""

    content: list[ContentBlock] = attrs.field(factory=list, metadata={KEEP: True})
    structured_content: dict[str, Any] | None = None
    is_error: bool = attrs.field(default=False, metadata={KEEP: True})
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """All text blocks of ``content`` joined by newlines (a convenience)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextContent))


# --- sampling & elicitation ----------------------------------------------------------


@attrs.frozen
class SamplingMessage:
    """One message of a sampling conversation; ``content`` is kept as wire JSON."""

    role: str
    content: dict[str, Any] | list[dict[str, Any]]
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


def _structure_sampling_content(value: Any, _: Any) -> Any:
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    raise TypeError("sampling content must be an object or an array of objects")


converter.register_structure_hook(
    dict[str, Any] | list[dict[str, Any]], _structure_sampling_content
)


@attrs.frozen
class CreateMessageParams:
    """Parameters of ``sampling/createMessage``."""

    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | None = None
    model_preferences: dict[str, Any] | None = None
    include_context: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CreateMessageResult:
    """Result of ``sampling/createMessage``."""

    role: str
    content: dict[str, Any] | list[dict[str, Any]]
    model: str
    stop_reason: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()

    @property
    def text(self) -> str:
        """The text of the sampled message's text blocks."""
        blocks = self.content if isinstance(self.content, list) else [self.content]
        return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


@attrs.frozen
class ElicitParams:
    """Parameters of ``elicitation/create`` (form mode, or url mode)."""

    message: str
    requested_schema: dict[str, Any] | None = None
    mode: str | None = None
    url: str | None = None
    elicitation_id: str | None = None
    task: TaskMetadata | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class ElicitResult:
    """Result of ``elicitation/create``: ``accept``, ``decline`` or ``cancel``."""

    action: str
    content: dict[str, Any] | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


# --- utilities -----------------------------------------------------------------------


@attrs.frozen
class ProgressParams:
    """Parameters of ``notifications/progress``."""

    progress_token: str | int
    progress: float
    total: float | None = None
    message: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


@attrs.frozen
class CancelledParams:
    """Parameters of ``notifications/cancelled``."""

    request_id: str | int | None = None
    reason: str | None = None
    meta: Meta = _meta()
    extra: dict[str, Any] = _extra()


# --- tasks ---------------------------------------------------------------------------


class TaskStatus(enum.StrEnum):
    """The five task statuses of MCP 2025-11-25."""

    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True for ``completed``, ``failed`` and ``cancelled``."""
        return self in _TERMINAL


_TERMINAL: Final = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


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
