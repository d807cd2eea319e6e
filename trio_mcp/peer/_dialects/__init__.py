"""The dialects of the two MCP eras: how a request of each is read and answered.

The features (:mod:`trio_mcp.peer._features`) and the task runtime are written
once; both eras live here, at the edge, as values of the features'
:class:`~trio_mcp.peer._features._base.Dialect` protocol: ``_legacy``'s
:class:`~._legacy.LegacyDialect` (2025-11-25: a connection's requests, read as
its handshake says; one per connection) and ``_era``'s
:class:`~._era.ModernRequest` (2026-07-28: one per request, read from its
``_meta``). The features import nothing from here.
"""

from ._era import is_modern_shaped as is_modern_shaped
from ._era import unsupported_version as unsupported_version
from ._modern_client import ERAS as ERAS
