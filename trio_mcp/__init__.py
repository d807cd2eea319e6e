"""trio-mcp: an actor-based, bidirectional MCP peer runtime on Trio.

It speaks both revisions of the protocol, 2025-11-25 (tasks in the core
protocol) and 2026-07-28 (stateless requests, MRTR, and tasks as the
``io.modelcontextprotocol/tasks`` extension), on stdio, WebSocket and
Streamable HTTP. Either side can host tasks and call them: a client calls
server tools as tasks, and a server asks the client for sampling or
elicitation as tasks.
"""

from typing import TYPE_CHECKING

from ._errors import (
    INTERNAL_ERROR as INTERNAL_ERROR,
)
from ._errors import (
    INVALID_PARAMS as INVALID_PARAMS,
)
from ._errors import (
    INVALID_REQUEST as INVALID_REQUEST,
)
from ._errors import (
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
)
from ._errors import (
    PARSE_ERROR as PARSE_ERROR,
)
from ._errors import (
    RESOURCE_LIMIT as RESOURCE_LIMIT,
)
from ._errors import ConnectionClosed as ConnectionClosed
from ._errors import ConnectionFailed as ConnectionFailed
from ._errors import HandshakeTimeout as HandshakeTimeout
from ._errors import HeaderMismatch as HeaderMismatch
from ._errors import LocalUsageError as LocalUsageError
from ._errors import McpError as McpError
from ._errors import MissingClientCapability as MissingClientCapability
from ._errors import RemoteError as RemoteError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._errors import TaskCancelled as TaskCancelled
from ._errors import TaskFailed as TaskFailed
from ._errors import TrioMcpError as TrioMcpError
from ._errors import UnsupportedProtocolVersion as UnsupportedProtocolVersion
from ._runner import App as App
from ._telemetry import configure_tracing as configure_tracing
from ._telemetry import tracing_enabled as tracing_enabled
from ._util import lazy_exports as _lazy_exports
from ._worker import serve_worker as serve_worker
from ._worker import until_drained as until_drained
from .peer import Peer as Peer
from .peer import open_peer as open_peer
from .peer._dialects._modern import CacheHint as CacheHint
from .peer._features import Caller as Caller
from .peer._features import RequestContext as RequestContext
from .peer._features import Role as Role

