"""OAuth 2.1 for trio-mcp: the resource server's token verifiers, and the client's provider.

A server verifies the bearer token of every request with a
:class:`TokenVerifier` and hands the :class:`Identity` it returns to the rest
of the runtime (task ownership, ``ctx.identity``, scopes):

* :class:`CallbackVerifier`: static tokens and/or your own function;
* :class:`JWTVerifier`: JWT access tokens against the authorization
  server's JWKS (needs joserfc: ``pip install 'trio-mcp[auth]'``);
* :class:`IntrospectionVerifier`: opaque tokens, asked of the
  authorization server (RFC 7662).

A client gets tokens with :class:`ClientCredentials` (an :class:`httpx.Auth`
for ``open_http_client(..., auth=...)``).
"""

from typing import TYPE_CHECKING

from .._util import lazy_exports as _lazy_exports
from ._identity import CallbackVerifier as CallbackVerifier
from ._identity import Identity as Identity
from ._identity import InvalidToken as InvalidToken
from ._identity import TokenVerifier as TokenVerifier
from ._introspection import IntrospectionVerifier as IntrospectionVerifier
from ._jwt import DEFAULT_ALGORITHMS as DEFAULT_ALGORITHMS
from ._jwt import JWTVerifier as JWTVerifier

if TYPE_CHECKING:
    from ._client import ClientCredentials as ClientCredentials
    from ._client import OAuthError as OAuthError
else:
    # The client's names subclass httpx's: imported on first use, so a server
    # that only verifies tokens does not load httpx.
    __getattr__, __dir__ = _lazy_exports(
        __name__, {"ClientCredentials": "._client", "OAuthError": "._client"}
    )

__all__ = [
    "DEFAULT_ALGORITHMS",
    "CallbackVerifier",
    "ClientCredentials",
    "Identity",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "OAuthError",
    "TokenVerifier",
]
