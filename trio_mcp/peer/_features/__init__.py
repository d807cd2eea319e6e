"""MCP features: one module per feature, each a mixin of :class:`~trio_mcp.peer.Peer`.

They are written once, for both eras; how an era reads a request and shapes
its answer is the business of :mod:`trio_mcp.peer._dialects`.
"""

from ._base import Caller as Caller
from ._base import PeerCore as PeerCore
from ._base import Role as Role
from ._children import TaskChildren as TaskChildren
from ._context import RequestContext as RequestContext
from ._scopes import IDENTITY_INFO as IDENTITY_INFO
from ._scopes import required_scopes as required_scopes
