"""The MCP features layer: the App, the Peer and one module per feature.

Each feature is a :class:`~._base.PeerCore` mixin registering its handlers
and capabilities (see :mod:`._catalog`); the session below knows no MCP.
"""

from ._app import App as App
from ._base import PeerCore as PeerCore
from ._base import Role as Role
from ._context import RequestContext as RequestContext
from ._peer import Peer as Peer
from ._peer import open_peer as open_peer
