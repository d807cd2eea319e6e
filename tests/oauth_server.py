"""A small real OAuth 2.1 authorization server for the auth tests, on loopback.

Served by the standard library's ``ThreadingHTTPServer`` in a thread (so the
server under test fetches from it over real sockets): RFC 8414 metadata, a
JWKS whose keys joserfc makes (rotatable), a ``client_credentials`` token
endpoint (``client_secret_basic`` / ``client_secret_post``) issuing JWT or
opaque access tokens bound to the requested ``resource``, and an RFC 7662
introspection endpoint that requires its own client authentication.
Counters tell how often each endpoint was used. Without joserfc (the ``auth``
extra) the tests that import this module are skipped with the reason (CI's run with
the ``test`` extra alone has no joserfc; its main run installs it).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

try:
    from joserfc import jwt
    from joserfc.jwk import ECKey, Key, OctKey, RSAKey
except ImportError:  # the auth extra (CI's second run, with the test extra alone, lacks it)
    pytest.skip("joserfc is not installed (pip install 'trio-mcp[auth]')",
                allow_module_level=True)

#: The resource server's own credentials at the authorization server (introspection).
RS_CLIENT = ("mcp-server", "rs-secret")


class AuthServer:
    """State of the authorization server (read and changed by tests, used by the handler)."""

    def __init__(self) -> None:
        self.issuer = ""
        self.keys: dict[str, Key] = {}
        self.published: list[str] = []
        self.signing_kid = ""
        #: client id -> (secret, scopes it may get)
        self.clients: dict[str, tuple[str, set[str]]] = {}
        self.opaque: dict[str, dict[str, Any]] = {}
        self.token_format = "jwt"
        #: Where the token endpoint is; and whether the metadata lists an
        #: authorization endpoint (RFC 8414 2: not for a client_credentials-only server).
        self.token_path = "/token"
        self.authorization_endpoint = True
        self.token_ttl = 300
        self.jwks_fetches = 0
        self.introspections = 0
        self.token_requests: list[dict[str, str]] = []
        self.lock = threading.Lock()

    # --- keys ------------------------------------------------------------------------------

    def add_key(self, kind: str = "RSA", publish: bool = True) -> str:
        """Make a key (RSA or EC P-256), maybe publish it; return its kid."""
        kid = f"{kind.lower()}-{secrets.token_hex(4)}"
        key: Key = (RSAKey.generate_key(2048, parameters={"kid": kid}) if kind == "RSA"
                    else ECKey.generate_key("P-256", parameters={"kid": kid}))
        self.keys[kid] = key
        if publish:
            self.published.append(kid)
        return kid

    def rotate(self) -> str:
        """Publish a new signing key (the old one stays published); return its kid."""
        self.signing_kid = self.add_key()
        return self.signing_kid

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**self.keys[k].as_dict(private=False), "use": "sig"}
                         for k in self.published]}

    # --- tokens ----------------------------------------------------------------------------

    def mint(self, claims: dict[str, Any] | None = None, *, kid: str | None = None,
             alg: str | None = None, header: dict[str, Any] | None = None,
             key: Key | None = None, drop: tuple[str, ...] = ()) -> str:
        """A JWT signed with ``kid``'s key (the signing key by default); claims merged."""
        kid = kid or self.signing_kid
        now = int(time.time())
        body = {"iss": self.issuer, "sub": "alice", "client_id": "agent", "aud": "",
                "scope": "tools", "iat": now, "exp": now + 300, **(claims or {})}
        for name in drop:
            body.pop(name, None)
        signing = key or self.keys[kid]
        algorithm = alg or ("RS256" if isinstance(signing, RSAKey) else
                            "ES256" if isinstance(signing, ECKey) else "HS256")
        return jwt.encode({"alg": algorithm, "kid": kid, **(header or {})}, body, signing)

    @staticmethod
    def unsigned(claims: dict[str, Any], kid: str) -> str:
        """A token with ``alg: none`` (no signature)."""
        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
        return f"{part({'alg': 'none', 'kid': kid, 'typ': 'JWT'})}.{part(claims)}."

    def hmac_with_public_key(self, claims: dict[str, Any], kid: str) -> str:
        """HS256 keyed with the published RSA key's public JWK (the classic confusion)."""
        public = json.dumps(self.keys[kid].as_dict(private=False)).encode()
        secret = OctKey.import_key(public)
        return self.mint(claims, kid=kid, alg="HS256", key=secret)

    def issue(self, client_id: str, scopes: set[str], resource: str | None) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": client_id, "client_id": client_id,
                  "scope": " ".join(sorted(scopes)), "iat": now, "exp": now + self.token_ttl}
        if resource:
            claims["aud"] = resource
        if self.token_format == "opaque":
            token = secrets.token_urlsafe(24)
            self.opaque[token] = claims
        else:
            token = self.mint(claims)
        return {"access_token": token, "token_type": "Bearer", "expires_in": self.token_ttl,
                "scope": claims["scope"]}


def _basic(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)


def _handler(state: AuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _form(self) -> dict[str, str]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            return {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}

        def _client(self, form: dict[str, str]) -> tuple[str, str] | None:
            found = _basic(self.headers.get("Authorization"))
            if found is None and "client_id" in form and "client_secret" in form:
                found = form["client_id"], form["client_secret"]
            return found

        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if path == "/.well-known/oauth-authorization-server":
                base = state.issuer
                self._json(200, {
                    **({"authorization_endpoint": base + "/authorize"}
                       if state.authorization_endpoint else {}),
                    "issuer": base, "token_endpoint": base + state.token_path,
                    "jwks_uri": base + "/jwks.json",
                    "introspection_endpoint": base + "/introspect",
                    "grant_types_supported": ["client_credentials"],
                    "response_types_supported": ["code"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                              "client_secret_post"],
                })
            elif path == "/jwks.json":
                with state.lock:
                    state.jwks_fetches += 1
                    body = state.jwks()
                self._json(200, body)
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            form = self._form()
            client = self._client(form)
            if path == state.token_path:
                with state.lock:
                    state.token_requests.append({**form, "_auth": "basic" if _basic(
                        self.headers.get("Authorization")) else "post"})
                known = state.clients.get(client[0]) if client else None
                if client is None or known is None or known[0] != client[1]:
                    self._json(401, {"error": "invalid_client"})
                    return
                if form.get("grant_type") != "client_credentials":
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                asked = set(form.get("scope", "").split()) or known[1]
                if not asked <= known[1]:
                    self._json(400, {"error": "invalid_scope"})
                    return
                with state.lock:
                    body = state.issue(client[0], asked, form.get("resource"))
                self._json(200, body)
            elif path == "/introspect":
                if client != RS_CLIENT:
                    self._json(401, {"error": "invalid_client"})
                    return
                with state.lock:
                    state.introspections += 1
                    claims = state.opaque.get(form.get("token", ""))
                self._json(200, {"active": True, **claims} if claims else {"active": False})
            else:
                self._json(404, {"error": "not_found"})

    return Handler


@contextmanager
def authorization_server() -> Iterator[AuthServer]:
    """Run an :class:`AuthServer` on 127.0.0.1 (an RSA signing key published) for the block."""
    state = AuthServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    state.rotate()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="oauth-server",
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
