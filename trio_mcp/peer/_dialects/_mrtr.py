"""Multi round-trip requests (MCP 2026-07-28, SEP-2322): questions as results, answers as retries.

A modern server never sends a request to the client. When a handler asks
(``ctx.elicit()``, ``ctx.sample()``, ``ctx.list_roots()``, ``ctx.ask_all()``)
and the request does not already carry the answer, the handler is stopped
with :class:`InputRequired` and the request ends with
``resultType: "input_required"``: the questions (``inputRequests``) and a
``requestState``. The client answers and sends the same request again with
``inputResponses`` and the state echoed; the handler then runs again from
the start, and each question it asks is answered from what was recorded.
Only answers to questions this server asked are used: a retry without a
``requestState`` gets none, and an answer to a key the state does not list
as asked is ignored (the handler asks that question when it gets there).

The model is **re-running**, as the official SDKs and FastMCP do: a handler
must ask the same questions in the same order for the same arguments, and
whatever it does before its last question runs once per round (keep side
effects after the questions, or make them idempotent).

``requestState`` is this module's: the answers of earlier rounds, the keys
asked last, a digest of the request it belongs to, the principal (the
transport's authenticated identity), and an expiry, as JSON under an
HMAC-SHA256 keyed with the App's secret. Any process holding the same secret
can resume the request (a restart, another replica). A forged, altered,
expired, foreign or mismatched state is ``-32602``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Mapping
from typing import Any, Final, final

import attrs

from ..._errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, McpError

#: Environment variable holding the default request-state secret (shared by
#: the processes of one deployment); without it each App draws a random one.
SECRET_ENV: Final = "TRIO_MCP_REQUEST_STATE_SECRET"
#: Seconds a ``requestState`` stays valid by default.
DEFAULT_STATE_TTL: Final = 600.0
#: Largest ``requestState`` issued or accepted, in characters (above what the
#: transports take in one message, so a state this side issued always comes back).
MAX_STATE_CHARS: Final = 8 * 1024 * 1024
#: Most input responses one request may carry.
MAX_INPUT_RESPONSES: Final = 64
#: Most questions one request may ask across its rounds.
MAX_QUESTIONS: Final = 256
#: Params that are not part of what a request asks (the digest leaves them out).
_ROUND_PARAMS: Final = frozenset({"_meta", "inputResponses", "requestState", "task"})


def default_secret() -> bytes:
    """The secret from :data:`SECRET_ENV`, else 32 random bytes (this process only)."""
    value = os.environ.get(SECRET_ENV)
    return value.encode("utf-8") if value else secrets.token_bytes(32)


class InputRequired(BaseException):
    """Raised inside a modern request's handler to end it with ``input_required``.

    A :class:`BaseException`, so a tool's ``except Exception`` does not turn
    the question into a tool error. Only the dialect catches it.

    Attributes:
        requests: Key -> input request (``{"method": ..., "params": ...}``).
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(sorted(requests))
        self.requests = requests


@final
@attrs.frozen
class RecordedRound:
    """What a verified ``requestState`` carried.

    Attributes:
        answers: Answers of earlier rounds, by key.
        asked: The keys the last ``input_required`` asked.
    """

    answers: dict[str, Any]
    asked: tuple[str, ...]


