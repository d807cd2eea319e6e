"""The dialects of the two MCP eras: how a request of each is read and answered.

The features (:mod:`trio_mcp.peer._features`) and the task runtime are written
once; the 2026-07-28 dialect lives here, at the edge, and the features import
nothing from it.
"""

from ._era import is_modern_shaped as is_modern_shaped
from ._era import unsupported_version as unsupported_version
from ._modern_client import ERAS as ERAS
