"""trio-mcp: an actor-based, bidirectional MCP 2025-11-25 peer runtime on Trio.

Either side can host tasks and call them: a client calls server tools as
tasks, and a server asks the client for sampling or elicitation as tasks.
"""

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
from ._errors import LocalUsageError as LocalUsageError
from ._errors import McpError as McpError
from ._errors import RemoteError as RemoteError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._errors import TrioMcpError as TrioMcpError
from .peer._app import App as App
from .peer._bus import MessageBus as MessageBus
from .peer._bus import memory_bus_pair as memory_bus_pair
from .peer._bus import open_bus as open_bus
from .peer._bus import run_memory_link as run_memory_link
from .peer._context import RequestContext as RequestContext
from .peer._handle import TaskHandle as TaskHandle
from .peer._jsonrpc import ErrorResponse as ErrorResponse
from .peer._jsonrpc import Notification as Notification
from .peer._jsonrpc import Request as Request
from .peer._jsonrpc import Response as Response
from .peer._jsonrpc import Undecodable as Undecodable
from .peer._registry import MemoryTaskStore as MemoryTaskStore
from .peer._registry import TaskLimits as TaskLimits
from .peer._registry import TaskRecord as TaskRecord
from .peer._registry import TaskRegistry as TaskRegistry
from .peer._registry import TaskStore as TaskStore
from .peer._router import Peer as Peer
from .peer._router import Role as Role
from .peer._router import open_peer as open_peer
from .peer._state import IllegalTransition as IllegalTransition
from .peer._state import TaskEvent as TaskEvent
from .peer._state import next_status as next_status
from .peer._types import (
    LATEST_PROTOCOL_VERSION as LATEST_PROTOCOL_VERSION,
)
from .peer._types import (
    MODEL_IMMEDIATE_RESPONSE_META as MODEL_IMMEDIATE_RESPONSE_META,
)
from .peer._types import (
    RELATED_TASK_META as RELATED_TASK_META,
)
from .peer._types import CallToolResult as CallToolResult
from .peer._types import ClientCapabilities as ClientCapabilities
from .peer._types import CreateMessageParams as CreateMessageParams
from .peer._types import CreateMessageResult as CreateMessageResult
from .peer._types import CreateTaskResult as CreateTaskResult
from .peer._types import ElicitParams as ElicitParams
from .peer._types import ElicitResult as ElicitResult
from .peer._types import Implementation as Implementation
from .peer._types import ListTasksResult as ListTasksResult
from .peer._types import ListToolsResult as ListToolsResult
from .peer._types import ProgressParams as ProgressParams
from .peer._types import SamplingMessage as SamplingMessage
from .peer._types import ServerCapabilities as ServerCapabilities
from .peer._types import Task as Task
from .peer._types import TaskStatus as TaskStatus
from .peer._types import TextContent as TextContent
from .peer._types import Tool as Tool
from .transports._memory import open_memory_pair as open_memory_pair
from .transports._stdio import open_stdio_client as open_stdio_client
from .transports._stdio import serve_stdio as serve_stdio
from .transports._stdio import wrap_stdio_streams as wrap_stdio_streams
from .transports._websocket import WebSocketAddress as WebSocketAddress
from .transports._websocket import open_websocket_client as open_websocket_client
from .transports._websocket import origin_allowed as origin_allowed
from .transports._websocket import serve_websocket as serve_websocket
from .transports._websocket import wrap_websocket as wrap_websocket

__version__ = "0.1.0"
from .transports._http_client import open_http_client as open_http_client
from .transports._http_policy import HttpPolicy as HttpPolicy
from .transports._http_server import HttpAddress as HttpAddress
from .transports._http_server import StreamableHttpApp as StreamableHttpApp
from .transports._http_server import serve_http as serve_http
from .transports._http_store import EventStore as EventStore
from .transports._http_store import MemoryEventStore as MemoryEventStore
