"""The client side: an OAuth 2.1 ``client_credentials`` provider as an :class:`httpx.Auth`.

:class:`ClientCredentials` is given to ``open_http_client(..., auth=...)``. The
first request goes out as is; a ``401`` starts discovery (MCP authorization,
2025-11-25 and 2026-07-28): the protected-resource metadata (RFC 9728) from
the ``resource_metadata`` of the ``WWW-Authenticate`` challenge, else from the
well-known URIs (path-suffixed first, then the root); its first
authorization server's metadata (RFC 8414, then OpenID discovery, in the
order the MCP spec gives); then a token from its ``token_endpoint`` with
``grant_type=client_credentials``, the ``resource`` parameter (RFC 8707: the
server's canonical URI) and ``scope`` (given, else the challenge's). The
token is sent on every request, fetched again shortly before it expires, and
once more (with one retry of the request) when the server answers 401 to
it. A ``403 insufficient_scope`` is returned as is (a client acting on its
own behalf may stop there, says the spec).
"""

from __future__ import annotations

import base64
import re
import secrets
import time
import urllib.parse
from collections.abc import AsyncGenerator, Generator, Mapping
from typing import Any, Final, Literal, final

import httpx
import trio

#: Seconds before expiry at which a token is fetched again (at most a tenth of its life).
REFRESH_MARGIN: Final = 60.0
_CHALLENGE_PARAM: Final = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class OAuthError(Exception):
    """Discovery or the token request failed (the message says where)."""


def challenge_params(header: str | None) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer ...`` challenge (lower-case names)."""
    if not header:
        return {}
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {
        m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3))
        .replace('\\"', '"')
        for m in _CHALLENGE_PARAM.finditer(rest)
    }


def canonical_resource(url: str | httpx.URL) -> str:
    """A server's canonical URI (RFC 8707): scheme and host lower case, no query or fragment."""
    parts = urllib.parse.urlsplit(str(url))
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))


def protected_resource_urls(url: str | httpx.URL) -> list[str]:
    """The RFC 9728 well-known URIs of a server, path-suffixed first, then the root."""
    parts = urllib.parse.urlsplit(str(url))
    base = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource"
    path = parts.path.rstrip("/")
    return [base + path, base] if path else [base]


def authorization_server_urls(issuer: str) -> list[str]:
    """Where an authorization server's metadata may be, in the MCP spec's order."""
    parts = urllib.parse.urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def _form(value: str) -> str:
    return urllib.parse.quote_plus(value)


