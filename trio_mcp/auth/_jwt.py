"""JWT access tokens checked against the authorization server's JWKS (RFC 7519, RFC 9068).

The keys come from ``jwks_uri`` over HTTPS with httpx (on Trio), are cached by
``kid``, refreshed after ``cache_ttl``, and refetched at once when a token
names a ``kid`` the cache lacks (a rotated key is accepted the first time a
token uses it) -- but at most once per ``refetch_interval``, so tokens with
made-up ``kid`` values cannot make the server hammer the authorization
server. Signatures are checked with joserfc (the ``auth`` extra).

Refused (:class:`~trio_mcp.auth.InvalidToken`): not a compact JWS; an
algorithm outside the allow-list (``none`` and the HMAC ones can never be
in it: a public key must not become an HMAC secret); an unknown key, or a
key whose type or ``alg`` does not fit the algorithm; a bad signature;
``iss`` other than the issuer; an ``aud`` that does not name this server
(RFC 8707: the token was issued for someone else); ``exp`` in the past or
``nbf`` in the future, each with ``leeway`` seconds of clock skew; a
missing ``exp``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from ._identity import Identity, InvalidToken

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import Key

log = logging.getLogger("trio_mcp.auth")

#: Asymmetric JWS algorithms accepted by default.
DEFAULT_ALGORITHMS: Final = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)
_KEY_TYPES: Final = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
#: Largest JWKS document read.
MAX_JWKS_BYTES: Final = 1024 * 1024


def key_type_for(algorithm: str) -> str:
    """The JWK ``kty`` an asymmetric JWS algorithm needs (``RS256`` -> ``RSA``).

    Raises:
        ValueError: ``none``, an HMAC algorithm or one not known here.
    """
    kty = _KEY_TYPES.get(algorithm[:2])
    if kty is None or algorithm.lower() == "none":
        raise ValueError(f"algorithm {algorithm!r} is not an asymmetric JWS algorithm")
    return kty


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWS, unverified.

    Raises:
        InvalidToken: Not three Base64url segments with a JSON object first.
    """
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise InvalidToken("not a compact JWS")
    try:
        raw = base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4))
        header = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise InvalidToken("malformed JOSE header") from exc
    if not isinstance(header, dict):
        raise InvalidToken("malformed JOSE header")
    return header


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes of a token: ``scope`` (space-separated, RFC 9068) or ``scp`` (a list)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, str):
        return frozenset(scp.split())
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str))
    return frozenset()


def check_times(claims: Mapping[str, Any], leeway: float, now: float) -> float:
    """Check ``exp`` (required) and ``nbf`` with ``leeway``; return ``exp``.

    Raises:
        InvalidToken: Expired, not yet valid, or no numeric ``exp``.
    """
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise InvalidToken("no numeric exp claim")
    if now > exp + leeway:
        raise InvalidToken("expired")
    nbf = claims.get("nbf")
    if nbf is not None:
        if not isinstance(nbf, int | float) or isinstance(nbf, bool):
            raise InvalidToken("malformed nbf claim")
        if now + leeway < nbf:
            raise InvalidToken("not yet valid")
    return float(exp)


def audience_matches(aud: Any, accepted: Sequence[str]) -> bool:
    """True when the ``aud`` claim (a string or a list) names one of ``accepted``."""
    names = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    return any(isinstance(name, str) and name in accepted for name in names)


def identity_from_claims(claims: Mapping[str, Any], exp: float | None) -> Identity:
    """An :class:`Identity` from verified claims (``sub``, ``client_id``/``azp``, scopes)."""
    sub = claims.get("sub")
    client_id = claims.get("client_id", claims.get("azp"))
    identity = Identity(
        subject=sub if isinstance(sub, str) and sub else None,
        client_id=client_id if isinstance(client_id, str) and client_id else None,
        scopes=scopes_of(claims), expires_at=exp, claims=claims,
    )
    if identity.subject is None and identity.client_id is None:
        raise InvalidToken("neither sub nor client_id")
    return identity


