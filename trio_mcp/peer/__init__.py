"""The transport-agnostic half of trio-mcp, in layers (each imports only those below):

* ``_peer``, ``_app``: the :class:`Peer` (features and dialects assembled) and its :class:`App`;
* ``_dialects``: how each era reads a request and shapes its answer (2026-07-28's
  ``_meta``, envelopes, MRTR, ``subscriptions/listen``, the tasks extension; 2025-11-25
  is the features' own shape);
* ``_features``: one module per MCP feature, written once for both eras, importing
  no dialect (an import-linter contract; the imports still to invert are listed there);
* ``_tasks``: the task runtime (state table, registry and actors, store, handle);
* ``_session``: the message bus and the JSON-RPC session, knowing no MCP;
* ``_messages``: JSON-RPC envelopes, the converter and the MCP types.

Transports and the CLI import from here; everything public is re-exported
from :mod:`trio_mcp`.
"""

from ._app import App as App
from ._features import IDENTITY_INFO as IDENTITY_INFO
from ._features import Caller as Caller
from ._features import RequestContext as RequestContext
from ._features import Role as Role
from ._features import required_scopes as required_scopes
from ._messages import Implementation as Implementation
from ._messages import Incoming as Incoming
from ._messages import Message as Message
from ._messages import Undecodable as Undecodable
from ._messages import decode_message as decode_message
from ._messages import encode_for_wire as encode_for_wire
from ._peer import Peer as Peer
from ._peer import host_reruns as host_reruns
from ._peer import open_peer as open_peer
from ._request_server import Outlet as Outlet
from ._request_server import RequestServer as RequestServer
from ._session import WAKE_WRITER as WAKE_WRITER
from ._session import Answered as Answered
from ._session import BusEnds as BusEnds
from ._session import MessageBus as MessageBus
from ._session import memory_bus_pair as memory_bus_pair
from ._session import open_bus as open_bus
from ._session import run_memory_link as run_memory_link