def request_digest(method: str, params: Mapping[str, Any]) -> str:
    """A digest of what a request asks: its method and params without the round's fields."""
    salient = {k: v for k, v in params.items() if k not in _ROUND_PARAMS}
    text = json.dumps([method, salient], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict base64url: another spelling of the same bytes is refused (ValueError)."""
    data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(data) != text:
        raise ValueError("not the canonical spelling")
    return data


@final
@attrs.frozen
class StateCodec:
    """Signs and verifies ``requestState`` with one secret.

    Attributes:
        secret: The HMAC key (the same in every process of a deployment).
        ttl: Seconds a state stays valid.
    """

    secret: bytes
    ttl: float = DEFAULT_STATE_TTL

    def _mac(self, payload: bytes) -> bytes:
        keyed = b"trio-mcp/requestState/1\n" + payload
        return hmac.new(self.secret, keyed, hashlib.sha256).digest()

    def seal(
        self, *, digest: str, principal: str | None, answers: Mapping[str, Any],
        asked: list[str], now: float | None = None,
    ) -> str:
        """The ``requestState`` for a request that asks ``asked`` and has ``answers``."""
        body = {
            "v": 1,
            "d": digest,
            "p": principal,
            "e": int((time.time() if now is None else now) + self.ttl),
            "a": dict(answers),
            "k": list(asked),
        }
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")
        sealed = f"{_b64(payload)}.{_b64(self._mac(payload))}"
        if len(sealed) > MAX_STATE_CHARS:
            raise McpError(
                INVALID_PARAMS,
                "Invalid params: the answers are too large to carry in requestState "
                f"(at most {MAX_STATE_CHARS} characters)",
            )
        return sealed

    def open(
        self, state: Any, *, digest: str, principal: str | None, now: float | None = None
    ) -> RecordedRound:
        """Verify ``state`` for this request and principal.

        Raises:
            McpError: -32602 when the state is malformed, forged, altered,
                expired, or belongs to another request or principal.
        """
        if not isinstance(state, str):
            raise _bad_state("requestState must be a string")
        if len(state) > MAX_STATE_CHARS:
            raise _bad_state("requestState is too large")
        head, dot, tail = state.partition(".")
        try:
            payload, mac = _unb64(head), _unb64(tail)
        except (binascii.Error, ValueError):
            raise _bad_state("requestState is not one this server issued") from None
        if not dot or not hmac.compare_digest(mac, self._mac(payload)):
            raise _bad_state("requestState failed its integrity check")
        try:
            body = json.loads(payload)
        except ValueError:
            raise _bad_state("requestState is not one this server issued") from None
        if not isinstance(body, dict) or body.get("v") != 1:
            raise _bad_state("requestState is not one this server issued")
        expires = body.get("e")
        if not isinstance(expires, int) or (time.time() if now is None else now) > expires:
            raise _bad_state("requestState has expired; send the request again without it")
        if body.get("d") != digest:
            raise _bad_state("requestState belongs to another request")
        if body.get("p") != principal:
            raise _bad_state("requestState belongs to another principal")
        answers, asked = body.get("a"), body.get("k")
        if not isinstance(answers, dict) or not isinstance(asked, list):
            raise _bad_state("requestState is not one this server issued")
        return RecordedRound(answers, tuple(str(k) for k in asked))


def _bad_state(why: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Invalid params: {why}")


def read_input_responses(params: Mapping[str, Any]) -> dict[str, Any]:
    """The request's ``inputResponses`` (empty when absent).

    Raises:
        McpError: -32602 when it is not an object of objects, or too large.
    """
    if "inputResponses" not in params:
        return {}
    value = params["inputResponses"]
    if not isinstance(value, dict):
        raise McpError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    if len(value) > MAX_INPUT_RESPONSES:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: at most {MAX_INPUT_RESPONSES} inputResponses per request",
        )
    for key, answer in value.items():
        if not isinstance(answer, dict):
            raise McpError(
                INVALID_PARAMS, f"Invalid params: inputResponses[{key[:64]!r}] must be an object"
            )
    return dict(value)


def missing_capability(capability: str, settings: dict[str, Any] | None = None) -> McpError:
    """The -32021 error for a question the client declared no capability for.

    Args:
        capability: The client capability (``sampling``, ``elicitation``, ``roots``).
        settings: What the capability object must hold (``{"form": {}}``).
    """
    detail = f".{next(iter(settings))}" if settings else ""
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: {capability}{detail} (declare it in "
        "io.modelcontextprotocol/clientCapabilities)",
        {"requiredCapabilities": {capability: dict(settings or {})}},
    )