@final
@attrs.define(eq=False)
class JWTVerifier:
    """Verify JWT access tokens with the keys of a JWKS document.

    Attributes:
        jwks_uri: Where the authorization server publishes its keys.
        issuer: The one accepted ``iss``; also the authorization server
            named in the protected-resource metadata.
        audience: This server's canonical URI (e.g.
            ``https://mcp.example.com/mcp``), or several; a token's ``aud``
            must name one. Also the ``resource`` of the metadata (the first).
        algorithms: The allowed JWS algorithms (asymmetric only).
        leeway: Seconds of clock skew allowed on ``exp`` and ``nbf``.
        cache_ttl: Seconds the fetched keys are trusted before a refetch.
        refetch_interval: Least seconds between two fetches made for an
            unknown ``kid``.
        timeout: Seconds for one JWKS fetch.
        http_client: The httpx client to fetch with (not closed here); by
            default a fresh one per fetch.
        token_types: When set, the accepted ``typ`` header values, e.g.
            ``("at+jwt", "application/at+jwt")`` (RFC 9068 4: refuses an ID
            token or another JWT of the same issuer); off by default, as many
            authorization servers still issue ``typ: JWT``.
    """

    jwks_uri: str
    issuer: str
    audience: str | Sequence[str]
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS
    leeway: float = 30.0
    cache_ttl: float = 300.0
    refetch_interval: float = 30.0
    timeout: float = 10.0
    http_client: httpx.AsyncClient | None = None
    token_types: Sequence[str] | None = None
    _keys: dict[str | None, Key] = attrs.field(factory=dict, init=False)
    _fetched_at: float | None = attrs.field(default=None, init=False)
    _unknown_refetch_at: float | None = attrs.field(default=None, init=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    fetches: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            import joserfc.jwt  # noqa: F401 -- fail at configuration, not at the first token
        except ImportError as exc:
            raise ImportError("JWTVerifier needs joserfc: pip install 'trio-mcp[auth]'") from exc
        if not self.algorithms:
            raise ValueError("algorithms: at least one")
        for algorithm in self.algorithms:
            key_type_for(algorithm)  # none / HS*: ValueError
        if not self.accepted_audiences:
            raise ValueError("audience: this server's canonical URI is required")

    @property
    def accepted_audiences(self) -> tuple[str, ...]:
        """The ``aud`` values accepted."""
        return (self.audience,) if isinstance(self.audience, str) else tuple(self.audience)

    async def verify(self, token: str) -> Identity:
        """The identity of a valid token.

        Raises:
            InvalidToken: The token is refused (see the module's docstring).
            httpx.HTTPError: The JWKS could not be fetched when it was needed.

        Cancellation: a JWKS fetch in progress is abandoned; the cache stays as it was.
        """
        from joserfc import jwt
        from joserfc.errors import JoseError

        header = unverified_header(token)
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise InvalidToken(f"algorithm {str(algorithm)[:20]!r} is not allowed")
        if self.token_types is not None and str(header.get("typ", "")).lower() not in {
            t.lower() for t in self.token_types
        }:
            raise InvalidToken(f"token type {str(header.get('typ'))[:30]!r} is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed kid")
        key = await self._key(kid)
        if key is None:
            raise InvalidToken(f"unknown key {str(kid)[:64]!r}")
        if key.key_type != key_type_for(algorithm) or key.get("alg", algorithm) != algorithm:
            raise InvalidToken(f"the key does not fit algorithm {algorithm}")
        try:
            decoded = jwt.decode(token, key, algorithms=[algorithm])
        except (JoseError, ValueError) as exc:
            raise InvalidToken(f"bad token: {type(exc).__name__}") from exc
        claims = decoded.claims
        exp = check_times(claims, self.leeway, time.time())
        if claims.get("iss") != self.issuer:
            raise InvalidToken("wrong issuer")
        if not audience_matches(claims.get("aud"), self.accepted_audiences):
            raise InvalidToken("wrong audience")
        return identity_from_claims(claims, exp)

    async def _key(self, kid: str | None) -> Key | None:
        now = trio.current_time()
        stale = self._fetched_at is None or now - self._fetched_at >= self.cache_ttl
        if not stale and self._has(kid):
            return self._find(kid)
        async with self._lock:
            now = trio.current_time()
            if self._fetched_at is None or now - self._fetched_at >= self.cache_ttl:
                await self._fetch()
            elif not self._has(kid) and (
                self._unknown_refetch_at is None
                or now - self._unknown_refetch_at >= self.refetch_interval
            ):
                self._unknown_refetch_at = now
                log.info("JWKS: unknown kid %.64r, refetching %s", kid, self.jwks_uri)
                await self._fetch()
        return self._find(kid)

    def _has(self, kid: str | None) -> bool:
        return self._find(kid) is not None

    def _find(self, kid: str | None) -> Key | None:
        if kid is not None:
            return self._keys.get(kid)
        # No kid: only a JWKS of exactly one key says which key was meant.
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    async def _fetch(self) -> None:
        import httpx  # here, not at import: a server that never fetches need not load it
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        client = self.http_client or httpx.AsyncClient(timeout=self.timeout, trust_env=False)
        try:
            response = await client.get(self.jwks_uri, headers={"Accept": "application/json"})
            response.raise_for_status()
        finally:
            if self.http_client is None:
                await client.aclose()
        self.fetches += 1
        if len(response.content) > MAX_JWKS_BYTES:
            raise httpx.HTTPError(f"the JWKS at {self.jwks_uri} is larger than {MAX_JWKS_BYTES}")
        document = response.json()
        keys: dict[str | None, Key] = {}
        for entry in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC", "OKP"):
                continue  # symmetric keys never verify a token here
            if entry.get("use", "sig") != "sig":
                continue
            try:
                key = KeySet.import_key_set({"keys": [entry]}).keys[0]
            except (JoseError, ValueError, TypeError) as exc:
                log.warning("JWKS: a key of %s is unusable: %r", self.jwks_uri, exc)
                continue
            keys[key.kid] = key
        self._keys = keys
        self._fetched_at = trio.current_time()
        log.debug("JWKS: %d keys from %s", len(keys), self.jwks_uri)