# Resources, prompts, completion, logging, roots, elicitation forms.
from .peer._features._resources import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
from .peer._messages import (
    LATEST_PROTOCOL_VERSION as LATEST_PROTOCOL_VERSION,
)
from .peer._messages import LOGGING_LEVELS as LOGGING_LEVELS
from .peer._messages import (
    MODEL_IMMEDIATE_RESPONSE_META as MODEL_IMMEDIATE_RESPONSE_META,
)
from .peer._messages import (
    RELATED_TASK_META as RELATED_TASK_META,
)
from .peer._messages import URL_ELICITATION_REQUIRED as URL_ELICITATION_REQUIRED
from .peer._messages import Annotations as Annotations
from .peer._messages import AudioContent as AudioContent
from .peer._messages import BlobResourceContents as BlobResourceContents
from .peer._messages import CallToolResult as CallToolResult
from .peer._messages import ClientCapabilities as ClientCapabilities
from .peer._messages import CompleteResult as CompleteResult
from .peer._messages import Completion as Completion
from .peer._messages import CreateMessageParams as CreateMessageParams
from .peer._messages import CreateMessageResult as CreateMessageResult
from .peer._messages import CreateTaskResult as CreateTaskResult
from .peer._messages import ElicitParams as ElicitParams
from .peer._messages import ElicitResult as ElicitResult
from .peer._messages import EmbeddedResource as EmbeddedResource
from .peer._messages import ErrorResponse as ErrorResponse
from .peer._messages import GetPromptResult as GetPromptResult
from .peer._messages import Icon as Icon
from .peer._messages import ImageContent as ImageContent
from .peer._messages import Implementation as Implementation
from .peer._messages import ListPromptsResult as ListPromptsResult
from .peer._messages import ListResourcesResult as ListResourcesResult
from .peer._messages import ListResourceTemplatesResult as ListResourceTemplatesResult
from .peer._messages import ListRootsResult as ListRootsResult
from .peer._messages import ListTasksResult as ListTasksResult
from .peer._messages import ListToolsResult as ListToolsResult
from .peer._messages import LoggingMessageParams as LoggingMessageParams
from .peer._messages import Notification as Notification
from .peer._messages import ProgressParams as ProgressParams
from .peer._messages import Prompt as Prompt
from .peer._messages import PromptArgument as PromptArgument
from .peer._messages import PromptMessage as PromptMessage
from .peer._messages import PromptReference as PromptReference
from .peer._messages import ReadResourceResult as ReadResourceResult
from .peer._messages import Request as Request
from .peer._messages import Resource as Resource
from .peer._messages import ResourceLink as ResourceLink
from .peer._messages import ResourceTemplate as ResourceTemplate
from .peer._messages import ResourceTemplateReference as ResourceTemplateReference
from .peer._messages import Response as Response
from .peer._messages import Root as Root
from .peer._messages import SamplingMessage as SamplingMessage
from .peer._messages import ServerCapabilities as ServerCapabilities
from .peer._messages import Task as Task
from .peer._messages import TaskStatus as TaskStatus
from .peer._messages import TextContent as TextContent
from .peer._messages import TextResourceContents as TextResourceContents
from .peer._messages import Tool as Tool
from .peer._messages import ToolAnnotations as ToolAnnotations
from .peer._messages import Undecodable as Undecodable
from .peer._messages import boolean_field as boolean_field
from .peer._messages import check_form_schema as check_form_schema
from .peer._messages import enum_field as enum_field
from .peer._messages import form_schema as form_schema
from .peer._messages import number_field as number_field
from .peer._messages import string_field as string_field
from .peer._session import MessageBus as MessageBus
from .peer._session import memory_bus_pair as memory_bus_pair
from .peer._session import open_bus as open_bus
from .peer._session import run_memory_link as run_memory_link
from .peer._tasks import IllegalTransition as IllegalTransition
from .peer._tasks import MemoryTaskStore as MemoryTaskStore
from .peer._tasks import SqliteTaskStore as SqliteTaskStore
from .peer._tasks import TaskEvent as TaskEvent
from .peer._tasks import TaskHandle as TaskHandle
from .peer._tasks import TaskLimits as TaskLimits
from .peer._tasks import TaskRecord as TaskRecord
from .peer._tasks import TaskRegistry as TaskRegistry
from .peer._tasks import TaskStore as TaskStore
from .peer._tasks import next_status as next_status
from .peer._tasks import open_task_store as open_task_store
from .peer._tasks._rerun import Rerun as Rerun
from .transports._http_store import EventStore as EventStore
from .transports._http_store import MemoryEventStore as MemoryEventStore
from .transports._memory import MemoryPair as MemoryPair
from .transports._memory import open_memory_pair as open_memory_pair
from .transports._stdio import open_stdio_client as open_stdio_client
from .transports._stdio import serve_stdio as serve_stdio
from .transports._stdio import wrap_stdio_streams as wrap_stdio_streams

if TYPE_CHECKING:
    from .transports._http11 import HttpServerSettings as HttpServerSettings
    from .transports._http_client import open_http_client as open_http_client
    from .transports._http_policy import HttpPolicy as HttpPolicy
    from .transports._http_server import StreamableHttpApp as StreamableHttpApp
    from .transports._http_server import serve_http as serve_http
    from .transports._http_servers import HttpAddress as HttpAddress
    from .transports._http_servers import HttpServerName as HttpServerName
    from .transports._http_servers import default_http_server as default_http_server
    from .transports._websocket import wrap_websocket as wrap_websocket
    from .transports._websocket_client import open_websocket_client as open_websocket_client
    from .transports._websocket_server import WebSocketAddress as WebSocketAddress
    from .transports._websocket_server import origin_allowed as origin_allowed
    from .transports._websocket_server import serve_websocket as serve_websocket