def _same_issuer(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


@final
class ClientCredentials(httpx.Auth):
    """OAuth 2.1 ``client_credentials`` for a client acting on its own behalf.

    Args:
        client_id: The client's id at the authorization server.
        client_secret: Its secret (``client_secret_basic``, or
            ``client_secret_post`` when the server's metadata lists only that).
        private_key: Instead of a secret, a private key (PEM text or a JWK
            dict) to sign a ``private_key_jwt`` client assertion with (RFC 7523;
            needs joserfc, the ``auth`` extra).
        signing_algorithm: The assertion's JWS algorithm (``ES256`` by default).
        scope: Scopes to ask for (space-separated); by default the 401
            challenge's ``scope``, if any.
        token_endpoint: Skip discovery and use this token endpoint.
        resource: The ``resource`` to ask a token for; by default the
            metadata's ``resource`` (checked against the server's URL).
        auth_method: Force ``"client_secret_basic"`` or ``"client_secret_post"``.
    """

    requires_response_body = False

    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        *,
        private_key: str | Mapping[str, Any] | None = None,
        signing_algorithm: str = "ES256",
        scope: str | None = None,
        token_endpoint: str | None = None,
        resource: str | None = None,
        auth_method: Literal["client_secret_basic", "client_secret_post"] | None = None,
    ) -> None:
        if (client_secret is None) == (private_key is None):
            raise ValueError("give exactly one of client_secret and private_key")
        self.client_id = client_id
        self._secret = client_secret
        self._private_key = private_key
        self.signing_algorithm = signing_algorithm
        self.scope = scope
        self.token_endpoint = token_endpoint
        self.resource = resource
        self.auth_method = auth_method
        self.issuer: str | None = None
        self._methods: list[str] = []
        self._token: str | None = None
        self._refresh_at: float | None = None
        #: Tokens fetched so far (for tests and logs).
        self.tokens_fetched = 0
        self._lock = trio.Lock()

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        """Not supported: trio-mcp's client is async."""
        raise RuntimeError("ClientCredentials works with httpx.AsyncClient only")
        yield request  # pragma: no cover

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Add the token; on a 401, discover, fetch a token and retry once.

        Raises:
            OAuthError: Discovery or the token request failed.

        Cancellation: the request (or the discovery step under way) is
            abandoned; a token already received is kept for the next request.
        """
        stale = self._token
        if stale is not None and self._refresh_at is not None and (
            trio.current_time() >= self._refresh_at
        ):
            async with self._lock:  # one renewal at a time; the others then use its token
                if self._token == stale:
                    steps = self._obtain({}, str(request.url))
                    reply: httpx.Response | None = None
                    while (step := await _next(steps, reply)) is not None:
                        reply = yield step
        sent = self._token
        if sent is not None:
            request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        if response.status_code != 401:
            return
        challenge = challenge_params(response.headers.get("www-authenticate"))
        async with self._lock:  # a request refused meanwhile waits for this new token
            if self._token in (sent, None):
                self._token = None
                steps = self._obtain(challenge, str(request.url))
                reply = None
                while (step := await _next(steps, reply)) is not None:
                    reply = yield step
        if self._token is None or self._token == sent:
            return
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    async def _obtain(
        self, challenge: Mapping[str, str], url: str
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Discover what is missing, then fetch a token (the requests to send, one by one)."""
        if self.token_endpoint is None or (self.resource is None and "resource_metadata" in
                                           challenge):
            hint = challenge.get("resource_metadata")
            prm: dict[str, Any] | None = None
            for candidate in [hint] if hint else protected_resource_urls(url):
                response = yield httpx.Request("GET", candidate, headers={"Accept":
                                                                          "application/json"})
                prm = await _json_or_none(response)
                if prm is not None:
                    break
            if prm is None:
                raise OAuthError(f"no protected-resource metadata for {url}")
            self._take_resource(prm, url)
            servers = prm.get("authorization_servers")
            if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
                raise OAuthError("the protected-resource metadata names no authorization server")
            if self.token_endpoint is None:
                steps = self._discover_server(servers[0])
                reply: httpx.Response | None = None
                while (step := await _next(steps, reply)) is not None:
                    reply = yield step
        if self.resource is None:
            self.resource = canonical_resource(url)
        scope = self.scope or challenge.get("scope")
        response = yield self._token_request(scope)
        await response.aread()
        self._take_token(response)

    def _take_resource(self, prm: Mapping[str, Any], url: str) -> None:
        resource = prm.get("resource")
        if self.resource is not None:
            return
        if not isinstance(resource, str):
            raise OAuthError("the protected-resource metadata has no resource")
        wanted = canonical_resource(url)
        if not wanted.startswith(canonical_resource(resource).rstrip("/")):
            raise OAuthError(f"the metadata's resource {resource!r} is not this server ({wanted})")
        self.resource = resource

    async def _discover_server(self, issuer: str) -> AsyncGenerator[httpx.Request, httpx.Response]:
        for candidate in authorization_server_urls(issuer):
            response = yield httpx.Request("GET", candidate, headers={"Accept":
                                                                      "application/json"})
            metadata = await _json_or_none(response)
            if metadata is None:
                continue
            found = metadata.get("issuer")
            if not isinstance(found, str) or not _same_issuer(found, issuer):
                raise OAuthError(f"the authorization server metadata at {candidate} names "
                                 f"issuer {found!r}, not {issuer!r}")
            endpoint = metadata.get("token_endpoint")
            if not isinstance(endpoint, str):
                raise OAuthError(f"the authorization server {issuer} has no token_endpoint")
            self.issuer, self.token_endpoint = found, endpoint
            methods = metadata.get("token_endpoint_auth_methods_supported")
            self._methods = [m for m in methods if isinstance(m, str)] if isinstance(
                methods, list) else []
            return
        raise OAuthError(f"no authorization server metadata for {issuer}")

    def _token_request(self, scope: str | None) -> httpx.Request:
        assert self.token_endpoint is not None
        data = {"grant_type": "client_credentials"}
        if self.resource:
            data["resource"] = self.resource
        if scope:
            data["scope"] = scope
        headers = {"Accept": "application/json"}
        if self._private_key is not None:
            data["client_id"] = self.client_id
            data["client_assertion_type"] = (
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            data["client_assertion"] = self._assertion()
        else:
            assert self._secret is not None
            method = self.auth_method or (
                "client_secret_post" if self._methods and "client_secret_basic" not in
                self._methods and "client_secret_post" in self._methods
                else "client_secret_basic")
            if method == "client_secret_post":
                data |= {"client_id": self.client_id, "client_secret": self._secret}
            else:  # RFC 6749 2.3.1: each part form-encoded before Base64
                pair = f"{_form(self.client_id)}:{_form(self._secret)}".encode()
                headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        return httpx.Request("POST", self.token_endpoint, data=data, headers=headers)

    def _assertion(self) -> str:
        from joserfc import jwk, jwt

        key = jwk.import_key(self._private_key)  # type: ignore[arg-type]
        now = int(time.time())
        claims = {"iss": self.client_id, "sub": self.client_id,
                  "aud": self.issuer or self.token_endpoint, "iat": now, "exp": now + 300,
                  "jti": secrets.token_urlsafe(16)}
        return jwt.encode({"alg": self.signing_algorithm}, claims, key)

    def _take_token(self, response: httpx.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200 or not isinstance(body, dict):
            error = body.get("error") if isinstance(body, dict) else None
            raise OAuthError(f"the token endpoint answered {response.status_code}"
                             + (f" ({error})" if error else ""))
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthError("the token endpoint's answer has no access_token")
        if str(body.get("token_type", "bearer")).lower() != "bearer":
            raise OAuthError(f"unsupported token_type {body.get('token_type')!r}")
        self._token = token
        self.tokens_fetched += 1
        expires_in = body.get("expires_in")
        self._refresh_at = None
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            margin = min(REFRESH_MARGIN, expires_in / 10)
            self._refresh_at = trio.current_time() + max(expires_in - margin, 0)


async def _next(
    steps: AsyncGenerator[httpx.Request, httpx.Response], reply: httpx.Response | None
) -> httpx.Request | None:
    """Drive a sub-flow: its next request (given the answer to the last), None when done."""
    try:
        return await (steps.__anext__() if reply is None else steps.asend(reply))
    except StopAsyncIteration:
        return None


async def _json_or_none(response: httpx.Response) -> dict[str, Any] | None:
    await response.aread()
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