else:
    # The HTTP and WebSocket transports load httpx, h11, trio_websocket and wsproto:
    # they are imported the first time one of their names is used, so that a stdio
    # server or client starts without them (``trio_mcp.serve_http`` and
    # ``from trio_mcp import serve_http`` work as if they were imported here).
    __getattr__, __dir__ = _lazy_exports(__name__, {
        "HttpServerSettings": ".transports._http11",
        "open_http_client": ".transports._http_client",
        "HttpPolicy": ".transports._http_policy",
        "StreamableHttpApp": ".transports._http_server",
        "serve_http": ".transports._http_server",
        "HttpAddress": ".transports._http_servers",
        "HttpServerName": ".transports._http_servers",
        "default_http_server": ".transports._http_servers",
        "wrap_websocket": ".transports._websocket",
        "open_websocket_client": ".transports._websocket_client",
        "WebSocketAddress": ".transports._websocket_server",
        "origin_allowed": ".transports._websocket_server",
        "serve_websocket": ".transports._websocket_server",
    })

__version__ = "0.1.0"

#: The public names, for ``help(trio_mcp)`` and ``from trio_mcp import *``.
__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_PROTOCOL_VERSION",
    "LOGGING_LEVELS",
    "METHOD_NOT_FOUND",
    "MODEL_IMMEDIATE_RESPONSE_META",
    "PARSE_ERROR",
    "RELATED_TASK_META",
    "RESOURCE_LIMIT",
    "RESOURCE_NOT_FOUND",
    "URL_ELICITATION_REQUIRED",
    "Annotations",
    "App",
    "AudioContent",
    "BlobResourceContents",
    "CacheHint",
    "CallToolResult",
    "Caller",
    "ClientCapabilities",
    "CompleteResult",
    "Completion",
    "ConnectionClosed",
    "ConnectionFailed",
    "CreateMessageParams",
    "CreateMessageResult",
    "CreateTaskResult",
    "ElicitParams",
    "ElicitResult",
    "EmbeddedResource",
    "ErrorResponse",
    "EventStore",
    "GetPromptResult",
    "HandshakeTimeout",
    "HeaderMismatch",
    "HttpAddress",
    "HttpPolicy",
    "HttpServerName",
    "HttpServerSettings",
    "Icon",
    "IllegalTransition",
    "ImageContent",
    "Implementation",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListRootsResult",
    "ListTasksResult",
    "ListToolsResult",
    "LocalUsageError",
    "LoggingMessageParams",
    "McpError",
    "MemoryEventStore",
    "MemoryPair",
    "MemoryTaskStore",
    "MessageBus",
    "MissingClientCapability",
    "Notification",
    "Peer",
    "ProgressParams",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptReference",
    "ReadResourceResult",
    "RemoteError",
    "RemoteProtocolError",
    "Request",
    "RequestContext",
    "Rerun",
    "Resource",
    "ResourceLink",
    "ResourceTemplate",
    "ResourceTemplateReference",
    "Response",
    "Role",
    "Root",
    "SamplingMessage",
    "ServerCapabilities",
    "SqliteTaskStore",
    "StreamableHttpApp",
    "Task",
    "TaskCancelled",
    "TaskEvent",
    "TaskFailed",
    "TaskHandle",
    "TaskLimits",
    "TaskRecord",
    "TaskRegistry",
    "TaskStatus",
    "TaskStore",
    "TextContent",
    "TextResourceContents",
    "Tool",
    "ToolAnnotations",
    "TrioMcpError",
    "Undecodable",
    "UnsupportedProtocolVersion",
    "WebSocketAddress",
    "boolean_field",
    "check_form_schema",
    "configure_tracing",
    "default_http_server",
    "enum_field",
    "form_schema",
    "memory_bus_pair",
    "next_status",
    "number_field",
    "open_bus",
    "open_http_client",
    "open_memory_pair",
    "open_peer",
    "open_stdio_client",
    "open_task_store",
    "open_websocket_client",
    "origin_allowed",
    "run_memory_link",
    "serve_http",
    "serve_stdio",
    "serve_websocket",
    "serve_worker",
    "string_field",
    "tracing_enabled",
    "until_drained",
    "wrap_stdio_streams",
    "wrap_websocket",
]
